// Fork PRs and closed PRs against the real server process (GitHub stand-in, real git and
// terraform): a fork's PR is neither autoplanned nor commanded unless --allow-fork-prs (a
// reply unless --silence-fork-pr-errors, a log line either way); a closed PR runs nothing but
// unlock, so it takes no lock that nothing would release. Settings are given as env, as a
// pod gets them.
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { CLOSED_PR_COMMENT, FORK_PR_COMMENT, UNLOCKED_COMMENT } from '../src/server/workflow/pr/messages.js';
import { type CliProcess, startCli, waitForHttp } from './support/cli.js';
import { childList } from './support/children.js';
import { git, terraformConfig } from './support/git-repos.js';
import { pullRequestPayload, sendWebhook } from './support/github-standin.js';
import { waitFor } from './support/server.js';
import { WEBHOOK_SECRET, type WorkflowEnv, createWorkflowEnv, tempDataDir } from './support/workflow-env.js';

const FORK = 'mallory/infra';
const FORK_LOG = 'Refused a command on a pull request from a fork';
const CLOSED_LOG = 'Refused a command on a closed pull request';

let env: WorkflowEnv;
const procs = childList();

before(async () => {
  env = await createWorkflowEnv({ ghHost: '127.0.164.250' });
});
after(async () => {
  procs.killAll();
  await env.close();
});

async function startServer(host: string, envVars: NodeJS.ProcessEnv = {}): Promise<{ p: CliProcess; url: string; dataDir: string }> {
  const dataDir = tempDataDir();
  const p = startCli(env.serverArgs(dataDir, host), envVars);
  procs.push(p);
  const url = `http://${host}:4141`;
  await waitForHttp(`${url}/healthz`).catch((e: Error) => {
    throw new Error(`${e.message}\n${p.output()}`);
  });
  return { p, url, dataDir };
}

/**
 * Opens PR `number` from a fork, as GitHub has it: the branch lives in the fork's own
 * repository (a real bare clone), the base repository only has refs/pull/<n>/head.
 */
async function openForkPull(url: string, number: number, branch: string): Promise<string> {
  const headSha = await env.repo.createBranch(branch, { 'app1/main.tf': terraformConfig({ marker: `fork-${number}` }) });
  await env.repo.publishPull(number, branch);
  const files = await env.repo.changedFiles(branch);
  const forkDir = path.join(mkdtempSync(path.join(tmpdir(), 'fork-')), 'infra.git');
  await git(tmpdir(), ['clone', '--bare', '-q', env.repo.bareDir, forkDir]);
  await git(env.repo.bareDir, ['update-ref', '-d', `refs/heads/${branch}`]);
  const headCloneUrl = `file://${forkDir}`;
  env.gh.addPull(env.repo.fullName, {
    number,
    headSha,
    headRef: branch,
    files: files.map((filename) => ({ filename })),
    headRepo: FORK,
    headCloneUrl,
  });
  const r = await sendWebhook(
    `${url}/events`,
    'pull_request',
    pullRequestPayload({
      repo: env.repo.fullName,
      cloneUrl: env.repo.cloneUrl,
      action: 'opened',
      number,
      headSha,
      headRef: branch,
      headRepo: FORK,
      headCloneUrl,
      user: 'mallory',
    }),
    { secret: WEBHOOK_SECRET },
  );
  assert.equal(r.status, 200);
  return headSha;
}

/** Log lines of the server with message `msg` and pull `pull`. */
function logLines(p: CliProcess, msg: string, pull: number): Array<Record<string, unknown>> {
  return p
    .output()
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as Record<string, unknown>)
    .filter((l) => l.msg === msg && l.pull === pull);
}

async function idle(url: string): Promise<void> {
  await waitFor(
    'no operation in progress',
    async () => ((await (await fetch(`${url}/status`)).json()) as { in_progress_operations: number }).in_progress_operations === 0,
  );
}

describe('fork and closed pull requests (real server process)', () => {
  it("by default a fork PR is not autoplanned nor commanded: Atlantis's reply each time, a log line, nothing cloned", async () => {
    const { p, url, dataDir } = await startServer('127.0.164.1');
    const headSha = await openForkPull(url, 11, 'fork-11');
    await env.waitForComment(11, /fork pull requests/, { timeoutMs: 15_000 });
    assert.equal((await env.comment(url, 11, 'atlantis plan', 'mallory')).status, 200);
    assert.equal((await env.comment(url, 11, 'atlantis apply', 'mallory')).status, 200);
    await waitFor('three refusals logged', () => logLines(p, FORK_LOG, 11).length === 3, 15_000);
    await idle(url);
    await waitFor('three replies', () => env.commentsOn(11).length === 3, 15_000);
    assert.deepEqual(
      env.commentsOn(11).map((c) => c.body),
      [FORK_PR_COMMENT, FORK_PR_COMMENT, FORK_PR_COMMENT],
    );
    assert.deepEqual(
      logLines(p, FORK_LOG, 11).map((l) => l.command),
      ['autoplan', 'plan', 'apply'],
    );
    assert.equal(env.gh.statusesFor(env.repo.fullName, headSha).length, 0, 'no commit status');
    assert.ok(!existsSync(path.join(dataDir, 'repos')), 'nothing was cloned');
    assert.doesNotMatch(await (await fetch(`${url}/`)).text(), /#11 by/, 'no lock');
    assert.match(await (await fetch(`${url}/metrics`)).text(), /atlantis_commands_refused_total\{reason="fork_pull_request"\} 3/);
  });

  it('a closed PR runs nothing but unlock: its locks, released on close, are not taken again', async () => {
    const { p, url } = await startServer('127.0.164.4');
    await env.openPull(url, 12, 'closed-12', { 'app2/main.tf': terraformConfig({ marker: 'closed-12' }) });
    await env.waitForComment(12, /^Ran Plan for dir: `app2`/);
    assert.match(await (await fetch(`${url}/`)).text(), /#12 by dev/);
    assert.equal((await env.closePull(url, 12)).status, 200);
    await env.waitForComment(12, /Locks and plans deleted/);
    let before = env.commentsOn(12).length;
    for (const cmd of ['atlantis plan', 'atlantis apply', 'atlantis plan -d app2'])
      assert.equal((await env.comment(url, 12, cmd)).status, 200);
    await waitFor('three refusals logged', () => logLines(p, CLOSED_LOG, 12).length === 3, 15_000);
    await idle(url);
    await waitFor('three replies', () => env.commentsOn(12).length === before + 3, 15_000);
    assert.deepEqual(
      env
        .commentsOn(12)
        .slice(before)
        .map((c) => c.body),
      [CLOSED_PR_COMMENT, CLOSED_PR_COMMENT, CLOSED_PR_COMMENT],
    );
    assert.doesNotMatch(await (await fetch(`${url}/`)).text(), /#12 by/, 'the closed PR holds no lock');
    // unlock still runs on a closed PR, as in Atlantis.
    before = env.commentsOn(12).length;
    await env.comment(url, 12, 'atlantis unlock');
    await env.waitForComment(12, new RegExp(UNLOCKED_COMMENT), { after: before, timeoutMs: 15_000 });
  });

  it('a PR closed while a command of it runs keeps no lock once the command ends', async () => {
    const { p, url } = await startServer('127.0.164.5');
    await env.openPull(url, 15, 'race-15', { 'app2/main.tf': terraformConfig({ marker: 'race-15' }) });
    await env.waitForComment(15, /^Ran Plan for dir: `app2`/);
    let before = env.commentsOn(15).length;
    await env.comment(url, 15, 'atlantis unlock');
    await env.waitForComment(15, new RegExp(UNLOCKED_COMMENT), { after: before, timeoutMs: 15_000 });
    assert.doesNotMatch(await (await fetch(`${url}/`)).text(), /#15 by/);
    // GitHub says the PR is open, but its answer arrives only after the PR was closed.
    const slow = env.gh.holdNext({ method: 'GET', path: /^\/repos\/acme\/infra\/pulls\/15$/ });
    before = env.commentsOn(15).length;
    assert.equal((await env.comment(url, 15, 'atlantis plan')).status, 200);
    await slow.reached;
    assert.equal((await env.closePull(url, 15)).status, 200);
    slow.release();
    await env.waitForComment(15, /^Ran Plan for dir: `app2`/, { after: before });
    await idle(url);
    assert.doesNotMatch(await (await fetch(`${url}/`)).text(), /#15 by/, 'the lock the plan took after the close was released');
    await waitFor(
      'the release logged',
      () => p.output().includes('Released what commands took while their pull request was being closed'),
      5000,
    );
  });

  it('--silence-fork-pr-errors: the same refusals, logged, without a reply', async () => {
    const { p, url, dataDir } = await startServer('127.0.164.2', { ATLANTIS_SILENCE_FORK_PR_ERRORS: 'true' });
    await openForkPull(url, 13, 'fork-13');
    assert.equal((await env.comment(url, 13, 'atlantis plan', 'mallory')).status, 200);
    await waitFor('two refusals logged', () => logLines(p, FORK_LOG, 13).length === 2, 15_000);
    await idle(url);
    // A reply the server does post, after the refusals: nothing came before it.
    await env.comment(url, 13, 'atlantis help', 'mallory');
    await env.waitForComment(13, /Commands/, { timeoutMs: 15_000 });
    assert.equal(
      env.commentsOn(13).length,
      1,
      env
        .commentsOn(13)
        .map((c) => c.body.slice(0, 80))
        .join('\n'),
    );
    assert.ok(!existsSync(path.join(dataDir, 'repos')), 'nothing was cloned');
  });

  it("--allow-fork-prs: a fork PR is autoplanned from the fork's repository", async () => {
    const { url } = await startServer('127.0.164.3', { ATLANTIS_ALLOW_FORK_PRS: 'true' });
    await openForkPull(url, 14, 'fork-14');
    const c = await env.waitForComment(14, /^Ran Plan for dir: `app1` workspace: `default`/);
    assert.match(c.body, /fork-14/);
  });
});
