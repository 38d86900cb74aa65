// --skip-clone-no-changes against the real server process, real git and terraform and the
// GitHub stand-in's contents API: a PR whose changes touch no project of the atlantis.yaml at
// its head is not cloned (judged from the server's own log and its data dir) and gets
// Atlantis's "no projects" outcome; a skipped commit never leaves a stale plan or checkout
// behind in either direction; without an atlantis.yaml, or with one over the size bound, the
// PR is cloned as usual; a bad atlantis.yaml read through the API fails as a cloned one does.
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { CliProcess } from './support/cli.js';
import { type FileChanges, terraformConfig } from './support/git-repos.js';
import { pullRequestPayload, sendWebhook } from './support/github-standin.js';
import { waitFor } from './support/server.js';
import { type WorkflowEnv, WEBHOOK_SECRET, createWorkflowEnv, startWorkflowServer, tempDataDir } from './support/workflow-env.js';

let env: WorkflowEnv;
let server: CliProcess;
let url: string;
const dataDir = tempDataDir();

const ATLANTIS_YAML = 'version: 3\nprojects:\n- dir: app1\n- dir: app2\n';

interface LogLine {
  msg: string;
  pull?: number;
  headSha?: string;
  [k: string]: unknown;
}
function logLines(): LogLine[] {
  return server
    .output()
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as LogLine);
}
const skipped = (pull: number, sha: string): boolean =>
  logLines().some((l) => l.pull === pull && l.headSha === sha && l.msg.startsWith('Skipping the clone'));
const cloned = (pull: number, sha: string): boolean =>
  logLines().some((l) => l.pull === pull && l.headSha === sha && l.msg === 'Cloning pull request');
const workingCopy = (pull: number): string => path.join(dataDir, 'repos', env.repo.fullName, String(pull));

/** Waits for the final atlantis/plan status of `sha` (set after any comment). */
async function finalPlanStatus(sha: string): Promise<{ state: string; description?: string }> {
  await waitFor(
    `the final atlantis/plan status of ${sha.slice(0, 7)}`,
    () => env.gh.statusesFor(env.repo.fullName, sha).some((s) => s.context === 'atlantis/plan' && s.state !== 'pending'),
    90_000,
  ).catch((e: Error) => {
    throw new Error(`${e.message}\n${server.output().slice(-3000)}`);
  });
  const s = env.gh.statusesFor(env.repo.fullName, sha).filter((x) => x.context === 'atlantis/plan' && x.state !== 'pending');
  return s.at(-1) as { state: string; description?: string };
}

/** Pushes a commit to PR `number`'s branch and sends GitHub's `synchronize` webhook for it. */
async function pushToPull(number: number, branch: string, files: FileChanges): Promise<string> {
  const headSha = await env.repo.commit(branch, files);
  await env.repo.publishPull(number, branch);
  env.gh.updatePull(env.repo.fullName, number, {
    headSha,
    files: (await env.repo.changedFiles(branch)).map((filename) => ({ filename })),
  });
  const r = await sendWebhook(
    `${url}/events`,
    'pull_request',
    pullRequestPayload({ repo: env.repo.fullName, cloneUrl: env.repo.cloneUrl, action: 'synchronize', number, headSha, headRef: branch }),
    { secret: WEBHOOK_SECRET },
  );
  assert.equal(r.status, 200);
  return headSha;
}

before(async () => {
  env = await createWorkflowEnv();
  // The contents API reads the stand-in's bare repository.
  env.gh.addRepo(env.repo.fullName, { cloneUrl: env.repo.cloneUrl, bareDir: env.repo.bareDir });
  ({ p: server, url } = await startWorkflowServer(env, dataDir, '127.0.89.1', ['--skip-clone-no-changes', '--log-level', 'debug']));
});
after(async () => {
  server.child.kill('SIGKILL');
  await env.close();
});

describe('--skip-clone-no-changes (real server process)', { timeout: 300_000 }, () => {
  it('a PR touching no project of atlantis.yaml: no clone, and the outcome of no projects', async () => {
    const { status, headSha } = await env.openPull(url, 1, 'docs-only', {
      'atlantis.yaml': ATLANTIS_YAML,
      'README.md': '# infra, documented\n',
    });
    assert.equal(status, 200);
    const s = await finalPlanStatus(headSha);
    assert.deepEqual(s, { ...s, state: 'success', description: '0/0 projects planned successfully.' });
    assert.ok(skipped(1, headSha), server.output().slice(-3000));
    assert.equal(cloned(1, headSha), false);
    assert.equal(existsSync(workingCopy(1)), false, 'no working copy of PR 1');
    // The file was read at the head commit, not at the branch.
    const reads = env.gh.callsTo('GET', /^\/repos\/acme\/infra\/contents\/atlantis\.yaml$/);
    assert.ok(
      reads.some((c) => c.query.ref === headSha),
      JSON.stringify(reads.map((c) => c.query)),
    );
    // As Atlantis's autoplan with no projects: nothing is said on the PR.
    assert.deepEqual(env.commentsOn(1), []);
    // A plain `atlantis plan` skips the clone too and says Atlantis's words for no projects.
    await env.comment(url, 1, 'atlantis plan');
    const c = await env.waitForComment(1, /^Ran Plan for 0 projects:/);
    assert.ok(c);
    assert.equal(existsSync(workingCopy(1)), false, 'still no working copy of PR 1');
  });

  it('a skipped commit, then one changing a project: the new commit is cloned and planned', async () => {
    const first = await env.openPull(url, 2, 'skip-then-change', { 'atlantis.yaml': ATLANTIS_YAML, 'README.md': '# first\n' });
    await finalPlanStatus(first.headSha);
    assert.ok(skipped(2, first.headSha));
    const second = await pushToPull(2, 'skip-then-change', { 'app1/main.tf': terraformConfig({ marker: 'app1-second-commit' }) });
    const c = await env.waitForComment(2, /^Ran Plan for dir: `app1` workspace: `default`/);
    assert.match(c.body, /app1-second-commit/);
    assert.ok(cloned(2, second), 'the second commit was cloned');
    assert.equal(skipped(2, second), false);
  });

  it('a cloned and planned commit, then one that skips: the old plan is neither kept nor shown', async () => {
    const first = await env.openPull(url, 3, 'change-then-skip', {
      'atlantis.yaml': ATLANTIS_YAML,
      'app2/main.tf': terraformConfig({ marker: 'app2-first-commit' }),
    });
    const planned = await env.waitForComment(3, /^Ran Plan for dir: `app2` workspace: `default`/);
    assert.match(planned.body, /app2-first-commit/);
    assert.ok(cloned(3, first.headSha));
    // The project's change is taken back: the PR now touches only the README.
    const second = await pushToPull(3, 'change-then-skip', {
      'app2/main.tf': terraformConfig({ marker: 'app2-v1' }),
      'README.md': '# b\n',
    });
    const s = await finalPlanStatus(second);
    assert.equal(s.description, '0/0 projects planned successfully.');
    assert.ok(skipped(3, second), server.output().slice(-3000));
    assert.equal(cloned(3, second), false);
    // The first commit's plan went with its lock: an apply finds nothing to apply.
    const before = env.commentsOn(3).length;
    await env.comment(url, 3, 'atlantis apply');
    const applied = await env.waitForComment(3, /^Ran Apply for 0 projects/, { after: before });
    assert.doesNotMatch(applied.body, /app2-first-commit/);
    // And a plain plan of the PR plans nothing from the old checkout.
    const n = env.commentsOn(3).length;
    await env.comment(url, 3, 'atlantis plan');
    const again = await env.waitForComment(3, /^Ran Plan for 0 projects:/, { after: n });
    assert.doesNotMatch(again.body, /app2-first-commit/);
    // A targeted plan clones the current head: the project as the second commit left it, not the first's checkout.
    const m = env.commentsOn(3).length;
    await env.comment(url, 3, 'atlantis plan -d app2');
    const targeted = await env.waitForComment(3, /^Ran Plan for dir: `app2` workspace: `default`/, { after: m });
    assert.match(targeted.body, /app2-v1/);
    assert.doesNotMatch(targeted.body, /app2-first-commit/);
    assert.ok(cloned(3, second), 'the second commit was cloned for the targeted plan');
    // Its lock goes, for the next PR's app2.
    const k = env.commentsOn(3).length;
    await env.comment(url, 3, 'atlantis unlock');
    await env.waitForComment(3, /^All Atlantis locks for this PR have been unlocked and plans discarded/, { after: k });
  });

  it('no atlantis.yaml (projects found from the files): cloned and planned as usual', async () => {
    const { headSha } = await env.openPull(url, 4, 'no-config', { 'app2/main.tf': terraformConfig({ marker: 'app2-autodetected' }) });
    const c = await env.waitForComment(4, /^Ran Plan for dir: `app2` workspace: `default`/);
    assert.match(c.body, /app2-autodetected/);
    assert.ok(cloned(4, headSha));
    assert.ok(logLines().some((l) => l.pull === 4 && l.msg === 'Cloning: no atlantis.yaml at the head commit'));
  });

  it('an atlantis.yaml over the size bound is read from the clone instead', async () => {
    const big = `${ATLANTIS_YAML}${'# padding\n'.repeat(110_000)}`;
    const { headSha } = await env.openPull(url, 5, 'big-config', { 'atlantis.yaml': big, 'README.md': '# big\n' });
    const s = await finalPlanStatus(headSha);
    assert.equal(s.description, '0/0 projects planned successfully.');
    const lines = logLines().filter((l) => l.pull === 5);
    assert.ok(
      lines.some((l) => l.msg === 'Cloning: atlantis.yaml is larger than 1048576 bytes'),
      JSON.stringify(lines.map((l) => l.msg)),
    );
    assert.ok(cloned(5, headSha));
  });

  it('a bad atlantis.yaml read through the API: the same Plan Error as a cloned one, and no clone', async () => {
    const { headSha } = await env.openPull(url, 6, 'bad-config', {
      'atlantis.yaml': 'version: 3\nprojects:\n- dir: app1\n  autoplan:\n    when_modified: 7\n',
      'README.md': '# bad\n',
    });
    const c = await env.waitForComment(6, /^\*\*Plan Error\*\*\n```\n/);
    assert.match(c.body, /atlantis\.yaml: projects\[0\]\.autoplan\.when_modified: must be a list of strings/);
    assert.equal(cloned(6, headSha), false);
  });
});
