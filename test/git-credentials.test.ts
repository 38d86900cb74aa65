// git authenticates to an https remote with the token without it being in git's argv, in a URL,
// in .git/config or any file of the working copy, or in the environment of the process host
// (which terraform inherits): real git against a real `git http-backend` behind a TLS server
// that asks for Basic auth, as GitHub does. The token file is read again for each git command.
import assert from 'node:assert/strict';
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { nullLogger } from '../src/log.js';
import { ProcessHost, type SpawnSpec } from '../src/server/terraform/process-host.js';
import { GitHubAppTokens } from '../src/server/vcs/github/app.js';
import { WorkingCopies } from '../src/server/workflow/checkout/working-copy.js';
import { type TestRepo, createTestRepo } from './support/git-repos.js';
import { GitHubStandin } from './support/github-standin.js';
import { StandinApp } from './support/github-standin-app.js';

const HOST = '127.0.162.9';
const dir = mkdtempSync(path.join(tmpdir(), 'git-cred-'));
const tokenFile = path.join(dir, 'token');
let repo: TestRepo;
let server: https.Server;
let cloneUrl: string;
/** What the TLS server got in Authorization headers, decoded. */
const authSeen: string[] = [];
let acceptedToken = 'ghs_firstTokenValue0001';

before(async () => {
  execFileSync(
    'openssl',
    [
      'req',
      '-x509',
      '-newkey',
      'rsa:2048',
      '-nodes',
      '-keyout',
      path.join(dir, 'key.pem'),
      '-out',
      path.join(dir, 'cert.pem'),
      '-days',
      '1',
      '-subj',
      `/CN=${HOST}`,
      '-addext',
      `subjectAltName=IP:${HOST}`,
    ],
    { stdio: 'ignore' },
  );
  // git trusts our server's certificate (children inherit it, as a server's would).
  process.env.GIT_SSL_CAINFO = path.join(dir, 'cert.pem');
  repo = await createTestRepo({ fullName: 'acme/creds' });
  execFileSync('git', ['-C', repo.bareDir, 'config', 'uploadpack.allowAnySHA1InWant', 'true']);
  const projectRoot = path.dirname(path.dirname(repo.bareDir)); // <root>/remote
  server = https.createServer(
    { key: readFileSync(path.join(dir, 'key.pem')), cert: readFileSync(path.join(dir, 'cert.pem')) },
    (req, res) => {
      const auth = req.headers.authorization;
      if (auth) authSeen.push(Buffer.from(auth.replace(/^Basic /, ''), 'base64').toString());
      if (auth !== `Basic ${Buffer.from(`x-access-token:${acceptedToken}`).toString('base64')}`) {
        res.writeHead(401, { 'WWW-Authenticate': 'Basic realm="GitHub"' }).end('auth required\n');
        return;
      }
      const u = new URL(req.url ?? '/', `https://${HOST}`);
      // git's own server side, as CGI.
      const cgi: ChildProcess = spawn('git', ['http-backend'], {
        env: {
          PATH: process.env.PATH,
          GIT_PROJECT_ROOT: projectRoot,
          GIT_HTTP_EXPORT_ALL: '1',
          PATH_INFO: u.pathname,
          QUERY_STRING: u.search.slice(1),
          REQUEST_METHOD: req.method,
          CONTENT_TYPE: req.headers['content-type'] ?? '',
          REMOTE_USER: 'x-access-token',
          REMOTE_ADDR: HOST,
          ...(req.headers['content-encoding'] ? { HTTP_CONTENT_ENCODING: req.headers['content-encoding'] } : {}),
          ...(req.headers['git-protocol'] ? { GIT_PROTOCOL: String(req.headers['git-protocol']) } : {}),
        },
      });
      req.pipe(cgi.stdin!);
      let head = Buffer.alloc(0);
      let headersDone = false;
      cgi.stdout!.on('data', (chunk: Buffer) => {
        if (headersDone) return void res.write(chunk);
        head = Buffer.concat([head, chunk]);
        const end = head.indexOf('\r\n\r\n');
        if (end < 0) return;
        headersDone = true;
        let status = 200;
        const headers: Record<string, string> = {};
        for (const line of head.subarray(0, end).toString().split('\r\n')) {
          const [k, ...v] = line.split(':');
          if (k!.toLowerCase() === 'status') status = Number(v.join(':').trim().split(' ')[0]);
          else headers[k!] = v.join(':').trim();
        }
        res.writeHead(status, headers);
        res.write(head.subarray(end + 4));
      });
      cgi.stdout!.on('end', () => res.end());
    },
  );
  server.listen(0, HOST);
  await new Promise((r) => server.once('listening', r));
  cloneUrl = `https://${HOST}:${(server.address() as AddressInfo).port}/acme/creds.git`;
});
after(() => {
  server.close();
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
    assert.ok(authSeen.includes(`x-access-token:${acceptedToken}`), 'git sent the token from the file');

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
    assert.ok(authSeen.includes(`x-access-token:${acceptedToken}`), 'the rotated token was read again');

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
      assert.ok(authSeen.includes(`x-access-token:${acceptedToken}`), 'git sent the installation token');
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
