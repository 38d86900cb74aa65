// The real-path rules on real directories and symlinks: which links leave a checkout, which
// project dirs are refused, which file arguments resolve outside.
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { assertPathArgsInside, findEscapingSymlink, projectDirInside } from '../src/server/workflow/checkout/checkout-paths.js';

/** A fake data dir: a checkout `wc` (app/, modules/m/), a sibling checkout `other` and a secret file beside them. */
function layout(): { root: string; wc: string } {
  const root = mkdtempSync(path.join(tmpdir(), 'ato-paths-'));
  const wc = path.join(root, 'repos', 'acme', 'infra', '1', 'default');
  for (const d of ['app', 'modules/m', '.git', 'app/.terraform/providers']) mkdirSync(path.join(wc, d), { recursive: true });
  mkdirSync(path.join(root, 'repos', 'acme', 'infra', '2', 'default', 'app'), { recursive: true });
  writeFileSync(path.join(wc, 'app', 'main.tf'), '');
  writeFileSync(path.join(wc, 'common.tfvars'), '');
  writeFileSync(path.join(root, 'secret'), 'x');
  return { root, wc };
}

test('findEscapingSymlink: links resolving outside the checkout, by real path, dangling ones too', async () => {
  const cases: { name: string; link: string; target: (l: { root: string; wc: string }) => string; escapes: boolean }[] = [
    { name: 'absolute to a server file', link: 'app/evil.tfvars', target: (l) => path.join(l.root, 'secret'), escapes: true },
    { name: 'relative to the sibling PR', link: 'app/other', target: () => '../../../2/default/app', escapes: true },
    { name: 'dangling, outside', link: 'x', target: () => '/nonexistent/dir', escapes: true },
    { name: 'dir to /', link: 'modules/m/root', target: () => '/', escapes: true },
    { name: 'inside, relative', link: 'alias', target: () => 'app', escapes: false },
    { name: 'inside, absolute', link: 'app/vars', target: (l) => path.join(l.wc, 'common.tfvars'), escapes: false },
    { name: 'dangling, inside', link: 'app/later', target: () => 'not-yet', escapes: false },
    { name: "under .git (git's own)", link: '.git/x', target: () => '/', escapes: false },
    { name: "terraform's provider cache links", link: 'app/.terraform/providers/p', target: () => '/', escapes: false },
    { name: 'a link to a dir is not followed, only checked', link: 'loop', target: () => '.', escapes: false },
  ];
  for (const c of cases) {
    const l = layout();
    symlinkSync(c.target(l), path.join(l.wc, c.link));
    const found = await findEscapingSymlink(l.wc);
    assert.equal(found?.link, c.escapes ? c.link : undefined, c.name);
  }
  assert.equal(await findEscapingSymlink(layout().wc), undefined, 'no links');
});

test('projectDirInside: the real dir, never through a link', async () => {
  const l = layout();
  symlinkSync('app', path.join(l.wc, 'alias'));
  symlinkSync('../app', path.join(l.wc, 'modules', 'up'));
  assert.equal(await projectDirInside(l.wc, 'app'), path.join(l.wc, 'app'));
  assert.equal(await projectDirInside(l.wc, '.'), l.wc);
  await assert.rejects(projectDirInside(l.wc, 'alias'), /dir "alias" goes through a symbolic link \(it is really "app"\)/);
  await assert.rejects(projectDirInside(l.wc, 'modules/up'), /goes through a symbolic link \(it is really "app"\)/);
  await assert.rejects(projectDirInside(l.wc, 'missing'), /^DirNotExistError: dir "missing" does not exist$/);
  // Only dirs cleaned by the repo-dir rule are joined to the checkout.
  for (const bad of ['..', '../1', '/etc', 'app/../app', './app', 'app/', 'a\u0000b']) {
    await assert.rejects(projectDirInside(l.wc, bad), /is not a clean directory inside the repository/, JSON.stringify(bad));
  }
  // A checkout reached through a link of its own (e.g. a data dir under a symlinked /tmp) is fine.
  const viaLink = path.join(l.root, 'wc-link');
  symlinkSync(l.wc, viaLink);
  assert.equal(await projectDirInside(viaLink, 'app'), path.join(l.wc, 'app'));
});

test('assertPathArgsInside: file arguments resolve inside the checkout, by real path', async () => {
  const l = layout();
  symlinkSync(l.wc, path.join(l.wc, 'app', 'top')); // inside; but top/.. is the checkout's parent
  const app = path.join(l.wc, 'app');
  const ok = [
    ['-var-file=main.tf'],
    ['-var-file', '../common.tfvars'],
    ['--var-file=../common.tfvars'],
    ['-var=x=/etc/passwd'],
    ['-generate-config-out=gen.tf'],
    ['-backend-config=bucket=x'],
  ];
  for (const args of ok) await assertPathArgsInside(l.wc, app, args);
  const refused = [
    ['-var-file=../../../../../../secret'],
    ['-var-file', '../../2/default/app/x.tfvars'],
    ['-var-file=/proc/self/environ'],
    ['-var-file=top/../secret'], // lexically app/secret, really beside the checkout
    ['-generate-config-out=../../../../../../gen.tf'],
    ['-backend-config=../../../../../../secret'],
  ];
  for (const args of refused) {
    await assert.rejects(
      assertPathArgsInside(l.wc, app, args),
      /is not allowed in extra args: .* must name a file inside this pull request's checkout/,
      args.join(' '),
    );
  }
});
