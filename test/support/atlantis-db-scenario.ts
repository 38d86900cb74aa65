// The scenario of the small atlantis.db fixture (test/fixtures/atlantis-db/README.md), shared by
// its recorder (test/support/atlantis-db-recorder.ts, against a real Atlantis v0.47) and by
// test/atlantis-metrics.test.ts (against our server, whose Atlantis-named metrics must count
// what Atlantis's counted): the repos, the pull requests and comments, and the waits.
import { sleep } from '../../src/async.js';
import { SCENARIO_WEBHOOK_SECRET } from './atlantis-scenario.js';
import { type FileChanges, type TestRepo, createTestRepo, terraformConfig } from './git-repos.js';
import { type GitHubStandin, issueCommentPayload, pullRequestPayload, sendWebhook } from './github-standin.js';

const NAMED_YAML = `version: 3
projects:
  - name: alpha
    dir: dir1
  - name: beta
    dir: dir2
`;

/** repos.yaml: Prometheus metrics on; acme/mono's plans run no terraform (only the locks matter there). */
export const REPOS_YAML = `repos:
- id: /.*/
- id: acme/mono
  workflow: echo
workflows:
  echo:
    plan:
      steps:
      - run: echo planned $DIR
    apply:
      steps:
      - run: echo applied $DIR
metrics:
  prometheus:
    endpoint: /metrics
`;

const ERRORED = `resource "terraform_data" "broken" {
  input = var.not_declared
}
`;

export interface Ctx {
  gh: GitHubStandin;
  url: string;
  repos: Map<string, TestRepo>;
}

export async function open(c: Ctx, repo: string, pull: number, branch: string, files: FileChanges, user = 'dev'): Promise<string> {
  const r = c.repos.get(repo)!;
  const headSha = await r.createBranch(branch, files);
  await r.publishPull(pull, branch);
  const changed = (await r.changedFiles(branch)).map((filename) => ({ filename }));
  c.gh.addPull(repo, { number: pull, headSha, headRef: branch, baseRef: r.baseBranch, baseSha: r.baseSha, files: changed, user });
  const payload = pullRequestPayload({
    repo,
    cloneUrl: c.gh.gitUrl(repo),
    action: 'opened',
    number: pull,
    headSha,
    headRef: branch,
    baseSha: r.baseSha,
    user,
  });
  await post(c, 'pull_request', payload);
  return headSha;
}

export async function comment(c: Ctx, repo: string, pull: number, body: string, user = 'dev'): Promise<void> {
  await post(c, 'issue_comment', issueCommentPayload({ repo, cloneUrl: c.gh.gitUrl(repo), number: pull, body, user }));
}

async function post(c: Ctx, event: string, payload: unknown): Promise<void> {
  const r = await sendWebhook(`${c.url}/events`, event, payload, { secret: SCENARIO_WEBHOOK_SECRET, timeoutMs: 30_000 });
  if (r.status >= 300) throw new Error(`the server answered ${event} with ${r.status}: ${r.body.slice(0, 300)}`);
}

/** Waits until the status `context` on `sha` is no longer pending, then a quiet second. */
export async function settled(c: Ctx, sha: string, context: string, from: number, waitMs = 600_000): Promise<string> {
  const end = Date.now() + waitMs;
  while (Date.now() < end) {
    const s = c.gh.statuses.slice(from).filter((x) => x.sha === sha && x.context === context);
    const last = s[s.length - 1];
    if (last && last.state !== 'pending') {
      await sleep(1000);
      return last.state;
    }
    await sleep(200);
  }
  throw new Error(`${context} on ${sha} did not settle`);
}

/** acme/infra (dir1, dir2) and acme/named (the same, with projects alpha and beta), served by the stand-in. */
export async function createLocksRepos(gh: GitHubStandin): Promise<Map<string, TestRepo>> {
  const repos = new Map<string, TestRepo>();
  const base = {
    'README.md': '# infra\n',
    'dir1/main.tf': terraformConfig({ marker: 'v1' }),
    'dir2/main.tf': terraformConfig({ marker: 'v1' }),
  };
  repos.set('acme/infra', await createTestRepo({ fullName: 'acme/infra', files: base }));
  repos.set('acme/named', await createTestRepo({ fullName: 'acme/named', files: { ...base, 'atlantis.yaml': NAMED_YAML } }));
  for (const [name, r] of repos) gh.addRepo(name, { cloneUrl: gh.gitUrl(name), bareDir: r.bareDir });
  return repos;
}

/** The steps of atlantis-locks.db, each waited for until its commit status settles. */
export async function runLocksScenario(c: Ctx): Promise<void> {
  const gh = c.gh;
  let from = gh.statuses.length;
  const sha1 = await open(c, 'acme/infra', 1, 'change-both', {
    'dir1/main.tf': terraformConfig({ marker: 'dir1-v2' }),
    'dir2/main.tf': terraformConfig({ marker: 'dir2-v2' }),
  });
  await settled(c, sha1, 'atlantis/plan', from);
  from = gh.statuses.length;
  await comment(c, 'acme/infra', 1, 'atlantis plan -d dir2 -w staging');
  await settled(c, sha1, 'atlantis/plan', from);
  // Another PR on dir1: refused by #1's lock (its plan errors, it holds no lock).
  from = gh.statuses.length;
  const sha2 = await open(c, 'acme/infra', 2, 'also-dir1', { 'dir1/main.tf': terraformConfig({ marker: 'dir1-other' }) }, 'carol');
  await settled(c, sha2, 'atlantis/plan', from);
  from = gh.statuses.length;
  const sha3 = await open(c, 'acme/infra', 3, 'broken', { 'dir3/main.tf': ERRORED });
  await settled(c, sha3, 'atlantis/plan', from);
  // Named projects: alpha planned and applied (its lock stays until the PR closes), beta planned.
  from = gh.statuses.length;
  const sha4 = await open(
    c,
    'acme/named',
    4,
    'alpha-beta',
    {
      'dir1/main.tf': terraformConfig({ marker: 'alpha-v2' }),
      'dir2/main.tf': terraformConfig({ marker: 'beta-v2' }),
    },
    'bob',
  );
  await settled(c, sha4, 'atlantis/plan', from);
  from = gh.statuses.length;
  await comment(c, 'acme/named', 4, 'atlantis apply -p alpha', 'bob');
  // The PR-wide atlantis/apply stays pending while beta is unapplied: the project's status says it is over.
  await settled(c, sha4, 'atlantis/apply: alpha', from);
}
