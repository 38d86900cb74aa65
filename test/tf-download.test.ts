// Terraform versions downloaded as Atlantis v0.47 does with --tf-download (the default) from
// --tf-download-url, against a local HTTP mirror (never the internet) that serves a zip of
// this machine's terraform under made-up versions, with HashiCorp's layout and SHA256SUMS:
// the download is verified and kept under the data dir (a second ask, even by a new
// process, fetches nothing: the mirror's request log says so); a wrong checksum or a missing
// version is a clear error, no binary is kept, and on a PR the project's plan is an error
// comment while nothing of it runs.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { nullLogger } from '../src/log.js';
import { ProcessHost } from '../src/server/terraform/process-host.js';
import { TerraformBinaries } from '../src/server/terraform/tf-install.js';
import { releaseFiles } from '../src/server/terraform/tf-versions.js';
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

/** Versions served: GOOD with its real checksum, BAD with a wrong one; MISSING not at all. */
const GOOD = '1.5.7';
const BAD = '1.5.8';
const MISSING = '1.5.9';

function serve(version: string, zip: Buffer, sumOf: Buffer): void {
  const f = releaseFiles(mirrorUrl, version, process.platform, process.arch);
  const sha = createHash('sha256').update(sumOf).digest('hex');
  files.set(new URL(f.zipUrl).pathname, zip);
  files.set(new URL(f.sumsUrl).pathname, Buffer.from(`${'0'.repeat(64)}  terraform_${version}_windows_amd64.zip\n${sha}  ${f.zipName}\n`));
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
  serve(GOOD, zip, zip);
  serve(BAD, zip, Buffer.from('something else'));
});
after(() => {
  mirror.close();
  rmSync(tmp, { recursive: true, force: true });
});

const binaries = (binDir: string, host: ProcessHost) =>
  new TerraformBinaries({
    tfBinary: TERRAFORM,
    download: true,
    downloadUrl: mirrorUrl,
    binDir,
    host,
    logger: nullLogger(),
    pathEnv: '/nonexistent',
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
    assert.deepEqual(
      requests.slice(before).map((r) => (r.endsWith('_SHA256SUMS') ? 'sums' : r.startsWith(zipPath) && r.endsWith('.zip') ? 'zip' : r)),
      ['sums', 'zip'],
    );
    assert.equal(await b.binaryFor(GOOD), p1);
    // A new server on the same data dir: found on disk, nothing fetched.
    assert.equal(await binaries(binDir, host).binaryFor(GOOD), p1);
    assert.equal(requests.length, before + 2, 'no second download');
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

describe('terraform_version on a pull request (real server process)', { timeout: 180_000 }, () => {
  let env: WorkflowEnv;
  let server: { p: CliProcess; url: string };
  const dataDir = tempDataDir();
  before(async () => {
    env = await createWorkflowEnv();
    server = await startWorkflowServer(env, dataDir, SERVER_HOST, ['--tf-download-url', mirrorUrl, '--log-level', 'debug']);
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
