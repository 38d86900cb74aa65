// Tokens and webhook secrets never appear in logs (debug level included), PR comments,
// /status, the web page, job logs, or the working copies, after a full workflow run.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { type CliProcess, startCli, waitForHttp } from './support/cli.js';
import { terraformConfig } from './support/git-repos.js';
import { sendWebhook, issueCommentPayload } from './support/github-standin.js';
import { type WorkflowEnv, WEBHOOK_SECRET, createWorkflowEnv, tempDataDir } from './support/workflow-env.js';

let env: WorkflowEnv;
let server: CliProcess;
const dataDir = tempDataDir();
const host = '127.0.46.1';
const url = `http://${host}:4141`;

function filesUnder(dir: string): string[] {
  return readdirSync(dir, { recursive: true, encoding: 'utf8' })
    .map((f) => path.join(dir, f))
    .filter((f) => statSync(f).isFile());
}

before(async () => {
  env = await createWorkflowEnv();
  server = startCli(env.serverArgs(dataDir, host, ['--log-level', 'debug']));
  await waitForHttp(`${url}/healthz`);
});
after(async () => {
  server.child.kill('SIGKILL');
  await env.close();
});

describe('secrets never leak', () => {
  it('after plan, apply, a forged webhook and a drain, no secret is anywhere', { timeout: 120_000 }, async () => {
    const token = env.gh.token;
    assert.ok(token.length > 10);
    await env.openPull(url, 60, 'leak-check', { 'leak/main.tf': terraformConfig({ marker: 'l1' }) });
    await env.waitForComment(60, /^Ran Plan/);
    await env.comment(url, 60, 'atlantis apply');
    await env.waitForComment(60, /^Ran Apply/);
    await env.comment(url, 60, 'atlantis plan -d ../x');
    await env.waitForComment(60, /relative path/);
    const forged = await sendWebhook(
      `${url}/events`,
      'issue_comment',
      issueCommentPayload({ repo: env.repo.fullName, number: 60, body: 'atlantis plan' }),
      { secret: 'wrong' },
    );
    assert.equal(forged.status, 401);
    const status = await (await fetch(`${url}/status`)).text();
    const page = await (await fetch(`${url}/`)).text();
    const metrics = await (await fetch(`${url}/metrics`)).text();
    server.child.kill('SIGTERM');
    assert.equal((await server.exited).code, 0);

    const places: Array<[string, string]> = [
      ['server logs', server.output()],
      ['/status', status],
      ['web page', page],
      ['/metrics', metrics],
      ...env.commentsOn(60).map((c, i): [string, string] => [`PR comment ${i}`, c.body]),
      ...filesUnder(dataDir)
        .filter((f) => !f.endsWith('.db') && !f.includes('/.terraform/') && !f.endsWith('.tfplan'))
        .map((f): [string, string] => [f, readFileSync(f, 'utf8')]),
    ];
    assert.ok(server.output().includes('"level":"debug"'), 'debug logging was on');
    assert.ok(places.length > 10);
    for (const [where, text] of places) {
      assert.ok(!text.includes(token), `the GitHub token appears in ${where}`);
      assert.ok(!text.includes(WEBHOOK_SECRET), `the webhook secret appears in ${where}`);
    }
  });
});
