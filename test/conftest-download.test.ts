// conftest versions found or downloaded as Atlantis v0.47 does (src/server/policy/conftest-install.ts):
// `conftest` on PATH when no version is asked for, `conftest<v>` on PATH, the data dir's
// bin/conftest<v>, else the release tarball from a local HTTP mirror (--conftest-download-url;
// never the internet) serving the conftest built from its Go module under made-up versions,
// checked against the release's checksums.txt. A wrong checksum, a version not listed and a
// missing version are each a clear error that keeps no binary; a second ask fetches nothing.
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { nullLogger } from '../src/log.js';
import { ConftestBinaries, conftestPlatform, conftestRelease } from '../src/server/policy/conftest-install.js';
import { ProcessHost } from '../src/server/terraform/process-host.js';
import { goTool } from './support/go-tools.js';

const MIRROR_HOST = '127.0.164.12';
const tmp = mkdtempSync(path.join(tmpdir(), 'conftest-download-'));
const requests: string[] = [];
const files = new Map<string, Buffer>();
let mirror: http.Server;
let mirrorUrl: string;
let conftest: string;
const PLATFORM = conftestPlatform(process.platform, process.arch)!;

const GOOD = '0.71.10';
const BAD = '0.71.11';
const UNLISTED = '0.71.12';
const MISSING = '0.71.13';

before(async () => {
  mirror = http.createServer((req, res) => {
    requests.push(req.url ?? '');
    const body = files.get(req.url ?? '');
    if (!body) return void res.writeHead(404).end('Not Found\n');
    res.writeHead(200, { 'content-length': body.length }).end(body);
  });
  mirror.listen(0, MIRROR_HOST);
  await new Promise((r) => mirror.once('listening', r));
  mirrorUrl = `http://${MIRROR_HOST}:${(mirror.address() as AddressInfo).port}`;
  conftest = await goTool('conftest');
  const src = path.join(tmp, 'tar-src');
  mkdirSync(src);
  copyFileSync(conftest, path.join(src, 'conftest'));
  execFileSync('sh', ['-c', 'echo licence > LICENSE && echo readme > README.md'], { cwd: src });
  execFileSync('tar', ['-czf', path.join(tmp, 'release.tar.gz'), 'LICENSE', 'README.md', 'conftest'], { cwd: src });
  const archive = readFileSync(path.join(tmp, 'release.tar.gz'));
  const sha = (b: Buffer | string) => createHash('sha256').update(b).digest('hex');
  for (const [v, sumOf, listed] of [
    [GOOD, archive, true],
    [BAD, Buffer.from('something else'), true],
    [UNLISTED, archive, false],
  ] as const) {
    const r = conftestRelease(mirrorUrl, v, PLATFORM);
    files.set(new URL(r.archiveUrl).pathname, archive);
    const other = `${sha('x')}  conftest_${v}_Windows_x86_64.zip\n`;
    files.set(new URL(r.sumsUrl).pathname, Buffer.from(listed ? `${other}${sha(sumOf)}  ${r.archiveName}\n` : other));
  }
});
after(() => {
  mirror.close();
  rmSync(tmp, { recursive: true, force: true });
});

const binaries = (binDir: string, host: ProcessHost, o: { pathEnv?: string; defaultVersion?: string } = {}) =>
  new ConftestBinaries({ binDir, downloadUrl: mirrorUrl, host, logger: nullLogger(), pathEnv: o.pathEnv ?? '/nonexistent', ...o });

describe('conftest versions', { timeout: 120_000 }, () => {
  it('downloads a version once, checked against checksums.txt, keeps it as bin/conftest<v>; a second ask fetches nothing', async () => {
    const host = new ProcessHost({ logger: nullLogger() });
    const binDir = path.join(tmp, 'data1', 'bin');
    try {
      const before = requests.length;
      const bin = await binaries(binDir, host).binaryFor(GOOD);
      assert.equal(bin, path.join(binDir, `conftest${GOOD}`));
      assert.deepEqual(
        requests.slice(before).map((r) => r.split('/').pop()),
        ['checksums.txt', `conftest_${GOOD}_${PLATFORM}.tar.gz`],
      );
      assert.match(spawnSync(bin, ['--version'], { encoding: 'utf8' }).stdout, /^Conftest: 0\.71\.1/);
      const again = requests.length;
      assert.equal(await binaries(binDir, host).binaryFor(`v${GOOD}`), bin, 'v-prefixed: the same version');
      assert.equal(requests.length, again);
    } finally {
      await host.close();
    }
  });

  it('the default version (DEFAULT_CONFTEST_VERSION) when none is asked for; without one, conftest on PATH; without that, an error', async () => {
    const host = new ProcessHost({ logger: nullLogger() });
    const binDir = path.join(tmp, 'data2', 'bin');
    const pathDir = path.join(tmp, 'path2');
    mkdirSync(pathDir);
    symlinkSync(conftest, path.join(pathDir, 'conftest'));
    symlinkSync(conftest, path.join(pathDir, `conftest${MISSING}`));
    try {
      assert.equal(await binaries(binDir, host, { defaultVersion: GOOD }).binaryFor(undefined), path.join(binDir, `conftest${GOOD}`));
      assert.equal(await binaries(binDir, host, { pathEnv: pathDir }).binaryFor(undefined), path.join(pathDir, 'conftest'));
      assert.equal(
        await binaries(binDir, host, { pathEnv: pathDir }).binaryFor(MISSING),
        path.join(pathDir, `conftest${MISSING}`),
        'conftest<v> on PATH',
      );
      await assert.rejects(
        binaries(binDir, host).binaryFor(undefined),
        /no conftest version configured\/specified or not found conftest command/,
      );
    } finally {
      await host.close();
    }
  });

  const refused: Array<[string, string, RegExp]> = [
    ['a wrong checksum', BAD, /downloading conftest version 0\.71\.11 at ".*": checksum mismatch for conftest_0\.71\.11_/],
    ['not in checksums.txt', UNLISTED, /conftest_0\.71\.12_\S+ is not listed in checksums\.txt/],
    ['a missing version', MISSING, /GET .*\/v0\.71\.13\/checksums\.txt answered 404/],
    ['not a version', '../../etc', /invalid conftest version "\.\.\/\.\.\/etc"/],
  ];
  for (const [what, version, re] of refused) {
    it(`refused: ${what}; nothing kept`, async () => {
      const host = new ProcessHost({ logger: nullLogger() });
      const binDir = path.join(tmp, `refused-${what.replace(/\W+/g, '-')}`, 'bin');
      try {
        await assert.rejects(binaries(binDir, host).binaryFor(version), re);
        assert.ok(!existsSync(path.join(binDir, `conftest${version}`)));
      } finally {
        await host.close();
      }
    });
  }
});
