// The project lease (src/server/locks/project-lease.ts, redis-lease.ts): one table run against both kinds.
// RedisProjectLeases as two replicas (two instances, two connections) on one real
// redis-server; LocalProjectLeases as the one instance an embedded-store server has, the two
// "replicas" being two jobs of it. Real time: the TTLs are short (300 ms; 1.5 s where renewals
// must keep up), nothing is mocked.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { sleep } from '../src/async.js';
import type { LogFields, Logger } from '../src/log.js';
import {
  type Lease,
  type LeaseAcquireResult,
  type LeaseTiming,
  LocalProjectLeases,
  type ProjectLeases,
} from '../src/server/locks/project-lease.js';
import { RedisProjectLeases } from '../src/server/locks/redis-lease.js';
import type { LockKey } from '../src/server/locks/state-store.js';
import { type RedisServer, startRedisServer } from './support/redis-server.js';

let srv: RedisServer;
before(async () => {
  srv = await startRedisServer();
});
after(async () => {
  await srv?.cleanup();
});

/** Records what is logged, as `level: msg`. */
function recordingLogger(lines: string[]): Logger {
  const at =
    (level: string) =>
    (msg: string, _f?: LogFields): void => {
      lines.push(`${level}: ${msg}`);
    };
  const l: Logger = { error: at('error'), warn: at('warn'), info: at('info'), debug: at('debug'), child: () => l };
  return l;
}

interface Pair {
  /** Replica A's leases and replica B's (the same instance for the local kind). */
  a: ProjectLeases;
  b: ProjectLeases;
  logged: string[];
}

type Open = (timing: LeaseTiming) => Pair;

const opened: ProjectLeases[] = [];
after(async () => {
  for (const l of opened) await l.close();
});

const kinds: Record<string, Open> = {
  RedisProjectLeases: (timing) => {
    const logged: string[] = [];
    // A key prefix of their own per pair: the tables never see each other's leases.
    const keyPrefix = `lease-${randomBytes(3).toString('hex')}:`;
    const open = () => new RedisProjectLeases({ host: srv.host, port: srv.port, keyPrefix, ...timing, logger: recordingLogger(logged) });
    const a = open();
    const b = open();
    opened.push(a, b);
    return { a, b, logged };
  },
  LocalProjectLeases: (timing) => {
    const logged: string[] = [];
    const a = new LocalProjectLeases({ ...timing, logger: recordingLogger(logged) });
    opened.push(a);
    return { a, b: a, logged };
  },
};

const K: LockKey = { repo: 'acme/infra', dir: 'envs/prod', workspace: 'default' };
const A = { replicaId: 'replica-a', jobId: 'job-a' };
const B = { replicaId: 'replica-b', jobId: 'job-b' };

function held(r: LeaseAcquireResult): Lease {
  assert.ok(r.held, `acquired (held by ${r.held ? '' : JSON.stringify(r.holder)})`);
  return r.lease;
}

for (const [name, open] of Object.entries(kinds)) {
  describe(name, () => {
    it('is exclusive per project: the other gets the holder; another dir or workspace is another project', async () => {
      const { a, b } = open({});
      const la = held(await a.acquire(K, A));
      assert.deepEqual(await b.acquire(K, B), { held: false, holder: A });
      assert.deepEqual(await a.acquire(K, { ...A, jobId: 'job-a2' }), { held: false, holder: A }, 'not re-entrant, even on A');
      const other = held(await b.acquire({ ...K, dir: 'envs/dev' }, B));
      const ws = held(await b.acquire({ ...K, workspace: 'staging' }, B));
      assert.ok(await la.stillHeld());
      await Promise.all([la.release(), other.release(), ws.release()]);
    });

    it('the same job asking again gets the lease it holds, as when its first answer was lost', async () => {
      const { a, b } = open({});
      const la = held(await a.acquire(K, A));
      const again = held(await a.acquire(K, A));
      assert.equal(again.token, la.token, 'the same lease');
      assert.deepEqual(await b.acquire(K, B), { held: false, holder: A });
      await again.release();
      assert.equal(await la.stillHeld(), false, 'one lease, released through either');
      assert.equal(held(await b.acquire(K, B)).token > la.token, true);
    });

    it('hands out strictly increasing tokens; release frees the project for the other', async () => {
      const { a, b } = open({});
      const tokens: number[] = [];
      for (let i = 0; i < 6; i++) {
        const l = held(await (i % 2 === 0 ? a : b).acquire(K, i % 2 === 0 ? A : B));
        tokens.push(l.token);
        await l.release();
        assert.equal(await l.stillHeld(), false, 'released is not held');
      }
      for (let i = 1; i < tokens.length; i++) assert.ok(tokens[i]! > tokens[i - 1]!, `tokens increase: ${tokens.join(', ')}`);
    });

    // A TTL well above the sleeps between renewals: a loaded machine may hold this process's
    // timers back by a few hundred ms, which must not look like a missed renewal.
    it('renew keeps it past its TTL, and so does the automatic renewal', async () => {
      const manual = open({ ttlMs: 1500, renewEveryMs: 0 });
      const lm = held(await manual.a.acquire(K, A));
      for (let i = 0; i < 5; i++) {
        await sleep(500);
        assert.equal(await lm.renew(), true);
      }
      assert.equal((await manual.b.acquire(K, B)).held, false, 'still held after 2.5 s of a 1.5 s TTL');
      await lm.release();

      const auto = open({ ttlMs: 1500 });
      const la = held(await auto.a.acquire(K, A));
      await sleep(3000);
      assert.equal(await la.stillHeld(), true);
      assert.deepEqual(await auto.b.acquire(K, B), { held: false, holder: A });
      await la.release();
      assert.equal(held(await auto.b.acquire(K, B)).token > la.token, true, 'free after release');
      assert.deepEqual(auto.logged, []);
    });

    it('an expired lease goes to the other; the first then cannot renew, pass the check or release the new one', async () => {
      const { a, b, logged } = open({ ttlMs: 300, renewEveryMs: 0 });
      const la = held(await a.acquire(K, A));
      await sleep(450);
      const lb = held(await b.acquire(K, B));
      assert.ok(lb.token > la.token);
      assert.equal(await la.stillHeld(), false, 'the fencing check fails');
      assert.equal(await la.renew(), false);
      await la.release();
      assert.equal(await lb.stillHeld(), true, "B's lease is untouched");
      assert.deepEqual(await a.acquire(K, A), { held: false, holder: B });
      assert.equal(await lb.renew(), true);
      assert.deepEqual(
        logged.filter((l) => l.startsWith('error')),
        ['error: Lost the project lease: it expired, another replica may have run terraform in the project'],
        'the loss is logged once',
      );
      await lb.release();
    });

    it('an expired lease that nobody took is still lost: renew does not bring it back', async () => {
      const { a } = open({ ttlMs: 300, renewEveryMs: 0 });
      const la = held(await a.acquire(K, A));
      await sleep(450);
      assert.equal(await la.renew(), false);
      assert.equal(await la.stillHeld(), false);
      const again = held(await a.acquire(K, A));
      assert.ok(again.token > la.token);
      await again.release();
    });

    it('concurrent acquires: exactly one winner per round', async () => {
      const { a, b } = open({});
      const tokens: number[] = [];
      for (let round = 0; round < 20; round++) {
        const holders = [0, 1, 2, 3, 4, 5].map((i) => ({ replicaId: i % 2 === 0 ? 'replica-a' : 'replica-b', jobId: `r${round}-${i}` }));
        const results = await Promise.all(holders.map((h, i) => (i % 2 === 0 ? a : b).acquire(K, h)));
        const winners = results.filter((r) => r.held);
        assert.equal(winners.length, 1, `round ${round}: one winner`);
        const w = (winners[0] as { lease: Lease }).lease;
        const winner = holders[results.indexOf(winners[0]!)];
        for (const r of results) if (!r.held) assert.deepEqual(r.holder, winner, 'the losers are told the winner');
        tokens.push(w.token);
        await w.release();
      }
      assert.equal(new Set(tokens).size, tokens.length);
    });
  });
}

describe('RedisProjectLeases while Redis goes away', () => {
  it('a lease outlives an outage shorter than its TTL less a renewal period and the reconnect', async () => {
    const own = await startRedisServer();
    const logged: string[] = [];
    const leases = new RedisProjectLeases({
      host: own.host,
      port: own.port,
      ttlMs: 8000,
      renewEveryMs: 1000,
      logger: recordingLogger(logged),
    });
    const other = new RedisProjectLeases({ host: own.host, port: own.port, ttlMs: 8000 });
    try {
      const t0 = Date.now();
      const la = held(await leases.acquire(K, A));
      await own.stop();
      await sleep(3000);
      await own.restart();
      // Past the expiry of the last renewal before the outage: only a renewal after it keeps the lease.
      await sleep(t0 + 9500 - Date.now());
      assert.equal(await la.stillHeld(), true);
      assert.deepEqual(await other.acquire(K, B), { held: false, holder: A });
      assert.deepEqual(
        logged.filter((l) => l.startsWith('error')),
        [],
      );
      assert.ok(logged.includes('warn: Could not renew the project lease'), 'the failed renewals are logged');
      await la.release();
    } finally {
      await leases.close();
      await other.close();
      await own.cleanup();
    }
  });

  it('the fencing check and the release wait for a Redis back within the TTL; an acquire waits too', async () => {
    const own = await startRedisServer();
    const logged: string[] = [];
    const leases = new RedisProjectLeases({ host: own.host, port: own.port, ttlMs: 20_000, logger: recordingLogger(logged) });
    const other = new RedisProjectLeases({ host: own.host, port: own.port, ttlMs: 20_000 });
    try {
      const la = held(await leases.acquire(K, A));
      await own.stop();
      // Asked with Redis down: answered once it is back, and still held (the outage was shorter than the TTL).
      const check = la.stillHeld();
      const acquire = leases.acquire({ ...K, dir: 'other' }, B);
      await own.restart();
      assert.equal(await check, true, 'still held after the outage');
      const lo = held(await acquire);
      await own.stop();
      const released = la.release();
      await own.restart();
      await released;
      assert.equal(held(await other.acquire(K, B)).token > lo.token, true, 'released: free for another job at once');
      assert.deepEqual(
        logged.filter((l) => l.startsWith('error')),
        [],
        'nothing lost',
      );
      assert.ok(logged.includes('warn: State store unreachable: the call waits for it'), logged.join('\n'));
    } finally {
      await leases.close();
      await other.close();
      await own.cleanup();
    }
  });
});
