// The web page behind --web-basic-auth in a real Chromium against the real server process:
// without credentials every page (and its stylesheet and script) answers 401 with Atlantis's
// challenge; with them the index, the lock page from a real plan comment, its discard and the
// job page work as without auth. And a page of another site that makes the signed-in browser
// post to this server (turn the apply lock on, discard a lock) is refused: 403, nothing
// changes, and the server logs why. Screenshots go to the directory the test prints.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Browser, BrowserContext } from 'playwright-core';
import { sleep } from '../src/async.js';
import { launchChromium, otherSite, screenshotDir, shoot } from './support/browser.js';
import { type CliProcess, startCli, waitForHttp } from './support/cli.js';
import { terraformConfig } from './support/git-repos.js';
import { type WorkflowEnv, createWorkflowEnv, tempDataDir } from './support/workflow-env.js';

const host = '127.0.222.11';
const url = `http://${host}:4141`;
/** Another site, as far as the browser is concerned: another address. */
const evilHost = '127.0.222.12';
const USER = 'ops';
const PASSWORD = 'browser-pass-5d81e0';

let env: WorkflowEnv;
let server: CliProcess;
let browser: Browser;
let signedIn: BrowserContext;
let shots: string;
const dataDir = tempDataDir();

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
  browser = await launchChromium();
  signedIn = await browser.newContext({ httpCredentials: { username: USER, password: PASSWORD } });
  shots = screenshotDir('browser-auth');
});
after(async () => {
  await browser?.close();
  server?.child.kill('SIGKILL');
  await env?.close();
});

/** The lines the server logged with message `msg`, parsed. */
const logged = (msg: string): Array<Record<string, unknown>> =>
  server
    .output()
    .split('\n')
    .filter((l) => l.includes(`"msg":"${msg}"`))
    .map((l) => JSON.parse(l) as Record<string, unknown>);

async function waitFor(what: string, ok: () => boolean, timeoutMs = 30_000, detail = () => ''): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (Date.now() < end) {
    if (ok()) return;
    await sleep(100);
  }
  throw new Error(`timed out waiting for ${what}\n${detail()}`);
}

describe('the web page behind basic auth, in Chromium', { timeout: 300_000 }, () => {
  let link = '';
  let jobUrl = '';

  it('a plan to look at: a real plan comment with its lock link and a job', async () => {
    const { headSha } = await env.openPull(url, 3, 'auth', { 'web/main.tf': terraformConfig({ marker: 'a1' }) });
    const plan = await env.waitForComment(3, /^Ran Plan/, { timeoutMs: 120_000 });
    link = /click \[here\]\((http:\/\/[^)]+\/lock\?id=[^)]+)\)/.exec(plan.body)?.[1] ?? '';
    assert.ok(link.startsWith(`${url}/lock?id=`), plan.body);
    jobUrl = env.gh.statusesFor(env.repo.fullName, headSha).find((s) => s.target_url?.includes('/jobs/'))?.target_url ?? '';
    assert.ok(jobUrl.startsWith(`${url}/jobs/`), 'the plan status links its job page');
  });

  it("without credentials: 401 and Atlantis's challenge for every page, its stylesheet and its script", async () => {
    const anonymous = await browser.newContext();
    try {
      const page = await anonymous.newPage();
      for (const p of [url, link, jobUrl, `${url}/static/atlantis.css`, `${url}/static/atlantis.js`, `${jobUrl}/stream`]) {
        // Headless Chromium has no one to ask for a password: it gives up on the challenge.
        const [res, nav] = await Promise.all([
          page.waitForResponse(p),
          page.goto(p).then(
            () => 'loaded',
            (e: Error) => e.message,
          ),
        ]);
        assert.equal(res.status(), 401, p);
        assert.equal(res.headers()['www-authenticate'], 'Basic realm="restricted", charset="UTF-8"', p);
        assert.match(nav, /ERR_INVALID_AUTH_CREDENTIALS/, p);
      }
    } finally {
      await anonymous.close();
    }
  });

  it('with credentials: the index, the lock page from the plan comment, and the job page', async () => {
    const page = await signedIn.newPage();
    const index = await page.goto(url);
    assert.equal(index?.status(), 200);
    assert.match((await page.locator('section[aria-label="Locks"] tbody').textContent()) ?? '', /acme\/infra.*web.*default.*#3 by dev/);
    assert.equal(await page.getByRole('button', { name: 'Disable Apply Commands' }).count(), 1);
    await shoot(page, shots, 'index');

    assert.equal((await page.goto(link))?.status(), 200);
    assert.match((await page.locator('dl.facts').textContent()) ?? '', /Locked By\s*#3 by dev/);
    await shoot(page, shots, 'lock');

    assert.equal((await page.goto(jobUrl))?.status(), 200);
    assert.equal((await page.locator('#status').textContent())?.trim(), 'success');
    assert.match((await page.locator('#out').textContent()) ?? '', /Plan: 1 to add/);
    await shoot(page, shots, 'job');
    await page.close();
  });

  it('a page of another site posting to this server through the signed-in browser is refused: 403, nothing changes, the log says why', async () => {
    const lockId = new URL(link).searchParams.get('id') ?? '';
    const site = await otherSite(
      evilHost,
      `<!doctype html><title>free stickers</title>
<form id="f" method="post" action="${url}/apply/lock"></form>
<form id="g" method="post" action="${url}/locks/discard?id=${encodeURIComponent(lockId)}"></form>
<p id="fetched">waiting</p>
<script>
  // A script may send a request no form could; the browser adds the credentials it has for the server.
  fetch('${url}/apply/lock', { method: 'POST', mode: 'no-cors', credentials: 'include' })
    .then(() => { document.getElementById('fetched').textContent = 'sent'; })
    .catch((e) => { document.getElementById('fetched').textContent = 'failed: ' + e.message; });
</script>`,
    );
    try {
      const page = await signedIn.newPage();
      await page.goto(url); // signed in to the server first, as its user would be
      const refusedBefore = logged('Cross-site request refused').length;

      // The script's request: refused by the cross-site check, or before it by basic auth (the
      // browser may keep its credentials from another site's script); either way refused.
      const [fetched] = await Promise.all([
        page.waitForResponse((r) => r.url() === `${url}/apply/lock` && r.request().resourceType() === 'fetch'),
        page.goto(site.url),
      ]);
      assert.ok([401, 403].includes(fetched.status()), `the script's POST got ${fetched.status()}`);
      await page.locator('#fetched', { hasText: /sent|failed/ }).waitFor({ timeout: 20_000 });
      await shoot(page, shots, 'other-site');
      const [res] = await Promise.all([page.waitForResponse(`${url}/apply/lock`), page.evaluate("document.getElementById('f').submit()")]);
      assert.equal(res.status(), 403);
      await page.waitForURL(`${url}/apply/lock`, { timeout: 20_000 });
      assert.equal((await page.locator('body').textContent())?.trim(), 'Forbidden: this action must come from a page of this server');
      await shoot(page, shots, 'cross-site-refused');

      await page.goto(site.url);
      const [discard] = await Promise.all([
        page.waitForResponse((r) => r.url().startsWith(`${url}/locks/discard`)),
        page.evaluate("document.getElementById('g').submit()"),
      ]);
      assert.equal(discard.status(), 403);
      await page.waitForURL((u) => u.href.startsWith(`${url}/locks/discard`), { timeout: 20_000 });
      assert.equal((await page.locator('body').textContent())?.trim(), 'Forbidden: this action must come from a page of this server');

      const expected = ['POST /apply/lock Sec-Fetch-Site: cross-site', 'POST /locks/discard Sec-Fetch-Site: cross-site'];
      if (fetched.status() === 403) expected.unshift('POST /apply/lock Sec-Fetch-Site: cross-site');
      await waitFor(
        'the refusals in the log',
        () => logged('Cross-site request refused').length >= refusedBefore + expected.length,
        30_000,
        () => server.output().split('\n').slice(-30).join('\n'),
      );
      const refusals = logged('Cross-site request refused').slice(refusedBefore);
      assert.deepEqual(refusals.map((l) => `${String(l.method)} ${String(l.path)} ${String(l.reason)}`).sort(), expected.sort());
      assert.ok(!server.output().includes(PASSWORD), 'the password is never logged');

      // Nothing changed: applies are enabled, the lock and its plan are there, the PR was not told.
      await page.goto(url);
      assert.equal(await page.getByRole('button', { name: 'Disable Apply Commands' }).count(), 1);
      assert.match((await page.locator('section[aria-label="Locks"] tbody').textContent()) ?? '', /#3 by dev/);
      assert.ok(!env.commentsOn(3).some((c) => /discarded/.test(c.body)));
      await page.close();
    } finally {
      await site.close();
    }
  });

  it("the same page's own form still works: Discard Plan & Unlock, then the PR is told", async () => {
    const page = await signedIn.newPage();
    await page.goto(link);
    const before = env.commentsOn(3).length;
    await page.getByRole('button', { name: 'Discard Plan & Unlock' }).click();
    await page.getByRole('button', { name: 'Yes' }).click();
    await page.waitForURL(`${url}/?notice=discarded`, { timeout: 20_000 });
    assert.equal(await page.getByRole('status').textContent(), 'Plan discarded and unlocked!');
    await shoot(page, shots, 'index-discarded');
    const c = await env.waitForComment(3, /^\*\*Warning\*\*/, { after: before });
    assert.match(c.body, /The plan for dir: `web` workspace: `default` was \*\*discarded\*\* via the Atlantis UI/);
    await page.close();
  });
});
