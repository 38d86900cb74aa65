// The real server process authenticating as a GitHub App against the stand-in: its key from
// ATLANTIS_GH_APP_KEY, the installation found with a JWT, the bot login read at start,
// installation tokens that live 4 s (GitHub: an hour) replaced before they expire while the
// server plans, its own comments ignored, and neither key nor tokens in anything it writes,
// also when a PR's terraform prints the server's environment, the key as an indented heredoc.
import assert from 'node:assert/strict';
import { readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { sleep } from '../src/async.js';
import { type CliProcess, startCli, waitForHttp } from './support/cli.js';
import { childList } from './support/children.js';
import { terraformConfig } from './support/git-repos.js';
import { StandinApp } from './support/github-standin-app.js';
import { type WorkflowEnv, createWorkflowEnv, tempDataDir } from './support/workflow-env.js';

const HOST = '127.0.93.1';
const APP_ID = 90417;
const SLUG = 'atl-bot';
const { privateKeyPem, publicKey } = StandinApp.keyPair();
const keyLines = privateKeyPem.split('\n').filter((l) => l.length > 20 && !l.startsWith('-----'));
let env: WorkflowEnv;
let app: StandinApp;
const procs = childList();

/** The workflow env's server flags with the App's in place of --gh-user/--gh-token. */
function appArgs(dataDir: string, host: string, extra: string[] = []): string[] {
  const args = env.serverArgs(dataDir, host, extra);
  for (const flag of ['--gh-user', '--gh-token']) args.splice(args.indexOf(flag), 2);
  return [...args, '--gh-app-id', String(APP_ID), '--gh-app-slug', SLUG];
}

before(async () => {
  env = await createWorkflowEnv();
  app = new StandinApp({ appId: APP_ID, slug: SLUG, publicKey, installations: [{ id: 31, account: 'acme' }], tokenTtlMs: 4000 });
  env.gh.app = app;
  // Comments made with an installation token are the App bot's, as on GitHub.
  env.gh.botLogin = `${SLUG}[bot]`;
});
after(async () => {
  procs.killAll();
  await env.close();
});

describe('the server as a GitHub App (real server process)', () => {
  let p: CliProcess;
  const url = `http://${HOST}:4141`;

  const dataDir = tempDataDir();

  it('starts with the App key from env: installation found with a JWT, bot login from /apps/<slug>', async () => {
    p = startCli(appArgs(dataDir, HOST, ['--log-level', 'debug']), { ATLANTIS_GH_APP_KEY: privateKeyPem });
    procs.push(p);
    await waitForHttp(`${url}/healthz`).catch((e: Error) => assert.fail(`${e.message}\n${p.output()}`));
    const installations = env.gh.callsTo('GET', /^\/app\/installations$/);
    assert.equal(installations.length, 1);
    assert.equal(installations[0]?.status, 200);
    assert.match(String(installations[0]?.headers.authorization), /^Bearer [\w-]+\.[\w-]+\.[\w-]+$/);
    const tokenCall = env.gh.callsTo('POST', /^\/app\/installations\/31\/access_tokens$/)[0];
    assert.equal(tokenCall?.status, 201);
    const appCall = env.gh.callsTo('GET', /^\/apps\/atl-bot$/)[0];
    assert.equal(appCall?.status, 200);
    assert.equal(appCall?.headers.authorization, `token ${app.issued[0]?.token}`);
  });

  it('plans a PR with installation tokens; the comment is the bot’s', async () => {
    const { status } = await env.openPull(url, 1, 'app-change', { 'app1/main.tf': terraformConfig({ marker: 'app1-app' }) });
    assert.equal(status, 200);
    const c = await env.waitForComment(1, /^Ran Plan for dir: `app1`/);
    assert.equal(c.user, 'atl-bot[bot]');
    const repoCalls = env.gh.calls.filter((x) => x.path.startsWith('/repos/'));
    assert.ok(repoCalls.length > 0);
    for (const x of repoCalls) assert.match(String(x.headers.authorization), /^token ghs_/, `${x.method} ${x.path}`);
  });

  it('replaces each token before it expires: a plan after two lifetimes, no request refused', async () => {
    const first = app.issued[0]!;
    // The stand-in's own clock decides expiry; wait (bounded) until the first token is dead.
    const deadline = first.expiresAtMs + 4000;
    while (Date.now() < deadline) await sleep(100);
    assert.equal(app.tokenState(`token ${first.token}`), 'expired');
    const before = env.commentsOn(1).length;
    const r = await env.comment(url, 1, 'atlantis plan');
    assert.equal(r.status, 200);
    await env.waitForComment(1, /^Ran Plan for dir: `app1`/, { after: before });
    assert.ok(app.issued.length >= 2, `tokens issued: ${app.issued.length}`);
    const refused = env.gh.calls.filter((x) => x.status === 401);
    assert.deepEqual(
      refused.map((x) => `${x.method} ${x.path}`),
      [],
      'every call carried a token that was still valid',
    );
    // Each repo call was made with a token the stand-in had issued and not yet seen expire.
    const lastCalls = env.gh.calls.filter((x) => x.path.startsWith('/repos/')).slice(-3);
    for (const x of lastCalls) assert.notEqual(x.headers.authorization, `token ${first.token}`);
  });

  it("ignores the App's own comments, and `@<slug>` is no executable name (as Atlantis)", async () => {
    const own = await env.comment(url, 1, 'atlantis plan', 'atl-bot[bot]');
    assert.equal(own.body, 'Ignoring comment from our own user\n');
    const mention = await env.comment(url, 1, '@atl-bot plan');
    assert.equal(mention.body, 'Ignoring non-command comment\n');
  });

  it('a token GitHub revokes is replaced after its 401, and the request sent again', async () => {
    // First the server gets a token that lives long: a 4 s one could come due for its early
    // replacement before the next call on a busy machine, and the revoked token never be sent.
    app.tokenTtlMs = 3600_000;
    const short = app.issued.at(-1)!;
    await sleep(Math.max(0, short.expiresAtMs - Date.now()));
    const warm = env.commentsOn(1).length;
    await env.comment(url, 1, 'atlantis plan');
    await env.waitForComment(1, /^Ran Plan for dir: `app1`/, { after: warm });
    const current = app.issued.at(-1)!;
    assert.ok(current.expiresAtMs - current.issuedAtMs > 3000_000, 'the server holds a token that lives an hour');
    assert.equal(env.gh.calls.filter((x) => x.status === 401).length, 0);
    // GitHub forgets every token issued so far (revoked): the next call is refused.
    const revoked = app.issued.splice(0).map((t) => t.token);
    const before = env.commentsOn(1).length;
    await env.comment(url, 1, 'atlantis plan');
    await env.waitForComment(1, /^Ran Plan for dir: `app1`/, { after: before });
    // Calls in flight together may each be refused once; each is sent again with a new token.
    const refused = env.gh.calls.filter((x) => x.status === 401);
    assert.ok(refused.length >= 1, 'a call was refused');
    for (const r of refused)
      assert.ok(
        revoked.some((t) => r.headers.authorization === `token ${t}`),
        `refused only with a revoked token: ${r.method} ${r.path}`,
      );
    const retried = p.output().match(/GitHub refused the token; retrying with a new one/g) ?? [];
    assert.equal(retried.length, refused.length, 'each refused call sent again once');
    assert.ok(app.issued.length >= 1, 'a new token');
    app.issued.push(...revoked.map((token) => ({ token, installationId: 31, issuedAtMs: 0, expiresAtMs: 0 })));
  });

  // The audit's attack: terraform printed the server's environment, the key in it as an
  // indented heredoc. Root reads a non-dumpable process's environ (as this suite runs), so the
  // redactor is what stands here; as another user the read itself is refused
  // (secrets-env-protection.test.ts).
  it("a PR's terraform showing the server's environ as an indented heredoc: no line of the key in the comment, job log or job page", async () => {
    const tf = `output "environ" {\n  value = replace(file("/proc/${p.child.pid}/environ"), "\\u0000", "\\n")\n}\n`;
    const before = env.commentsOn(2).length;
    await env.openPull(url, 2, 'read-environ', { 'leak/main.tf': tf });
    const c = (await env.waitForComment(2, /^Ran Plan for dir: `leak`/, { after: before, timeoutMs: 90_000 })).body;
    if (process.getuid?.() === 0) {
      assert.match(c, /environ += <<-EOT\n +[^\n]*\n/, c);
      assert.match(c, /^ +ATLANTIS_GH_APP_KEY=\[REDACTED\]$/m, 'the key was printed, and scrubbed');
      assert.match(c, /^ +\[REDACTED\]$/m, 'its lines too, in their indentation');
    } else assert.match(c, /Permission denied/, c);
    const jobs = readdirSync(path.join(dataDir, 'jobs')).filter((f) => f.endsWith('.log'));
    const texts: Array<[string, string]> = [['comment', c]];
    for (const f of jobs) {
      texts.push([`job log ${f}`, readFileSync(path.join(dataDir, 'jobs', f), 'utf8')]);
      texts.push([`job page ${f}`, await (await fetch(`${url}/jobs/${f.slice(0, -4)}`)).text()]);
    }
    assert.ok(
      texts.some(([, t]) => t.includes('environ')),
      'the job logs and pages hold the plan',
    );
    for (const [where, t] of texts) for (const l of keyLines) assert.ok(!t.includes(l), `a line of the key in the ${where}`);
  });

  it('writes neither the key nor a token anywhere (log, comments)', () => {
    const texts = [p.output(), ...env.commentsOn(1).map((c) => c.body)].join('\n');
    assert.match(p.output(), /GitHub App installation token fetched/);
    for (const l of keyLines) assert.ok(!texts.includes(l), 'a line of the key was written');
    for (const t of app.issued) assert.ok(!texts.includes(t.token), 'a token was written');
  });

  it("stops at start with Atlantis's error when GitHub does not take the key (exit 2)", async () => {
    const bad = startCli(appArgs(tempDataDir(), '127.0.93.3'), { ATLANTIS_GH_APP_KEY: StandinApp.keyPair().privateKeyPem });
    procs.push(bad);
    const { code } = await bad.exited;
    assert.equal(code, 2);
    assert.ok(
      bad
        .output()
        .includes(`getting user: initializing client: GET ${env.gh.url}/app/installations: 401 A JSON web token could not be decoded []`),
      bad.output(),
    );
  });

  it("stops at start with Atlantis's error when GitHub does not know the slug (exit 2)", async () => {
    const bad = startCli(
      appArgs(tempDataDir(), '127.0.93.2').map((a) => (a === SLUG ? 'no-such-app' : a)),
      { ATLANTIS_GH_APP_KEY: privateKeyPem },
    );
    procs.push(bad);
    const { code } = await bad.exited;
    assert.equal(code, 2);
    assert.ok(
      bad.output().includes(`getting user: getting app details: GET ${env.gh.url}/apps/no-such-app: 404 Not Found []`),
      bad.output(),
    );
  });
});
