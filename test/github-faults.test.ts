// Fault: the GitHub API answers 5xx and rate limits (403/429 with the headers GitHub sends)
// while a PR is autoplanned and applied through the server. The server retries with
// backoff, posts each result once, runs terraform apply once, and reports the failures
// that outlast the retries in its logs and in atlantis_github_request_failures_total.
import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import { createLogger } from '../src/log.js';
import { terraformConfig } from './support/git-repos.js';
import type { RecordedCall } from './support/github-standin.js';
import { type TestServer, startTestServer, waitFor } from './support/server.js';
import { WEBHOOK_SECRET, type WorkflowEnv, createWorkflowEnv } from './support/workflow-env.js';

let env: WorkflowEnv;
let ts: TestServer;
let logText = '';

interface LogLine {
  level: string;
  msg: string;
  [k: string]: unknown;
}
const logLines = (): LogLine[] =>
  logText
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l) => JSON.parse(l) as LogLine);

before(async () => {
  env = await createWorkflowEnv();
  const stream = new Writable({
    write(chunk: Buffer, _enc, cb) {
      logText += chunk.toString();
      cb();
    },
  });
  // --emoji-reaction: Atlantis reacts to comments only when it is set.
  ts = await startTestServer(
    ['--gh-webhook-secret', WEBHOOK_SECRET, '--gh-api-url', env.gh.url, '--gh-token', env.gh.token, '--emoji-reaction', 'eyes'],
    {
      workflow: true,
      logger: createLogger({ level: 'debug', stream }),
    },
  );
});
after(async () => {
  await ts.server.close();
  await env.close();
});

async function metric(name: string, labels: string): Promise<number> {
  const text = await (await fetch(`${ts.url}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`${name}{${labels}}`));
  return line === undefined ? 0 : Number(line.split(' ').pop());
}

const idle = () => waitFor('no operation in progress', () => ts.server.tracker.inProgress === 0, 60_000);
const statusesOf = (calls: RecordedCall[]) => calls.map((c) => c.status);
const bodyOf = (c: RecordedCall) => String((c.body as { body?: unknown; state?: unknown } | undefined)?.body ?? '');

describe('GitHub faults while a PR is autoplanned and applied', () => {
  const pull = 7;
  const dir = 'faulty';
  const touchFile = path.join(mkdtempSync(path.join(tmpdir(), 'ato-touch-')), 'applied');
  let headSha = '';

  it('autoplan: 502 on the changed files, 429 secondary limit on a status, 403 rate limit and 503 on the comment: retried, one plan comment', {
    timeout: 120_000,
  }, async () => {
    const files = /\/pulls\/7\/files$/;
    const comments = /\/issues\/7\/comments$/;
    env.gh.failNext(1, { kind: 'status', status: 502 }, { method: 'GET', path: files });
    env.gh.failNext(1, { kind: 'secondary-rate-limit', retryAfterSeconds: 1, status: 429 }, { method: 'POST', path: /\/statuses\// });
    env.gh.failNext(1, { kind: 'rate-limit', resetInSeconds: 1, status: 403 }, { method: 'POST', path: comments });
    env.gh.failNext(1, { kind: 'status', status: 503 }, { method: 'POST', path: comments });

    const opened = await env.openPull(ts.url, pull, 'gh-faults', { [`${dir}/main.tf`]: terraformConfig({ marker: 'f1', touchFile }) });
    headSha = opened.headSha;
    assert.equal(opened.status, 200);
    const plan = await env.waitForComment(pull, /^Ran Plan/, { timeoutMs: 90_000 });
    assert.match(plan.body, new RegExp(`^Ran Plan for dir: \`${dir}\` workspace: \`default\``));
    await idle();

    assert.equal(env.commentsOn(pull).length, 1, 'exactly one comment: the plan result, not duplicated by the retries');
    // Each faulted call was retried until it worked.
    assert.deepEqual(statusesOf(env.gh.callsTo('GET', files)), [502, 200], 'changed files: 502 then 200');
    assert.deepEqual(
      statusesOf(env.gh.callsTo('POST', comments).filter((c) => bodyOf(c).startsWith('Ran Plan'))),
      [403, 503, 201],
      'plan comment: rate limit, 503, created',
    );
    const contextOf = (c: RecordedCall) => String((c.body as { context?: unknown }).context);
    const statusCalls = env.gh.callsTo('POST', /\/statuses\//).filter((c) => contextOf(c) === 'atlantis/plan');
    assert.deepEqual(statusesOf(statusCalls), [429, 201, 201], 'pending status: 429 then created; success status created');
    assert.deepEqual(
      env.gh
        .statusesFor(env.repo.fullName, headSha)
        .filter((s) => s.context === 'atlantis/plan')
        .map((s) => s.state),
      ['pending', 'success'],
    );
    // The client waited as the rate limit headers told it to.
    const retries = logLines().filter((l) => l.msg === 'GitHub request will be retried');
    const limited = retries.filter((l) => l.status === 403 || l.status === 429);
    assert.equal(limited.length, 2, JSON.stringify(retries));
    for (const l of limited)
      assert.ok(
        Number(l.waitMs) >= 1000,
        `waited ${String(l.waitMs)} ms after a rate limit (Retry-After / x-ratelimit-reset ask for >= 1 s)`,
      );
    assert.ok(retries.some((l) => l.status === 502) && retries.some((l) => l.status === 503), 'the 5xx retries are logged');
    assert.equal(await metric('atlantis_github_request_failures_total', 'operation="set_status"'), 0, 'nothing failed for good yet');
  });

  it('apply: 500 on the pull, 500 on the reaction, a status that fails all 5 attempts, 429 on the comment: applied once, failure in logs and metric', {
    timeout: 120_000,
  }, async () => {
    env.gh.failNext(1, { kind: 'status', status: 500 }, { method: 'GET', path: /\/pulls\/7$/ });
    env.gh.failNext(1, { kind: 'status', status: 500 }, { method: 'POST', path: /\/reactions$/ });
    // The "pending" status of the apply is the first status call: every attempt fails.
    env.gh.failNext(5, { kind: 'status', status: 502 }, { method: 'POST', path: /\/statuses\// });
    env.gh.failNext(1, { kind: 'rate-limit', resetInSeconds: 1, status: 429 }, { method: 'POST', path: /\/issues\/7\/comments$/ });
    const before = env.commentsOn(pull).length;
    const callsBefore = env.gh.calls.length;

    const r = await env.comment(ts.url, pull, 'atlantis apply');
    assert.equal(r.status, 200);
    const applied = await env.waitForComment(pull, /^Ran Apply/, { after: before, timeoutMs: 90_000 });
    assert.match(applied.body, /applied f1/);
    await idle();
    const calls = env.gh.calls.slice(callsBefore);

    // The command finished, its result was posted once, terraform applied once.
    assert.equal(env.commentsOn(pull).length, before + 1, 'exactly one new comment: the apply result');
    assert.equal(env.commentsOn(pull).filter((c) => /^Ran Apply/.test(c.body)).length, 1);
    assert.equal(readFileSync(touchFile, 'utf8'), 'f1', "the apply's local-exec ran");
    const jobLogs = readdirSync(path.join(ts.dataDir, 'jobs')).map((f) => readFileSync(path.join(ts.dataDir, 'jobs', f), 'utf8'));
    assert.equal(jobLogs.filter((l) => l.includes('Apply complete!')).length, 1, 'terraform apply ran exactly once');
    const state = JSON.parse(
      readFileSync(path.join(ts.dataDir, 'repos', 'acme/infra', String(pull), 'default', dir, 'terraform.tfstate'), 'utf8'),
    ) as { resources: unknown[] };
    assert.equal(state.resources.length, 1);
    assert.equal(await metric('atlantis_commands_total', 'command="apply",result="success"'), 1, 'the apply counted as a success');

    // Retries: the pull read, the reaction and the comment were retried until they worked.
    assert.deepEqual(statusesOf(calls.filter((c) => c.method === 'GET' && /\/pulls\/7$/.test(c.path))), [500, 200]);
    assert.deepEqual(statusesOf(calls.filter((c) => /\/reactions$/.test(c.path))), [500, 201]);
    assert.deepEqual(statusesOf(calls.filter((c) => c.method === 'POST' && /\/comments$/.test(c.path))), [429, 201]);
    // The pending status failed all 5 attempts; the final status still went out.
    const statusCalls = calls.filter((c) => /\/statuses\//.test(c.path) && (c.body as { context?: unknown }).context === 'atlantis/apply');
    assert.deepEqual(
      statusCalls.map((c) => `${String((c.body as { state: string }).state)}:${c.status}`),
      [...Array(5).fill('pending:502'), 'success:201'],
    );
    assert.deepEqual(
      env.gh
        .statusesFor(env.repo.fullName, headSha)
        .filter((s) => s.context === 'atlantis/apply')
        .map((s) => s.state),
      ['success'],
    );

    // The failure that outlasted the retries is in the logs and the metric.
    assert.equal(await metric('atlantis_github_request_failures_total', 'operation="set_status"'), 1);
    const lines = logLines();
    const refused = lines.filter((l) => l.msg === 'GitHub request refused' && l.status === 502);
    assert.equal(refused.length, 1, 'one "GitHub request refused" line for the status');
    assert.equal(refused[0]?.attempt, 5);
    assert.ok(
      lines.some((l) => l.msg === 'Could not set commit status' && l.level === 'warn' && /502/.test(String(l.error))),
      'the lost status is logged as a warning',
    );
    assert.ok(!logText.includes(env.gh.token), 'the token is not in the logs');
  });

  it('plan whose result comment fails every attempt: the command ends, the failure is logged and counted, the status is not left pending', {
    timeout: 120_000,
  }, async () => {
    // Every comment POST on the PR fails (the result, and the error comment after it).
    env.gh.failNext(20, { kind: 'status', status: 500 }, { method: 'POST', path: /\/issues\/7\/comments$/ });
    const callsBefore = env.gh.calls.length;
    const linesBefore = logLines().length;
    const r = await env.comment(ts.url, pull, 'atlantis plan');
    assert.equal(r.status, 200);
    await waitFor('the plan to start', () => env.gh.calls.slice(callsBefore).some((c) => /\/statuses\//.test(c.path)), 60_000);
    await idle();
    env.gh.clearFaults();
    const calls = env.gh.calls.slice(callsBefore);
    const commentCalls = calls.filter((c) => c.method === 'POST' && /\/comments$/.test(c.path));
    assert.ok(commentCalls.length >= 5 && commentCalls.every((c) => c.status === 500), 'the result comment was tried 5 times, all failed');
    assert.deepEqual(
      commentCalls.slice(0, 5).map((c) => bodyOf(c).slice(0, 8)),
      Array(5).fill('Ran Plan'),
      'the first 5 attempts are the result comment',
    );
    const lines = logLines().slice(linesBefore);
    assert.ok(
      lines.some((l) => l.msg === 'GitHub request refused' && l.status === 500 && /\/comments$/.test(String(l.path))),
      'the lost comment is logged',
    );
    // Both expectations below are checked before failing, so one run reports both.
    const bugs: string[] = [];
    // Expected (issue 6: "reports failures in its logs and metrics"): a comment lost for good
    // counts in atlantis_github_request_failures_total like a lost commit status does.
    if ((await metric('atlantis_github_request_failures_total', 'operation="create_comment"')) < 1) {
      bugs.push(
        'a result comment lost after all retries is not counted in atlantis_github_request_failures_total ' +
          "(CommandRunner.comment, src/server/workflow/commands/command-runner.ts:293, does not increment githubRequestFailures; only the plugin's own comment helper, plugin.ts:52, does)",
      );
    }
    // Expected: the plan's final commit status is still set when its comment could not be
    // posted; otherwise atlantis/plan stays "pending" on the commit forever.
    const planStatuses = calls.filter((c) => /\/statuses\//.test(c.path)).map((c) => String((c.body as { state: string }).state));
    if (planStatuses.at(-1) === 'pending') {
      bugs.push(
        `after the result comment failed, the final atlantis/plan status was never sent (statuses sent: ${planStatuses.join(', ')}); ` +
          'CommandRunner.report (src/server/workflow/commands/command-runner.ts:268) awaits the comment before setting the status (line 272), so a thrown comment skips it',
      );
    }
    assert.deepEqual(bugs, [], `BUG(s):\n- ${bugs.join('\n- ')}`);
  });
});
