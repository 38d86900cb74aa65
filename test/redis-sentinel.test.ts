// The Redis store through Redis Sentinel (real redis-servers: a master, its replica, three
// sentinels; test/support/redis-sentinel.ts), one failover per test:
// - a sentinel that takes the connection and never answers is passed over; with no sentinel
//   at all, the first connection fails at a deadline instead of waiting for ever;
// - the master SIGKILLed: calls fail fast while no master is named, then the same client
//   goes on with the promoted replica: what was replicated is there, the Lua scripts run
//   (sent again as EVAL on the new connection), and after SCRIPT FLUSH too (NOSCRIPT);
// - the master silent (SIGSTOP): the sentinels' +switch-master ends the connection that
//   nothing else would end, and the client moves to the new master;
// - the master demoted while its connections stay open: a write gets READONLY once, and the
//   client reconnects to the master the sentinels name instead of failing every write;
// - what asynchronous replication loses: a lock the old master acknowledged but never sent
//   to its replica (the replication link is a black hole) is gone after the failover.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import net from 'node:net';
import { Redis } from 'ioredis';
import {
  REDIS_CONNECT_DEADLINE_MS,
  closeRedis,
  connectRedis,
  createRedisClient,
  redisClientOptions,
} from '../src/server/locks/redis-connection.js';
import { RedisStore } from '../src/server/locks/redis-store.js';
import type { LockKey } from '../src/server/locks/state-store.js';
import { type SentinelSetup, startSentinelSetup } from './support/redis-sentinel.js';
import { startRedisServer, testSharedStateKey } from './support/redis-server.js';
import { TcpProxy } from './support/tcp-proxy.js';

const tmpRoot = fs.mkdtempSync(path.join(os.tmpdir(), 'redis-sentinel-'));
const cleanups: Array<() => Promise<unknown>> = [];
after(async () => {
  for (const c of cleanups.reverse()) await c().catch(() => undefined);
  fs.rmSync(tmpRoot, { recursive: true, force: true });
});

const PW = 'data-pw-1';
const SPW = 'sentinel-pw-1';
let n = 0;

async function setupAndStore(): Promise<{ s: SentinelSetup; store: RedisStore }> {
  const s = await startSentinelSetup({ password: PW, sentinelPassword: SPW });
  cleanups.push(() => s.cleanup());
  const store = await storeOn(s);
  return { s, store };
}

async function storeOn(s: Pick<SentinelSetup, 'addresses' | 'masterName'>): Promise<RedisStore> {
  const store = await RedisStore.connect({
    // Not used through Sentinel: a port nothing listens on proves it.
    host: '127.0.0.1',
    port: 1,
    password: PW,
    sharedStateKey: testSharedStateKey(),
    sentinel: {
      addresses: s.addresses.split(',').map((a) => ({ host: a.split(':')[0]!, port: Number(a.split(':')[1]) })),
      masterName: s.masterName,
      password: SPW,
    },
    dataDir: path.join(tmpRoot, `data-${n++}`),
    replicaId: 'r1',
  });
  cleanups.push(() => store.close());
  return store;
}

/** A port that was free a moment ago. */
const freedPort = (): Promise<number> =>
  new Promise((resolve) => {
    const srv = net.createServer().listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as net.AddressInfo;
      srv.close(() => resolve(port));
    });
  });

const key = (dir: string): LockKey => ({ repo: 'acme/infra', dir, workspace: 'default' });

/** Calls `fn` until it resolves, each failure bounded by the client's own timeouts; the failures, and the time it took. */
async function untilItWorks<T>(fn: () => Promise<T>, timeoutMs: number): Promise<{ value: T; failures: string[]; ms: number }> {
  const start = Date.now();
  const failures: string[] = [];
  while (Date.now() - start < timeoutMs) {
    const t = Date.now();
    try {
      return { value: await fn(), failures, ms: Date.now() - start };
    } catch (e) {
      const took = Date.now() - t;
      // Bounded: the 2 s command timeout at most (plus scheduling), never a hang.
      assert.ok(took < 4000, `a failed call took ${took} ms`);
      failures.push((e as Error).message);
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  throw new Error(`still failing after ${timeoutMs} ms: ${failures.slice(-3).join(' | ')}`);
}

describe('the Redis store through Sentinel', { timeout: 180_000 }, () => {
  it('the master SIGKILLed: calls fail fast, then go on with the promoted replica, scripts included', async () => {
    const { s, store } = await setupAndStore();
    const [m, r] = s.nodes;
    assert.equal((await store.tryLock(key('net'), { pull: 1, user: 'alice' })).acquired, true);
    await s.waitReplicated(m, r);
    const c = s.client(r);
    assert.ok(await c.hlen('atlantis:locks'), 'the lock is on the replica');
    c.disconnect();

    await m.kill();
    const during = await untilItWorks(() => store.tryLock(key('dns'), { pull: 2, user: 'bob' }), 60_000);
    assert.ok(during.failures.length > 0, 'refused while no master was named');
    assert.equal(during.value.acquired, true);
    assert.equal((await s.masterNode()).port, r.port, 'the sentinels promoted the replica');
    assert.equal((await store.getLock(key('net')))?.pull, 1, 'the replicated lock survived');
    const refused = await store.tryLock(key('net'), { pull: 3, user: 'carol' });
    assert.equal(refused.acquired, false, 'the lock script ran on the new master and saw the lock');

    // Scripts flushed on the master (a restart without persistence does it too): NOSCRIPT, loaded again.
    const admin = s.client(r);
    assert.equal(await admin.script('FLUSH'), 'OK');
    admin.disconnect();
    assert.equal((await store.unlock(key('dns')))?.pull, 2);
    assert.equal((await store.tryLock(key('dns'), { pull: 4, user: 'dave' })).acquired, true);

    // The old master comes back as a replica of the new one; the store is not disturbed. No
    // second failover from here: on a loaded machine a node or a sentinel stalled for the 1 s
    // of down-after-milliseconds looks down, and the sentinels would promote the old master.
    await s.setDownAfter(30_000);
    await m.restart();
    await s.waitReplicated(r, m, 30_000);
    assert.equal((await s.replication(m)).role, 'slave');
    assert.equal((await store.getLock(key('dns')))?.pull, 4);
    assert.equal(await store.isHealthy(), true);
  });

  it('a silent sentinel is passed over within the command timeout; no sentinel at all fails the connection at the deadline', async () => {
    const s = await startSentinelSetup({ password: PW, sentinelPassword: SPW });
    cleanups.push(() => s.cleanup());
    // The first sentinel asked takes the connection and never answers.
    s.sentinels[0]!.pause();
    cleanups.push(async () => s.sentinels[0]!.resume());
    const t = Date.now();
    const store = await storeOn(s);
    assert.ok(Date.now() - t < REDIS_CONNECT_DEADLINE_MS, `connected in ${Date.now() - t} ms`);
    assert.equal((await store.tryLock(key('net'), { pull: 1, user: 'alice' })).acquired, true);
    s.sentinels[0]!.resume();

    // Sentinels nobody listens on (a port just freed): the client gives up at the deadline, says why, and stops.
    const dead = new Redis(
      redisClientOptions({
        host: '127.0.0.1',
        port: 1,
        sentinel: { addresses: [{ host: '127.0.0.1', port: await freedPort() }], masterName: 'm' },
      }),
    );
    const started = Date.now();
    await assert.rejects(connectRedis(dead, 1500), /^Error: no connection within 1500 ms: All sentinels are unreachable\./);
    assert.ok(Date.now() - started < 4000, `gave up after ${Date.now() - started} ms`);
    // It stops asking at its next turn (bounded by the connect and sentinel command timeouts).
    for (const end = Date.now() + 6000; dead.status !== 'end' && Date.now() < end; ) await new Promise((r) => setTimeout(r, 50));
    assert.equal(dead.status, 'end');
  });

  it('a failover detected while a reconnect asks the sentinels for the master: ioredis ends the client, which connects again', async () => {
    const s = await startSentinelSetup({ password: PW, sentinelPassword: SPW });
    cleanups.push(() => s.cleanup());
    const opts = {
      host: '127.0.0.1',
      port: 1,
      password: PW,
      sentinel: {
        addresses: s.addresses.split(',').map((a) => ({ host: a.split(':')[0]!, port: Number(a.split(':')[1]) })),
        masterName: s.masterName,
        password: SPW,
      },
    };
    const events: string[] = [];
    const watch = (c: Redis) => {
      c.on('error', () => undefined);
      for (const e of ['ready', 'end']) c.on(e, () => events.push(e));
    };
    // What the failover detector does on +switch-master (connector.disconnect()), done at the
    // moment a reconnect has begun asking the sentinels: 'connecting' is emitted on the next
    // tick, while that question is still on the network.
    const failOverDuringReconnect = (c: Redis): void => {
      const connector = (c as unknown as { connector: { disconnect(): void } }).connector;
      c.once('connecting', () => connector.disconnect());
      (c as unknown as { stream: { destroy(): void } }).stream.destroy();
    };
    const nextEvent = async (name: string, after: number): Promise<void> => {
      for (const end = Date.now() + 15_000; Date.now() < end; await new Promise((r) => setTimeout(r, 20)))
        if (events.slice(after).includes(name)) return;
      throw new Error(`no ${name} after event ${after}: ${events.join(', ')}`);
    };

    // ioredis alone: the client is ended for good (the bug the server works around).
    const plain = new Redis(redisClientOptions(opts));
    cleanups.push(async () => plain.disconnect());
    watch(plain);
    await connectRedis(plain);
    let from = events.length;
    failOverDuringReconnect(plain);
    await nextEvent('end', from);
    await new Promise((r) => setTimeout(r, 3000));
    assert.equal(plain.status, 'end', 'ioredis left the client ended');
    plain.removeAllListeners('ready');

    // The server's client connects again, and goes on with its commands.
    const client = createRedisClient(opts);
    cleanups.push(() => closeRedis(client));
    watch(client);
    await connectRedis(client);
    await client.set('k', 'before');
    from = events.length;
    failOverDuringReconnect(client);
    await nextEvent('end', from);
    await nextEvent('ready', events.lastIndexOf('end') + 1);
    assert.equal(await client.get('k'), 'before');
    await client.set('k', 'after');
    assert.equal(await client.get('k'), 'after');
    // An end the server asks for stays an end.
    await closeRedis(client);
    await new Promise((r) => setTimeout(r, 2000));
    assert.equal(client.status, 'end');
  });

  it('the master silent (SIGSTOP): the failover detector ends the connection, the client moves to the new master', async () => {
    const { s, store } = await setupAndStore();
    const [m, r] = s.nodes;
    assert.equal((await store.tryLock(key('net'), { pull: 1, user: 'alice' })).acquired, true);
    await s.waitReplicated(m, r);
    m.pause();
    cleanups.push(async () => m.resume());
    const moved = await untilItWorks(() => store.tryLock(key('dns'), { pull: 2, user: 'bob' }), 60_000);
    assert.ok(moved.failures.length > 0, 'calls timed out while the master was silent');
    assert.ok(
      moved.failures.every((f) => /timed out|Connection is closed|not writeable|Stream isn't writeable/i.test(f)),
      moved.failures.join('|'),
    );
    assert.equal((await s.masterNode()).port, r.port);
    assert.equal((await store.getLock(key('net')))?.pull, 1);
    m.resume();
    await s.waitReplicated(r, m, 30_000);
  });

  it('the master demoted while connected (READONLY): one write fails, then the client reconnects to the named master', async () => {
    const { s, store } = await setupAndStore();
    const [m, r] = s.nodes;
    assert.equal((await store.tryLock(key('net'), { pull: 1, user: 'alice' })).acquired, true);
    await s.waitReplicated(m, r);
    // By hand, as an operator would: the replica becomes the master, the sentinels are told,
    // then the old master becomes its replica. Redis keeps its clients' connections open.
    const ra = s.client(r);
    assert.equal(await ra.call('REPLICAOF', 'NO', 'ONE'), 'OK');
    ra.disconnect();
    await s.remonitor(r);
    const ma = s.client(m);
    assert.equal(await ma.call('REPLICAOF', r.host, String(r.port)), 'OK');
    ma.disconnect();

    await assert.rejects(store.tryLock(key('dns'), { pull: 2, user: 'bob' }), /READONLY/);
    const back = await untilItWorks(() => store.tryLock(key('dns'), { pull: 2, user: 'bob' }), 20_000);
    assert.equal(back.value.acquired, true);
    const check = s.client(r);
    assert.equal(await check.hexists('atlantis:locks', JSON.stringify(['acme/infra', 'dns', 'default'])), 1, 'written on the new master');
    check.disconnect();
  });

  it('what asynchronous replication loses: a lock acknowledged by the old master that never reached the replica', async () => {
    // The replica replicates through a proxy, so the test can make the link a black hole.
    const m = await startRedisServer({ password: PW, args: ['--masterauth', PW, '--repl-diskless-sync-delay', '0'] });
    cleanups.push(() => m.cleanup());
    const link = new TcpProxy({ host: '127.0.0.1', target: { host: m.host, port: m.port } });
    await link.listen();
    cleanups.push(() => link.close());
    const s = await startSentinelSetup({
      password: PW,
      sentinelPassword: SPW,
      master: m,
      replicaOf: { host: '127.0.0.1', port: link.port },
    });
    cleanups.push(() => s.cleanup());
    const store = await storeOn(s);
    const r = s.nodes[1];
    assert.equal((await store.tryLock(key('net'), { pull: 1, user: 'alice' })).acquired, true);
    await s.waitReplicated(m, r);

    link.silence();
    assert.equal((await store.tryLock(key('dns'), { pull: 2, user: 'bob' })).acquired, true, 'acknowledged by the master');
    const [mo, ro] = [(await s.replication(m)).master_repl_offset, (await s.replication(r)).master_repl_offset];
    assert.ok(Number(mo) > Number(ro), `not replicated: master at ${mo}, replica at ${ro}`);
    await m.kill();
    await untilItWorks(() => store.getLock(key('net')), 60_000);
    await s.waitForMaster(r);
    assert.equal((await store.getLock(key('net')))?.pull, 1, 'the replicated lock is there');
    assert.equal(await store.getLock(key('dns')), undefined, 'the unreplicated lock is lost');
    assert.equal((await store.tryLock(key('dns'), { pull: 3, user: 'carol' })).acquired, true, 'another PR takes the project');
  });
});
