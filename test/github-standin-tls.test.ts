// The GitHub stand-in's TLS mode and git smart-HTTP, which the Atlantis differential test
// relies on: the self-signed certificate (openssl's, and the node-only one made when openssl is
// missing) names only the stand-in's IP, real git clones over HTTPS with the token as Basic
// auth (and is refused without it), and the contents API reads the served repo.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, it } from 'node:test';
import { execa } from 'execa';
import { GitHubStandin } from './support/github-standin.js';
import { nodeSelfSignedCert, selfSignedCert } from './support/github-standin-git.js';
import { createTestRepo } from './support/git-repos.js';

const HOST = '127.0.18.9';

describe('the stand-in certificate', () => {
  for (const [how, make] of [
    [
      'openssl',
      () => {
        const files = selfSignedCert(HOST);
        const pem = readFileSync(files.certFile, 'utf8');
        rmSync(files.dir, { recursive: true, force: true });
        return pem;
      },
    ],
    ['node only', () => nodeSelfSignedCert(HOST).cert],
  ] as const) {
    it(`${how}: self-signed, a CA, valid now, named by the IP only`, () => {
      const x = new crypto.X509Certificate(make());
      assert.equal(x.subjectAltName, `IP Address:${HOST}`);
      assert.equal(x.checkIP(HOST), HOST);
      assert.equal(x.checkIP('127.0.0.1'), undefined);
      assert.ok(x.verify(x.publicKey), 'signed by its own key');
      assert.equal(x.ca, true);
      assert.ok(Date.parse(x.validFrom) <= Date.now() && Date.now() < Date.parse(x.validTo));
    });
  }
  it('node only: the key is the certificate’s', () => {
    const made = nodeSelfSignedCert(HOST);
    assert.ok(new crypto.X509Certificate(made.cert).checkPrivateKey(crypto.createPrivateKey(made.key)));
  });
});

describe('the stand-in over TLS', () => {
  it('serves clones to git with the token, refuses them without, and the contents API', { timeout: 60_000 }, async () => {
    const gh = await GitHubStandin.start({ tls: true, host: HOST });
    const dest = mkdtempSync(path.join(tmpdir(), 'standin-tls-clone-'));
    try {
      const repo = await createTestRepo({ fullName: 'acme/tls', files: { 'atlantis.yaml': 'version: 3\n', 'dir1/main.tf': '# one\n' } });
      gh.addRepo('acme/tls', { cloneUrl: gh.gitUrl('acme/tls'), bareDir: repo.bareDir });
      assert.equal(gh.gitUrl('acme/tls'), `https://${HOST}:${gh.hostPort.split(':')[1]}/acme/tls.git`);
      const env = { ...process.env, GIT_SSL_CAINFO: gh.caFile!, GIT_TERMINAL_PROMPT: '0', GIT_CONFIG_GLOBAL: '/dev/null' };
      const withCreds = (user: string, password: string): string => {
        const u = new URL(gh.gitUrl('acme/tls'));
        u.username = user;
        u.password = password;
        return u.toString();
      };

      const refused = await execa('git', ['clone', withCreds('atlantis-bot', 'wrong'), path.join(dest, 'a')], { env, reject: false });
      assert.notEqual(refused.exitCode, 0);
      assert.match(refused.stderr, /Authentication failed|401/);

      await execa('git', ['clone', '--depth=1', '--branch', 'main', withCreds('atlantis-bot', gh.token), path.join(dest, 'b')], { env });
      assert.deepEqual(readdirSync(path.join(dest, 'b')).sort(), ['.git', 'atlantis.yaml', 'dir1']);
      const pushes = gh.calls.filter((c) => /git-receive-pack/.test(c.path));
      assert.equal(pushes.length, 0);

      const basic = `Basic ${Buffer.from(`atlantis-bot:${gh.token}`).toString('base64')}`;
      const get = async (p: string): Promise<{ status: number; body: Record<string, unknown> }> => {
        // Node trusts the stand-in's certificate through a child with NODE_EXTRA_CA_CERTS.
        const r = await execa(
          process.execPath,
          [
            '-e',
            `fetch(process.argv[1],{headers:{authorization:process.argv[2]}}).then(async r=>console.log(JSON.stringify({status:r.status,body:await r.json()})))`,
            `${gh.url}${p}`,
            basic,
          ],
          { env: { ...process.env, NODE_EXTRA_CA_CERTS: gh.caFile! } },
        );
        return JSON.parse(r.stdout) as { status: number; body: Record<string, unknown> };
      };
      const yaml = await get('/api/v3/repos/acme/tls/contents/atlantis.yaml?ref=main');
      assert.equal(yaml.status, 200);
      assert.equal(Buffer.from(String(yaml.body.content).replace(/\n/g, ''), 'base64').toString(), 'version: 3\n');
      assert.equal((await get('/api/v3/repos/acme/tls/contents/missing.yaml?ref=main')).status, 404);
    } finally {
      await gh.close();
      rmSync(dest, { recursive: true, force: true });
    }
  });
});
