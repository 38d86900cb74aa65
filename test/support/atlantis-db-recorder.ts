// Records the atlantis.db fixtures of test/fixtures/atlantis-db/ (its README tells the story)
// from a real Atlantis v0.47 run against the GitHub stand-in. Never part of `make test`; it
// needs an Atlantis binary built beforehand, outside this repository:
//
//   ATLANTIS_REFERENCE_BIN=/path/to/atlantis node --import tsx test/support/atlantis-db-recorder.ts
//
// Atlantis binds every interface, so the recorder runs itself again in a network namespace of
// its own with only loopback (`unshare -rn`), as the differential recorder does. It also
// scrapes Atlantis's /metrics after a plan and an apply (test/fixtures/atlantis-v0.47/metrics.txt).
import { spawn, spawnSync } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { networkInterfaces, tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { sleep } from '../../src/async.js';
import { serverEnv, sharedFlags } from './atlantis-differential.js';
import { SCENARIO_BOT, SCENARIO_WEBHOOK_SECRET } from './atlantis-scenario.js';
import { waitForHttp } from './cli.js';
import { type FileChanges, type TestRepo, createTestRepo, terraformConfig } from './git-repos.js';
import { GitHubStandin, issueCommentPayload, pullRequestPayload, sendWebhook } from './github-standin.js';

const OUT = fileURLToPath(new URL('../fixtures/atlantis-db/', import.meta.url));
const METRICS_OUT = fileURLToPath(new URL('../fixtures/atlantis-v0.47/metrics.txt', import.meta.url));
/** No secret: the stand-in's token, which Atlantis writes into the clone URLs it records. */
export const RECORDER_TOKEN = 'fixture-token-not-a-secret';

/** The monorepo of the many-locks file: this many project dirs, this many per pull request. */
export const MANY_DIRS = 320;
export const MANY_PER_PULL = 40;

const NAMED_YAML = `version: 3
projects:
  - name: alpha
    dir: dir1
  - name: beta
    dir: dir2
`;

/** repos.yaml: Prometheus metrics on; acme/mono's plans run no terraform (only the locks matter there). */
const REPOS_YAML = `repos:
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

interface Ctx {
  gh: GitHubStandin;
  url: string;
  repos: Map<string, TestRepo>;
}

async function open(c: Ctx, repo: string, pull: number, branch: string, files: FileChanges, user = 'dev'): Promise<string> {
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

async function comment(c: Ctx, repo: string, pull: number, body: string, user = 'dev'): Promise<void> {
  await post(c, 'issue_comment', issueCommentPayload({ repo, cloneUrl: c.gh.gitUrl(repo), number: pull, body, user }));
}

async function post(c: Ctx, event: string, payload: unknown): Promise<void> {
  const r = await sendWebhook(`${c.url}/events`, event, payload, { secret: SCENARIO_WEBHOOK_SECRET, timeoutMs: 30_000 });
  if (r.status >= 300) throw new Error(`Atlantis answered ${event} with ${r.status}: ${r.body.slice(0, 300)}`);
}

/** Waits until the status `context` on `sha` is no longer pending, then a quiet second. */
async function settled(c: Ctx, sha: string, context: string, from: number, waitMs = 600_000): Promise<string> {
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

async function record(): Promise<void> {
  const bin = process.env.ATLANTIS_REFERENCE_BIN;
  if (!bin) throw new Error('set ATLANTIS_REFERENCE_BIN to an Atlantis v0.47 binary built beforehand');
  if (!Object.values(networkInterfaces()).every((a) => (a ?? []).every((x) => x.internal))) {
    const r = spawnSync(
      'unshare',
      ['-rn', 'sh', '-c', 'ip link set lo up && exec "$@"', 'sh', process.execPath, ...process.execArgv, ...process.argv.slice(1)],
      {
        stdio: 'inherit',
      },
    );
    process.exit(r.status ?? 1);
  }
  const gh = await GitHubStandin.start({ botLogin: SCENARIO_BOT, tls: true, token: RECORDER_TOKEN });
  const repos = new Map<string, TestRepo>();
  const base = {
    'README.md': '# infra\n',
    'dir1/main.tf': terraformConfig({ marker: 'v1' }),
    'dir2/main.tf': terraformConfig({ marker: 'v1' }),
  };
  repos.set('acme/infra', await createTestRepo({ fullName: 'acme/infra', files: base }));
  repos.set('acme/named', await createTestRepo({ fullName: 'acme/named', files: { ...base, 'atlantis.yaml': NAMED_YAML } }));
  const mono: Record<string, string> = { 'README.md': '# mono\n' };
  for (let i = 0; i < MANY_DIRS; i++) mono[`stacks/s${String(i).padStart(3, '0')}/main.tf`] = '# v1\n';
  repos.set('acme/mono', await createTestRepo({ fullName: 'acme/mono', files: mono }));
  for (const [name, r] of repos) gh.addRepo(name, { cloneUrl: gh.gitUrl(name), bareDir: r.bareDir });

  const work = mkdtempSync(path.join(tmpdir(), 'atlantis-db-rec-'));
  const reposYaml = path.join(work, 'repos.yaml');
  writeFileSync(reposYaml, REPOS_YAML);
  const port = 4141;
  const url = `http://127.0.0.1:${port}`;
  const version = spawnSync(bin, ['version'], { encoding: 'utf8' }).stdout.trim();
  const runs: Array<{ dataDir: string; log: string }> = [];

  async function withAtlantis(name: string, fn: (c: Ctx) => Promise<void>): Promise<void> {
    const dataDir = path.join(work, `${name}-data`);
    const home = path.join(work, `${name}-home`);
    mkdirSync(home, { recursive: true });
    const flags = [...sharedFlags(gh, dataDir, url, port), '--repo-config', reposYaml];
    const child = spawn(bin as string, flags, { env: serverEnv(gh, home), stdio: ['ignore', 'pipe', 'pipe'] });
    let log = '';
    child.stdout.on('data', (d: Buffer) => (log += d.toString()));
    child.stderr.on('data', (d: Buffer) => (log += d.toString()));
    try {
      await waitForHttp(`${url}/healthz`, 30_000);
      await fn({ gh, url, repos });
    } finally {
      child.kill('SIGTERM');
      if (child.exitCode === null && child.signalCode === null) await new Promise((r) => child.once('exit', r));
      runs.push({ dataDir, log });
      writeFileSync(path.join(tmpdir(), `atlantis-db-rec-${name}.log`), log);
    }
    mkdirSync(OUT, { recursive: true });
    copyFileSync(path.join(dataDir, 'atlantis.db'), path.join(OUT, `${name}.db`));
    console.log(`wrote ${name}.db`);
  }

  // The small file: the cases one by one.
  await withAtlantis('atlantis-locks', async (c) => {
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
    const metrics = await fetch(`${url}/metrics`).then((r) => r.text());
    // Go's runtime and process collectors say nothing about Atlantis: left out.
    const kept = metrics.split('\n').filter((l) => !/^(# (HELP|TYPE) )?(go|process)_/.test(l));
    writeFileSync(
      METRICS_OUT,
      `# Scraped from ${version} (${url}/metrics) after the plans and the apply of test/support/atlantis-db-recorder.ts\n# Only the atlantis_* and tally_* series are kept here; Go's runtime (go_*) and process (process_*) collectors are left out.\n${kept.join('\n')}`,
    );
  });

  // The many-locks file: MANY_DIRS project dirs locked by MANY_DIRS / MANY_PER_PULL pull requests, and the apply lock on.
  await withAtlantis('atlantis-many-locks', async (c) => {
    for (let p = 0; p < MANY_DIRS / MANY_PER_PULL; p++) {
      const files: FileChanges = {};
      for (let i = p * MANY_PER_PULL; i < (p + 1) * MANY_PER_PULL; i++)
        files[`stacks/s${String(i).padStart(3, '0')}/main.tf`] = `# v2 ${i}\n`;
      const from = gh.statuses.length;
      const sha = await open(c, 'acme/mono', 100 + p, `batch-${p}`, files, `user${p}`);
      console.log(`pull ${100 + p}: ${await settled(c, sha, 'atlantis/plan', from)}`);
    }
    const r = await fetch(`${url}/apply/lock`, { method: 'POST' });
    if (!r.ok) throw new Error(`POST /apply/lock: ${r.status}`);
  });

  const clone = runs.flatMap((r) => r.log.split('\n')).filter((l) => /level":"(error|warn)/.test(l));
  if (clone.length) console.log(`Atlantis's warnings and errors:\n${clone.slice(0, 40).join('\n')}`);
  console.log(`recorded with ${version}`);
  await gh.close();
  for (const r of repos.values()) rmSync(path.resolve(r.bareDir, '..', '..', '..'), { recursive: true, force: true });
  rmSync(work, { recursive: true, force: true });
}

await record();
