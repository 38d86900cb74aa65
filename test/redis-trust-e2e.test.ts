// Redis is storage anyone with its password (or none) may write to, never a source of trust
// (issue 30): two real server processes on one real redis-server, the GitHub stand-in, real
// terraform. What someone who can write to Redis, without the replicas' shared state key,
// tries, and what happens:
// - a plan file and its sha256 replaced in Redis by a plan whose local-exec writes a marker:
//   `atlantis apply` is refused with a comment, on the replica that planned and on another,
//   and the local-exec never runs;
// - a genuine plan record copied onto another PR: refused the same way;
// - replica records pointing at a listener of theirs: nothing is sent there, the command runs
//   on a real replica; a record with the right seal (a URL taken over) gets the forward, but
//   its answer has no proof, so the command still runs on a real replica;
// - a webhook replayed with the same X-GitHub-Delivery: answered, never run twice.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Redis } from 'ioredis';
import { sleep } from '../src/async.js';
import { type ReplicaInfo, ownerOf } from '../src/server/replicas/affinity.js';
import { sealReplica } from '../src/server/replicas/replica-record.js';
import { REPLAY_HANDLED_BODY } from '../src/server/workflow/intake/delivery-replay.js';
import { issueCommentPayload, sendWebhook } from './support/github-standin.js';
import { terraformConfig } from './support/git-repos.js';
import { type RedisServer, startRedisServer, testSharedStateKey } from './support/redis-server.js';
import { type Replica, inProgress, keepLogs, logLines, startReplica } from './support/replica-faults.js';
import { waitFor } from './support/server.js';
import { TERRAFORM } from './support/terraform.js';
import {
  WEBHOOK_SECRET,
  type WorkflowEnv,
  createWorkflowEnv,
  handleHere,
  startWorkflowServer,
  tempDataDir,
} from './support/workflow-env.js';

let env: WorkflowEnv;
let redis: RedisServer;
let r: Redis;
const replicas: Replica[] = [];
const dirs: string[] = [];
const scratch = mkdtempSync(path.join(tmpdir(), 'ato-redis-trust-'));
/** What the forged plan's local-exec writes: it must never exist. */
const PWNED = path.join(scratch, 'pwned');

before(async () => {
  env = await createWorkflowEnv();
  redis = await startRedisServer();
  r = new Redis({ host: redis.host, port: redis.port, lazyConnect: true, maxRetriesPerRequest: 1 });
  await r.connect();
  for (const [i, id] of ['t1', 't2'].entries()) replicas.push(await startReplica(env, redis, `127.30.30.${i + 1}`, id, [], dirs));
});
after(async () => {
  keepLogs(replicas, 'redis-trust-');
  for (const x of replicas) x.p.child.kill('SIGKILL');
  r?.disconnect();
  await env?.close();
  await redis?.cleanup();
  for (const d of [...dirs, scratch]) rmSync(d, { recursive: true, force: true });
});

const pullKey = (n: number) => `${env.repo.fullName}#${n}`;
const info = (x: Replica): ReplicaInfo => ({ id: x.id, url: x.url, draining: false, heartbeatAt: 0 });
const ownerOfPull = (n: number): Replica => replicas.find((x) => x.id === ownerOf(pullKey(n), replicas.map(info))?.id) as Replica;
const other = (x: Replica): Replica => replicas.find((y) => y.id !== x.id) as Replica;
/** Commands a replica finished, as `<command> #<pull>`. */
const finished = (x: Replica): string[] =>
  [...logLines(x, 'Command finished'), ...logLines(x, 'Command failed')].map((l) => `${String(l.command)} #${String(l.pull)}`);
const planField = (dir: string) => JSON.stringify([dir, 'default']);

/** A saved terraform plan, made outside any replica, whose apply writes PWNED. */
function forgedPlan(): Buffer {
  const dir = mkdtempSync(path.join(scratch, 'forge-'));
  writeFileSync(
    path.join(dir, 'main.tf'),
    `resource "terraform_data" "marker" {
  input = "v1"
  provisioner "local-exec" {
    command = "touch '${PWNED}'"
  }
}
`,
  );
  const tf = (...args: string[]) =>
    execFileSync(TERRAFORM, args, { cwd: dir, stdio: 'pipe', env: { ...process.env, TF_IN_AUTOMATION: '1' } });
  tf('init', '-input=false');
  tf('plan', '-input=false', '-out=forged.tfplan');
  return readFileSync(path.join(dir, 'forged.tfplan'));
}

async function planned(n: number, dir: string): Promise<string> {
  const opened = await env.openPull(replicas[0]!.url, n, `trust-${n}`, { [`${dir}/main.tf`]: terraformConfig({ marker: `${dir}-v1` }) });
  assert.equal(opened.status, 200);
  await env.waitForComment(n, new RegExp(`^Ran Plan for dir: \`${dir}\` workspace: \`default\``));
  await waitFor(`the plan of #${n} to finish`, () => replicas.some((x) => finished(x).includes(`plan #${n}`)), 60_000);
  return opened.headSha;
}

async function idle(): Promise<void> {
  await waitFor(
    'every replica idle',
    async () => (await Promise.all(replicas.map((x) => inProgress(x.url)))).every((n) => n === 0),
    60_000,
  );
}

describe('at start', () => {
  it('a replica on a Redis without a password and without TLS says so, one warn line each', () => {
    for (const x of replicas) {
      const warns = x.p
        .output()
        .split('\n')
        .filter((l) => l.includes('"level":"warn"') && /"msg":"Redis is used without (a password|TLS) /.test(l));
      assert.equal(warns.length, 2, `${x.id}: ${warns.join('\n')}`);
    }
  });
});

describe('plans in Redis are checked against the shared state key', () => {
  it('a plan file and its sha256 replaced in Redis: apply is refused with a comment on the replica that planned, nothing runs', async () => {
    await planned(1, 'net');
    const key = `atlantis:plans:${pullKey(1)}`;
    const rec = JSON.parse((await r.hget(key, planField('net'))) as string) as Record<string, unknown>;
    assert.equal(typeof rec.mac, 'string', 'the record is sealed');
    assert.equal(rec.madeBy, ownerOfPull(1).id);
    const bytes = forgedPlan();
    const sha = createHash('sha256').update(bytes).digest('hex');
    // Everything an apply reads, consistent with the forged bytes; only the seal cannot be made.
    await r
      .multi()
      .hset(key, planField('net'), JSON.stringify({ ...rec, planSha256: sha, fileSha256: sha, fileSize: bytes.length }))
      .hset(`atlantis:planfiles:${pullKey(1)}`, planField('net'), bytes)
      .exec();
    const before = env.commentsOn(1).length;
    assert.equal((await env.comment(other(ownerOfPull(1)).url, 1, 'atlantis apply')).status, 200);
    const refused = await env.waitForComment(1, /^\*\*Apply Error\*\*/, { after: before });
    assert.match(
      refused.body,
      /the saved plans of this pull request failed their check against the shared state key, so nothing was applied/,
    );
    assert.match(refused.body, /dir net workspace default: its authentication code does not match/);
    assert.match(refused.body, /comment `atlantis plan` to plan again/);
    await idle();
    assert.equal(existsSync(PWNED), false, "the forged plan's local-exec never ran");
    const o = ownerOfPull(1);
    assert.equal(logLines(o, 'Refused apply: a saved plan in the shared store failed its check against the shared state key').length, 1);
    assert.equal(logLines(o, 'Restored a plan file from the shared store').length, 0, 'nothing was restored');
    assert.equal(await r.hget(key, planField('net')), null, 'the record was dropped');
    // Planned again, the PR applies as usual: the comment said how.
    const again = env.commentsOn(1).length;
    await env.comment(o.url, 1, 'atlantis plan');
    await env.waitForComment(1, /^Ran Plan for dir: `net` workspace: `default`/, { after: again });
    await waitFor('the second plan to finish', () => finished(o).filter((c) => c === 'plan #1').length === 2, 60_000);
    const applied = env.commentsOn(1).length;
    await env.comment(o.url, 1, 'atlantis apply');
    const ok = await env.waitForComment(1, /^Ran Apply for dir: `net` workspace: `default`/, { after: applied });
    assert.match(ok.body, /Apply complete! Resources: 1 added/);
  });

  it('a genuine plan record and its bytes copied onto another PR: refused there, on a replica that did not plan; nothing runs', async () => {
    await planned(2, 'dns');
    await planned(3, 'dns2');
    // PR 2's record of dns, sealed for PR 2, put where PR 3's plan of dns2 is looked for... and as dns of PR 3.
    const from = `atlantis:plans:${pullKey(2)}`;
    const rec = (await r.hget(from, planField('dns'))) as string;
    const bytes = (await r.hgetBuffer(`atlantis:planfiles:${pullKey(2)}`, planField('dns'))) as Buffer;
    await r
      .multi()
      .hset(`atlantis:plans:${pullKey(3)}`, planField('dns'), rec)
      .hset(`atlantis:planfiles:${pullKey(3)}`, planField('dns'), bytes)
      .exec();
    const before = env.commentsOn(3).length;
    assert.equal((await env.comment(replicas[0]!.url, 3, 'atlantis apply -d dns')).status, 200);
    const refused = await env.waitForComment(3, /^\*\*Apply Error\*\*/, { after: before });
    assert.match(refused.body, /dir dns workspace default: its authentication code does not match/);
    await idle();
    assert.deepEqual(
      replicas.flatMap((x) => logLines(x, 'Restored a plan file from the shared store')),
      [],
      'no plan file was written from Redis',
    );
    assert.deepEqual(
      env.commentsOn(3).filter((c) => /^Ran Apply/.test(c.body)),
      [],
      'nothing was applied',
    );
  });

  it('a plan made on one replica is applied on another: restored from Redis once, the restore logged', async () => {
    await planned(4, 'mv');
    const maker = replicas.find((x) => finished(x).includes('plan #4')) as Replica;
    const applier = other(maker);
    const before = env.commentsOn(4).length;
    // Marked as forwarded with the proof, so the replica that did not plan applies it.
    assert.equal((await env.comment(applier.url, 4, 'atlantis apply', 'dev', handleHere(applier.id))).status, 200);
    const ok = await env.waitForComment(4, /^Ran Apply for dir: `mv` workspace: `default`/, { after: before });
    assert.match(ok.body, /Apply complete! Resources: 1 added/);
    const restored = logLines(applier, 'Restored a plan file from the shared store');
    assert.equal(restored.length, 1);
    assert.equal(restored[0]?.madeBy, maker.id);
    assert.equal(restored[0]?.replaced, false);
  });
});

describe('replica records and forwards are checked against the shared state key', () => {
  let listener: http.Server;
  const received: string[] = [];
  let listenUrl = '';

  before(async () => {
    listener = http.createServer((req, res) => {
      received.push(`${req.method} ${req.url}`);
      req.resume();
      req.on('end', () => res.writeHead(200, { 'content-type': 'text/plain' }).end('Processing...\n'));
    });
    listener.listen(0, '127.30.31.9');
    await new Promise((res) => listener.once('listening', res));
    listenUrl = `http://127.30.31.9:${(listener.address() as AddressInfo).port}`;
  });
  after(() => listener?.close());

  /** A replica id that would own PR `n` over the real ones. */
  function winningId(n: number, prefix: string): string {
    for (let i = 0; ; i++) {
      const id = `${prefix}-${i}`;
      if (ownerOf(pullKey(n), [...replicas.map(info), { id, url: listenUrl, draining: false, heartbeatAt: 0 }])?.id === id) return id;
    }
  }

  async function register(id: string, raw: string): Promise<void> {
    await r.multi().hset('atlantis:replicas', id, raw).set(`atlantis:replica:${id}`, raw, 'PX', 120_000).exec();
  }

  /** Past the router's cache of the live list (1 s, replicas/router.ts): the next webhook reads Redis again. */
  const listRead = () => sleep(1100);

  it('records without the seal (or with a path in the URL) get nothing: the command runs on a real replica', async () => {
    const n = 5;
    const now = Date.now();
    const unsealed = winningId(n, 'evil');
    const withPath = winningId(n, 'evil-path');
    await register(unsealed, JSON.stringify({ id: unsealed, url: listenUrl, draining: false, heartbeatAt: now, instance: 'x' }));
    // Sealed, but its URL has a path: refused for that alone.
    await register(
      withPath,
      sealReplica(testSharedStateKey(), { id: withPath, url: `${listenUrl}/stolen?x=`, draining: false, heartbeatAt: now, instance: 'y' }),
    );
    await listRead();
    await planned(n, 'fw');
    assert.deepEqual(received, [], 'the listener got nothing');
    const ignored = replicas.flatMap((x) => logLines(x, 'Ignored a replica record that fails its check against the shared state key'));
    assert.match(String(ignored.find((l) => l.replicaId === unsealed)?.problem), /no authentication code/);
    assert.match(String(ignored.find((l) => l.replicaId === withPath)?.problem), /must be http\(s\):\/\/host:port/);
    await r
      .multi()
      .hdel('atlantis:replicas', unsealed, withPath)
      .del(`atlantis:replica:${unsealed}`, `atlantis:replica:${withPath}`)
      .exec();
  });

  it('a sealed record at a URL that is not a replica: the forward gets no proof back, so the command runs here', async () => {
    const n = 6;
    const id = winningId(n, 'taken');
    // Sealed (as a genuine replica whose address another process took over would be).
    await register(
      id,
      sealReplica(testSharedStateKey(), { id, url: listenUrl, draining: false, heartbeatAt: Date.now(), instance: 'gone' }),
    );
    await listRead();
    await planned(n, 'fw2');
    assert.equal(received.filter((x) => x === 'POST /events').length, 1, 'the one forward went there');
    const handled = replicas.flatMap((x) =>
      logLines(x, 'Could not hand the webhook to the replica that owns the pull request; handling it here').filter((l) => l.owner === id),
    );
    assert.equal(handled.length, 1);
    assert.match(String(handled[0]?.error), /carries no proof of the shared state key/);
    await r.multi().hdel('atlantis:replicas', id).del(`atlantis:replica:${id}`).exec();
  });
});

describe('a webhook replayed with the same X-GitHub-Delivery runs once', () => {
  /**
   * PR `n` (autoplanned: `base` commands finished) gets `atlantis plan` on `url`, then the same
   * bytes under the same delivery id on `againUrl`, once the first has started.
   */
  async function replay(url: string, againUrl: string, n: number, on: Replica[], base: number): Promise<void> {
    const payload = issueCommentPayload({
      repo: env.repo.fullName,
      cloneUrl: env.repo.cloneUrl,
      number: n,
      body: 'atlantis plan',
      user: 'dev',
    });
    const raw = JSON.stringify(payload);
    const deliveryId = `replayed-${n}-${Date.now()}`;
    const before = env.commentsOn(n).length;
    const first = await sendWebhook(`${url}/events`, 'issue_comment', payload, { secret: WEBHOOK_SECRET, deliveryId, rawBody: raw });
    assert.equal(first.status, 200);
    assert.equal(first.body, 'Processing...\n');
    // Its plan comment: the first delivery's command has started.
    await env.waitForComment(n, /^Ran Plan for dir: `rp` workspace: `default`/, { after: before });
    const again = await sendWebhook(`${againUrl}/events`, 'issue_comment', payload, { secret: WEBHOOK_SECRET, deliveryId, rawBody: raw });
    assert.equal(again.status, 200);
    assert.equal(again.body, `${REPLAY_HANDLED_BODY}\n`);
    assert.ok(on.some((x) => logLines(x, 'Webhook delivery replayed: not run again').some((l) => l.deliveryId === deliveryId)));
    // A command is journalled and counted before its 200: with every replica idle, every run has ended.
    await waitFor('idle', async () => (await Promise.all(on.map((x) => inProgress(x.url)))).every((c) => c === 0), 60_000);
    const runs = on.flatMap((x) => logLines(x, 'Command finished').filter((l) => l.pull === n));
    assert.equal(runs.length, base + 1, 'the comment ran once');
    assert.equal(env.commentsOn(n).filter((c) => /^Ran Plan for dir: `rp`/.test(c.body)).length, base + 1);
  }

  it('on Redis replicas: the replay lands on the other replica and is answered without running', async () => {
    const n = 7;
    await env.openPull(replicas[0]!.url, n, 'replay-7', { 'rp/main.tf': terraformConfig({ marker: 'rp-v1' }) });
    await env.waitForComment(n, /^Ran Plan for dir: `rp` workspace: `default`/);
    await waitFor('the autoplan to finish', () => replicas.some((x) => finished(x).includes(`plan #${n}`)), 60_000);
    await replay(replicas[0]!.url, replicas[1]!.url, n, replicas, 1);
  });

  it('on one server with the embedded store: the same', async () => {
    const dataDir = tempDataDir();
    dirs.push(dataDir);
    const solo: Replica = { id: 'solo', ...(await startWorkflowServer(env, dataDir, '127.30.30.9')), dataDir };
    try {
      const n = 8;
      await env.openPull(solo.url, n, 'replay-8', { 'rp/main.tf': terraformConfig({ marker: 'rp-v8' }) });
      await env.waitForComment(n, /^Ran Plan for dir: `rp` workspace: `default`/);
      await waitFor('the autoplan to finish', () => finished(solo).includes(`plan #${n}`), 60_000);
      await replay(solo.url, solo.url, n, [solo], 1);
    } finally {
      solo.p.child.kill('SIGTERM');
      await solo.p.exited;
    }
  });
});
