// Debian's Chromium driven by playwright-core for the web UI's browser tests: headless, no
// sandbox (tests run as root in a private network namespace), background networking off, so
// it talks to nothing but the pages it is sent to. Screenshots go to a directory the test
// prints and leaves behind. `make test` installs Chromium (hack/deps/chromium.sh).
import { existsSync, mkdirSync, mkdtempSync } from 'node:fs';
import { type Server, createServer } from 'node:http';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { type Browser, type Page, chromium } from 'playwright-core';

export const CHROMIUM = '/usr/bin/chromium';

export async function launchChromium(): Promise<Browser> {
  if (!existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is missing: run 'make chromium-bin' (make test does it)`);
  return chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    chromiumSandbox: false,
    timeout: 60_000,
    args: ['--disable-background-networking', '--disable-component-update', '--disable-dev-shm-usage', '--no-first-run'],
  });
}

/** Where a test's screenshots go: `<tmp>/ato-web-<name>-XXXXXX/screenshots`, printed once, kept after the test. */
export function screenshotDir(name: string): string {
  const dir = path.join(mkdtempSync(path.join(tmpdir(), `ato-web-${name}-`)), 'screenshots');
  mkdirSync(dir, { recursive: true });
  console.log(`screenshots of ${name}: ${dir}`);
  return dir;
}

/** A full-page PNG of what the page shows now, `<dir>/<name>.png`. */
export async function shoot(page: Page, dir: string, name: string): Promise<string> {
  const file = path.join(dir, `${name}.png`);
  await page.screenshot({ path: file, fullPage: true });
  return file;
}

/** Whether the page is wider than its viewport (it should never need sideways scrolling as a whole). */
export const overflowsSideways = (page: Page): Promise<boolean> =>
  page.evaluate('document.documentElement.scrollWidth > window.innerWidth') as Promise<boolean>;

/**
 * A page of another site: `/` serves `html`. A browser on it that sends a request to the
 * server is making a cross-site request, as a malicious page a user visits would.
 */
export async function otherSite(host: string, html: string): Promise<{ url: string; close: () => Promise<void> }> {
  const srv: Server = createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
    res.end(html);
  });
  await new Promise<void>((resolve) => srv.listen(8080, host, resolve));
  return {
    url: `http://${host}:8080/`,
    close: () => new Promise<void>((resolve) => srv.close(() => resolve())),
  };
}
