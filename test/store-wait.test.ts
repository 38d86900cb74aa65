// Store calls of accepted commands wait out a short Redis outage (src/server/locks/store-wait.ts),
// and the journal entry of a command answered 503 goes once Redis answers again
// (src/server/workflow/intake/refused-entries.ts). Against a real redis-server that is stopped,
// restarted and paused; the errors classified are the ones ioredis really gives.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import type { LogFields, Logger } from '../src/log.js';
import { RedisStore } from '../src/server/locks/redis-store.js';
import type { LockKey } from '../src/server/locks/state-store.js';
import { retryPauseMs, storeUnreachable, waitingStore } from '../src/server/locks/store-wait.js';
import { RefusedEntries } from '../src/server/workflow/intake/refused-entries.js';
import { type RedisServer, startRedisServer, testSharedStateKey } from './support/redis-server.js';
import { waitFor } from './support/server.js';
import { stateStoreContract } from './support/state-store-contract.js';

const tmpRoot = fs.mkdtempSync(path.join(os.tmpdir(), 'store-wait-'));
const servers: RedisServer[] = [];
const stores: RedisStore[] = [];
after(async () => {
  for (const s of stores) await s.close();
  for (const s of servers) await s.cleanup();
  fs.rmSync(tmpRoot, { recursive: true, force: true });
});

const K: LockKey = { repo: 'acme/infra', dir: 'envs/prod', workspace: 'default' };

function recordingLogger(lines: string[]): Logger {
  const at =
    (level: string) =>
    (msg: string, f?: LogFields): void => {
      lines.push(`${level}: ${msg}${f?.call !== undefined ? ` (${String(f.call)})` : ''}`);
    };
  const l: Logger = { error: at('error'), warn: at('warn'), info: at('info'), debug: at('debug'), child: () => l };
  return l;
}

async function fresh(): Promise<{ srv: RedisServer; store: RedisStore }> {
  const srv = await startRedisServer();
  servers.push(srv);
  const store = await RedisStore.connect({
    host: srv.host,
    port: srv.port,
    dataDir: path.join(tmpRoot, `d${servers.length}`),
    replicaId: 'r0',
    sharedStateKey: testSharedStateKey(),
  });
  stores.push(store);
  return { srv, store };
}

const errorOf = async (p: Promise<unknown>): Promise<Error> => {
  try {
    await p;
  } catch (e) {
    return e as Error;
  }
  throw new Error('the call succeeded');
};

describe('storeUnreachable', () => {
  it('is true for the errors of a Redis that cannot be reached, false for its answers', async () => {
    const { srv, store } = await fresh();
    // Real errors: an answer of Redis (a key of the wrong type), no connection, a silent Redis.
    const raw = new (await import('ioredis')).Redis({ host: srv.host, port: srv.port, lazyConnect: true });
    await raw.connect();
    await raw.set('atlantis:locks', 'not a hash');
    const wrongType = await errorOf(store.getLock(K));
    await raw.del('atlantis:locks');
    raw.disconnect();
    srv.pause();
    const timedOut = await errorOf(store.getLock(K));
    srv.resume();
    await srv.stop();
    const offline = await errorOf(store.getLock(K));
    await srv.restart();

    const table: Array<[string, unknown, boolean]> = [
      ['WRONGTYPE from Redis', wrongType, false],
      ['a call while disconnected', offline, true],
      ['a call to a silent Redis', timedOut, true],
      ['the connection closed with the call in flight', new Error('Connection is closed.'), true],
      [
        'a call queued when the connection dropped',
        Object.assign(new Error('Reached the max retries'), { name: 'MaxRetriesPerRequestError' }),
        true,
      ],
      ['Redis still loading its AOF', new Error('LOADING Redis is loading the dataset in memory'), true],
      ['a write to a master demoted by a failover', new Error("READONLY You can't write against a read only replica."), true],
      ['a master without an in-sync replica', new Error('NOREPLICAS Not enough good replicas to write.'), true],
      ['a replica without its master', new Error('MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to no.'), true],
      ['a message that only mentions it', new Error('ERR something about READONLY'), false],
      ['a refused connection', Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:6379'), { code: 'ECONNREFUSED' }), true],
      ['a reset connection', Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' }), true],
      ['the store giving up on a race', new Error('pull status of a#1: too many concurrent writers, gave up'), false],
      ['a plan whose bytes do not match', new Error('the plan file kept in Redis for a#1 . does not match its recorded sha256'), false],
      ['not an Error', 'Connection is closed.', false],
    ];
    for (const [what, e, want] of table) assert.equal(storeUnreachable(e), want, `${what}: ${(e as Error).message ?? e}`);
  });

  it('retries 100 ms apart, doubling to at most 1 s', () => {
    assert.deepEqual([1, 2, 3, 4, 5, 6, 10].map(retryPauseMs), [100, 200, 400, 800, 1000, 1000, 1000]);
  });
});

// The wrapper changes nothing while Redis answers: the whole store contract, through it.
let contractN = 0;
let contractServer: RedisServer | undefined;
stateStoreContract('waitingStore(RedisStore)', async () => {
  if (!contractServer) {
    contractServer = await startRedisServer();
    servers.push(contractServer);
  }
  const srv = contractServer;
  const keyPrefix = `contract-${contractN++}:`;
  const dataDir = path.join(tmpRoot, keyPrefix.slice(0, -1));
  const own: RedisStore[] = [];
  const open = async (replicaId = 'r0', dir = dataDir) => {
    const s = await RedisStore.connect({
      host: srv.host,
      port: srv.port,
      dataDir: dir,
      replicaId,
      keyPrefix,
      sharedStateKey: testSharedStateKey(),
    });
    own.push(s);
    return waitingStore(s);
  };
  return {
    store: await open(),
    dataDir,
    reopen: () => open(),
    otherServer: () => open('r1', `${dataDir}-other`),
    cleanup: async () => {
      for (const s of own) await s.close();
    },
  };
});

describe('waitingStore', () => {
  it('a call made while Redis is stopped goes through once it is back; the log says so once each way', async () => {
    const { srv, store } = await fresh();
    const logged: string[] = [];
    const ups: boolean[] = [];
    const w = waitingStore(store, { logger: recordingLogger(logged), onReachable: (up) => ups.push(up) });
    await w.tryLock(K, { pull: 1, user: 'u' });
    await srv.stop();
    const call = w.tryLock({ ...K, dir: 'during' }, { pull: 2, user: 'u' });
    // Nothing listens until the restart: the call can only go through after it.
    await srv.restart();
    assert.equal((await call).acquired, true);
    assert.equal((await store.getLock({ ...K, dir: 'during' }))?.pull, 2, 'written once Redis was back');
    assert.deepEqual(logged, [
      'warn: State store unreachable: the call waits for it (tryLock)',
      'info: State store reachable again: the waiting call went through (tryLock)',
    ]);
    assert.equal(ups.at(0), false);
    assert.equal(ups.at(-1), true);
  });

  it('gives up after maxWaitMs with the last error; an answer of Redis is thrown at once', async () => {
    const { srv, store } = await fresh();
    const logged: string[] = [];
    const w = waitingStore(store, { logger: recordingLogger(logged), maxWaitMs: 800 });
    await srv.stop();
    const t0 = Date.now();
    await assert.rejects(w.getLock(K), /enableOfflineQueue/);
    assert.ok(Date.now() - t0 < 2000, `gave up after ${Date.now() - t0} ms`);
    assert.deepEqual(logged, [
      'warn: State store unreachable: the call waits for it (getLock)',
      'error: State store still unreachable: the call gives up (getLock)',
    ]);
    await srv.restart();
    const raw = new (await import('ioredis')).Redis({ host: srv.host, port: srv.port });
    await raw.set('atlantis:locks', 'not a hash');
    raw.disconnect();
    await waitFor('the store to reconnect', () => store.isHealthy(), 10_000);
    const t1 = Date.now();
    await assert.rejects(waitingStore(store).getLock(K), /WRONGTYPE/);
    assert.ok(Date.now() - t1 < 500, 'not retried');
  });

  it("the intake's calls and those a repeat would change answer at once", async () => {
    const { srv, store } = await fresh();
    const w = waitingStore(store);
    await srv.stop();
    for (const call of [
      () => w.acceptCommand({ id: 'c', repo: 'acme/infra', pull: 1, payload: {} }),
      () => w.enqueue('acme/infra', 1, {}),
      () => w.takeAll(),
    ]) {
      const t0 = Date.now();
      await assert.rejects(call(), /enableOfflineQueue/);
      assert.ok(Date.now() - t0 < 500);
    }
    assert.equal(await w.isHealthy(), false);
    assert.equal(w.kind, 'redis');
    assert.match(w.planPath(K, 1), /plans/);
    await srv.restart();
  });
});

describe('RefusedEntries', () => {
  it('removes the entry of a write that timed out (answered 503) and reached Redis when it resumed', async () => {
    const { srv, store } = await fresh();
    const logged: string[] = [];
    const refused = new RefusedEntries(store, recordingLogger(logged));
    srv.pause();
    // The write waits in the socket; the caller sees a timeout (the webhook got its 503).
    await assert.rejects(store.acceptCommand({ id: 'lost-reply', repo: 'acme/infra', pull: 1, payload: {} }), /timed out/);
    const done = refused.add('lost-reply');
    assert.equal(refused.pending, 1);
    srv.resume();
    await done;
    assert.equal(refused.pending, 0);
    assert.deepEqual(await store.acceptedCommands(), [], 'the entry the paused Redis took in the end is gone');
    assert.deepEqual(logged, []);
  });

  it('entries never written (Redis stopped) are a no-op for one loop, which leaves the other entries alone', async () => {
    const { srv, store } = await fresh();
    const refused = new RefusedEntries(store, recordingLogger([]));
    await store.acceptCommand({ id: 'kept', repo: 'acme/infra', pull: 2, payload: {} });
    await srv.stop();
    const a = refused.add('never-written-1');
    const b = refused.add('never-written-2');
    assert.equal(a, b, 'one loop');
    await srv.restart();
    await a;
    assert.deepEqual(
      (await store.acceptedCommands()).map((c) => c.id),
      ['kept'],
    );
  });
});
