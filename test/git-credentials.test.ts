// git authenticates to an https remote with the token without it being in git's argv, in a URL,
// in .git/config or any file of the working copy, or in the environment of the process host
// (which terraform inherits): real git against a real `git http-backend` behind a TLS server
// that asks for Basic auth, as GitHub does (support/git-https.ts). The token file is read again for each git command.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { nullLogger } from '../src/log.js';
import { ProcessHost, type SpawnSpec } from '../src/server/terraform/process-host.js';
import { GitHubAppTokens } from '../src/server/vcs/github/app.js';
import { WorkingCopies } from '../src/server/workflow/checkout/working-copy.js';
import { type TestRepo, createTestRepo } from './support/git-repos.js';
import { type GitHttpsServer, startGitHttps } from './support/git-https.js';
import { GitHubStandin } from './support/github-standin.js';
import { StandinApp } from './support/github-standin-app.js';

const HOST = '127.0.162.9';
const dir = mkdtempSync(path.join(tmpdir(), 'git-cred-'));
const tokenFile = path.join(dir, 'token');
let repo: TestRepo;
let git: GitHttpsServer;
let cloneUrl: string;
let acceptedToken = 'ghs_firstTokenValue0001';

before(async () => {
  repo = await createTestRepo({ fullName: 'acme/creds' });
  execFileSync('git', ['-C', repo.bareDir, 'config', 'uploadpack.allowAnySHA1InWant', 'true']);
  // TLS and Basic auth as GitHub asks for them, git http-backend behind (support/git-https.ts).
  git = await startGitHttps({
    host: HOST,
    projectRoot: path.dirname(path.dirname(repo.bareDir)), // <root>/remote
    certDir: dir,
    accept: (userPassword) => userPassword === `x-access-token:${acceptedToken}`,
  });
  // git trusts our server's certificate (children inherit it, as a server's would).
  process.env.GIT_SSL_CAINFO = git.caFile;
  cloneUrl = `${git.url}/acme/creds.git`;
});
after(() => {
  git.close();
  rmSync(dir, { recursive: true, force: true });
});

/** A process host (the default environment: this process's without ATLANTIS_*) whose spawns are recorded. */
function recordingHost(): { host: ProcessHost; specs: SpawnSpec[] } {
  const specs: SpawnSpec[] = [];
  const host = new ProcessHost({ logger: nullLogger() });
  // Recorded on the way to the real spawn: what git was started with.
  const spawnReal = host.spawn.bind(host);
  host.spawn = (spec, listeners) => {
    specs.push(spec);
    return spawnReal(spec, listeners);
  };
  return { host, specs };
}

function filesUnder(root: string): string[] {
  return readdirSync(root, { recursive: true, encoding: 'utf8' })
    .map((f) => path.join(root, f))
    .filter((f) => statSync(f).isFile());
}

describe('git credentials', () => {
  it('clones and fetches over https with the token from a credential helper; the token is nowhere else', { timeout: 60_000 }, async () => {
    const older = await repo.createBranch('feature', { 'app1/extra.tf': '# one\n' });
    await repo.commit('feature', { 'app1/extra.tf': '# two\n' });
    const { host, specs } = recordingHost();
    const data = path.join(dir, 'data');
    const copies = new WorkingCopies(data, () => readFileSync(tokenFile, 'utf8').trim(), nullLogger(), host);

    writeFileSync(tokenFile, 'ghs_wrongTokenValue0000\n');
    await assert.rejects(
      copies.checkout({ repo: 'acme/creds', pull: 1, workspace: 'default', cloneUrl, headRef: 'feature', headSha: older }),
      (e: Error) => /git clone .* failed/.test(e.message) && !e.message.includes('ghs_'),
      'a refused token fails the clone, and the error names no token',
    );

    writeFileSync(tokenFile, `${acceptedToken}\n`);
    // The head is the older commit: a clone of the branch, then a fetch of that commit.
    const wc = await copies.checkout({ repo: 'acme/creds', pull: 1, workspace: 'default', cloneUrl, headRef: 'feature', headSha: older });
    assert.equal(execFileSync('git', ['-C', wc, 'rev-parse', 'HEAD']).toString().trim(), older);
    const gitSpecs = specs.filter((s) => s.command === 'git' && s.args.some((a) => a === 'clone' || a === 'fetch'));
    assert.ok(
      gitSpecs.some((s) => s.args.includes('fetch')),
      'the fetch of the exact commit ran too',
    );
    assert.ok(git.authSeen.includes(`x-access-token:${acceptedToken}`), 'git sent the token from the file');

    // A rotated token file is used by the next git command.
    acceptedToken = 'ghs_rotatedTokenValue02';
    writeFileSync(tokenFile, `${acceptedToken}\n`);
    const wc2 = await copies.checkout({
      repo: 'acme/creds',
      pull: 2,
      workspace: 'default',
      cloneUrl,
      headRef: 'feature',
      headSha: await repo.headSha('feature'),
    });
    assert.ok(git.authSeen.includes(`x-access-token:${acceptedToken}`), 'the rotated token was read again');

    for (const s of specs) {
      for (const t of ['ghs_wrongTokenValue0000', 'ghs_firstTokenValue0001', acceptedToken]) {
        assert.ok(
          s.args.every((a) => !a.includes(t)),
          `no token in git's argv: ${s.args.join(' ')}`,
        );
      }
      assert.ok(
        s.args.every((a) => !/https:\/\/[^/]*@/.test(a)),
        'no credentials in a URL',
      );
    }
    for (const w of [wc, wc2]) {
      for (const f of filesUnder(w)) assert.ok(!readFileSync(f, 'latin1').includes('ghs_'), `no token in ${f}`);
      assert.match(
        readFileSync(path.join(w, '.git', 'config'), 'utf8'),
        new RegExp(`url = https://${HOST.replace(/\./g, '\\.')}:\\d+/acme/creds\\.git`),
      );
    }
    const workerEnv = readFileSync(`/proc/${host.pid}/environ`, 'latin1');
    assert.ok(
      !workerEnv.includes('ghs_') && !workerEnv.includes('ATO_GIT_TOKEN'),
      'the process host (and so terraform) has no token in its environment',
    );
    host.close();
  });

  it("clones with a GitHub App's installation token, fetched when git needs it", { timeout: 60_000 }, async () => {
    const gh = await GitHubStandin.start({ host: HOST });
    const { privateKeyPem, publicKey } = StandinApp.keyPair();
    const app = new StandinApp({ appId: 5, slug: 'atl', publicKey, installations: [{ id: 8, account: 'acme' }] });
    gh.app = app;
    const tokens = new GitHubAppTokens({ settings: { appId: 5, privateKeyPem }, baseUrl: gh.url });
    try {
      const { host, specs } = recordingHost();
      const copies = new WorkingCopies(path.join(dir, 'data-app'), () => tokens.token(), nullLogger(), host);
      // The git server takes whatever token the App was just issued.
      acceptedToken = await tokens.token();
      const sha = await repo.headSha('feature');
      const wc = await copies.checkout({ repo: 'acme/creds', pull: 3, workspace: 'default', cloneUrl, headRef: 'feature', headSha: sha });
      assert.equal(execFileSync('git', ['-C', wc, 'rev-parse', 'HEAD']).toString().trim(), sha);
      assert.ok(git.authSeen.includes(`x-access-token:${acceptedToken}`), 'git sent the installation token');
      assert.match(acceptedToken, /^ghs_/);
      for (const s of specs)
        assert.ok(
          s.args.every((a) => !a.includes(acceptedToken)),
          'no token in argv',
        );
      for (const f of filesUnder(wc)) assert.ok(!readFileSync(f, 'latin1').includes('ghs_'), `no token in ${f}`);
      host.close();
    } finally {
      await gh.close();
    }
  });
});
