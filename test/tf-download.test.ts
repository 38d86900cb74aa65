// Terraform versions downloaded as Atlantis v0.47 does with --tf-download (the default) from
// --tf-download-url, against a local HTTP mirror (never the internet) that serves a zip of
// this machine's terraform under made-up versions, with HashiCorp's layout, SHA256SUMS and
// its detached signature, made by Debian's gpg with a key generated here (the mirror's own,
// given as --tf-download-key-file): the download is verified and kept under the data dir (a
// second ask, even by a new process, fetches nothing: the mirror's request log says so); a
// SHA256SUMS changed after it was signed, signed by another key, not signed at all, or
// checked against HashiCorp's key, a wrong checksum and a missing version are each a clear
// error, no binary is kept, and on a PR the project's plan is an error comment while nothing
// of it runs.
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmodSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { nullLogger } from '../src/log.js';
import { ProcessHost } from '../src/server/terraform/process-host.js';
import { TerraformBinaries } from '../src/server/terraform/tf-install.js';
import { releaseFiles } from '../src/server/terraform/tf-versions.js';
import { shortKeyId } from '../src/server/terraform/tf-signature.js';
import { HASHICORP_PUBLIC_KEY } from '../src/server/terraform/hashicorp-key.js';
import type { CliProcess } from './support/cli.js';
import { terraformConfig } from './support/git-repos.js';
import { TERRAFORM } from './support/terraform.js';
import { type WorkflowEnv, createWorkflowEnv, startWorkflowServer, tempDataDir } from './support/workflow-env.js';

const MIRROR_HOST = '127.0.162.12';
const SERVER_HOST = '127.0.162.13';
const tmp = mkdtempSync(path.join(tmpdir(), 'tf-download-'));
/** Paths the mirror was asked for, in order. */
const requests: string[] = [];
const files = new Map<string, Buffer>();
let mirror: http.Server;
let mirrorUrl: string;

/**
 * Versions served: GOOD with its real checksum, BAD with a wrong one, both signed by the
 * mirror's key; TAMPERED's SHA256SUMS changed after it was signed, OTHER_KEY signed by another
 * key, UNSIGNED without a signature; MISSING not at all.
 */
const GOOD = '1.5.7';
const BAD = '1.5.8';
const MISSING = '1.5.9';
const TAMPERED = '1.5.10';
const OTHER_KEY = '1.5.11';
const UNSIGNED = '1.5.12';

/** A gpg home with one new signing key (RSA, as HashiCorp's), and the key's public half. */
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
  gpg(home, ['--quick-gen-key', `${name} <${name}@mirror.test>`, 'rsa2048', 'sign', 'never']);
  return { home, armored: gpg(home, ['--armor', '--export']).toString() };
}

let mirrorKey: GpgKey;
let keyFile: string;

function serve(version: string, zip: Buffer, sumOf: Buffer, sign: { key?: GpgKey; tamper?: boolean } = {}): void {
  const f = releaseFiles(mirrorUrl, version, process.platform, process.arch);
  const sha = createHash('sha256').update(sumOf).digest('hex');
  files.set(new URL(f.zipUrl).pathname, zip);
  const sums = Buffer.from(`${'0'.repeat(64)}  terraform_${version}_windows_amd64.zip\n${sha}  ${f.zipName}\n`);
  if (sign.key) files.set(`${new URL(f.sumsUrl).pathname}.sig`, gpg(sign.key.home, ['--detach-sign', '--output', '-'], sums));
  // Changed after signing: another zip's checksum, as an attacker who swapped the zip would write.
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
  // A release zip of this machine's terraform, as HashiCorp packs it: one `terraform` entry.
  const src = path.join(tmp, 'zip-src');
  mkdirSync(src);
  copyFileSync(TERRAFORM, path.join(src, 'terraform'));
  execFileSync('zip', ['-q', '-1', path.join(tmp, 'release.zip'), 'terraform'], { cwd: src });
  const zip = readFileSync(path.join(tmp, 'release.zip'));
  mirrorKey = newKey('mirror');
  keyFile = path.join(tmp, 'mirror-key.asc');
  writeFileSync(keyFile, mirrorKey.armored);
  serve(GOOD, zip, zip, { key: mirrorKey });
  serve(BAD, zip, Buffer.from('something else'), { key: mirrorKey });
  serve(TAMPERED, zip, zip, { key: mirrorKey, tamper: true });
  serve(OTHER_KEY, zip, zip, { key: newKey('someone-else') });
  serve(UNSIGNED, zip, zip);
});
after(() => {
  mirror.close();
  for (const home of gpgHomes) spawnSync('gpgconf', ['--homedir', home, '--kill', 'gpg-agent']);
  rmSync(tmp, { recursive: true, force: true });
});

/** `key`: the mirror's key (as --tf-download-key-file); 'hashicorp': the default. */
const binaries = (binDir: string, host: ProcessHost, key: 'mirror' | 'hashicorp' = 'mirror') =>
  new TerraformBinaries({
    tfBinary: TERRAFORM,
    download: true,
    downloadUrl: mirrorUrl,
    binDir,
    host,
    logger: nullLogger(),
    pathEnv: '/nonexistent',
    ...(key === 'mirror' ? { signingKey: { armored: mirrorKey.armored, owner: 'the key of --tf-download-key-file' } } : {}),
  });

describe('terraform downloads from a local mirror', { timeout: 120_000 }, () => {
  it('downloads and verifies a version once; later asks, also from a new process, hit the cache', async () => {
    const host = new ProcessHost({ logger: nullLogger() });
    const binDir = path.join(tmp, 'data1', 'bin');
    const b = binaries(binDir, host);
    const before = requests.length;
    // Two projects asking at once share one download.
    const [p1, p2] = await Promise.all([b.binaryFor(GOOD), b.binaryFor(GOOD)]);
    assert.equal(p1, path.join(binDir, `terraform${GOOD}`));
    assert.equal(p2, p1);
    assert.deepEqual(readFileSync(p1), readFileSync(TERRAFORM), 'the binary out of the zip');
    assert.match(execFileSync(p1, ['version']).toString(), /^Terraform v/);
    const zipPath = `/terraform/${GOOD}/terraform_${GOOD}_`;
    const shortId = (await shortKeyId({ armored: mirrorKey.armored, owner: '' })).toUpperCase();
    assert.deepEqual(
      requests
        .slice(before)
        .map((r) =>
          r
            .replace(`/terraform/${GOOD}/terraform_${GOOD}_SHA256SUMS`, 'sums')
            .replace(/^.*\.zip$/, (z) => (z.startsWith(zipPath) ? 'zip' : z)),
        ),
      ['sums', `sums.${shortId}.sig`, 'sums.sig', 'zip'],
      "as hc-install: the key's own signature file first, then the generic one",
    );
    assert.equal(await b.binaryFor(GOOD), p1);
    // A new server on the same data dir: found on disk, nothing fetched.
    assert.equal(await binaries(binDir, host).binaryFor(GOOD), p1);
    assert.equal(requests.length, before + 4, 'no second download');
    host.close();
  });

  it('refuses a zip that does not match SHA256SUMS, and a version the mirror does not have; keeps nothing', async () => {
    const host = new ProcessHost({ logger: nullLogger() });
    const binDir = path.join(tmp, 'data2', 'bin');
    const b = binaries(binDir, host);
    await assert.rejects(b.binaryFor(BAD), (e: Error) => {
      assert.match(
        e.message,
        new RegExp(
          `^error downloading terraform version ${BAD}: checksum mismatch for terraform_${BAD}_\\w+_\\w+\\.zip: expected [0-9a-f]{64}, got [0-9a-f]{64}$`,
        ),
      );
      return true;
    });
    await assert.rejects(b.binaryFor(MISSING), (e: Error) => {
      assert.match(
        e.message,
        new RegExp(
          `^error downloading terraform version ${MISSING}: GET ${mirrorUrl}/terraform/${MISSING}/terraform_${MISSING}_SHA256SUMS answered 404`,
        ),
      );
      return true;
    });
    assert.ok(!existsSync(path.join(binDir, `terraform${BAD}`)));
    assert.ok(!existsSync(path.join(binDir, `terraform${MISSING}`)));
    host.close();
  });
});

describe('the signature of SHA256SUMS', { timeout: 120_000 }, () => {
  const refused = async (b: TerraformBinaries, version: string, why: RegExp): Promise<void> => {
    await assert.rejects(b.binaryFor(version), (e: Error) => {
      assert.match(e.message, new RegExp(`^error downloading terraform version ${version.replace(/\./g, '\\.')}: ${why.source}`));
      return true;
    });
  };

  it('refuses a SHA256SUMS changed after signing, signed by another key, or not signed; keeps nothing', async () => {
    const host = new ProcessHost({ logger: nullLogger() });
    const binDir = path.join(tmp, 'data3', 'bin');
    const b = binaries(binDir, host);
    await refused(b, TAMPERED, /terraform_1\.5\.10_SHA256SUMS is not signed by the key of --tf-download-key-file: /);
    await refused(b, OTHER_KEY, /terraform_1\.5\.11_SHA256SUMS is not signed by the key of --tf-download-key-file: /);
    await refused(
      b,
      UNSIGNED,
      /no signature of terraform_1\.5\.12_SHA256SUMS on the mirror \(terraform_1\.5\.12_SHA256SUMS\.[0-9A-F]{8}\.sig, terraform_1\.5\.12_SHA256SUMS\.sig: 404\)$/,
    );
    for (const v of [TAMPERED, OTHER_KEY, UNSIGNED]) assert.ok(!existsSync(path.join(binDir, `terraform${v}`)), v);
    assert.ok(
      !requests.some((r) => r.includes(`/terraform/${TAMPERED}/`) && r.endsWith('.zip')),
      'the zip of a refused SHA256SUMS is never fetched',
    );
    host.close();
  });

  it("by default only HashiCorp's key is trusted (its real key, shipped in the project)", async () => {
    const host = new ProcessHost({ logger: nullLogger() });
    const b = binaries(path.join(tmp, 'data4', 'bin'), host, 'hashicorp');
    await refused(b, GOOD, /terraform_1\.5\.7_SHA256SUMS is not signed by HashiCorp's key: /);
    assert.equal(await shortKeyId({ armored: HASHICORP_PUBLIC_KEY, owner: '' }), '72D7468F');
    host.close();
  });
});

describe('terraform_version on a pull request (real server process)', { timeout: 180_000 }, () => {
  let env: WorkflowEnv;
  let server: { p: CliProcess; url: string };
  const dataDir = tempDataDir();
  before(async () => {
    env = await createWorkflowEnv();
    server = await startWorkflowServer(env, dataDir, SERVER_HOST, [
      '--tf-download-url',
      mirrorUrl,
      '--tf-download-key-file',
      keyFile,
      '--log-level',
      'debug',
    ]);
  });
  after(async () => {
    server?.p.child.kill('SIGKILL');
    await env?.close();
  });

  it('plans with the downloaded version; a bad checksum is an error comment and nothing of that project runs', async () => {
    const yaml = `version: 3\nprojects:\n- dir: app1\n  terraform_version: v${GOOD}\n- dir: app2\n  terraform_version: ${BAD}\n`;
    const before = requests.length;
    await env.openPull(server.url, 1, 'versions', {
      'atlantis.yaml': yaml,
      'app1/main.tf': terraformConfig({ marker: 'app1-tfv' }),
      'app2/main.tf': terraformConfig({ marker: 'app2-tfv' }),
    });
    const c = await env.waitForComment(1, /^Ran Plan for 2 projects/);
    assert.match(c.body, /app1-tfv/, 'app1 planned');
    assert.match(
      c.body,
      new RegExp(
        `dir: \`app2\` workspace: \`default\`\\n\\*\\*Plan Error\\*\\*\\n\`\`\`\\nerror downloading terraform version ${BAD}: checksum mismatch for terraform_${BAD}_\\w+_\\w+\\.zip: expected [0-9a-f]{64}, got [0-9a-f]{64}\\n\`\`\``,
      ),
    );
    assert.doesNotMatch(c.body, /app2-tfv/, 'app2 never planned');
    assert.match(
      server.p.output(),
      /"level":"warn","time":"[^"]+","msg":"Terraform downloads use plain HTTP[^"]*"[^\n]*"url":"http:\/\/127\.0\.162\.12:\d+"/,
    );
    const started = server.p
      .output()
      .split('\n')
      .filter((l) => l.includes('"Process started"'))
      .map((l) => JSON.parse(l) as { command: string; args: string[] });
    const downloaded = path.join(dataDir, 'bin', `terraform${GOOD}`);
    assert.ok(
      started.some((s) => s.command === downloaded && s.args[0] === 'plan'),
      'app1 planned with the downloaded binary',
    );
    assert.ok(!started.some((s) => s.command.includes(BAD)), `no terraform${BAD} ever ran`);
    assert.ok(!existsSync(path.join(dataDir, 'bin', `terraform${BAD}`)));
    const fetched = requests.slice(before);
    assert.ok(fetched.some((r) => r.includes(`/terraform/${GOOD}/`)) && fetched.some((r) => r.includes(`/terraform/${BAD}/`)));

    // Planned again: the kept download is used, nothing is fetched for it.
    const again = requests.length;
    await env.comment(server.url, 1, 'atlantis plan -d app1');
    await env.waitForComment(1, /^Ran Plan for dir: `app1` workspace: `default`/);
    assert.deepEqual(
      requests.slice(again).filter((r) => r.includes(`/terraform/${GOOD}/`)),
      [],
      'cache hit: no second download',
    );
  });
});

describe('--default-tf-version (real server process)', { timeout: 120_000 }, () => {
  it('is downloaded at start, in the background, as Atlantis does', async () => {
    const env = await createWorkflowEnv();
    const dataDir = tempDataDir();
    const before = requests.length;
    const server = await startWorkflowServer(env, dataDir, '127.0.162.17', [
      '--tf-download-url',
      mirrorUrl,
      '--tf-download-key-file',
      keyFile,
      '--default-tf-version',
      `v${GOOD}`,
    ]);
    try {
      // The server's own log says when it is done (bounded wait).
      const end = Date.now() + 60_000;
      while (!server.p.output().includes('"Downloaded terraform"') && Date.now() < end) await new Promise((r) => setTimeout(r, 100));
      assert.match(server.p.output(), /"Downloaded terraform"/, server.p.output());
      assert.ok(existsSync(path.join(dataDir, 'bin', `terraform${GOOD}`)));
      assert.ok(requests.slice(before).some((r) => r.includes(`/terraform/${GOOD}/`)));
    } finally {
      server.p.child.kill('SIGKILL');
      await env.close();
    }
  });
});
