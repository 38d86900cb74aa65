// OpenTofu end to end: a server with --default-tf-distribution opentofu and no tofu anywhere on
// the machine gets each version a project needs from --tofu-download-url (a local mirror
// serving the tofu built from its Go module under made-up versions, its SHA256SUMS signed by a
// key made here with Debian's gpg, given as --tofu-download-key-file): the default version
// (--default-tf-version) for a project that names none, a project's own terraform_version, and
// terraform for a project whose terraform_distribution says so. A version whose SHA256SUMS was
// changed after signing is a clear error on the PR and nothing of it runs.
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmodSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { sleep } from '../src/async.js';
import { tofuReleaseFiles } from '../src/server/terraform/distribution.js';
import { findOnPath } from '../src/server/terraform/tf-install.js';
import { githubServerArgs } from './support/workflow-env.js';
import { type CliProcess, startCli, waitForHttp } from './support/cli.js';
import { type TestRepo, createTestRepo, terraformConfig } from './support/git-repos.js';
import { GitHubStandin, pullRequestPayload, sendWebhook } from './support/github-standin.js';
import { goTool } from './support/go-tools.js';

const NET = '127.0.39';
const SECRET = 'opentofu-e2e-secret';
const DEFAULT = '1.12.71';
const PINNED = '1.12.72';
const TAMPERED = '1.12.73';

describe('OpenTofu as the default distribution, versions downloaded per project', { timeout: 600_000 }, () => {
  const root = mkdtempSync(path.join(tmpdir(), 'ato-opentofu-e2e-'));
  const dataDir = path.join(root, 'data');
  const files = new Map<string, Buffer>();
  const requests: string[] = [];
  let mirror: http.Server;
  let gh: GitHubStandin;
  let repo: TestRepo;
  let server: CliProcess;
  let url = '';
  const gpgHome = path.join(root, 'gnupg');
  const gpg = (args: string[], input?: Buffer): Buffer =>
    execFileSync('gpg', ['--homedir', gpgHome, '--batch', '--yes', '--pinentry-mode', 'loopback', '--passphrase', '', ...args], {
      input,
      stdio: ['pipe', 'pipe', 'pipe'],
    });

  before(async () => {
    mirror = http.createServer((req, res) => {
      requests.push(req.url ?? '');
      const body = files.get(req.url ?? '');
      if (!body) return void res.writeHead(404).end();
      res.writeHead(200).end(body);
    });
    await new Promise<void>((r) => mirror.listen(0, `${NET}.5`, r));
    const mirrorUrl = `http://${NET}.5:${(mirror.address() as AddressInfo).port}`;
    mkdirSync(gpgHome);
    chmodSync(gpgHome, 0o700);
    gpg(['--quick-gen-key', 'mirror <mirror@mirror.test>', 'ed25519', 'sign', 'never']);
    const keyFile = path.join(root, 'mirror-key.asc');
    writeFileSync(keyFile, gpg(['--armor', '--export']));
    const src = path.join(root, 'tar');
    mkdirSync(src);
    copyFileSync(await goTool('tofu'), path.join(src, 'tofu'));
    execFileSync('tar', ['-czf', path.join(root, 'tofu.tar.gz'), 'tofu'], { cwd: src });
    const archive = readFileSync(path.join(root, 'tofu.tar.gz'));
    for (const v of [DEFAULT, PINNED, TAMPERED]) {
      const f = tofuReleaseFiles(mirrorUrl, v, process.platform, process.arch);
      const sums = Buffer.from(`${createHash('sha256').update(archive).digest('hex')}  ${f.archiveName}\n`);
      files.set(new URL(f.archiveUrl).pathname, archive);
      files.set(new URL(f.signatureUrl).pathname, gpg(['--detach-sign', '--output', '-'], sums));
      files.set(
        new URL(f.sumsUrl).pathname,
        v === TAMPERED ? Buffer.from(sums.toString().replace(/^./, (c) => (c === 'a' ? 'b' : 'a'))) : sums,
      );
    }
    repo = await createTestRepo({
      fullName: 'acme/tofu',
      files: {
        'README.md': '# tofu\n',
        'default/main.tf': terraformConfig({ marker: 'd1' }),
        'pinned/main.tf': terraformConfig({ marker: 'p1' }),
        'classic/main.tf': terraformConfig({ marker: 'c1' }),
        'tampered/main.tf': terraformConfig({ marker: 't1' }),
        'atlantis.yaml': `version: 3\nprojects:\n- {name: default, dir: default}\n- {name: pinned, dir: pinned, terraform_version: ${PINNED}}\n- {name: classic, dir: classic, terraform_distribution: terraform}\n- {name: tampered, dir: tampered, terraform_version: ${TAMPERED}}\n`,
      },
    });
    gh = await GitHubStandin.start({ botLogin: 'atlantis-bot', host: `${NET}.1` });
    gh.addRepo(repo.fullName, { cloneUrl: repo.cloneUrl });
    const host = `${NET}.2`;
    url = `http://${host}:4141`;
    // No tofu on PATH: every tofu version comes from the mirror.
    assert.equal(findOnPath('tofu', process.env.PATH ?? ''), undefined, 'this test needs no tofu on PATH');
    server = startCli(
      githubServerArgs(gh, {
        dataDir,
        host,
        secret: SECRET,
        extra: [
          '--default-tf-distribution',
          'opentofu',
          '--default-tf-version',
          DEFAULT,
          '--tofu-download-url',
          mirrorUrl,
          '--tofu-download-key-file',
          keyFile,
        ],
      }),
    );
    await waitForHttp(`${url}/healthz`).catch((e: Error) => {
      throw new Error(`${e.message}\n${server.output()}`);
    });
  });

  after(async () => {
    server?.child.kill('SIGTERM');
    if (server) await server.exited;
    await gh?.close();
    mirror?.close();
    spawnSync('gpgconf', ['--homedir', gpgHome, '--kill', 'gpg-agent']);
    rmSync(root, { recursive: true, force: true });
  });

  it('each project runs the distribution and version it asks for; a tampered release is refused on the PR', async () => {
    const changes = Object.fromEntries(
      ['default', 'pinned', 'classic', 'tampered'].map((d) => [`${d}/main.tf`, terraformConfig({ marker: `${d}-v2` })]),
    );
    const headSha = await repo.createBranch('all', changes);
    await repo.publishPull(1, 'all');
    gh.addPull(repo.fullName, {
      number: 1,
      headSha,
      headRef: 'all',
      baseRef: repo.baseBranch,
      files: Object.keys(changes).map((filename) => ({ filename })),
    });
    const r = await sendWebhook(
      `${url}/events`,
      'pull_request',
      pullRequestPayload({ repo: repo.fullName, cloneUrl: repo.cloneUrl, action: 'opened', number: 1, headSha, headRef: 'all' }),
      { secret: SECRET },
    );
    assert.equal(r.status, 200, r.body);
    const end = Date.now() + 300_000;
    while (Date.now() < end && gh.comments(repo.fullName, 1).length === 0) await sleep(200);
    const body = gh.comments(repo.fullName, 1)[0]?.body ?? '';
    // The header lists every project; each section starts with `### `.
    const section = (name: string) =>
      body
        .split('### ')
        .slice(1)
        .find((s) => s.includes(`project: \`${name}\``)) ?? '';
    assert.match(section('default'), /OpenTofu used the selected providers/);
    assert.match(section('pinned'), /OpenTofu used the selected providers/);
    assert.match(section('classic'), /Terraform used the selected providers/);
    assert.match(section('tampered'), /\*\*Plan Error\*\*/);
    assert.match(
      section('tampered'),
      new RegExp(
        `error downloading tofu version ${TAMPERED.replace(/\./g, '\\.')}: tofu_${TAMPERED.replace(/\./g, '\\.')}_SHA256SUMS is not signed by the key of --tofu-download-key-file`,
      ),
    );
    assert.match(body, /4 projects, 3 with changes, 0 with no changes, 1 failed/);
    for (const v of [DEFAULT, PINNED]) assert.ok(existsSync(path.join(dataDir, 'bin', `tofu${v}`)), `tofu${v} kept`);
    assert.ok(!existsSync(path.join(dataDir, 'bin', `tofu${TAMPERED}`)));
    // One download of each good version (the default one fetched at start), none twice.
    const archives = requests.filter((q) => q.endsWith('.tar.gz'));
    assert.deepEqual(archives.map((q) => q.split('/')[1]).sort(), [`v${DEFAULT}`, `v${PINNED}`]);
  });
});
