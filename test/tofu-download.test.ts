// OpenTofu versions downloaded as Atlantis v0.47 does (through OpenTofu's tofudl): the
// release tarball, `tofu_<v>_SHA256SUMS` and its detached signature `.gpgsig` by OpenTofu's
// key, here from a local HTTP mirror (never the internet; --tofu-download-url) that serves the
// tofu built from its Go module (docs/test-tools.md) under made-up versions, signed by a key
// generated here with Debian's gpg (the mirror's own, as --tofu-download-key-file). The
// download is verified, kept as <data-dir>/bin/tofu<v> and runs; a second ask fetches nothing;
// a SHA256SUMS changed after signing, signed by another key or not at all, checked against
// OpenTofu's real key, a wrong checksum and a missing version are each a clear error and
// leave no binary. The tarball reader (terraform/tar-gz.ts) is checked on its own too.
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmodSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { nullLogger } from '../src/log.js';
import { tofuReleaseFiles } from '../src/server/terraform/distribution.js';
import { ProcessHost } from '../src/server/terraform/process-host.js';
import { extractTarGzFile } from '../src/server/terraform/tar-gz.js';
import { TerraformBinaries } from '../src/server/terraform/tf-install.js';
import { goTool } from './support/go-tools.js';

const MIRROR_HOST = '127.0.163.12';
const tmp = mkdtempSync(path.join(tmpdir(), 'tofu-download-'));
const requests: string[] = [];
const files = new Map<string, Buffer>();
let mirror: http.Server;
let mirrorUrl: string;

const GOOD = '1.12.60';
const BAD = '1.12.61';
const MISSING = '1.12.62';
const TAMPERED = '1.12.63';
const OTHER_KEY = '1.12.64';
const UNSIGNED = '1.12.65';

interface GpgKey {
  home: string;
  armored: string;
}
const gpgHomes: string[] = [];

function gpg(home: string, args: string[], input?: Buffer): Buffer {
  try {
    return execFileSync('gpg', ['--homedir', home, '--batch', '--yes', '--pinentry-mode', 'loopback', '--passphrase', '', ...args], {
      input,
      stdio: ['pipe', 'pipe', 'pipe'],
    });
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') throw new Error('this test needs gpg (Debian: apt-get install gpg)');
    throw e;
  }
}

function newKey(name: string): GpgKey {
  const home = mkdtempSync(path.join(tmp, 'gnupg-'));
  chmodSync(home, 0o700);
  gpgHomes.push(home);
  gpg(home, ['--quick-gen-key', `${name} <${name}@mirror.test>`, 'ed25519', 'sign', 'never']);
  return { home, armored: gpg(home, ['--armor', '--export']).toString() };
}

let mirrorKey: GpgKey;

function serve(version: string, archive: Buffer, sumOf: Buffer, sign: { key?: GpgKey; tamper?: boolean } = {}): void {
  const f = tofuReleaseFiles(mirrorUrl, version, process.platform, process.arch);
  const sha = createHash('sha256').update(sumOf).digest('hex');
  files.set(new URL(f.archiveUrl).pathname, archive);
  const sums = Buffer.from(`${'0'.repeat(64)}  tofu_${version}_windows_amd64.zip\n${sha}  ${f.archiveName}\n`);
  if (sign.key) files.set(new URL(f.signatureUrl).pathname, gpg(sign.key.home, ['--detach-sign', '--output', '-'], sums));
  const served = sign.tamper ? Buffer.from(sums.toString().replace(sha, createHash('sha256').update('evil').digest('hex'))) : sums;
  files.set(new URL(f.sumsUrl).pathname, served);
}

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
  // A release tarball as OpenTofu packs it: tofu beside its licence and readme.
  const src = path.join(tmp, 'tar-src');
  mkdirSync(src);
  copyFileSync(await goTool('tofu'), path.join(src, 'tofu'));
  for (const f of ['LICENSE', 'README.md']) execFileSync('sh', ['-c', `echo ${f} > ${f}`], { cwd: src });
  execFileSync('tar', ['-czf', path.join(tmp, 'release.tar.gz'), 'LICENSE', 'README.md', 'tofu'], { cwd: src });
  const archive = readFileSync(path.join(tmp, 'release.tar.gz'));
  mirrorKey = newKey('mirror');
  serve(GOOD, archive, archive, { key: mirrorKey });
  serve(BAD, archive, Buffer.from('something else'), { key: mirrorKey });
  serve(TAMPERED, archive, archive, { key: mirrorKey, tamper: true });
  serve(OTHER_KEY, archive, archive, { key: newKey('someone-else') });
  serve(UNSIGNED, archive, archive);
});
after(() => {
  mirror.close();
  for (const home of gpgHomes) spawnSync('gpgconf', ['--homedir', home, '--kill', 'gpg-agent']);
  rmSync(tmp, { recursive: true, force: true });
});

const binaries = (binDir: string, host: ProcessHost, key: 'mirror' | 'opentofu' = 'mirror') =>
  new TerraformBinaries({
    distribution: 'opentofu',
    tfBinary: 'tofu',
    download: true,
    downloadUrl: mirrorUrl,
    binDir,
    host,
    logger: nullLogger(),
    pathEnv: '/nonexistent',
    ...(key === 'mirror' ? { signingKey: { armored: mirrorKey.armored, owner: 'the key of --tofu-download-key-file' } } : {}),
  });

describe('OpenTofu downloads from a local mirror', { timeout: 120_000 }, () => {
  it('downloads and verifies a version once, keeps it as tofu<v> and runs it; a second ask fetches nothing', async () => {
    const host = new ProcessHost({ logger: nullLogger() });
    const binDir = path.join(tmp, 'data1', 'bin');
    try {
      const b = binaries(binDir, host);
      const before = requests.length;
      const bin = await b.binaryFor(GOOD);
      assert.equal(bin, path.join(binDir, `tofu${GOOD}`));
      assert.deepEqual(
        requests.slice(before).map((r) => r.split('/').pop()),
        [
          `tofu_${GOOD}_SHA256SUMS`,
          `tofu_${GOOD}_SHA256SUMS.gpgsig`,
          tofuReleaseFiles('', GOOD, process.platform, process.arch).archiveName,
        ],
      );
      const version = spawnSync(bin, ['version'], { encoding: 'utf8', env: { PATH: process.env.PATH, CHECKPOINT_DISABLE: '1' } });
      assert.match(version.stdout, /^OpenTofu v1\.12\.6/);
      const again = requests.length;
      assert.equal(await binaries(binDir, host).binaryFor(GOOD), bin);
      assert.equal(requests.length, again, 'a new instance finds the binary on disk');
    } finally {
      await host.close();
    }
  });

  const refused: Array<[string, string, RegExp, ('mirror' | 'opentofu')?]> = [
    ['a wrong checksum', BAD, /error downloading tofu version 1\.12\.61: checksum mismatch for tofu_1\.12\.61_linux_amd64\.tar\.gz/],
    ['a missing version', MISSING, /error downloading tofu version 1\.12\.62: GET .*tofu_1\.12\.62_SHA256SUMS answered 404/],
    ['SHA256SUMS changed after it was signed', TAMPERED, /tofu_1\.12\.63_SHA256SUMS is not signed by the key of --tofu-download-key-file/],
    ['signed by another key', OTHER_KEY, /tofu_1\.12\.64_SHA256SUMS is not signed by the key of --tofu-download-key-file/],
    ['no signature', UNSIGNED, /no signature of tofu_1\.12\.65_SHA256SUMS on the mirror \(tofu_1\.12\.65_SHA256SUMS\.gpgsig: 404\)/],
    ["the mirror's release checked against OpenTofu's key", GOOD, /tofu_1\.12\.60_SHA256SUMS is not signed by OpenTofu's key/, 'opentofu'],
  ];
  for (const [what, version, re, key] of refused) {
    it(`refused: ${what}; no binary is kept`, async () => {
      const host = new ProcessHost({ logger: nullLogger() });
      const binDir = path.join(tmp, `refused-${version}-${key ?? 'mirror'}`, 'bin');
      try {
        await assert.rejects(binaries(binDir, host, key).binaryFor(version), re);
        assert.ok(!existsSync(path.join(binDir, `tofu${version}`)));
      } finally {
        await host.close();
      }
    });
  }

  it('downloads off: the error names tofu, the version and the bin dir', async () => {
    const host = new ProcessHost({ logger: nullLogger() });
    const binDir = path.join(tmp, 'off', 'bin');
    try {
      const b = new TerraformBinaries({
        distribution: 'opentofu',
        tfBinary: 'tofu',
        download: false,
        downloadUrl: mirrorUrl,
        binDir,
        host,
        logger: nullLogger(),
        pathEnv: '/nonexistent',
      });
      await assert.rejects(
        b.binaryFor(GOOD),
        new RegExp(`could not find tofu version ${GOOD.replace(/\./g, '\\.')} in PATH or ${binDir}, and downloads are disabled`),
      );
    } finally {
      await host.close();
    }
  });
});

describe('tar-gz.ts', () => {
  it('finds a file by path, with or without ./, in ustar and GNU long-name entries; refuses what is not there or too large', () => {
    const src = mkdtempSync(path.join(tmp, 'tar-'));
    const long = `${'d'.repeat(60)}/${'e'.repeat(60)}`;
    mkdirSync(path.join(src, long), { recursive: true });
    execFileSync('sh', ['-c', `printf one > a.txt && printf long > ${long}/f.txt`], { cwd: src });
    execFileSync('tar', ['--format=gnu', '-czf', path.join(src, 'x.tar.gz'), './a.txt', `${long}/f.txt`], { cwd: src });
    const t = readFileSync(path.join(src, 'x.tar.gz'));
    assert.equal(extractTarGzFile(t, 'a.txt', 1024).toString(), 'one');
    assert.equal(extractTarGzFile(t, './a.txt', 1024).toString(), 'one');
    assert.equal(extractTarGzFile(t, `${long}/f.txt`, 1024).toString(), 'long');
    assert.throws(() => extractTarGzFile(t, 'b.txt', 1024), /no b\.txt in the archive/);
    assert.throws(() => extractTarGzFile(t, 'a.txt', 2), /larger than 2 bytes/);
    assert.throws(() => extractTarGzFile(Buffer.from('not gzip'), 'a.txt', 1024), /not a gzip archive/);
  });
});
