// The Redis StateStore against a real redis-server: the contract every store passes, then
// what only a shared store has (replicas, plan bytes, a Redis that goes away and comes back).
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { Redis } from 'ioredis';
import type { Logger } from '../src/log.js';
import { MAX_PLAN_FILE_BYTES } from '../src/server/locks/plan-bytes.js';
import { RedisStore, type RedisStoreOptions } from '../src/server/locks/redis-store.js';
import { DELIVERY_TTL_MS, type LockKey } from '../src/server/locks/state-store.js';
import { type RedisServer, startRedisServer, testSharedStateKey } from './support/redis-server.js';
import { stateStoreContract } from './support/state-store-contract.js';

let srv: RedisServer;
const tmpRoot = fs.mkdtempSync(path.join(os.tmpdir(), 'redis-store-'));
let n = 0;
const opened: RedisStore[] = [];

before(async () => {
  srv = await startRedisServer();
});
after(async () => {
  for (const s of opened) await s.close();
  await srv?.cleanup();
  fs.rmSync(tmpRoot, { recursive: true, force: true });
});

/** A store on the shared server, under its own key prefix (so tests never see each other's keys). */
async function connect(o: Partial<RedisStoreOptions> & { keyPrefix: string }): Promise<RedisStore> {
  const s = await RedisStore.connect({
    host: srv.host,
    port: srv.port,
    dataDir: path.join(tmpRoot, `data-${n++}`),
    replicaId: 'replica-0',
    sharedStateKey: testSharedStateKey(),
    ...o,
  });
  opened.push(s);
  return s;
}

const freshPrefix = () => `t${n++}-${randomBytes(3).toString('hex')}:`;

/** A plain client on the shared server: what anyone who can write to Redis has. */
async function connectRaw(): Promise<Redis> {
  const c = new Redis({ host: srv.host, port: srv.port, lazyConnect: true, maxRetriesPerRequest: 1 });
  await c.connect();
  return c;
}

function recordingLogger(into: Array<[string, Record<string, unknown>]>): Logger {
  const log = (msg: string, fields: Record<string, unknown> = {}) => void into.push([msg, fields]);
  const l: Logger = { debug: log, info: log, warn: log, error: log, child: () => l };
  return l;
}

stateStoreContract('RedisStore', async () => {
  const keyPrefix = freshPrefix();
  const dataDir = path.join(tmpRoot, `contract-${n++}`);
  const store = await connect({ keyPrefix, dataDir });
  return {
    store,
    dataDir,
    reopen: () => connect({ keyPrefix, dataDir }),
    otherServer: () => connect({ keyPrefix, replicaId: 'replica-1' }),
    cleanup: async () => {
      fs.rmSync(dataDir, { recursive: true, force: true });
    },
  };
});

const K: LockKey = { repo: 'acme/infra', dir: 'envs/prod', workspace: 'default' };
const R = 'acme/infra';
const sha256 = (b: Buffer) => createHash('sha256').update(b).digest('hex');

/** Two replicas on one Redis: same prefix, each its own data dir and identity. */
async function twoReplicas(): Promise<[RedisStore, RedisStore]> {
  const keyPrefix = freshPrefix();
  return [await connect({ keyPrefix, replicaId: 'atlantis-0' }), await connect({ keyPrefix, replicaId: 'atlantis-1' })];
}

test('two replicas on one Redis see the same locks, plans and queue', async () => {
  const [a, b] = await twoReplicas();
  assert.equal(a.kind, 'redis');
  assert.equal((await a.tryLock(K, { pull: 1, user: 'alice' })).acquired, true);
  const r = await b.tryLock(K, { pull: 2, user: 'bob' });
  assert.equal(r.acquired, false);
  if (!r.acquired) assert.equal(r.holder.user, 'alice');
  assert.deepEqual(await b.list(), await a.list());
  await b.enqueue(R, 2, { from: 'b' });
  assert.deepEqual(
    (await a.takeAll()).map((q) => q.payload),
    [{ from: 'b' }],
  );
  assert.equal((await b.unlockAllForPull(R, 1)).locks.length, 1);
  assert.equal(await a.getLock(K), undefined);
  // Another prefix is another store.
  const other = await connect({ keyPrefix: freshPrefix() });
  await a.tryLock(K, { pull: 1, user: 'alice' });
  assert.deepEqual(await other.list(), []);
});

test('a plan saved by one replica is restored by another into its own path, byte for byte', async () => {
  const [a, b] = await twoReplicas();
  const bytes = randomBytes(3 * 1024 * 1024 + 17);
  const pa = a.planPath(K, 4, 'prod');
  fs.mkdirSync(path.dirname(pa), { recursive: true });
  fs.writeFileSync(pa, bytes);
  await a.savePlan({ ...K, pull: 4, project: 'prod', planPath: pa, headSha: 'h', planSha256: sha256(bytes) });
  // The file on A changes after the save: what B gets is what was saved.
  fs.writeFileSync(pa, 'changed on A later');

  const got = await b.getPlan(R, 4, K.dir, K.workspace);
  assert.ok(got);
  assert.equal(got.planPath, b.planPath(K, 4, 'prod'));
  assert.notEqual(got.planPath, pa);
  assert.ok(got.planPath.startsWith(b.dataDir));
  assert.equal(fs.existsSync(got.planPath), false);
  await b.restorePlanFile(got);
  assert.deepEqual(fs.readFileSync(got.planPath), bytes);
  assert.equal(fs.statSync(got.planPath).mode & 0o777, 0o600);
  assert.deepEqual(fs.readdirSync(path.dirname(got.planPath)), [path.basename(got.planPath)], 'no temp file left');

  // A matching file is left alone (same inode); a tampered one is rewritten.
  const ino = fs.statSync(got.planPath).ino;
  await b.restorePlanFile(got);
  assert.equal(fs.statSync(got.planPath).ino, ino);
  fs.writeFileSync(got.planPath, 'tampered');
  await b.restorePlanFile(got);
  assert.deepEqual(fs.readFileSync(got.planPath), bytes);
  fs.rmSync(got.planPath);
  await b.restorePlanFile(got);
  assert.equal(sha256(fs.readFileSync(got.planPath)), got.planSha256);

  // Every record B reads carries B's path.
  assert.deepEqual(
    (await b.listPlans(R, 4)).map((p) => p.planPath),
    [got.planPath],
  );
  const gone = await b.unlockAllForPull(R, 4, { discardPlans: true });
  assert.deepEqual(
    gone.plans.map((p) => p.planPath),
    [got.planPath],
  );
  // Discarded: nothing more to restore.
  fs.rmSync(got.planPath);
  await b.restorePlanFile(got);
  assert.equal(fs.existsSync(got.planPath), false);
});

test('the replica that made a plan keeps its own file; Redis bytes are written only when they match the sealed sha256', async () => {
  const logged: Array<[string, Record<string, unknown>]> = [];
  const logger = recordingLogger(logged);
  const keyPrefix = freshPrefix();
  const a = await connect({ keyPrefix, replicaId: 'maker', logger });
  const b = await connect({ keyPrefix, replicaId: 'other', logger });
  const bytes = randomBytes(4096);
  const pa = a.planPath(K, 9);
  fs.mkdirSync(path.dirname(pa), { recursive: true });
  fs.writeFileSync(pa, bytes);
  await a.savePlan({ ...K, pull: 9, planPath: pa, headSha: 'h', planSha256: sha256(bytes) });
  const atA = (await a.getPlan(R, 9, K.dir, K.workspace))!;
  const atB = (await b.getPlan(R, 9, K.dir, K.workspace))!;
  assert.equal(atA.unverified, undefined);

  // The maker's own file changed: never replaced from Redis (its hash check then refuses it).
  fs.writeFileSync(pa, 'changed on the maker');
  assert.equal(await a.restorePlanFile(atA), undefined);
  assert.equal(fs.readFileSync(pa, 'utf8'), 'changed on the maker');
  assert.ok(logged.some(([m]) => m === 'Plan file not restored: this replica made the plan and its own file differs from the record'));
  // Its own file gone (a data dir replaced): the sealed bytes come back.
  fs.rmSync(pa);
  assert.equal(await a.restorePlanFile(atA), undefined);
  assert.deepEqual(fs.readFileSync(pa), bytes);

  // Another replica's copy: written, logged.
  assert.equal(await b.restorePlanFile(atB), undefined);
  assert.deepEqual(fs.readFileSync(atB.planPath), bytes);
  const restored = logged.filter(([m]) => m === 'Restored a plan file from the shared store').map(([, f]) => f);
  assert.deepEqual(
    restored.map((f) => [f.madeBy, f.replaced, f.bytes]),
    [
      ['maker', false, 4096],
      ['maker', false, 4096],
    ],
  );

  // Bytes changed in Redis (the record left as it was): refused, nothing written.
  fs.rmSync(atB.planPath);
  const raw = await connectRaw();
  await raw.hset(`${keyPrefix}planfiles:${R}#9`, JSON.stringify([K.dir, K.workspace]), Buffer.from('forged bytes'));
  assert.match((await b.restorePlanFile(atB)) ?? '', /does not match the sha256 recorded when it was planned/);
  assert.equal(fs.existsSync(atB.planPath), false);

  // The record changed in Redis: read back unverified, and never restored.
  const rec = JSON.parse((await raw.hget(`${keyPrefix}plans:${R}#9`, JSON.stringify([K.dir, K.workspace])))!) as Record<string, unknown>;
  await raw.hset(`${keyPrefix}plans:${R}#9`, JSON.stringify([K.dir, K.workspace]), JSON.stringify({ ...rec, headSha: 'h2' }));
  const changed = (await b.getPlan(R, 9, K.dir, K.workspace))!;
  assert.match(changed.unverified ?? '', /authentication code does not match/);
  assert.deepEqual([changed.repo, changed.pull, changed.dir, changed.workspace], [R, 9, K.dir, K.workspace]);
  assert.match((await b.restorePlanFile(changed)) ?? '', /failed its check against the shared state key/);
  assert.deepEqual(
    (await b.listPlans(R, 9)).map((p) => p.unverified !== undefined),
    [true],
  );
  // Discarding still works: it goes by where the record is kept.
  assert.ok(await b.deletePlan(R, 9, K.dir, K.workspace));
  raw.disconnect();
});

test('a delivery is kept in Redis for DELIVERY_TTL_MS at most (its key expires)', async () => {
  const keyPrefix = freshPrefix();
  const s = await connect({ keyPrefix });
  assert.ok('accepted' in (await s.acceptDelivery('d-ttl', { id: 'c', repo: R, pull: 1, payload: null })));
  assert.equal(await s.enqueue(R, 1, null, 'd-ttl-q'), 1);
  const raw = await connectRaw();
  for (const k of ['d-ttl', 'd-ttl-q']) {
    const ttl = await raw.pttl(`${keyPrefix}delivery:${k}`);
    assert.ok(ttl > DELIVERY_TTL_MS - 60_000 && ttl <= DELIVERY_TTL_MS, `${k}: ${ttl}`);
  }
  assert.equal(await raw.get(`${keyPrefix}delivery:d-ttl`), 'replica-0\nc');
  raw.disconnect();
});

test('a plan file over 512 MiB is refused with a clear error, and nothing is recorded', async () => {
  const s = await connect({ keyPrefix: freshPrefix() });
  const p = s.planPath(K, 1);
  fs.mkdirSync(path.dirname(p), { recursive: true });
  fs.writeFileSync(p, '');
  fs.truncateSync(p, MAX_PLAN_FILE_BYTES + 1); // sparse: no disk used
  await assert.rejects(s.savePlan({ ...K, pull: 1, planPath: p, headSha: 'h' }), /over the .*512 MiB/);
  assert.equal(await s.getPlan(R, 1, K.dir, K.workspace), undefined);
  fs.rmSync(p);
});

test('concurrent tryLock from two replicas on one key: exactly one wins, every round', async () => {
  const [a, b] = await twoReplicas();
  for (let round = 0; round < 200; round++) {
    const key = { ...K, dir: `d${round}` };
    const [ra, rb] = await Promise.all([a.tryLock(key, { pull: 1, user: 'a' }), b.tryLock(key, { pull: 2, user: 'b' })]);
    assert.equal(Number(ra.acquired) + Number(rb.acquired), 1, `round ${round}`);
    const winner = ra.acquired ? ra.lock : rb.acquired ? rb.lock : undefined;
    const loser = !ra.acquired ? ra.holder : !rb.acquired ? rb.holder : undefined;
    assert.deepEqual(loser, winner);
  }
  assert.equal((await a.list()).length, 200);
});

test('concurrent pull status updates from two replicas are all merged', async () => {
  const [a, b] = await twoReplicas();
  const dirs = Array.from({ length: 40 }, (_, i) => `dir${String(i).padStart(2, '0')}`);
  await Promise.all(
    dirs.map((dir, i) =>
      (i % 2 ? a : b).updatePullStatus(R, 3, 'h', [{ dir, workspace: 'default', project: '', command: 'plan', ok: true }]),
    ),
  );
  assert.deepEqual((await a.getPullStatus(R, 3))?.projects.map((p) => p.dir).sort(), dirs);
});

test('unfinished jobs are per replica; recent jobs are everyone’s; a restarted replica recovers its own', async () => {
  const keyPrefix = freshPrefix();
  const a = await connect({ keyPrefix, replicaId: 'atlantis-0' });
  const b = await connect({ keyPrefix, replicaId: 'atlantis-1' });
  await a.jobStarted({ id: 'a1', command: 'plan', repo: R, pull: 1 });
  await b.jobStarted({ id: 'b1', command: 'apply', repo: R, pull: 2 });
  await a.jobStarted({ id: 'a2', command: 'plan', repo: R, pull: 3 });
  assert.deepEqual(
    (await a.unfinishedJobs()).map((j) => j.id),
    ['a1', 'a2'],
  );
  assert.deepEqual(
    (await b.unfinishedJobs()).map((j) => j.id),
    ['b1'],
  );
  assert.deepEqual((await b.recentJobs()).map((j) => j.id).sort(), ['a1', 'a2', 'b1']);
  assert.equal('replicaId' in ((await b.recentJobs())[0] ?? {}), false, 'records have the interface shape');
  await a.close();
  // The pod comes back with the same name (a StatefulSet), on another data dir even.
  const a2 = await connect({ keyPrefix, replicaId: 'atlantis-0' });
  assert.deepEqual(
    (await a2.unfinishedJobs()).map((j) => j.id),
    ['a1', 'a2'],
  );
  await a2.jobFinished('a1', 'interrupted');
  await b.jobFinished('a2', 'interrupted');
  assert.deepEqual(await a2.unfinishedJobs(), []);
  assert.deepEqual(
    (await b.unfinishedJobs()).map((j) => j.id),
    ['b1'],
  );
});

test("a survivor reads a dead replica's unfinished jobs and accepted commands (of), and finishes them for it", async () => {
  const keyPrefix = freshPrefix();
  const dead = await connect({ keyPrefix, replicaId: 'atlantis-0' });
  const survivor = await connect({ keyPrefix, replicaId: 'atlantis-1' });
  await dead.jobStarted({ id: 'd1', command: 'apply', repo: R, pull: 1, dir: 'net', workspace: 'default' });
  await dead.acceptCommand({ id: 'c1', repo: R, pull: 1, payload: { kind: 'comment' } });
  await dead.acceptCommand({ id: 'c2', repo: R, pull: 2, payload: { kind: 'autoplan' } });
  await dead.commandStarted('c1');
  await survivor.acceptCommand({ id: 's1', repo: R, pull: 3, payload: null });
  assert.deepEqual(
    (await survivor.unfinishedJobs('atlantis-0')).map((j) => j.id),
    ['d1'],
  );
  assert.deepEqual(
    (await survivor.acceptedCommands('atlantis-0')).map((c) => [c.id, c.startedAt !== undefined]),
    [
      ['c1', true],
      ['c2', false],
    ],
  );
  await survivor.commandFinished('c1', 'atlantis-0');
  await survivor.commandFinished('c2', 'atlantis-0');
  await survivor.jobFinished('d1', 'interrupted');
  assert.deepEqual(await dead.acceptedCommands(), [], "the dead replica's entries are gone");
  assert.deepEqual(await dead.unfinishedJobs(), []);
  assert.deepEqual(
    (await survivor.acceptedCommands()).map((c) => c.id),
    ['s1'],
    "the survivor's own entry is untouched",
  );
  await dead.close();
  await survivor.close();
});

/** Waits until `ok()` holds, polling, within `ms`. */
async function eventually(ok: () => Promise<boolean>, ms: number, what: string): Promise<number> {
  const t0 = Date.now();
  while (Date.now() - t0 < ms) {
    if (await ok()) return Date.now() - t0;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`not within ${ms} ms: ${what}`);
}

test('Redis killed: calls fail within a bound and isHealthy is false; restarted: the same store works again and kept the data', async () => {
  const own = await startRedisServer();
  const dataDir = path.join(tmpRoot, 'outage');
  const s = await RedisStore.connect({ host: own.host, port: own.port, dataDir, replicaId: 'r', sharedStateKey: testSharedStateKey() });
  try {
    const bytes = randomBytes(64 * 1024);
    const p = s.planPath(K, 6);
    fs.mkdirSync(path.dirname(p), { recursive: true });
    fs.writeFileSync(p, bytes);
    await s.tryLock(K, { pull: 6, user: 'u' });
    await s.savePlan({ ...K, pull: 6, planPath: p, headSha: 'h', planSha256: sha256(bytes) });
    await s.updatePullStatus(R, 6, 'h', [{ ...K, project: '', command: 'plan', ok: true }]);
    await s.enqueue(R, 6, { before: 'kill' });
    await s.jobStarted({ id: 'before-kill', command: 'plan', repo: R, pull: 6 });

    // Calls in flight when Redis dies settle (rejected or done), none hangs.
    const inFlight = Promise.allSettled(Array.from({ length: 200 }, (_, i) => s.tryLock({ ...K, dir: `f${i}` }, { pull: 1, user: 'u' })));
    const tKill = Date.now();
    await own.kill();
    await inFlight;
    assert.ok(Date.now() - tKill < 3000, `in-flight calls settled after ${Date.now() - tKill} ms`);
    for (const call of [() => s.getLock(K), () => s.tryLock({ ...K, dir: 'x' }, { pull: 1, user: 'u' }), () => s.takeAll()]) {
      const t0 = Date.now();
      await assert.rejects(call());
      assert.ok(Date.now() - t0 < 3000, `rejected after ${Date.now() - t0} ms`);
    }
    const t0 = Date.now();
    assert.equal(await s.isHealthy(), false);
    assert.ok(Date.now() - t0 < 1500, `isHealthy took ${Date.now() - t0} ms`);

    await own.restart();
    await eventually(() => s.isHealthy(), 10_000, 'the store is healthy again after the restart');
    assert.equal((await s.getLock(K))?.pull, 6, 'the lock survived the SIGKILL (appendfsync always)');
    assert.deepEqual((await s.getPullStatus(R, 6))?.projects.length, 1);
    assert.deepEqual(
      (await s.unfinishedJobs()).map((j) => j.id),
      ['before-kill'],
    );
    fs.rmSync(p);
    const plan = await s.getPlan(R, 6, K.dir, K.workspace);
    assert.ok(plan);
    await s.restorePlanFile(plan);
    assert.deepEqual(fs.readFileSync(p), bytes);
    // Writes work again; the queue item written before the kill is there.
    assert.equal((await s.tryLock({ ...K, dir: 'after' }, { pull: 7, user: 'u' })).acquired, true);
    assert.deepEqual(
      (await s.takeAll()).map((q) => q.payload),
      [{ before: 'kill' }],
    );
  } finally {
    await s.close();
    await own.cleanup();
  }
});

test('Redis up but silent (SIGSTOP): calls time out, isHealthy is false; resumed: works again', async () => {
  const own = await startRedisServer();
  const s = await RedisStore.connect({
    host: own.host,
    port: own.port,
    dataDir: path.join(tmpRoot, 'paused'),
    replicaId: 'r',
    sharedStateKey: testSharedStateKey(),
  });
  try {
    await s.tryLock(K, { pull: 1, user: 'u' });
    own.pause();
    const t0 = Date.now();
    assert.equal(await s.isHealthy(), false);
    assert.ok(Date.now() - t0 < 1500, `isHealthy took ${Date.now() - t0} ms`);
    const t1 = Date.now();
    await assert.rejects(s.getLock(K), /timed out/i);
    assert.ok(Date.now() - t1 < 3000, `rejected after ${Date.now() - t1} ms`);
    own.resume();
    await eventually(() => s.isHealthy(), 10_000, 'healthy after SIGCONT');
    assert.equal((await s.getLock(K))?.pull, 1);
  } finally {
    own.resume();
    await s.close();
    await own.cleanup();
  }
});

test('connect fails with a clear error when Redis is not there', async () => {
  const gone = await startRedisServer();
  const { host, port } = gone;
  await gone.cleanup();
  const t0 = Date.now();
  await assert.rejects(
    RedisStore.connect({ host, port, dataDir: tmpRoot, replicaId: 'r', sharedStateKey: testSharedStateKey() }),
    (err: Error) => err.message.includes(`failed to connect to redis at ${host}:${port}`) && /ECONNREFUSED/.test(err.message),
  );
  assert.ok(Date.now() - t0 < 3000);
});

test('auth: requirepass and an ACL user; a wrong password is a clear error from connect', async () => {
  const sec = await startRedisServer({ password: 'right horse', user: { name: 'atlantis', password: 's3cret' } });
  try {
    const base = { host: sec.host, port: sec.port, dataDir: tmpRoot, replicaId: 'r', sharedStateKey: testSharedStateKey() };
    await assert.rejects(RedisStore.connect({ ...base, password: 'wrong' }), (err: Error) => {
      assert.match(err.message, new RegExp(`failed to connect to redis at ${sec.host}:${sec.port}: WRONGPASS`));
      assert.equal(err.message.includes('wrong'), false, 'the password is not in the message');
      return true;
    });
    await assert.rejects(RedisStore.connect(base), /NOAUTH|Authentication required/);
    await assert.rejects(RedisStore.connect({ ...base, username: 'atlantis', password: 'nope' }), /WRONGPASS/);
    for (const creds of [{ password: 'right horse' }, { username: 'atlantis', password: 's3cret' }]) {
      const s = await RedisStore.connect({ ...base, ...creds, keyPrefix: freshPrefix() });
      assert.equal(await s.isHealthy(), true);
      assert.equal((await s.tryLock(K, { pull: 1, user: 'u' })).acquired, true);
      await s.close();
    }
  } finally {
    await sec.cleanup();
  }
});

test("a PR's status in Redis counts only with its seal: a forged policy approval or an unsealed status is as if none were kept", async () => {
  const keyPrefix = freshPrefix();
  const logged: Array<[string, Record<string, unknown>]> = [];
  const s = await connect({ keyPrefix, logger: recordingLogger(logged) });
  const R = 'acme/infra';
  const failing = { policySetName: 'no-forbidden', passed: false, approvals: [], hashes: ['h'], policyItemRegex: '(?s).+' };
  const status = await s.updatePullStatus(R, 4, 'sha', [
    { dir: 'dir1', workspace: 'default', project: '', command: 'policy_check', ok: false, policyStatus: [failing] },
  ]);
  assert.deepEqual(await s.getPullStatus(R, 4), status);
  const raw = await connectRaw();
  try {
    const key = `${keyPrefix}pull-status:${R}#4`;
    const sealed = (await raw.hget(key, 'json'))!;
    assert.match(sealed, /"mac":/);
    // Someone with write access to Redis approves the failing set and marks it passed.
    await raw.hset(
      key,
      'json',
      sealed.replace('"passed":false', '"passed":true').replace('"status":"policy_check_errored"', '"status":"policy_check_passed"'),
    );
    assert.equal(await s.getPullStatus(R, 4), undefined);
    assert.ok(logged.some(([m, f]) => /failed its check against the shared state key/.test(m) && /does not match/.test(String(f.problem))));
    await raw.hset(key, 'json', JSON.stringify(status));
    assert.equal(await s.getPullStatus(R, 4), undefined, 'an unsealed status (an old replica, or forged) is not used');
    // The next update starts afresh and seals what it writes.
    const next = await s.updatePullStatus(R, 4, 'sha', [{ dir: 'dir1', workspace: 'default', project: '', command: 'plan', ok: true }]);
    assert.deepEqual(await s.getPullStatus(R, 4), next);
  } finally {
    raw.disconnect();
  }
});
