// Table tests of PR affinity (src/server/replicas/affinity.ts): rendezvous ownership, the
// routing rules for a webhook that landed on a replica, and what follows a failed forward.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  type ForwardOutcome,
  type ReplicaInfo,
  type RouteDecision,
  afterForwardFailure,
  liveReplicas,
  ownerOf,
  route,
  score,
} from '../src/server/replicas/affinity.js';

const NOW = 1_800_000_000_000;
const rep = (id: string, draining = false, heartbeatAt = NOW): ReplicaInfo => ({
  id,
  url: `http://${id}.atlantis:4141`,
  draining,
  heartbeatAt,
});
const keys = (n: number): string[] => Array.from({ length: n }, (_, i) => `acme/repo-${i % 37}#${i + 1}`);

/** A key whose owner among `ids` (all serving) is `want`: rows read better with a known owner. */
function keyOwnedBy(want: string, ids: string[]): string {
  const all = ids.map((id) => rep(id));
  for (const k of keys(500)) if (ownerOf(k, all)?.id === want) return k;
  throw new Error(`no key owned by ${want}`);
}

describe('ownerOf', () => {
  it('is undefined with no replica, or none serving', () => {
    assert.equal(ownerOf('acme/infra#1', []), undefined);
    assert.equal(ownerOf('acme/infra#1', [rep('a', true), rep('b', true)]), undefined);
  });

  it('is the highest sha256(id, key) among the serving replicas, whatever their order', () => {
    const all = [rep('atlantis-0'), rep('atlantis-1'), rep('atlantis-2')];
    for (const k of keys(200)) {
      const best = [...all].sort((x, y) => Buffer.compare(score(y.id, k), score(x.id, k)))[0];
      assert.equal(ownerOf(k, all)?.id, best?.id, k);
      assert.equal(ownerOf(k, [...all].reverse())?.id, best?.id, k);
    }
  });

  it('skips a draining replica: its keys go to the next highest, the others stay', () => {
    const all = [rep('a'), rep('b'), rep('c')];
    const withBDraining = [rep('a'), rep('b', true), rep('c')];
    for (const k of keys(300)) {
      const before = ownerOf(k, all)!.id;
      const after = ownerOf(k, withBDraining)!.id;
      if (before !== 'b') assert.equal(after, before, k);
      else assert.notEqual(after, 'b', k);
    }
  });

  it('spreads 1,000 keys over 3 replicas: each owns 25-42%', () => {
    const all = [rep('atlantis-0'), rep('atlantis-1'), rep('atlantis-2')];
    const count = new Map<string, number>();
    for (const k of keys(1000)) {
      const o = ownerOf(k, all)!.id;
      count.set(o, (count.get(o) ?? 0) + 1);
    }
    assert.equal(count.size, 3);
    for (const [id, c] of count) assert.ok(c >= 250 && c <= 420, `${id} owns ${c} of 1000`);
  });

  it('removing one of 4 replicas moves only its keys; adding it back moves only those back', () => {
    const four = ['atlantis-0', 'atlantis-1', 'atlantis-2', 'atlantis-3'].map((id) => rep(id));
    const three = four.filter((r) => r.id !== 'atlantis-2');
    let moved = 0;
    for (const k of keys(1000)) {
      const before = ownerOf(k, four)!.id;
      const after = ownerOf(k, three)!.id;
      if (before === 'atlantis-2') moved++;
      else assert.equal(after, before, `${k} moved from ${before} to ${after}`);
    }
    // It owned about a quarter of them, and only those moved.
    assert.ok(moved > 150 && moved < 350, `moved ${moved}`);
  });

  it('adding a fifth replica takes keys only for itself', () => {
    const four = ['a', 'b', 'c', 'd'].map((id) => rep(id));
    const five = [...four, rep('e')];
    for (const k of keys(1000)) {
      const after = ownerOf(k, five)!.id;
      if (after !== 'e') assert.equal(after, ownerOf(k, four)!.id, k);
    }
  });
});

describe('liveReplicas', () => {
  const ttl = 10_000;
  const rows: Array<{ name: string; all: ReplicaInfo[]; live: string[] }> = [
    { name: 'none', all: [], live: [] },
    { name: 'a fresh heartbeat is live', all: [rep('a', false, NOW - 1)], live: ['a'] },
    { name: 'one just inside the TTL is live', all: [rep('a', false, NOW - ttl + 1)], live: ['a'] },
    { name: 'one exactly TTL old is gone', all: [rep('a', false, NOW - ttl)], live: [] },
    { name: 'an older one is gone, the rest stay', all: [rep('b'), rep('a', false, NOW - 60_000), rep('c')], live: ['b', 'c'] },
    { name: 'a draining one is live (ownerOf skips it)', all: [rep('a', true)], live: ['a'] },
    { name: 'sorted by id', all: [rep('c'), rep('a'), rep('b')], live: ['a', 'b', 'c'] },
  ];
  for (const r of rows)
    it(r.name, () =>
      assert.deepEqual(
        liveReplicas(r.all, NOW, ttl).map((x) => x.id),
        r.live,
      ),
    );

  it('keeps the newest entry of an id listed twice', () => {
    const live = liveReplicas([rep('a', false, NOW - 5000), rep('a', true, NOW - 1000)], NOW, ttl);
    assert.deepEqual(live, [rep('a', true, NOW - 1000)]);
  });
});

describe('route', () => {
  const ids = ['a', 'b', 'c'];
  const kA = keyOwnedBy('a', ids);
  const kB = keyOwnedBy('b', ids);
  // With a draining, its keys go to the highest of b and c.
  const nextOfA = ownerOf(kA, [rep('b'), rep('c')])!.id;
  // A key of b that goes to c, not a, when b drains.
  const kBthenC = keys(500).find(
    (k) => ownerOf(k, [rep('a'), rep('b'), rep('c')])!.id === 'b' && ownerOf(k, [rep('a'), rep('c')])!.id === 'c',
  )!;

  const local = (reason: string): RouteDecision => ({ kind: 'local', reason }) as RouteDecision;
  const fwd = (id: string, draining = false): RouteDecision => ({ kind: 'forward', to: rep(id, draining) });

  interface Row {
    name: string;
    key: string;
    self: ReplicaInfo;
    live: ReplicaInfo[];
    forwardedBy?: string;
    want: RouteDecision;
  }
  const rows: Row[] = [
    { name: 'self owns it → local', key: kA, self: rep('a'), live: [rep('a'), rep('b'), rep('c')], want: local('owner') },
    {
      name: 'another live serving replica owns it → forward',
      key: kB,
      self: rep('a'),
      live: [rep('a'), rep('b'), rep('c')],
      want: fwd('b'),
    },
    {
      name: 'self missing from the list (its heartbeat not seen yet) still counts as itself',
      key: kA,
      self: rep('a'),
      live: [rep('b'), rep('c')],
      want: local('owner'),
    },
    {
      name: "self's own view wins over a stale entry of itself (draining now)",
      key: kA,
      self: rep('a', true),
      live: [rep('a'), rep('b'), rep('c')],
      want: fwd(nextOfA),
    },
    {
      name: 'the owner drains → forward to the next highest',
      key: kBthenC,
      self: rep('a'),
      live: [rep('b', true), rep('c')],
      want: fwd('c'),
    },
    { name: 'self alone and serving → local', key: kB, self: rep('a'), live: [], want: local('owner') },
    {
      name: 'self the only serving one (all others drain) → local',
      key: kB,
      self: rep('a'),
      live: [rep('b', true), rep('c', true)],
      want: local('owner'),
    },
    {
      name: 'self draining, one other serving → forward to it',
      key: kA,
      self: rep('a', true),
      live: [rep('b', true), rep('c')],
      want: fwd('c'),
    },
    {
      name: 'self draining, others serving → forward to the owner among them',
      key: kA,
      self: rep('a', true),
      live: [rep('b'), rep('c')],
      want: fwd(nextOfA),
    },
    {
      name: 'every replica drains → local (the drain rules refuse or queue)',
      key: kA,
      self: rep('a', true),
      live: [rep('b', true), rep('c', true)],
      want: local('none-serving'),
    },
    { name: 'self draining and alone → local', key: kA, self: rep('a', true), live: [], want: local('none-serving') },
    {
      name: 'forwarded here → local even when another owns it (loop guard)',
      key: kB,
      self: rep('a'),
      live: [rep('b'), rep('c')],
      forwardedBy: 'c',
      want: local('forwarded'),
    },
    {
      name: 'forwarded here while draining → local (never forwarded twice)',
      key: kA,
      self: rep('a', true),
      live: [rep('b'), rep('c')],
      forwardedBy: 'b',
      want: local('forwarded'),
    },
  ];
  for (const r of rows) {
    it(r.name, () => {
      const got = route(r.key, r.self, r.live, r.forwardedBy !== undefined ? { forwardedBy: r.forwardedBy } : {});
      assert.deepEqual(got, r.want);
    });
  }

  it('never forwards to itself nor to a draining replica, for any key and view', () => {
    const views: Array<[ReplicaInfo, ReplicaInfo[]]> = [
      [rep('a'), [rep('a', true), rep('b'), rep('c', true)]],
      [rep('a', true), [rep('a'), rep('b', true), rep('c')]],
      [rep('b'), [rep('a'), rep('c')]],
    ];
    for (const [self, live] of views)
      for (const k of keys(300)) {
        const d = route(k, self, live);
        if (d.kind === 'forward') {
          assert.notEqual(d.to.id, self.id);
          assert.equal(d.to.draining, false);
        }
      }
  });

  it('every replica that forwards agrees on the owner (same list, same answer)', () => {
    const live = [rep('a'), rep('b'), rep('c'), rep('d', true)];
    for (const k of keys(300)) {
      const owner = ownerOf(k, live)!.id;
      for (const self of live) {
        const d = route(k, self, live);
        assert.equal(d.kind === 'forward' ? d.to.id : self.id, owner, `${k} on ${self.id}`);
      }
    }
  });
});

describe('afterForwardFailure', () => {
  const rows: Array<{ name: string; outcome: ForwardOutcome; want: ReturnType<typeof afterForwardFailure> }> = [
    {
      name: '200 → relay',
      outcome: { ok: true, status: 200, body: 'Processing...\n' },
      want: { kind: 'relay', status: 200, body: 'Processing...\n' },
    },
    {
      name: '202 (queued) → relay',
      outcome: { ok: true, status: 202, body: 'Queued\n' },
      want: { kind: 'relay', status: 202, body: 'Queued\n' },
    },
    {
      name: '401 (bad signature) → relay',
      outcome: { ok: true, status: 401, body: 'bad\n' },
      want: { kind: 'relay', status: 401, body: 'bad\n' },
    },
    { name: '400 → relay', outcome: { ok: true, status: 400, body: 'x' }, want: { kind: 'relay', status: 400, body: 'x' } },
    { name: '500 → local', outcome: { ok: true, status: 500, body: 'boom' }, want: { kind: 'local', reason: 'owner-failed' } },
    {
      name: '503 (owner began draining) → local',
      outcome: { ok: true, status: 503, body: 'down' },
      want: { kind: 'local', reason: 'owner-failed' },
    },
    {
      name: 'refused → local',
      outcome: { ok: false, failure: 'refused', message: 'ECONNREFUSED' },
      want: { kind: 'local', reason: 'unreachable' },
    },
    { name: 'timeout → local', outcome: { ok: false, failure: 'timeout', message: 't' }, want: { kind: 'local', reason: 'unreachable' } },
    { name: 'reset → local', outcome: { ok: false, failure: 'reset', message: 'r' }, want: { kind: 'local', reason: 'unreachable' } },
    { name: 'other error → local', outcome: { ok: false, failure: 'error', message: 'e' }, want: { kind: 'local', reason: 'unreachable' } },
  ];
  for (const r of rows) it(r.name, () => assert.deepEqual(afterForwardFailure(r.outcome), r.want));
});
