// A hostile when_modified against the real server process: the pattern `*a*a…*c` and a
// 10k-char changed path used to block the event loop for minutes (no /healthz, SIGTERM not
// handled). Now the server keeps answering, plans what matches, refuses what is too costly
// with a comment, and drains at once on SIGTERM (judged from its own log timestamps).
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { type CliProcess, startCli, waitForHttp } from './support/cli.js';
import { terraformConfig } from './support/git-repos.js';
import { pullRequestPayload, sendWebhook } from './support/github-standin.js';
import { waitFor } from './support/server.js';
import { type WorkflowEnv, WEBHOOK_SECRET, createWorkflowEnv, tempDataDir } from './support/workflow-env.js';

let env: WorkflowEnv;
let server: CliProcess;
const host = '127.0.83.17';
const url = `http://${host}:4141`;

const PATHOLOGICAL = '*a'.repeat(30) + '*c';
/** The same shape at the length limit: ~1000 NFA states each. */
const LONG_PATHOLOGICAL = '*a'.repeat(511) + '*c';
/** 10k a's then `cx`: holds every literal of the patterns, so the NFA runs over all of it. */
const LONG_PATH = 'app1/' + 'a'.repeat(10_000) + 'cx';

/**
 * Opens PR `number` whose branch commits `files`; the stand-in lists `extraListed` among its
 * changed files too (a 10k-char path cannot be checked out: PATH_MAX is 4096; the server,
 * like Atlantis, takes the changed files from the API).
 */
async function openPull(number: number, files: Record<string, string>, extraListed: string[]): Promise<number> {
  const branch = `wm-${number}`;
  const headSha = await env.repo.createBranch(branch, files);
  await env.repo.publishPull(number, branch);
  const listed = [...(await env.repo.changedFiles(branch)), ...extraListed];
  env.gh.addPull(env.repo.fullName, {
    number,
    headSha,
    headRef: branch,
    baseRef: env.repo.baseBranch,
    files: listed.map((filename) => ({ filename })),
  });
  const r = await sendWebhook(
    `${url}/events`,
    'pull_request',
    pullRequestPayload({ repo: env.repo.fullName, cloneUrl: env.repo.cloneUrl, action: 'opened', number, headSha, headRef: branch }),
    { secret: WEBHOOK_SECRET, timeoutMs: 10_000 },
  );
  return r.status;
}

/**
 * Probes /healthz every 100 ms until PR `number` has a comment (at most 90 s): every answer
 * must come within 5 s (the budget's worst case is about half a second of CPU, more on a
 * busy machine). The backtracking matcher left /healthz unanswered for minutes once
 * the PR's checkout was done. Returns how many probes were answered.
 */
async function probeHealthzUntilComment(number: number): Promise<number> {
  let answered = 0;
  const end = Date.now() + 90_000;
  while (env.commentsOn(number).length === 0 && Date.now() < end) {
    const res = await fetch(`${url}/healthz`, { signal: AbortSignal.timeout(5_000) });
    assert.equal(res.status, 200);
    answered++;
    await new Promise((r) => setTimeout(r, 100));
  }
  return answered;
}

function atlantisYaml(app1Patterns: string[]): string {
  return `version: 3\nprojects:\n- dir: app1\n  autoplan:\n    when_modified: ${JSON.stringify(app1Patterns)}\n- dir: app2\n`;
}

interface LogLine {
  time: string;
  msg: string;
  [k: string]: unknown;
}
function logLines(): LogLine[] {
  return server
    .output()
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as LogLine);
}

before(async () => {
  env = await createWorkflowEnv();
  server = startCli(env.serverArgs(tempDataDir(), host, ['--log-level', 'debug']));
  await waitForHttp(`${url}/healthz`);
});
after(async () => {
  server.child.kill('SIGKILL');
  await env.close();
});

describe('hostile when_modified (real server process)', { timeout: 180_000 }, () => {
  it('the pathological pattern on a 10k-char path: /healthz answers, only the matching project plans', async () => {
    const status = await openPull(
      1,
      { 'atlantis.yaml': atlantisYaml([PATHOLOGICAL]), 'app2/main.tf': terraformConfig({ marker: 'app2-wm' }) },
      [LONG_PATH],
    );
    assert.equal(status, 200);
    assert.ok((await probeHealthzUntilComment(1)) > 0);
    const c = await env.waitForComment(1, /^Ran Plan for dir: `app2` workspace: `default`/);
    assert.doesNotMatch(c.body, /app1/);
    assert.match(c.body, /app2-wm/);
  });

  it('the same path also planning app1 when its last char makes the pattern match', async () => {
    const status = await openPull(
      2,
      { 'atlantis.yaml': atlantisYaml([PATHOLOGICAL]), 'app1/main.tf': terraformConfig({ marker: 'app1-wm' }) },
      [LONG_PATH.slice(0, -1)],
    );
    assert.equal(status, 200);
    await probeHealthzUntilComment(2);
    const c = await env.waitForComment(2, /^Ran Plan for dir: `app1` workspace: `default`/);
    assert.match(c.body, /app1-wm/);
  });

  it('100 long pathological patterns: the step budget refuses with a comment, the server stays up', async () => {
    const patterns = Array.from({ length: 100 }, () => LONG_PATHOLOGICAL);
    const status = await openPull(
      3,
      { 'atlantis.yaml': atlantisYaml(patterns), 'app2/main.tf': terraformConfig({ marker: 'app2-budget' }) },
      [LONG_PATH],
    );
    assert.equal(status, 200);
    await probeHealthzUntilComment(3);
    const c = await env.waitForComment(3, /^\*\*Plan Error\*\*\n```\n/);
    assert.match(
      c.body,
      /when_modified matching needed more than 20000000 steps for this pull request's changed files; plan projects with -d\/-p instead/,
    );
  });

  it('a config over the bounds is refused naming the key', async () => {
    const status = await openPull(4, { 'atlantis.yaml': atlantisYaml(Array.from({ length: 101 }, () => PATHOLOGICAL)) }, [LONG_PATH]);
    assert.equal(status, 200);
    const c = await env.waitForComment(4, /^\*\*Plan Error\*\*\n```\n/);
    assert.match(c.body, /atlantis\.yaml: projects\[0\]\.autoplan\.when_modified: at most 100 patterns are allowed, got 101/);
  });

  it('SIGTERM right after a costly event: the server drains and exits at once', async () => {
    const patterns = Array.from({ length: 100 }, () => LONG_PATHOLOGICAL);
    const status = await openPull(5, { 'atlantis.yaml': atlantisYaml(patterns) }, [LONG_PATH]);
    assert.equal(status, 200);
    // The command is journalled before the 200 and begins after it: its first line may follow the answer.
    await waitFor("the server's first line of PR 5's event", () => logLines().some((l) => l.pull === 5), 30_000).catch((e: Error) => {
      throw new Error(`${e.message}\n${server.output().slice(-2000)}`);
    });
    const accepted = logLines()
      .filter((l) => l.pull === 5)
      .at(0);
    assert.ok(accepted);
    server.child.kill('SIGTERM');
    const exit = await server.exited;
    assert.equal(exit.code, 0, server.output().slice(-3000));
    const lines = logLines();
    const finished = lines.find((l) => l.msg === 'Drain finished');
    assert.ok(finished, 'the server logged the end of its drain');
    // From the server's own clock: the event's first log line to the end of the drain. The
    // backtracking matcher needed minutes here before the SIGTERM handler could even run.
    const took = Date.parse(finished.time) - Date.parse(accepted.time);
    assert.ok(took >= 0 && took < 10_000, `drain finished ${took} ms after PR 5's event`);
  });
});
