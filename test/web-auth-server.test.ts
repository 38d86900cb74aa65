// --web-basic-auth on a real server process, set from the env as an Atlantis user would:
// the web page, job pages, job logs, their live streams and /metrics answer 401 (Atlantis's
// challenge and body) without the right credentials and 200 with them; webhooks, probes and
// /status (the controller reads it) stay open.
import assert from 'node:assert/strict';
import { readdirSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { type CliProcess, startCli, waitForHttp } from './support/cli.js';
import { terraformConfig } from './support/git-repos.js';
import { issueCommentPayload, sendWebhook } from './support/github-standin.js';
import { type WorkflowEnv, createWorkflowEnv, tempDataDir } from './support/workflow-env.js';

const host = '127.61.16.1';
const url = `http://${host}:4141`;
const USER = 'ops';
const PASSWORD = 'web-pass-7f3c9a';
const basic = (user: string, pass: string) => `Basic ${Buffer.from(`${user}:${pass}`).toString('base64')}`;
const GOOD = basic(USER, PASSWORD);
const WRONG: Array<[string, string]> = [
  ['no credentials', ''],
  ['a wrong password', basic(USER, 'wrong-pass-1b2e')],
  ['a wrong username', basic('admin', PASSWORD)],
  ["Atlantis's default credentials", basic('atlantis', 'atlantis')],
  ['a bearer token', `Bearer ${PASSWORD}`],
];

let env: WorkflowEnv;
let server: CliProcess;
const dataDir = tempDataDir();

async function get(p: string, authorization?: string, method = 'GET'): Promise<{ status: number; headers: Headers; body: string }> {
  const res = await fetch(`${url}${p}`, { method, headers: authorization ? { authorization } : {}, signal: AbortSignal.timeout(20_000) });
  return { status: res.status, headers: res.headers, body: await res.text() };
}

function assertRefused(r: { status: number; headers: Headers; body: string }, what: string): void {
  assert.equal(r.status, 401, what);
  assert.equal(r.headers.get('www-authenticate'), 'Basic realm="restricted", charset="UTF-8"', what);
  assert.equal(r.body, 'Unauthorized\n', what);
}

before(async () => {
  env = await createWorkflowEnv();
  server = startCli(env.serverArgs(dataDir, host), {
    ATLANTIS_WEB_BASIC_AUTH: 'true',
    ATLANTIS_WEB_USERNAME: USER,
    ATLANTIS_WEB_PASSWORD: PASSWORD,
  });
  await waitForHttp(`${url}/healthz`, 30_000).catch((e: Error) => {
    throw new Error(`${e.message}\n${server.output()}`);
  });
});
after(async () => {
  server.child.kill('SIGKILL');
  await env.close();
});

describe('web basic auth on a real server', () => {
  it('protects the page, jobs, job logs, live streams and /metrics; leaves /events, /healthz, /readyz, /status open', {
    timeout: 240_000,
  }, async () => {
    // /events is open: a signed webhook is handled, an unsigned one is refused by the signature check, not by basic auth.
    const opened = await env.openPull(url, 7, 'web-auth', { 'web/main.tf': terraformConfig({ marker: 'w1', sleepSeconds: 6 }) });
    assert.equal(opened.status, 200);
    const unsigned = await sendWebhook(
      `${url}/events`,
      'issue_comment',
      issueCommentPayload({ repo: env.repo.fullName, number: 7, body: 'atlantis plan' }),
    );
    assert.equal(unsigned.status, 401);
    assert.equal(unsigned.headers.get('www-authenticate'), null, 'a webhook is never asked for a password');
    assert.match(unsigned.body, /X-Hub-Signature-256/);
    await env.waitForComment(7, /^Ran Plan/, { timeoutMs: 120_000 });

    // The apply sleeps 6 s in local-exec: its job is live meanwhile.
    await env.comment(url, 7, 'atlantis apply');
    let jobId: string | undefined;
    const end = Date.now() + 90_000;
    while (!jobId && Date.now() < end) {
      const page = await get('/', GOOD);
      jobId = /<h2>Running jobs<\/h2><table>.*?href="\/jobs\/([0-9a-f-]{36})">apply</s.exec(page.body)?.[1];
      if (!jobId) await new Promise((r) => setTimeout(r, 100));
    }
    assert.ok(jobId, 'the apply job shows as running on the web page');

    // Live stream: refused without credentials, streamed with them.
    for (const [what, auth] of WRONG) assertRefused(await get(`/jobs/${jobId}/stream`, auth || undefined), `live stream, ${what}`);
    const live = await fetch(`${url}/jobs/${jobId}/stream`, { headers: { authorization: GOOD }, signal: AbortSignal.timeout(90_000) });
    assert.equal(live.status, 200);
    assert.match(live.headers.get('content-type') ?? '', /^text\/event-stream/);
    const events = await live.text(); // ends with the job
    assert.match(events, /event: output\n/);
    assert.match(events, /applied w1/);
    assert.match(events, /event: done\ndata: "success"/);
    await env.waitForComment(7, /^Ran Apply/, { timeoutMs: 60_000 });

    const logFiles = readdirSync(path.join(dataDir, 'jobs'));
    assert.ok(logFiles.includes(`${jobId}.log`), 'the apply has a job log');
    const planJob = logFiles.map((f) => f.slice(0, -4)).find((id) => id !== jobId)!;
    const protectedPaths = [
      '/',
      `/jobs/${jobId}`,
      `/jobs/${planJob}`,
      `/jobs/${jobId}/stream`,
      '/metrics',
      '/no-such-page',
      '/status/',
      '/STATUS',
    ];
    for (const p of protectedPaths) {
      for (const [what, auth] of WRONG) assertRefused(await get(p, auth || undefined), `${p}, ${what}`);
      const head = await get(p, undefined, 'HEAD');
      assert.equal(head.status, 401, `HEAD ${p}`);
      assert.equal(head.headers.get('www-authenticate'), 'Basic realm="restricted", charset="UTF-8"', `HEAD ${p}`);
    }
    // With the credentials: the finished job's page and log, the page, /metrics.
    const jobPage = await get(`/jobs/${jobId}`, GOOD);
    assert.equal(jobPage.status, 200);
    assert.match(jobPage.body, /applied w1/);
    const finishedStream = await get(`/jobs/${jobId}/stream`, GOOD);
    assert.equal(finishedStream.status, 200);
    assert.match(finishedStream.body, /event: done/);
    assert.equal((await get('/', GOOD)).status, 200);
    assert.match((await get('/metrics', GOOD)).body, /atlantis_webhooks_total/);
    assert.equal((await get('/no-such-page', GOOD)).status, 404);

    // Open without credentials (and with wrong ones): probes and the controller's /status.
    for (const p of ['/healthz', '/readyz', '/status', '/status?wait_drained=0']) {
      for (const [what, auth] of WRONG) {
        const r = await get(p, auth || undefined);
        assert.equal(r.status, 200, `${p}, ${what}`);
        assert.equal(r.headers.get('www-authenticate'), null);
      }
    }
    assert.equal((JSON.parse((await get('/status')).body) as { shutting_down: boolean }).shutting_down, false);

    // A wrong password is logged (without what was sent); the password never is.
    server.child.kill('SIGTERM');
    assert.equal((await server.exited).code, 0);
    const out = server.output();
    assert.match(out, /"msg":"Web login refused: wrong username or password"/);
    assert.ok(!out.includes('wrong-pass-1b2e'), 'the wrong password sent is not logged');
    assert.ok(!out.includes(PASSWORD), 'the web password is not logged');
  });
});
