// Bad webhooks against the real server module with the workflow wired in: every rejection
// has the right status, and nothing runs, nothing is locked, nothing is commented wrongly.
import assert from 'node:assert/strict';
import { readdirSync, existsSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { issueCommentPayload, pullRequestPayload, sendWebhook } from './support/github-standin.js';
import { type TestServer, startTestServer, waitFor } from './support/server.js';
import { WEBHOOK_SECRET, type WorkflowEnv, createWorkflowEnv } from './support/workflow-env.js';

let env: WorkflowEnv;
let ts: TestServer;

before(async () => {
  env = await createWorkflowEnv();
  ts = await startTestServer(['--gh-webhook-secret', WEBHOOK_SECRET, '--gh-api-url', env.gh.url, '--gh-token', env.gh.token], {
    workflow: true,
  });
  env.gh.addPull(env.repo.fullName, {
    number: 5,
    headSha: env.repo.baseSha,
    headRef: env.repo.baseBranch,
    files: [{ filename: 'app1/main.tf' }],
  });
});
after(async () => {
  await ts.server.close();
  await env.close();
});

const events = () => `${ts.url}/events`;
const comment = (body: string, extra: Partial<Parameters<typeof issueCommentPayload>[0]> = {}) =>
  issueCommentPayload({ repo: env.repo.fullName, cloneUrl: env.repo.cloneUrl, number: 5, body, ...extra });

function nothingRan(): void {
  assert.equal(ts.server.runner.running().length, 0);
  const jobs = path.join(ts.dataDir, 'jobs');
  assert.ok(!existsSync(jobs) || readdirSync(jobs).length === 0, 'no job ran');
  assert.ok(!existsSync(path.join(ts.dataDir, 'repos')), 'nothing was cloned');
}

describe('bad webhooks', () => {
  it('rejects a forged signature with 401', async () => {
    const r = await sendWebhook(events(), 'issue_comment', comment('atlantis plan'), { secret: 'not-the-secret' });
    assert.equal(r.status, 401);
    nothingRan();
  });

  it('rejects a missing signature with 401', async () => {
    const r = await sendWebhook(events(), 'issue_comment', comment('atlantis plan'), { signature: null });
    assert.equal(r.status, 401);
    nothingRan();
  });

  it('rejects a malformed signature header with 401', async () => {
    const r = await sendWebhook(events(), 'issue_comment', comment('atlantis plan'), { signature: 'sha256=zz' });
    assert.equal(r.status, 401);
  });

  it('rejects truncated JSON (correctly signed) with 400', async () => {
    const raw = JSON.stringify(comment('atlantis plan')).slice(0, 80);
    const r = await sendWebhook(events(), 'issue_comment', null, { secret: WEBHOOK_SECRET, rawBody: raw });
    assert.equal(r.status, 400);
    assert.match(r.body, /not valid JSON/);
    nothingRan();
  });

  it('rejects a payload missing required fields with 400', async () => {
    const r = await sendWebhook(events(), 'issue_comment', { action: 'created', issue: { number: 5 } }, { secret: WEBHOOK_SECRET });
    assert.equal(r.status, 400);
  });

  it('rejects a body over 25 MiB with 413', async () => {
    const r = await sendWebhook(events(), 'issue_comment', null, {
      secret: WEBHOOK_SECRET,
      rawBody: Buffer.alloc(25 * 1024 * 1024 + 10, 'a'),
    });
    assert.equal(r.status, 413);
    nothingRan();
  });

  it('answers 200 "Ignoring" for other events', async () => {
    for (const ev of ['push', 'ping', 'check_run']) {
      const r = await sendWebhook(events(), ev, { zen: 'x', repository: { full_name: 'acme/infra' } }, { secret: WEBHOOK_SECRET });
      assert.equal(r.status, 200, ev);
      assert.match(r.body, /Ignoring/);
    }
    nothingRan();
  });

  it('refuses a repo outside the allowlist with 403', async () => {
    const r = await sendWebhook(events(), 'issue_comment', issueCommentPayload({ repo: 'evil/infra', number: 5, body: 'atlantis plan' }), {
      secret: WEBHOOK_SECRET,
    });
    assert.equal(r.status, 403);
    const p = await sendWebhook(
      events(),
      'pull_request',
      pullRequestPayload({ repo: 'evil/infra', action: 'opened', number: 1, headSha: 'a'.repeat(40) }),
      { secret: WEBHOOK_SECRET },
    );
    assert.equal(p.status, 403);
    nothingRan();
    assert.equal(env.gh.comments('evil/infra').length, 0);
  });

  it('ignores edited comments, issue comments and comments of its own user', async () => {
    for (const payload of [
      comment('atlantis plan', { action: 'edited' }),
      comment('atlantis plan', { onPullRequest: false }),
      comment('atlantis plan', { user: 'atlantis-bot' }),
      comment('looks good to me'),
    ]) {
      const r = await sendWebhook(events(), 'issue_comment', payload, { secret: WEBHOOK_SECRET });
      assert.equal(r.status, 200);
      assert.match(r.body, /Ignoring/);
    }
    nothingRan();
  });

  const parserErrors: Array<[string, RegExp]> = [
    ['atlantis destroy', /unknown command/i],
    ['atlantis plan --bogus', /unknown flag/i],
    ['atlantis plan -p x -d app1', /cannot use -p\/--project at same time as -d\/--dir or -w\/--workspace/],
    ['atlantis plan -d ../../etc', /relative path/],
    ['atlantis plan -w ../x', /workspace/i],
    ['atlantis plan -- -chdir=/tmp', /-chdir/],
    ['terraform plan', /Did you mean to use `atlantis` instead of `terraform`\?/],
    ['atlantis import', /import/],
  ];
  for (const [text, re] of parserErrors) {
    it(`answers "${text}" with an error comment and runs nothing`, async () => {
      const before = env.commentsOn(5).length;
      const r = await sendWebhook(events(), 'issue_comment', comment(text), { secret: WEBHOOK_SECRET });
      assert.equal(r.status, 200);
      const c = await env.waitForComment(5, re, { after: before, timeoutMs: 10_000 });
      assert.ok(c);
      nothingRan();
    });
  }

  it('nothing was locked by any of it', async () => {
    await waitFor('background replies', () => ts.server.tracker.inProgress === 0);
    assert.doesNotMatch(await (await fetch(`${ts.url}/`)).text(), /by dev/);
    assert.equal(env.gh.statuses.length, 0, 'no commit status was set');
  });
});
