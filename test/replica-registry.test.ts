// The replica registry against a real redis-server: replicas see each other, a replica that
// stops heartbeating (a SIGKILL, as far as Redis can tell) drops out after the TTL and exactly
// one survivor is told, the draining flag travels within a heartbeat, leave() is immediate, and
// heartbeats come back by themselves after Redis restarts.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { Redis } from 'ioredis';
import type { ReplicaInfo } from '../src/server/replicas/affinity.js';
import { loadStoreParts } from '../src/server/locks/open-store.js';
import { LocalReplicaRegistry, ReplicaRegistry } from '../src/server/replicas/registry.js';
import { type RedisServer, startRedisServer, testSharedStateKey } from './support/redis-server.js';

let srv: RedisServer;
const opened: ReplicaRegistry[] = [];
const HEARTBEAT_MS = 150;
// Longer than a heartbeat plus the longest reconnect delay (1 s): the sweep grace after Redis comes back.
const TTL_MS = 1500;

before(async () => {
  srv = await startRedisServer();
});
after(async () => {
  for (const r of opened) await r.close();
  await srv?.cleanup();
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function until(what: string, cond: () => Promise<boolean> | boolean, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await cond()) return;
    await sleep(25);
  }
  assert.fail(`timed out waiting for: ${what}`);
}

interface Cluster {
  keyPrefix: string;
  regs: ReplicaRegistry[];
  gone: Array<{ by: string; id: string; last: ReplicaInfo }>;
}

/** `n` replicas on the shared server under their own key prefix, started. */
async function cluster(n: number): Promise<Cluster> {
  const keyPrefix = `t-${randomBytes(4).toString('hex')}:`;
  const c: Cluster = { keyPrefix, regs: [], gone: [] };
  for (let i = 0; i < n; i++) {
    const id = `atlantis-${i}`;
    const reg = new ReplicaRegistry({
      host: srv.host,
      port: srv.port,
      keyPrefix,
      key: testSharedStateKey(),
      self: { id, url: `http://10.0.0.${i + 1}:4141` },
      heartbeatMs: HEARTBEAT_MS,
      ttlMs: TTL_MS,
      onReplicaGone: (g) => {
        c.gone.push({ by: id, id: g.id, last: g });
      },
    });
    opened.push(reg);
    c.regs.push(reg);
  }
  await Promise.all(c.regs.map((r) => r.start()));
  return c;
}

const ids = (rs: ReplicaInfo[]) => rs.map((r) => r.id);

test('three registries see each other, with their urls', async () => {
  const { regs } = await cluster(3);
  for (const r of regs) {
    const live = await r.list();
    assert.deepEqual(ids(live), ['atlantis-0', 'atlantis-1', 'atlantis-2']);
    assert.deepEqual(
      live.map((x) => x.url),
      ['http://10.0.0.1:4141', 'http://10.0.0.2:4141', 'http://10.0.0.3:4141'],
    );
    assert.ok(live.every((x) => !x.draining && x.heartbeatAt > 0));
  }
});

test('a replica that stops heartbeating is dropped after the TTL; exactly one survivor gets onReplicaGone', async () => {
  const c = await cluster(3);
  const [a, b, dead] = c.regs as [ReplicaRegistry, ReplicaRegistry, ReplicaRegistry];
  await sleep(TTL_MS); // every survivor past its sweep grace
  dead.stop(); // no leave(): its record stays, only its key expires
  assert.deepEqual(ids(await a.list()), ['atlantis-0', 'atlantis-1', 'atlantis-2'], 'still listed right after');
  await until('the dead replica no longer listed', async () => !ids(await a.list()).includes('atlantis-2'));
  // Its key lived one TTL from its last heartbeat (a heartbeat in flight at stop() may have been the last).
  const lastBeat = dead.self.heartbeatAt;
  const sinceLast = Date.now() - lastBeat;
  assert.ok(sinceLast >= TTL_MS - 50 && sinceLast < TTL_MS + 1000, `dropped ${sinceLast} ms after its last heartbeat`);
  assert.deepEqual(ids(await b.list()), ['atlantis-0', 'atlantis-1']);
  // Both survivors keep heartbeating (and sweeping) for a few more TTLs: still one report.
  await until('its death reported', () => c.gone.length > 0);
  await sleep(3 * TTL_MS);
  assert.equal(c.gone.length, 1, JSON.stringify(c.gone));
  assert.equal(c.gone[0]!.id, 'atlantis-2');
  assert.ok(['atlantis-0', 'atlantis-1'].includes(c.gone[0]!.by));
  assert.equal(c.gone[0]!.last.heartbeatAt, lastBeat);
});

test('a dead replica that comes back (same id) is listed again, and its next death is reported again', async () => {
  const c = await cluster(2);
  const [a, b] = c.regs as [ReplicaRegistry, ReplicaRegistry];
  await sleep(TTL_MS);
  b.stop();
  await until('first death reported', () => c.gone.length === 1);
  await b.start();
  await until('back in the list', async () => ids(await a.list()).includes('atlantis-1'));
  b.stop();
  await until('second death reported', () => c.gone.length === 2);
  assert.deepEqual(
    c.gone.map((g) => [g.by, g.id]),
    [
      ['atlantis-0', 'atlantis-1'],
      ['atlantis-0', 'atlantis-1'],
    ],
  );
  assert.ok(c.gone[1]!.last.heartbeatAt > c.gone[0]!.last.heartbeatAt);
});

test('records that fail their check are never listed, and their "deaths" are never reported', async () => {
  const c = await cluster(2);
  const [, b] = c.regs as [ReplicaRegistry, ReplicaRegistry];
  const prefix = c.keyPrefix;
  const raw = new Redis({ host: srv.host, port: srv.port, lazyConnect: true, maxRetriesPerRequest: 1 });
  await raw.connect();
  try {
    const genuine = (await raw.hget(`${prefix}replicas`, 'atlantis-1')) as string;
    // Without alive keys: the sweep would report each as dead if it took them for replicas.
    await raw.hset(`${prefix}replicas`, {
      // atlantis-1's own sealed record, copied under another id.
      'copied-1': genuine,
      unsealed: JSON.stringify({ id: 'unsealed', url: 'http://10.9.9.9:4141', draining: false, heartbeatAt: Date.now(), instance: 'x' }),
      garbage: '{"id":',
    });
    await raw.set(
      `${prefix}replica:listed-fake`,
      JSON.stringify({ id: 'listed-fake', url: 'http://10.9.9.9:4141', draining: false, heartbeatAt: 1, instance: 'y' }),
      'PX',
      60_000,
    );
    await raw.hset(`${prefix}replicas`, 'listed-fake', (await raw.get(`${prefix}replica:listed-fake`)) as string);
    assert.deepEqual(ids(await b.list()), ['atlantis-0', 'atlantis-1'], 'only the sealed records are listed');
    await sleep(TTL_MS); // past the sweep grace: the fields without a key are swept
    await until('the bad fields swept', async () => {
      const left = Object.keys(await raw.hgetall(`${prefix}replicas`));
      return !left.includes('copied-1') && !left.includes('unsealed') && !left.includes('garbage');
    });
    assert.deepEqual(c.gone, [], 'no death reported: none of them was a replica');
  } finally {
    raw.disconnect();
  }
});

test('the draining flag is visible to the others within one heartbeat', async () => {
  const { regs } = await cluster(3);
  const [a, b] = regs as [ReplicaRegistry, ReplicaRegistry];
  // setDraining writes at once; the others read it on their next list().
  await a.setDraining(true);
  const seen = (await b.list()).find((r) => r.id === 'atlantis-0');
  assert.equal(seen?.draining, true);
  assert.equal(a.self.draining, true);
  // And it stays set through the timer's heartbeats.
  await sleep(3 * HEARTBEAT_MS);
  assert.equal((await b.list()).find((r) => r.id === 'atlantis-0')?.draining, true);
  await a.setDraining(false);
  assert.equal((await b.list()).find((r) => r.id === 'atlantis-0')?.draining, false);
});

test('leave() removes the replica at once, and nobody is told it died', async () => {
  const c = await cluster(3);
  await sleep(TTL_MS);
  const [a, , leaving] = c.regs as [ReplicaRegistry, ReplicaRegistry, ReplicaRegistry];
  await leaving.leave();
  assert.deepEqual(ids(await a.list()), ['atlantis-0', 'atlantis-1']);
  await sleep(2 * TTL_MS);
  assert.deepEqual(c.gone, []);
  assert.deepEqual(ids(await a.list()), ['atlantis-0', 'atlantis-1']);
});

test('Redis restarted, even after more than the TTL down: heartbeats resume alone, and no live replica is declared gone', async () => {
  const c = await cluster(3);
  const [a] = c.regs as [ReplicaRegistry];
  await sleep(TTL_MS);
  await srv.stop();
  await sleep(2 * TTL_MS); // every heartbeat key expires meanwhile
  await srv.restart();
  await until('all three listed again', async () => {
    try {
      return ids(await a.list()).length === 3;
    } catch {
      return false;
    }
  });
  await sleep(2 * TTL_MS);
  assert.deepEqual(ids(await a.list()), ['atlantis-0', 'atlantis-1', 'atlantis-2']);
  assert.deepEqual(c.gone, []);
});

test('start() fails with the address when Redis cannot be reached', async () => {
  const reg = new ReplicaRegistry({ host: '127.0.0.1', port: 1, key: testSharedStateKey(), self: { id: 'x', url: 'http://x:4141' } });
  opened.push(reg);
  await assert.rejects(reg.start(), /failed to connect to redis at 127\.0\.0\.1:1/);
});

test('the TTL must be longer than the heartbeat', () => {
  assert.throws(
    () =>
      new ReplicaRegistry({
        host: srv.host,
        port: srv.port,
        key: testSharedStateKey(),
        self: { id: 'x', url: 'u' },
        heartbeatMs: 1000,
        ttlMs: 1000,
      }),
    /must be longer/,
  );
});

test('LocalReplicaRegistry lists only itself, with its draining flag', async () => {
  const reg = new LocalReplicaRegistry({ id: 'atlantis-0', url: 'http://127.0.0.1:4141' });
  await reg.start();
  assert.deepEqual(ids(await reg.list()), ['atlantis-0']);
  await reg.setDraining(true);
  assert.equal((await reg.list())[0]?.draining, true);
  await reg.leave();
  await reg.close();
});

test('the store parts open the registry of the store: local for boltdb, Redis for redis', async () => {
  const dataDir = mkdtempSync(path.join(tmpdir(), 'registry-'));
  const local = (await loadStoreParts({ store: { type: 'boltdb' }, replicaId: 'r0', dataDir })).openReplicaRegistry('http://a:4141');
  assert.ok(local instanceof LocalReplicaRegistry);
  const redisParts = await loadStoreParts({
    store: {
      type: 'redis',
      redis: { host: srv.host, port: srv.port, db: 0, tls: false, insecureSkipVerify: false, sharedStateKey: testSharedStateKey() },
    },
    replicaId: 'r1',
    dataDir,
  });
  const shared = redisParts.openReplicaRegistry('http://b:4141', {
    keyPrefix: `t-${randomBytes(4).toString('hex')}:`,
    heartbeatMs: HEARTBEAT_MS,
    ttlMs: TTL_MS,
  });
  assert.ok(shared instanceof ReplicaRegistry);
  opened.push(shared);
  await shared.start();
  assert.deepEqual(
    (await shared.list()).map((r) => [r.id, r.url]),
    [['r1', 'http://b:4141']],
  );
  rmSync(dataDir, { recursive: true, force: true });
});
