// Leader election on a coordination.k8s.io/v1 Lease: the pure decisions as tables, then real
// electors against the local API server (short durations): one leader out of two, hand-over
// on release within about one retry period, take-over after a crash only once the lease
// expired, 409 races, and a leader that cannot renew giving up at its renew deadline.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import {
  decideLease,
  leaseDurationSeconds,
  LeaderElector,
  type Lease,
  type LeaseObservation,
  type LeaderElectionOptions,
  leaseValid,
  microTime,
  nextLeaseSpec,
  observeLease,
  releaseSpec,
  renewDeadlinePassed,
  validateDurations,
} from '../src/controller/leader-election.js';
import { apiPath, kubeRequest, kubeRequestOk } from '../src/k8s/client.js';
import { nullLogger } from '../src/log.js';
import { deleteNamespace, freshNamespace, getCluster, waitFor, type TestCluster } from './support/k8s.js';

const ME = 'me_1';
const OTHER = 'other_2';
const L = 15_000;

function obs(holder: string | undefined, observedAtMs: number, leaseSecs: number | undefined = 15): LeaseObservation {
  return { spec: { holderIdentity: holder, leaseDurationSeconds: leaseSecs, leaseTransitions: 3 }, observedAtMs };
}

describe('decideLease (pure)', () => {
  const rows: Array<[string, LeaseObservation | undefined, number, ReturnType<typeof decideLease>]> = [
    ['no Lease object', undefined, 0, 'create'],
    ['released (empty holder)', obs('', 1_000), 1_000, 'acquire'],
    ['released (holder missing)', obs(undefined, 1_000), 1_000, 'acquire'],
    ['we hold it, fresh', obs(ME, 1_000), 2_000, 'renew'],
    ['we hold it, stale (still ours to renew)', obs(ME, 1_000), 100_000, 'renew'],
    ['other holds it, just observed', obs(OTHER, 1_000), 1_000, 'wait'],
    ['other holds it, 1 ms before expiry', obs(OTHER, 1_000), 15_999, 'wait'],
    ['other holds it, exactly at expiry', obs(OTHER, 1_000), 16_000, 'acquire'],
    ['other holds it, long expired', obs(OTHER, 1_000), 60_000, 'acquire'],
    ['record duration wins over ours (5 s, expired)', obs(OTHER, 1_000, 5), 6_000, 'acquire'],
    ['record duration wins over ours (60 s, valid)', obs(OTHER, 1_000, 60), 30_000, 'wait'],
    ['record without duration uses ours (valid)', obs(OTHER, 1_000, undefined), 15_999, 'wait'],
    ['record without duration uses ours (expired)', obs(OTHER, 1_000, undefined), 16_000, 'acquire'],
  ];
  for (const [name, o, now, want] of rows) {
    it(name, () => assert.equal(decideLease(o, ME, now, L), want));
  }

  it('judges expiry by when the record last CHANGED on our clock, not by its timestamps', () => {
    // The holder's renewTime is an hour in the past (skewed clock) but we only just saw it change.
    const spec = { holderIdentity: OTHER, leaseDurationSeconds: 15, renewTime: '2000-01-01T00:00:00.000000Z' };
    let o = observeLease(undefined, spec, 50_000);
    assert.equal(decideLease(o, ME, 50_001, L), 'wait');
    // The same record read again later does not move the observation time...
    o = observeLease(o, { ...spec }, 60_000);
    assert.equal(o.observedAtMs, 50_000);
    assert.equal(decideLease(o, ME, 65_000, L), 'acquire');
    // ...a renewal (changed renewTime) does.
    o = observeLease(o, { ...spec, renewTime: '2000-01-01T00:00:02.000000Z' }, 64_000);
    assert.equal(o.observedAtMs, 64_000);
    assert.equal(decideLease(o, ME, 65_000, L), 'wait');
    assert.equal(leaseValid(o, 78_999, L), true);
    assert.equal(leaseValid(o, 79_000, L), false);
  });
});

describe('lease records (pure)', () => {
  const now = new Date('2026-11-29T19:00:00.123Z');
  it('formats MicroTime with six fractional digits', () => {
    assert.equal(microTime(now), '2026-11-29T19:00:00.123000Z');
  });
  it('rounds lease durations up to whole seconds, at least 1', () => {
    assert.deepEqual([500, 1000, 1500, 15_000].map(leaseDurationSeconds), [1, 1, 2, 15]);
  });
  it('create, acquire, renew and release write the fields client-go writes', () => {
    const old = { holderIdentity: OTHER, acquireTime: 'then', renewTime: 'then', leaseTransitions: 4, leaseDurationSeconds: 15 };
    const t = microTime(now);
    assert.deepEqual(nextLeaseSpec('create', undefined, ME, now, 15_000), {
      holderIdentity: ME,
      leaseDurationSeconds: 15,
      renewTime: t,
      acquireTime: t,
      leaseTransitions: 0,
    });
    assert.deepEqual(nextLeaseSpec('acquire', old, ME, now, 15_000), {
      holderIdentity: ME,
      leaseDurationSeconds: 15,
      renewTime: t,
      acquireTime: t,
      leaseTransitions: 5,
    });
    assert.deepEqual(nextLeaseSpec('renew', { ...old, holderIdentity: ME }, ME, now, 15_000), {
      holderIdentity: ME,
      leaseDurationSeconds: 15,
      renewTime: t,
      acquireTime: 'then',
      leaseTransitions: 4,
    });
    assert.deepEqual(releaseSpec(old, now), {
      holderIdentity: '',
      leaseDurationSeconds: 1,
      renewTime: t,
      acquireTime: t,
      leaseTransitions: 4,
    });
  });
  it('renew deadline', () => {
    assert.equal(renewDeadlinePassed(1_000, 10_999, 10_000), false);
    assert.equal(renewDeadlinePassed(1_000, 11_000, 10_000), true);
  });
  it('rejects durations that would let two leaders overlap', () => {
    validateDurations(15_000, 10_000, 2_000);
    assert.throws(() => validateDurations(10_000, 10_000, 2_000), /lease duration must be greater than the renew deadline/);
    assert.throws(() => validateDurations(15_000, 2_000, 2_000), /renew deadline must be greater than the retry period/);
    assert.throws(() => validateDurations(15_000, 10_000, 0), /retry period/);
    assert.throws(() => validateDurations(900, 500, 100), /at least 1s/);
  });
});

// ---------------------------------------------------------------------------------------
// Real electors against the local API server.

const LEASE_MS = 3_000;
const RENEW_MS = 2_000;
const RETRY_MS = 200;
/** extra time allowed for a loaded machine (API latency, late timers) */
const SLACK_MS = 800;

let cluster: TestCluster;
let ns: string;
const electors: LeaderElector[] = [];
let leaseCounter = 0;

before(async () => {
  cluster = await getCluster();
  ns = await freshNamespace('leader-election');
});
after(async () => {
  await Promise.all(electors.map((e) => e.stop({ release: false })));
  if (ns) await deleteNamespace(ns);
});

interface Probe {
  elector: LeaderElector;
  started: number;
  stopped: number;
  newLeaders: string[];
}

function elector(lease: string, identity: string, extra: Partial<LeaderElectionOptions> = {}): Probe {
  const p: Probe = { started: 0, stopped: 0, newLeaders: [] } as unknown as Probe;
  p.elector = new LeaderElector({
    kc: cluster.kc,
    namespace: ns,
    name: lease,
    identity,
    leaseDurationMs: LEASE_MS,
    renewDeadlineMs: RENEW_MS,
    retryPeriodMs: RETRY_MS,
    logger: nullLogger(),
    onStartedLeading: () => {
      p.started++;
    },
    onStoppedLeading: () => {
      p.stopped++;
    },
    onNewLeader: (id) => {
      p.newLeaders.push(id);
    },
    ...extra,
  });
  electors.push(p.elector);
  return p;
}

async function getLease(name: string): Promise<Lease> {
  return kubeRequestOk<Lease>(cluster.kc, 'GET', apiPath('coordination.k8s.io/v1', 'leases', ns, name));
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const leaseName = () => `le-${++leaseCounter}`;

describe('LeaderElector on the real API server', () => {
  it('two electors on one Lease: exactly one leads, and the Lease says who', async () => {
    const name = leaseName();
    const a = elector(name, 'a');
    const b = elector(name, 'b');
    a.elector.start();
    b.elector.start();
    await waitFor('a leader', () => a.elector.isLeader() || b.elector.isLeader(), { timeoutMs: 10_000, intervalMs: 20 });
    // Watch for 2 lease durations: never two leaders, and the same one throughout.
    const first = a.elector.isLeader() ? a : b;
    const second = first === a ? b : a;
    const end = Date.now() + 2 * LEASE_MS;
    while (Date.now() < end) {
      assert.ok(!(a.elector.isLeader() && b.elector.isLeader()), 'two leaders at once');
      assert.ok(first.elector.isLeader(), 'the leader lost the lease while renewing normally');
      await sleep(25);
    }
    assert.equal(first.started, 1);
    assert.equal(second.started, 0);
    assert.equal(first.stopped + second.stopped, 0);
    const lease = await getLease(name);
    assert.equal(lease.spec?.holderIdentity, first.elector.identity);
    assert.equal(lease.spec?.leaseDurationSeconds, 3);
    assert.equal(lease.spec?.leaseTransitions, 0);
    assert.match(lease.spec?.acquireTime ?? '', /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/);
    // renewTime moves, acquireTime stays
    const r1 = lease.spec?.renewTime;
    await sleep(RETRY_MS * 3);
    const lease2 = await getLease(name);
    assert.notEqual(lease2.spec?.renewTime, r1);
    assert.equal(lease2.spec?.acquireTime, lease.spec?.acquireTime);
    // both saw the same leader
    assert.deepEqual(first.newLeaders, [first.elector.identity]);
    assert.deepEqual(second.newLeaders, [first.elector.identity]);
    assert.equal(second.elector.leader(), first.elector.identity);
  });

  it('a leader that stops releases the Lease and the other takes over within about one retry period', async () => {
    const name = leaseName();
    const a = elector(name, 'a');
    a.elector.start();
    await waitFor('a leads', () => a.elector.isLeader(), { timeoutMs: 10_000, intervalMs: 20 });
    const b = elector(name, 'b');
    b.elector.start();
    await waitFor('b has polled', () => b.elector.hasRun(), { timeoutMs: 10_000, intervalMs: 10 });
    assert.equal(b.elector.isLeader(), false);
    await a.elector.stop();
    const released = Date.now();
    assert.equal(a.elector.isLeader(), false);
    assert.equal(a.stopped, 0, 'a graceful stop is no lease loss');
    await waitFor('b leads', () => b.elector.isLeader(), { timeoutMs: 10_000, intervalMs: 5 });
    const takeover = Date.now() - released;
    console.log(`# takeover after release: ${takeover} ms (retry period ${RETRY_MS} ms)`);
    // followers poll every retryPeriod x (1 + up to 0.2 jitter); allow API latency on top
    assert.ok(takeover <= RETRY_MS * 1.2 + SLACK_MS, `took ${takeover} ms`);
    assert.ok(takeover < LEASE_MS - RETRY_MS, 'waited for expiry instead of seeing the release');
    const lease = await getLease(name);
    assert.equal(lease.spec?.holderIdentity, 'b');
    assert.equal(lease.spec?.leaseTransitions, 1);
    assert.equal(lease.spec?.leaseDurationSeconds, 3);
  });

  it('a leader killed without release is replaced only after the lease duration', async () => {
    const name = leaseName();
    const a = elector(name, 'a');
    a.elector.start();
    await waitFor('a leads', () => a.elector.isLeader(), { timeoutMs: 10_000, intervalMs: 20 });
    const b = elector(name, 'b');
    b.elector.start();
    await sleep(RETRY_MS * 3);
    assert.equal(b.elector.isLeader(), false);
    await a.elector.stop({ release: false }); // timers stop, the Lease stays held: a crash
    const killed = Date.now();
    const held = await getLease(name);
    assert.equal(held.spec?.holderIdentity, 'a');
    await waitFor('b leads', () => b.elector.isLeader(), { timeoutMs: 15_000, intervalMs: 5 });
    const takeover = Date.now() - killed;
    const lease = await getLease(name);
    assert.equal(lease.spec?.holderIdentity, 'b');
    assert.equal(lease.spec?.leaseTransitions, 1);
    // Safety, from the Lease itself (one machine, one clock): b's acquire came at least a
    // whole lease duration after a's last renew.
    const gap = Date.parse(lease.spec!.acquireTime!) - Date.parse(held.spec!.renewTime!);
    console.log(`# takeover after crash: ${takeover} ms after the kill, ${gap} ms after the last renew (lease duration ${LEASE_MS} ms)`);
    assert.ok(gap >= LEASE_MS, `took over ${gap} ms after the last renew`);
    assert.ok(gap <= LEASE_MS + 2.4 * RETRY_MS + SLACK_MS, `took over ${gap} ms after the last renew`);
    assert.ok(takeover <= LEASE_MS + 2.4 * RETRY_MS + SLACK_MS, `took ${takeover} ms`);
  });

  it('a stop while an acquire is in flight still releases the Lease it took', async () => {
    const name = leaseName();
    let stopping: Promise<void> | undefined;
    const a: Probe = elector(name, 'a', {
      beforeWrite: async (d) => {
        if (d === 'create') stopping = a.elector.stop();
      },
    });
    a.elector.start();
    await waitFor('stop requested', () => stopping !== undefined, { timeoutMs: 10_000, intervalMs: 5 });
    await stopping;
    assert.equal(a.started, 0, 'no onStartedLeading after stop()');
    assert.equal(a.elector.isLeader(), false);
    const lease = await getLease(name);
    assert.equal(lease.spec?.holderIdentity, '', 'released, so nobody waits for it to expire');
    assert.equal(lease.spec?.leaseDurationSeconds, 1);
  });

  it('a lost write race (409) leaves the loser a follower', async () => {
    const name = leaseName();
    const b = elector(name, 'b');
    // a reads the (missing) Lease, then b creates it before a writes: a's POST gets 409.
    let raced = false;
    const a = elector(name, 'a', {
      beforeWrite: async () => {
        if (raced) return;
        raced = true;
        const rb = await b.elector.tryAcquireOrRenew();
        assert.equal(rb.ok, true);
      },
    });
    const ra = await a.elector.tryAcquireOrRenew();
    assert.equal(raced, true);
    assert.deepEqual({ ok: ra.ok, decision: ra.decision, conflict: ra.conflict }, { ok: false, decision: 'create', conflict: true });
    assert.equal((await getLease(name)).spec?.holderIdentity, 'b');
    // Same on an update: the Lease is released, a reads it free, b takes it first: a's PUT gets 409.
    const lease = await getLease(name);
    await kubeRequestOk(cluster.kc, 'PUT', apiPath('coordination.k8s.io/v1', 'leases', ns, name), {
      ...lease,
      spec: releaseSpec(lease.spec, new Date()),
    });
    raced = false;
    const bNew = elector(name, 'b2');
    const a2 = elector(name, 'a2', {
      beforeWrite: async () => {
        if (raced) return;
        raced = true;
        assert.equal((await bNew.elector.tryAcquireOrRenew()).ok, true);
      },
    });
    const ra2 = await a2.elector.tryAcquireOrRenew();
    assert.deepEqual({ ok: ra2.ok, decision: ra2.decision, conflict: ra2.conflict }, { ok: false, decision: 'acquire', conflict: true });
    // the next try of the loser sees a valid Lease held by b2 and waits
    const again = await a2.elector.tryAcquireOrRenew();
    assert.deepEqual({ ok: again.ok, decision: again.decision, holder: again.holder }, { ok: false, decision: 'wait', holder: 'b2' });
    assert.equal((await getLease(name)).spec?.holderIdentity, 'b2');
  });

  it('five candidates racing for a free Lease at the same instant: exactly one wins', async () => {
    const name = leaseName();
    const ps = ['c1', 'c2', 'c3', 'c4', 'c5'].map((id) => elector(name, id));
    const rs = await Promise.all(ps.map((p) => p.elector.tryAcquireOrRenew()));
    const winners = rs.filter((r) => r.ok);
    assert.equal(winners.length, 1, JSON.stringify(rs));
    const winner = ps[rs.findIndex((r) => r.ok)]!.elector.identity;
    assert.equal((await getLease(name)).spec?.holderIdentity, winner);
    for (const r of rs.filter((x) => !x.ok)) assert.ok(r.conflict || r.decision === 'wait', JSON.stringify(r));
  });

  it('a leader that cannot renew gives up at its renew deadline, before the lease expires', async () => {
    const name = leaseName();
    let failRenews = false;
    let lostAt = 0;
    const a = elector(name, 'a', {
      beforeWrite: async (d) => {
        if (failRenews && d === 'renew') throw new Error('simulated API outage');
      },
      onStoppedLeading: () => {
        lostAt = Date.now();
        a.stopped++;
      },
    });
    a.elector.start();
    await waitFor('a leads', () => a.elector.isLeader(), { timeoutMs: 10_000, intervalMs: 20 });
    failRenews = true;
    await waitFor('a gives up', () => a.stopped === 1, { timeoutMs: 10_000, intervalMs: 5 });
    assert.equal(a.elector.isLeader(), false);
    // Measured from its last successful renew (the renewTime it wrote, same clock):
    const renewTime = (await getLease(name)).spec?.renewTime;
    const gaveUp = lostAt - Date.parse(renewTime!);
    console.log(`# leader gave up ${gaveUp} ms after its last successful renew (renew deadline ${RENEW_MS} ms)`);
    assert.ok(gaveUp >= RENEW_MS, `gave up too early: ${gaveUp} ms`);
    assert.ok(gaveUp <= RENEW_MS + SLACK_MS, `gave up after ${gaveUp} ms`);
    assert.ok(gaveUp < LEASE_MS, 'must stop before a follower may take over');
    // it stopped trying: the Lease is not renewed any more
    await sleep(RETRY_MS * 3);
    assert.equal((await getLease(name)).spec?.renewTime, renewTime);
    assert.equal(a.stopped, 1);
  });

  it('a leader that sees another holder in the Lease stops leading at once', async () => {
    const name = leaseName();
    const a = elector(name, 'a');
    a.elector.start();
    await waitFor('a leads', () => a.elector.isLeader(), { timeoutMs: 10_000, intervalMs: 20 });
    const lease = await getLease(name);
    const path = apiPath('coordination.k8s.io/v1', 'leases', ns, name);
    // someone takes the Lease by force (e.g. an operator editing it)
    let put = await kubeRequest(cluster.kc, 'PUT', path, { ...lease, spec: { ...lease.spec, holderIdentity: 'intruder' } });
    for (let i = 0; i < 20 && put.status === 409; i++) {
      const l = await getLease(name);
      put = await kubeRequest(cluster.kc, 'PUT', path, { ...l, spec: { ...l.spec, holderIdentity: 'intruder' } });
    }
    assert.equal(put.status, 200);
    await waitFor('a stops leading', () => a.stopped === 1, { timeoutMs: RETRY_MS * 5, intervalMs: 5 });
    assert.equal(a.elector.isLeader(), false);
    assert.deepEqual(a.newLeaders, ['a', 'intruder']);
    assert.equal((await getLease(name)).spec?.holderIdentity, 'intruder');
  });
});
