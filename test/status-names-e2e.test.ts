// Two servers on one repository, as teams run several Atlantis servers on a monorepo: each
// reads its own atlantis.yaml (repos.yaml's repo_config_file), names its commit statuses with
// --vcs-status-name, and with --silence-no-projects stays quiet about the other's projects.
// Every webhook goes to both (two GitHub webhooks). Each plans and applies only its own project,
// a `-d`/`-p` naming the other's project runs nothing there (without the flag the wrong server
// would plan it as a project of its own), a `-p` regex (--enable-regexp-cmd) selects only among
// each server's own projects, and their statuses never share a context.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { sleep } from '../src/async.js';
import { type CliProcess, startCli, waitForHttp } from './support/cli.js';
import { type TestRepo, createTestRepo, terraformConfig } from './support/git-repos.js';
import { GitHubStandin, issueCommentPayload, pullRequestPayload, sendWebhook } from './support/github-standin.js';
import { TERRAFORM } from './support/terraform.js';

const NET = '127.0.36';
const SECRET = 'status-names-secret';
const REPO = 'acme/mono';

const teamYaml = (team: string) => `version: 3\nprojects:\n- name: ${team}\n  dir: ${team}\n`;

describe('two servers with their own status names and --silence-no-projects on one repo', { timeout: 300_000 }, () => {
  let gh: GitHubStandin;
  let repo: TestRepo;
  const servers: Array<{ team: string; p: CliProcess; url: string }> = [];
  const dirs: string[] = [];

  before(async () => {
    gh = await GitHubStandin.start({ botLogin: 'atlantis-bot', host: `${NET}.1` });
    repo = await createTestRepo({
      fullName: REPO,
      files: {
        'README.md': '# mono\n',
        'team-a/main.tf': terraformConfig({ marker: 'a-v1' }),
        'team-b/main.tf': terraformConfig({ marker: 'b-v1' }),
        'atlantis-a.yaml': teamYaml('team-a'),
        'atlantis-b.yaml': teamYaml('team-b'),
      },
    });
    gh.addRepo(REPO, { cloneUrl: repo.cloneUrl });
    for (const [i, team] of ['team-a', 'team-b'].entries()) {
      const dir = mkdtempSync(path.join(tmpdir(), `ato-status-names-${team}-`));
      dirs.push(dir);
      const repoConfig = path.join(dir, 'repos.yaml');
      writeFileSync(repoConfig, `repos:\n- id: /.*/\n  repo_config_file: atlantis-${team.slice(-1)}.yaml\n`);
      const host = `${NET}.${i + 2}`;
      const p = startCli([
        'server',
        '--bind-address',
        host,
        '--port',
        '4141',
        '--data-dir',
        path.join(dir, 'data'),
        '--atlantis-url',
        `http://${host}:4141`,
        '--repo-allowlist',
        'github.com/acme/*',
        '--gh-user',
        'atlantis-bot',
        '--gh-token',
        gh.token,
        '--gh-webhook-secret',
        SECRET,
        '--gh-api-url',
        gh.url,
        '--tf-binary',
        TERRAFORM,
        '--repo-config',
        repoConfig,
        '--vcs-status-name',
        team,
        '--silence-no-projects',
        '--enable-regexp-cmd',
        '--ignore-vcs-status-names',
        team === 'team-a' ? 'team-b' : 'team-a',
      ]);
      const url = `http://${host}:4141`;
      await waitForHttp(`${url}/healthz`).catch((e: Error) => {
        throw new Error(`${e.message}\n${p.output()}`);
      });
      servers.push({ team, p, url });
    }
  });

  after(async () => {
    for (const s of servers) s.p.child.kill('SIGTERM');
    await Promise.all(servers.map((s) => s.p.exited));
    await gh?.close();
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  /** Sends a webhook to both servers, as two GitHub webhooks do. */
  async function toBoth(event: string, payload: unknown): Promise<void> {
    for (const s of servers) {
      const r = await sendWebhook(`${s.url}/events`, event, payload, { secret: SECRET });
      assert.ok(r.status < 300, `${s.team}: ${r.status} ${r.body}`);
    }
  }

  /** Both servers logged the end of as many commands as `want` (each counted once per server). */
  async function commandsDone(want: number): Promise<void> {
    const end = Date.now() + 120_000;
    const done = () => servers.map((s) => s.p.output().match(/"msg":"Command (finished|failed)"/g)?.length ?? 0);
    while (Date.now() < end && done().some((n) => n < want)) await sleep(100);
    assert.deepEqual(done(), [want, want], servers.map((s) => s.p.output().slice(-2000)).join('\n----\n'));
  }

  let headSha = '';
  const comment = (number: number, body: string) =>
    toBoth('issue_comment', issueCommentPayload({ repo: REPO, cloneUrl: repo.cloneUrl, number, body, user: 'dev' }));

  it('a PR changing team-a: only the team-a server plans, statuses of each named apart', async () => {
    headSha = await repo.createBranch('change-a', { 'team-a/main.tf': terraformConfig({ marker: 'a-v2' }) });
    await repo.publishPull(1, 'change-a');
    gh.addPull(REPO, { number: 1, headSha, headRef: 'change-a', baseRef: repo.baseBranch, files: [{ filename: 'team-a/main.tf' }] });
    await toBoth(
      'pull_request',
      pullRequestPayload({ repo: REPO, cloneUrl: repo.cloneUrl, action: 'opened', number: 1, headSha, headRef: 'change-a' }),
    );
    await commandsDone(1);
    const comments = gh.comments(REPO, 1).map((c) => c.body);
    assert.equal(comments.length, 1, comments.join('\n----\n'));
    assert.match(comments[0]!, /^Ran Plan for project: `team-a` dir: `team-a` workspace: `default`/);
    const contexts = gh.statusesFor(REPO, headSha).map((s) => s.context);
    assert.ok(contexts.includes('team-a/plan'));
    assert.ok(contexts.includes('team-a/plan: team-a'));
    // The team-b server found none of its projects: its 0/0 statuses, under its own name.
    assert.ok(contexts.includes('team-b/plan'));
    assert.ok(
      contexts.every((c) => c.startsWith('team-a/') || c.startsWith('team-b/')),
      contexts.join(', '),
    );
    const last = (ctx: string) =>
      gh
        .statusesFor(REPO, headSha)
        .filter((s) => s.context === ctx)
        .at(-1);
    assert.equal(last('team-a/plan')?.description, '1/1 projects planned successfully.');
    assert.equal(last('team-b/plan')?.description, '0/0 projects planned successfully.');
  });

  it("plan -d and apply -p of team-a's project: the team-b server runs nothing and says nothing", async () => {
    const before = gh.comments(REPO, 1).length;
    await comment(1, 'atlantis plan -d team-a');
    await commandsDone(2);
    await comment(1, 'atlantis apply -p team-a');
    await commandsDone(3);
    const added = gh
      .comments(REPO, 1)
      .slice(before)
      .map((c) => c.body);
    assert.equal(added.length, 2, added.join('\n----\n'));
    assert.match(added[0]!, /^Ran Plan for project: `team-a` dir: `team-a` workspace: `default`/);
    assert.match(added[1]!, /^Ran Apply for project: `team-a` dir: `team-a` workspace: `default`/);
    const last = (ctx: string) =>
      gh
        .statusesFor(REPO, headSha)
        .filter((s) => s.context === ctx)
        .at(-1);
    assert.equal(last('team-a/apply')?.description, '1/1 projects applied successfully.');
    // team-b's statuses were put back as they were (its plan status 0/0), never made pending.
    assert.ok(!gh.statusesFor(REPO, headSha).some((s) => s.context.startsWith('team-b/') && s.state === 'pending'));
    assert.equal(last('team-b/plan')?.description, '0/0 projects planned successfully.');
    // The team-b server never ran terraform in team-a.
    assert.doesNotMatch(servers[1]!.p.output(), /"msg":"Process started"/);
  });

  it('plan -p with a regex (--enable-regexp-cmd): team-a plans the project it matches, team-b none', async () => {
    const before = gh.comments(REPO, 1).length;
    await comment(1, 'atlantis plan -p team-(a|x)');
    await commandsDone(4);
    const added = gh
      .comments(REPO, 1)
      .slice(before)
      .map((c) => c.body);
    assert.equal(added.length, 1, added.join('\n----\n'));
    assert.match(added[0]!, /^Ran Plan for project: `team-a` dir: `team-a` workspace: `default`/);
    assert.doesNotMatch(servers[1]!.p.output(), /"msg":"Process started"/);
  });

  it('an unlock with nothing to unlock on team-b: only team-a answers', async () => {
    const before = gh.comments(REPO, 1).length;
    await comment(1, 'atlantis unlock');
    await commandsDone(5);
    const added = gh
      .comments(REPO, 1)
      .slice(before)
      .map((c) => c.body);
    assert.deepEqual(added, ['All Atlantis locks for this PR have been unlocked and plans discarded']);
  });
});
