// The web page an Atlantis user expects, in a real Chromium (Debian's, driven by
// playwright-core) against the real server process, the GitHub stand-in, real git and real
// terraform: the index; a lock page opened from the link in a real plan comment, its plan
// discarded with the keyboard (the PR is told, the plan file and the lock are gone); the
// global apply lock turned on, an apply refused with Atlantis's text, turned off again; a
// running apply's job page whose output grows live, in terraform's colours; times in the
// viewer's timezone; every page on a phone; and --disable-global-apply-lock. Screenshots of
// every page go to the directory the test prints.
import assert from 'node:assert/strict';
import { existsSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { APPLY_DISABLED_COMMENT } from '../src/server/workflow/commands/apply-lock.js';
import { CONFIRM_APPLY_LOCK, CONFIRM_DISCARD } from '../src/server/web/pages.js';
import { sleep } from '../src/async.js';
import { launchChromium, overflowsSideways, screenshotDir, shoot } from './support/browser.js';
import type { CliProcess } from './support/cli.js';
import { type WorkflowEnv, createWorkflowEnv, startWorkflowServer, tempDataDir } from './support/workflow-env.js';

const host = '127.0.222.1';
/** What the test uses of the page's window inside locator.evaluate (the project compiles without the DOM's types). */
type BrowserWindow = { getComputedStyle(e: unknown): { color: string } };
const TICKS = 8;
/** An apply that prints a green line a second, as a provisioner whose tool colours its output. */
const COLOURED = `resource "terraform_data" "ticks" {
  input = "v1"
  provisioner "local-exec" {
    command = "for i in $(seq 1 ${TICKS}); do printf '\\\\033[32mtick %s\\\\033[0m\\\\n' $i; sleep 1; done"
  }
}
`;

let env: WorkflowEnv;
let server: CliProcess;
let url: string;
let browser: Browser;
let ctx: BrowserContext;
let page: Page;
let shots: string;
const dataDir = tempDataDir();
/** Errors the pages' script or policy reported in the browser: there must be none. */
const pageErrors: string[] = [];

function watch(p: Page): Page {
  p.on('pageerror', (e) => pageErrors.push(`${p.url()}: ${e.message}`));
  p.on('console', (m) => {
    // A document's own status is the test's to check (a 404 on purpose); a script, style or policy error is not.
    if (m.type() === 'error' && m.location().url !== p.url()) pageErrors.push(`${p.url()}: ${m.location().url}: ${m.text()}`);
  });
  return p;
}

const planFiles = (pull: number): string[] => {
  const dir = path.join(dataDir, 'plans', 'acme', 'infra', String(pull));
  return existsSync(dir) ? readdirSync(dir) : [];
};

/** The lock link of a plan comment: `click [here](<atlantis-url>/lock?id=...)`. */
function lockLink(body: string): string {
  const link = /click \[here\]\((http:\/\/[^)]+\/lock\?id=[^)]+)\)/.exec(body)?.[1];
  assert.ok(link, `a lock link in the plan comment:\n${body}`);
  return link;
}

/** Waits (bounded) for a pending project status of `cmd` set after the first `after` statuses; returns its job page URL. */
async function jobUrlOf(sha: string, cmd: 'plan' | 'apply', afterCount: number): Promise<string> {
  const end = Date.now() + 90_000;
  while (Date.now() < end) {
    const s = env.gh
      .statusesFor(env.repo.fullName, sha)
      .slice(afterCount)
      .find((x) => x.context.startsWith(`atlantis/${cmd}:`) && x.state === 'pending' && x.target_url?.includes('/jobs/'));
    if (s?.target_url) return s.target_url;
    await sleep(100);
  }
  throw new Error(`no pending ${cmd} status with a job link on ${sha}`);
}

/** Presses a form's button with the keyboard and answers the dialog: Escape (nothing happens) or Yes. */
async function confirmWithKeyboard(p: Page, button: string, question: string, answer: 'yes' | 'escape'): Promise<void> {
  await p.getByRole('button', { name: button }).focus();
  await p.keyboard.press('Enter');
  const dialog = p.locator('dialog#confirm[open]');
  await dialog.waitFor({ state: 'visible', timeout: 10_000 });
  assert.equal(await p.locator('#confirm-text').textContent(), question);
  assert.equal(await p.evaluate('document.activeElement.value'), 'cancel', 'the dialog starts on Cancel');
  if (answer === 'escape') {
    await p.keyboard.press('Escape');
    await p.locator('dialog#confirm').waitFor({ state: 'hidden', timeout: 10_000 });
    return;
  }
  await p.keyboard.press('Shift+Tab');
  assert.equal(await p.evaluate('document.activeElement.value'), 'yes');
  await p.keyboard.press('Enter');
}

before(async () => {
  env = await createWorkflowEnv();
  ({ p: server, url } = await startWorkflowServer(env, dataDir, host));
  browser = await launchChromium();
  ctx = await browser.newContext({ locale: 'en-GB', timezoneId: 'UTC' });
  page = watch(await ctx.newPage());
  shots = screenshotDir('browser');
});
after(async () => {
  await browser?.close();
  server?.child.kill('SIGKILL');
  await env?.close();
});

describe('the web page in Chromium', { timeout: 400_000 }, () => {
  let headSha = '';
  let link = '';

  it('the index: this server serving, the apply lock enabled, no locks, no jobs; under its policy', async () => {
    const res = await page.goto(url);
    assert.equal(res?.status(), 200);
    assert.match(res?.headers()['content-security-policy'] ?? '', /script-src 'self'/);
    assert.equal(await page.title(), 'atlantis');
    assert.equal((await page.locator('.badge').textContent())?.trim(), 'serving');
    assert.equal(await page.getByRole('button', { name: 'Disable Apply Commands' }).count(), 1);
    const tree = await page.locator('main').ariaSnapshot();
    for (const part of [
      'heading "Apply commands"',
      'heading "Locks"',
      'heading "Running jobs"',
      'heading "Recent jobs"',
      'columnheader "Locked by"',
    ])
      assert.ok(tree.includes(part), `${part} in\n${tree}`);
    await shoot(page, shots, 'index-empty');
  });

  it("the lock link of a real plan comment opens the lock's page; Discard Plan & Unlock, with the keyboard, removes the plan file and the lock and tells the PR", async () => {
    ({ headSha } = await env.openPull(url, 1, 'colours', { 'app/main.tf': COLOURED }));
    const plan = await env.waitForComment(1, /^Ran Plan/, { timeoutMs: 120_000 });
    link = lockLink(plan.body);
    assert.equal(planFiles(1).length, 1, 'the plan is saved');

    const res = await page.goto(link);
    assert.equal(res?.status(), 200);
    assert.equal(await page.locator('h1 .key').textContent(), 'acme/infra/app/default/');
    const facts = (await page.locator('dl.facts').textContent()) ?? '';
    for (const f of [
      /Repo Owner\s*acme/,
      /Repo Name\s*infra/,
      /Locked By\s*#1 by dev/,
      /Workspace\s*default/,
      /Plan\s*saved .* from commit/,
    ])
      assert.match(facts, f);
    await shoot(page, shots, 'lock');

    // Escape: nothing happens.
    await confirmWithKeyboard(page, 'Discard Plan & Unlock', CONFIRM_DISCARD, 'escape');
    await shoot(page, shots, 'lock-after-escape');
    assert.equal(planFiles(1).length, 1, 'Escape discards nothing');
    assert.equal(page.url(), link);

    const before = env.commentsOn(1).length;
    await confirmWithKeyboard(page, 'Discard Plan & Unlock', CONFIRM_DISCARD, 'yes');
    await page.waitForURL(`${url}/?notice=discarded`, { timeout: 20_000 });
    assert.equal(await page.getByRole('status').textContent(), 'Plan discarded and unlocked!');
    assert.equal(await page.locator('section[aria-label="Locks"] tbody').textContent(), 'none');
    await shoot(page, shots, 'index-discarded');

    const warning = await env.waitForComment(1, /^\*\*Warning\*\*/, { after: before });
    assert.equal(
      warning.body,
      '**Warning**: The plan for dir: `app` workspace: `default` was **discarded** via the Atlantis UI.\n\nTo `apply` this plan you must run `plan` again.',
    );
    assert.deepEqual(planFiles(1), [], 'the plan file is gone');
    const gone = await page.goto(link);
    assert.equal(gone?.status(), 404);
    assert.equal((await page.locator('body').textContent())?.trim(), "No lock found at id 'acme/infra/app/default/'");
  });

  it("the global apply lock: turned on from the index, an apply is refused with Atlantis's text; turned off, applies may run", async () => {
    const planned = env.commentsOn(1).length;
    await env.comment(url, 1, 'atlantis plan');
    await env.waitForComment(1, /^Ran Plan/, { after: planned, timeoutMs: 120_000 });

    await page.goto(url);
    await page.getByRole('button', { name: 'Disable Apply Commands' }).click();
    assert.equal(await page.locator('#confirm-text').textContent(), CONFIRM_APPLY_LOCK);
    await shoot(page, shots, 'index-apply-lock-confirm');
    await page.getByRole('button', { name: 'Yes' }).click();
    await page.waitForURL(`${url}/?notice=apply-locked`, { timeout: 20_000 });
    const section = (await page.locator('section.apply-lock').textContent()) ?? '';
    assert.match(section, /Apply commands are disabled globally/);
    assert.match(section, /Lock Status\s*Active/);
    assert.match(section, /Active Since\s*\d/);
    await shoot(page, shots, 'index-apply-locked');

    const before = env.commentsOn(1).length;
    await env.comment(url, 1, 'atlantis apply');
    const refused = await env.waitForComment(1, /is disabled\.$/, { after: before, timeoutMs: 60_000 });
    assert.equal(refused.body, APPLY_DISABLED_COMMENT);
    await waitForLog(
      /"msg":"Command finished".*"command":"apply".*"result":"refused"|"command":"apply".*"msg":"Command finished".*"result":"refused"/,
    );
    assert.equal(planFiles(1).length, 1, 'the plan is still there to apply');
    assert.ok(
      !env
        .commentsOn(1)
        .slice(before)
        .some((c) => /^Ran Apply/.test(c.body)),
      'nothing was applied',
    );

    await page.getByRole('button', { name: 'Enable Apply Commands' }).click();
    await page.getByRole('button', { name: 'Yes' }).click();
    await page.waitForURL(`${url}/?notice=apply-unlocked`, { timeout: 20_000 });
    assert.match((await page.locator('section.apply-lock').textContent()) ?? '', /Apply commands are enabled/);
  });

  it("a running apply's job page, opened from its commit status: the output grows live, in terraform's colours, and the page sees the end", async () => {
    const statuses = env.gh.statusesFor(env.repo.fullName, headSha).length;
    const before = env.commentsOn(1).length;
    await env.comment(url, 1, 'atlantis apply');
    const jobUrl = await jobUrlOf(headSha, 'apply', statuses);
    await page.goto(jobUrl);
    // Every change the page makes to the output, as the page itself saw it.
    await page.evaluate(`(() => {
      const out = document.getElementById('out');
      const status = () => document.getElementById('status').textContent.trim();
      window.seen = [{ length: out.textContent.length, status: status() }];
      new MutationObserver(() => window.seen.push({ length: out.textContent.length, status: status() })).observe(document.getElementById('main'), { childList: true, subtree: true, characterData: true });
    })()`);
    // Waits judged from the page's DOM (a locator: the pages' policy forbids the eval of a string predicate).
    await page.locator('#out', { hasText: 'tick 2' }).waitFor({ timeout: 90_000 });
    await shoot(page, shots, 'job-running');
    await page.locator('#out[data-done]').waitFor({ state: 'attached', timeout: 90_000 });
    assert.equal(await page.locator('#out').getAttribute('data-done'), 'success');
    assert.equal((await page.locator('#status').textContent())?.trim(), 'success');

    const seen = (await page.evaluate('window.seen')) as Array<{ length: number; status: string }>;
    const growing = seen.filter((s) => s.status === 'running').map((s) => s.length);
    assert.ok(new Set(growing).size >= 3, `the output grew at least twice while the job ran: ${JSON.stringify(seen)}`);
    assert.deepEqual(
      growing,
      [...growing].sort((a, b) => a - b),
      'it only grows',
    );
    const text = (await page.locator('#out').textContent()) ?? '';
    let at = -1;
    for (let i = 1; i <= TICKS; i++) {
      const next = text.indexOf(`tick ${i}\n`);
      assert.ok(next > at, `tick ${i} once, in order:\n${text}`);
      at = next;
    }
    assert.ok(!text.includes('\x1b'), 'no escape shown');
    const green = page.locator('#out span.xf2', { hasText: /^tick \d+$/ });
    assert.equal(await green.count(), TICKS);
    // Run in the page: the browser's own computed colour of the span.
    const colour = await green.first().evaluate((e) => (globalThis as unknown as BrowserWindow).getComputedStyle(e).color);
    assert.equal(colour, 'rgb(95, 211, 95)', 'the palette green');
    await shoot(page, shots, 'job-finished');
    await env.waitForComment(1, /^Ran Apply/, { after: before, timeoutMs: 60_000 });
  });

  it("times are in the viewer's timezone; every page fits a phone, its buttons big enough to touch", async () => {
    const phone = await browser.newContext({
      locale: 'en-GB',
      timezoneId: 'Asia/Tokyo',
      viewport: { width: 390, height: 844 },
      deviceScaleFactor: 2,
      isMobile: true,
      hasTouch: true,
    });
    try {
      const p = watch(await phone.newPage());
      await p.goto(url);
      const since = p.locator('section[aria-label="Locks"] time').first();
      const iso = (await since.getAttribute('datetime')) ?? '';
      const tokyo = new Intl.DateTimeFormat('en-GB', {
        timeZone: 'Asia/Tokyo',
        hour: '2-digit',
        minute: '2-digit',
        second: '2-digit',
        hourCycle: 'h23',
      }).format(new Date(iso));
      const shown = (await since.textContent()) ?? '';
      assert.ok(shown.includes(tokyo) && shown.includes('GMT+9'), `${iso} shown in Tokyo as ${shown}, expected ${tokyo} GMT+9`);
      assert.match((await since.getAttribute('title')) ?? '', / UTC$/, 'the UTC time stays in the title');
      assert.equal(await overflowsSideways(p), false, 'the index fits the phone');
      const button = await p.getByRole('button', { name: 'Disable Apply Commands' }).boundingBox();
      assert.ok(button && button.height >= 44, `a touch target of ${button?.height} px`);
      await shoot(p, shots, 'phone-index');

      await p.locator('section[aria-label="Locks"] a').first().click();
      await p.waitForURL(/\/lock\?id=/, { timeout: 20_000 });
      assert.equal(await overflowsSideways(p), false, 'the lock page fits the phone');
      await shoot(p, shots, 'phone-lock');

      await p.goto(url);
      await p.locator('section[aria-label="Recent jobs"] a', { hasText: 'apply' }).first().click();
      await p.waitForURL(/\/jobs\//, { timeout: 20_000 });
      assert.match((await p.locator('#out').textContent()) ?? '', new RegExp(`tick ${TICKS}`));
      assert.equal(await overflowsSideways(p), false, 'the job page fits the phone');
      await shoot(p, shots, 'phone-job');
    } finally {
      await phone.close();
    }
  });

  it('--disable-global-apply-lock: the index has no apply lock, its routes are gone, and a lock left in the store stops no apply', async () => {
    await page.goto(url);
    await page.getByRole('button', { name: 'Disable Apply Commands' }).click();
    await page.getByRole('button', { name: 'Yes' }).click();
    await page.waitForURL(`${url}/?notice=apply-locked`, { timeout: 20_000 });
    server.child.kill('SIGKILL');
    await server.exited;
    ({ p: server } = await startWorkflowServer(env, dataDir, host, ['--disable-global-apply-lock']));

    await page.goto(url);
    assert.equal(await page.locator('section.apply-lock').count(), 0);
    assert.equal(await page.getByRole('heading', { name: 'Locks' }).count(), 1);
    await shoot(page, shots, 'index-apply-lock-disabled');
    for (const [method, p] of [
      ['POST', '/apply/lock'],
      ['POST', '/apply/unlock'],
      ['DELETE', '/apply/unlock'],
    ] as const)
      assert.equal((await fetch(`${url}${p}`, { method })).status, 404, `${method} ${p}`);

    const planned = env.commentsOn(1).length;
    await env.comment(url, 1, 'atlantis plan');
    await env.waitForComment(1, /^Ran Plan/, { after: planned, timeoutMs: 120_000 });
    const before = env.commentsOn(1).length;
    await env.comment(url, 1, 'atlantis apply');
    await env.waitForComment(1, /^Ran Apply/, { after: before, timeoutMs: 120_000 });
    assert.ok(
      !env
        .commentsOn(1)
        .slice(before)
        .some((c) => c.body === APPLY_DISABLED_COMMENT),
      'not refused',
    );
  });

  it("no page's script failed and nothing was blocked by the pages' policy", () => {
    assert.deepEqual(pageErrors, []);
  });
});

/** Waits (bounded) until a line of the server's log matches `re`. */
async function waitForLog(re: RegExp): Promise<void> {
  const end = Date.now() + 60_000;
  while (Date.now() < end) {
    if (
      server
        .output()
        .split('\n')
        .some((l) => re.test(l))
    )
      return;
    await sleep(100);
  }
  throw new Error(`the server never logged ${re}:\n${server.output().slice(-3000)}`);
}
