// A real Gitea built from its Go modules (hack/gitea), started by test/support/gitea.ts:
// users, a repo pushed over HTTP with git, a pull request, and a comment on it that reaches a
// local webhook receiver signed with the hook's secret (X-Gitea-Signature and
// X-Hub-Signature-256, checked here with our own HMAC), as the server's Gitea intake will
// receive them.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { execa } from 'execa';
import { type Gitea, type GiteaRepo, type GiteaUser, startGitea } from './support/gitea.js';

const GITEA_HOST = '127.0.236.3';
const RECEIVER_HOST = '127.0.236.4';

interface Delivery {
  at: number;
  headers: http.IncomingHttpHeaders;
  raw: Buffer;
  json: Record<string, unknown>;
}

/** Collects webhook deliveries; `next(pred)` resolves with the first (past or future) that matches. */
async function startReceiver(): Promise<{
  url: string;
  deliveries: Delivery[];
  next(pred: (d: Delivery) => boolean, ms?: number): Promise<Delivery>;
  close(): Promise<void>;
}> {
  const deliveries: Delivery[] = [];
  const waiters: Array<{ pred: (d: Delivery) => boolean; resolve: (d: Delivery) => void }> = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const raw = Buffer.concat(chunks);
      const d: Delivery = { at: Date.now(), headers: req.headers, raw, json: JSON.parse(raw.toString('utf8')) as Record<string, unknown> };
      deliveries.push(d);
      res.writeHead(200).end('ok');
      for (const w of waiters.filter((x) => x.pred(d))) {
        waiters.splice(waiters.indexOf(w), 1);
        w.resolve(d);
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, RECEIVER_HOST, resolve));
  return {
    url: `http://${RECEIVER_HOST}:${(server.address() as AddressInfo).port}/events`,
    deliveries,
    next(pred, ms = 60_000) {
      const seen = deliveries.find(pred);
      if (seen) return Promise.resolve(seen);
      return new Promise<Delivery>((resolve, reject) => {
        const t = setTimeout(
          () =>
            reject(
              new Error(`no matching delivery within ${ms} ms; got ${deliveries.map((x) => x.headers['x-gitea-event-type']).join(', ')}`),
            ),
          ms,
        );
        waiters.push({
          pred,
          resolve: (d) => {
            clearTimeout(t);
            resolve(d);
          },
        });
      });
    },
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

const hmac = (secret: string, raw: Buffer): string => crypto.createHmac('sha256', secret).update(raw).digest('hex');

describe('Gitea built from Go modules', { timeout: 1_800_000 }, () => {
  let gitea: Gitea;
  let receiver: Awaited<ReturnType<typeof startReceiver>>;
  let alice: GiteaUser;
  let bob: GiteaUser;
  let repo: GiteaRepo;
  const secret = `whsec-${crypto.randomBytes(8).toString('hex')}`;

  before(async () => {
    receiver = await startReceiver();
    gitea = await startGitea({ host: GITEA_HOST });
  });
  after(async () => {
    await gitea?.stop();
    await receiver?.close();
  });

  it('answers its API as the pinned version, with admin and users made through it', async () => {
    const v = await gitea.api<{ version: string }>('GET', '/version');
    assert.equal(v.status, 200);
    assert.equal(v.body.version, '1.27.3');
    alice = await gitea.createUser('alice');
    bob = await gitea.createUser('bob');
    const me = await gitea.api<{ login: string; is_admin: boolean }>('GET', '/user', undefined, alice);
    assert.deepEqual([me.status, me.body.login, me.body.is_admin], [200, 'alice', false]);
    const admin = await gitea.api<{ login: string; is_admin: boolean }>('GET', '/user');
    assert.deepEqual([admin.body.login, admin.body.is_admin], [gitea.admin.name, true]);
    const bad = await gitea.api('GET', '/user', undefined, { ...alice, token: 'not-a-token' });
    assert.equal(bad.status, 401);
  });

  it('takes pushes over HTTP, opens a pull request, and signs the webhook of a comment on it', async () => {
    repo = await gitea.createRepo(alice, 'infra');
    await gitea.addCollaborator(repo, bob);
    await gitea.push(repo, alice, { branch: 'main', files: { 'main.tf': 'resource "terraform_data" "a" {}\n' }, message: 'first' });
    const headSha = await gitea.push(repo, bob, {
      branch: 'change',
      base: 'main',
      files: { 'main.tf': 'resource "terraform_data" "b" {}\n' },
    });
    await gitea.addWebhook(repo, { url: receiver.url, secret });

    const pr = await gitea.openPullRequest(repo, bob, { head: 'change', title: 'Change b' });
    assert.equal(pr.headSha, headSha);
    const opened = await receiver.next((d) => d.headers['x-gitea-event'] === 'pull_request' && d.json.action === 'opened');
    assert.equal((opened.json.pull_request as { head: { sha: string } }).head.sha, headSha);

    const body = 'atlantis plan -d .';
    const commentId = await gitea.comment(repo, bob, pr.number, body);
    const d = await receiver.next((x) => x.headers['x-gitea-event'] === 'issue_comment');
    assert.equal(d.headers['x-gitea-event-type'], 'pull_request_comment');
    assert.equal(d.headers['content-type'], 'application/json');
    const want = hmac(secret, d.raw);
    assert.equal(d.headers['x-gitea-signature'], want, 'X-Gitea-Signature is the HMAC-SHA256 of the raw body');
    assert.equal(d.headers['x-hub-signature-256'], `sha256=${want}`, 'X-Hub-Signature-256 is too');
    assert.notEqual(hmac('another-secret', d.raw), want);
    const p = d.json as {
      action: string;
      is_pull: boolean;
      comment: { id: number; body: string; user: { login: string } };
      issue: { number: number };
      repository: { full_name: string };
    };
    assert.deepEqual(
      [p.action, p.is_pull, p.comment.id, p.comment.body, p.comment.user.login, p.issue.number, p.repository.full_name],
      ['created', true, commentId, body, 'bob', pr.number, 'alice/infra'],
    );

    // Every delivery so far is signed the same way.
    for (const x of receiver.deliveries) assert.equal(x.headers['x-gitea-signature'], hmac(secret, x.raw));
  });

  it("opens a pull request from a user's fork, which the webhook names as the head repo", async () => {
    const carol = await gitea.createUser('carol');
    const fork = await gitea.fork(repo, carol);
    assert.equal(fork.fullName, 'carol/infra');
    const sha = await gitea.push(fork, carol, { branch: 'from-fork', base: 'main', files: { 'fork.tf': '\n' } });
    const pr = await gitea.openPullRequest(repo, carol, { head: 'carol:from-fork', title: 'From a fork' });
    assert.equal(pr.headSha, sha);
    const d = await receiver.next((x) => x.headers['x-gitea-event'] === 'pull_request' && (x.json.number as number) === pr.number);
    const p = d.json as { pull_request: { head: { repo: { full_name: string }; ref: string }; base: { repo: { full_name: string } } } };
    assert.deepEqual(
      [p.pull_request.head.repo.full_name, p.pull_request.head.ref, p.pull_request.base.repo.full_name],
      ['carol/infra', 'from-fork', 'alice/infra'],
    );
  });

  it('makes an organisation team whose members the API lists', async () => {
    const id = await gitea.createOrgTeam('platform', 'tf-admins', [alice]);
    const members = await gitea.api<Array<{ login: string }>>('GET', `/teams/${id}/members`);
    assert.deepEqual(
      members.body.map((m) => m.login),
      ['alice'],
    );
    const teams = await gitea.api<Array<{ name: string }>>('GET', '/user/teams', undefined, alice);
    assert.ok(teams.body.some((t) => t.name === 'tf-admins'));
    const none = await gitea.api<Array<{ name: string }>>('GET', '/user/teams', undefined, bob);
    assert.deepEqual(none.body, []);
  });

  it('serves the pushed branch to a plain git clone with a token, and refuses one without', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'ato-gitea-clone-'));
    try {
      const auth = `Authorization: Basic ${Buffer.from(`alice:${alice.token}`).toString('base64')}`;
      const env = { GIT_TERMINAL_PROMPT: '0', GIT_CONFIG_NOSYSTEM: '1', GIT_CONFIG_GLOBAL: '/dev/null' };
      await execa('git', ['-c', `http.extraHeader=${auth}`, 'clone', '-q', '-b', 'change', repo.cloneUrl, 'c'], {
        cwd: dir,
        env,
        timeout: 60_000,
      });
      assert.equal(readFileSync(path.join(dir, 'c', 'main.tf'), 'utf8'), 'resource "terraform_data" "b" {}\n');
      const priv = await gitea.createRepo(alice, 'secret-infra', { private: true });
      await gitea.push(priv, alice, { branch: 'main', files: { 'x.tf': '\n' } });
      const anon = await execa('git', ['clone', '-q', priv.cloneUrl, 'anon'], { cwd: dir, env, reject: false, timeout: 60_000 });
      assert.notEqual(anon.exitCode, 0, 'a private repo needs credentials');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('stops cleanly on SIGTERM and leaves nothing behind', async () => {
    const log = gitea.logFile;
    const ended = await gitea.stop();
    assert.deepEqual(ended, { code: 0, signal: null }, 'Gitea ended by itself on SIGTERM');
    assert.equal(existsSync(log), false, 'its temp dir is gone');
  });
});
