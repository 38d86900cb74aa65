// The surge rollout (maxSurge > 0, pods without a PVC): table rows, each surge guard alone,
// invariants over arbitrary observed states, and rollouts played to the end against a model
// of the cluster (pods start, drain and terminate over time as the plan's actions ask).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import {
  ALL_GUARD_NAMES,
  GUARD_NAMES,
  SURGE_GUARD_NAMES,
  actionsOf,
  formatTime,
  isAvailable,
  isDraining,
  isTerminating,
  keeperOf,
  observeDeployment,
  planRollout,
  waitingFor,
  type ObservedState,
  type Plan,
  type PodObservation,
} from '../src/controller/rollout/index.js';
import { podNameFor, podNaming } from '../src/controller/resources/names.js';
import type { AtlantisDeployment } from '../src/controller/types.js';
import { DRAINED, NEW, NOW, OLD, REJECTED, ago, checkRow, events, pod, probe, summary, unreachable } from './support/rollout-planner.js';
import { MID, N, at, cur, drainingAt, surgeAlone, surgeRows, surgeState } from './support/rollout-surge.js';

test('surge rollout table', async (t) => {
  for (const row of surgeRows) await t.test(row.name, () => checkRow(row, planRollout(row.state, row.now ?? NOW), assert));
});

test('the surge table exercises every surge guard, the SurgePodCreated event and every rollout phase', () => {
  const plans = surgeRows.map((r) => planRollout(r.state, r.now ?? NOW));
  const guards = new Set(plans.flatMap((p) => p.waiting.flatMap((w) => w.guards)));
  for (const g of SURGE_GUARD_NAMES) assert.ok(guards.has(g), g);
  assert.deepEqual(ALL_GUARD_NAMES, [...GUARD_NAMES, ...SURGE_GUARD_NAMES]);
  assert.ok(plans.some((p) => events(p).some((e) => e.startsWith('Normal SurgePodCreated'))));
  const phases = new Set(plans.map((p) => p.status.rolloutPhase));
  assert.deepEqual([...phases].sort(), ['Complete', 'Draining', 'Paused', 'ScalingDown', 'Stalled', 'Surging', 'Updating'].sort());
});

test('each surge guard holds a pod on its own and lets it go once its cause is gone', async (t) => {
  assert.deepEqual(surgeAlone.map((a) => a.guard).sort(), [...SURGE_GUARD_NAMES].sort(), 'one case per surge guard');
  const touching = (plan: Plan, ordinal: number): string[] =>
    summary(plan).filter((a) => a.includes(` atlantis-${ordinal}-`) || a.includes(`createPod ${N(ordinal)}@`));
  for (const a of surgeAlone) {
    await t.test(a.guard, () => {
      const ordinal = Number(a.pod.split('-')[1]);
      const held = planRollout(a.held, NOW);
      assert.deepEqual(waitingFor(held, a.pod), [a.guard], 'held by this guard alone');
      assert.deepEqual(touching(held, ordinal), [], 'nothing done for its ordinal');
      const released = planRollout(a.released, NOW);
      assert.deepEqual(waitingFor(released, a.pod), a.thenWaits);
      assert.deepEqual(touching(released, ordinal), a.then);
    });
  }
});

test('pod names: by ordinal with a PVC, by ordinal and revision without', () => {
  assert.equal(podNameFor('atlantis', 2, NEW, podNaming(true)), 'atlantis-2');
  assert.equal(podNameFor('atlantis', 2, NEW, podNaming(false)), `atlantis-2-${NEW}`);
  // The longest instance name still gives a valid pod name (a DNS subdomain, at most 253).
  assert.ok(podNameFor('a'.repeat(63), 999_999_999, NEW, 'revision').length <= 253);
});

test('keeperOf: a Ready pod first, then the expected name, then the oldest', () => {
  const older = pod(1, { name: 'x', uid: 'x', ready: false, createdAt: ago(100) });
  const newer = pod(1, { name: 'y', uid: 'y', ready: false, createdAt: ago(10) });
  assert.equal(keeperOf([newer, older], NEW, 'z')?.name, 'x');
  assert.equal(keeperOf([older, newer], NEW, 'y')?.name, 'y');
  assert.equal(keeperOf([older, { ...newer, ready: true }], NEW, 'x')?.name, 'y');
  assert.equal(keeperOf([at(1, OLD), drainingAt(1, NEW, 5, null), cur(1, { deletionTimestamp: ago(1) })], NEW, N(1)), null);
  assert.equal(keeperOf([cur(1, { phase: 'Failed' })], NEW, N(1)), null);
});

test('observeDeployment: maxSurge and dataClaims only when pods share state in Redis', () => {
  const ad = (spec: Partial<AtlantisDeployment['spec']>): AtlantisDeployment => ({
    apiVersion: 'atlantis-operator.dev/v1alpha1',
    kind: 'AtlantisDeployment',
    metadata: { name: 'web', namespace: 'infra', uid: 'u' },
    spec: { image: 'i', ...spec },
  });
  const spec = (a: AtlantisDeployment) => observeDeployment(a, NEW, [], [], new Map()).spec;
  const redis = { atlantis: { lockingDB: { type: 'redis' as const, redis: { host: 'r' } } } };
  assert.equal('maxSurge' in spec(ad({})), false);
  assert.equal('dataClaims' in spec(ad({})), false);
  assert.equal('maxSurge' in spec(ad({ updateStrategy: { maxSurge: 2 } })), false, 'no surge with the embedded store');
  assert.deepEqual([spec(ad(redis)).maxSurge, spec(ad(redis)).dataClaims], [1, false], 'the default with Redis');
  assert.equal(spec(ad({ ...redis, updateStrategy: { maxSurge: 2 } })).maxSurge, 2);
  assert.equal('maxSurge' in spec(ad({ ...redis, updateStrategy: { maxSurge: 0 } })), false);
});

// ---- invariants over arbitrary observed states with a surge

const REVS = [OLD, MID, NEW] as const;
const arbPod = (ordinal: number, rev: string): fc.Arbitrary<PodObservation> =>
  fc
    .record({
      phase: fc.constantFrom('Pending', 'Running', 'Running', 'Running', 'Failed') as fc.Arbitrary<PodObservation['phase']>,
      ready: fc.boolean(),
      terminating: fc.boolean(),
      drainAgo: fc.option(fc.integer({ min: 0, max: 10_000 })),
      waitingReason: fc.option(fc.constantFrom('CrashLoopBackOff', 'ContainerCreating')),
      status: fc.option(
        fc.oneof(
          fc.constant(unreachable),
          fc.record({ s: fc.boolean(), n: fc.integer({ min: 0, max: 2 }) }).map((x) => probe(x.s, x.n)),
        ),
      ),
    })
    .map((r) =>
      at(ordinal, rev, {
        phase: r.phase,
        ready: r.ready,
        deletionTimestamp: r.terminating ? ago(1) : null,
        drainAnnotation: r.drainAgo === null ? null : formatTime(ago(r.drainAgo)),
        waitingReason: r.waitingReason,
        status: r.status,
      }),
    );

const arbSurgeState = fc
  .record({
    replicas: fc.integer({ min: 0, max: 4 }),
    maxSurge: fc.integer({ min: 1, max: 3 }),
    maxUnavailable: fc.integer({ min: 1, max: 2 }),
    paused: fc.boolean(),
    onDrainTimeout: fc.constantFrom('Wait', 'Interrupt') as fc.Arbitrary<'Wait' | 'Interrupt'>,
    rejected: fc.boolean(),
    present: fc.array(fc.array(fc.boolean(), { minLength: 3, maxLength: 3 }), { minLength: 5, maxLength: 5 }),
  })
  .chain((s) =>
    fc.tuple(...s.present.flatMap((revs, i) => revs.flatMap((on, r) => (on ? [arbPod(i, REVS[r]!)] : [])))).map((pods) =>
      surgeState(
        pods,
        {
          replicas: s.replicas,
          maxSurge: s.maxSurge,
          maxUnavailable: s.maxUnavailable,
          paused: s.paused,
          onDrainTimeout: s.onDrainTimeout,
        },
        { replacementRejected: s.rejected ? REJECTED : null },
      ),
    ),
  );

const live = (pods: readonly PodObservation[]): PodObservation[] => pods.filter((p) => !isTerminating(p));

test('surge invariants hold for any observed state', () => {
  // biome-ignore lint/nursery/noFloatingPromises: fc.assert of a synchronous property returns void
  fc.assert(
    fc.property(arbSurgeState, (o) => {
      const plan = planRollout(o, NOW);
      const R = o.spec.replicas;
      const S = o.spec.maxSurge!;
      const before = live(o.pods);
      const creates = actionsOf(plan, 'createPod');
      const surges = creates.filter((c) => c.surge);
      // Never beyond replicas + maxSurge live pods by a surge; from a state within it, never beyond it at all.
      if (surges.length > 0) assert.ok(before.length + creates.length <= R + S, 'surge within replicas + maxSurge');
      const extraOrdinals = before.some((p) => p.ordinal >= R);
      const surgeBefore =
        before.filter((p) => p.ordinal < R).length - new Set(before.filter((p) => p.ordinal < R).map((p) => p.ordinal)).size;
      if (!extraOrdinals && surgeBefore <= S) assert.ok(before.length + creates.length <= R + S, 'stays within replicas + maxSurge');
      for (const c of creates) {
        assert.ok(c.ordinal < R, 'only desired ordinals');
        assert.equal(c.revision, NEW);
        assert.ok(!o.pods.some((p) => p.name === c.name), 'never over an existing name');
        assert.ok(
          !o.pods.some((p) => p.ordinal === c.ordinal && p.revision === NEW && !isTerminating(p) && !isDraining(p) && p.phase !== 'Failed'),
        );
      }
      if (o.replacementRejected) assert.deepEqual(creates, [], 'a refused revision: no create');
      const drains = actionsOf(plan, 'startDrain');
      if (o.spec.paused) {
        assert.deepEqual(drains, [], 'paused: no drain');
        assert.deepEqual(surges, [], 'paused: no surge');
      }
      // A desired ordinal's pod is drained only beside a Ready up-to-date pod of that ordinal.
      for (const d of drains.filter((x) => x.ordinal < R))
        assert.ok(
          o.pods.some((q) => q.ordinal === d.ordinal && q.name !== d.podName && q.revision === NEW && isAvailable(q)),
          `${d.podName} drained without a Ready replacement`,
        );
      // maxUnavailable: only drains that leave an ordinal unserved cost budget.
      const unavailable = new Set<number>();
      for (let i = 0; i < R; i++) if (!o.pods.some((p) => p.ordinal === i && isAvailable(p))) unavailable.add(i);
      for (const p of o.pods) if (p.ordinal >= R && !isAvailable(p)) unavailable.add(p.ordinal);
      const byName = new Map(o.pods.map((p) => [p.name, p]));
      const newlyUnserved = new Set(
        drains
          .filter((d) => !unavailable.has(d.ordinal))
          .filter((d) => !o.pods.some((q) => q.ordinal === d.ordinal && q.name !== d.podName && isAvailable(q)))
          .map((d) => d.ordinal),
      );
      if (newlyUnserved.size > 0) assert.ok(unavailable.size + newlyUnserved.size <= o.spec.maxUnavailable, 'budget');
      for (const d of actionsOf(plan, 'deletePod')) {
        const p = byName.get(d.podName)!;
        assert.equal(p.deletionTimestamp, null, 'never deletes a terminating pod again');
        const running = p.phase === 'Running' && p.waitingReason !== 'CrashLoopBackOff';
        if (!running) continue;
        const drained = p.status?.ok === true && p.status.body.shutting_down && p.status.body.in_progress_operations === 0;
        assert.ok(p.drainAnnotation, 'a Running pod is deleted only after a drain');
        assert.ok(drained || (o.spec.onDrainTimeout === 'Interrupt' && d.reason === 'DrainTimeout'), `${d.podName} ${d.reason}`);
      }
      const acted = new Set(plan.actions.flatMap((a) => (a.type === 'startDrain' || a.type === 'deletePod' ? [a.podName] : [])));
      assert.equal(acted.size, drains.length + actionsOf(plan, 'deletePod').length, 'one step per pod');
      assert.ok((plan.status.surgeReplicas ?? 0) >= 0);
    }),
    { numRuns: 3000, seed: 20 },
  );
});

// ---- rollouts played to the end against a model of the cluster

interface Model {
  pods: Map<string, PodObservation>;
  /** Per pod: ticks until it is Ready (new pods) or drained (draining pods). */
  left: Map<string, number>;
  /** Per draining pod: ticks until its readiness probe fails (it stays Ready until then). */
  unreadyIn: Map<string, number>;
  readyAt: Map<string, number>;
}

interface Run {
  ticks: number;
  maxLive: number;
  /** Each drain started, with the tick its ordinal's new pod became Ready (undefined: not Ready). */
  drains: Array<{ pod: string; ordinal: number; at: number; replacementReadyAt: number | undefined }>;
  deletes: string[];
}

/** Plays one rollout: each tick plans, carries out the actions on the model, then advances it. */
function playRollout(p: {
  replicas: number;
  maxSurge: number;
  maxUnavailable: number;
  busy: number[];
  startTicks: number;
  probeTicks: number;
}): Run {
  const m: Model = { pods: new Map(), left: new Map(), unreadyIn: new Map(), readyAt: new Map() };
  for (let i = 0; i < p.replicas; i++) {
    const x = at(i, OLD);
    m.pods.set(x.name, x);
  }
  const run: Run = { ticks: 0, maxLive: 0, drains: [], deletes: [] };
  for (let tick = 0; tick < 400; tick++) {
    const now = new Date(NOW.getTime() + tick * 1000);
    const state: ObservedState = surgeState([...m.pods.values()], {
      replicas: p.replicas,
      maxSurge: p.maxSurge,
      maxUnavailable: p.maxUnavailable,
    });
    const plan = planRollout(state, now);
    if (plan.complete) return { ...run, ticks: tick };
    for (const a of plan.actions) {
      if (a.type === 'createPod') {
        m.pods.set(a.name, { ...at(a.ordinal, a.revision), phase: 'Pending', ready: false, createdAt: now });
        m.left.set(a.name, p.startTicks);
      } else if (a.type === 'startDrain') {
        const x = m.pods.get(a.podName)!;
        assert.equal(x.uid, a.uid);
        const replacement = [...m.pods.values()].find((q) => q.ordinal === a.ordinal && q.revision === NEW && q.ready);
        run.drains.push({
          pod: a.podName,
          ordinal: a.ordinal,
          at: tick,
          replacementReadyAt: replacement && m.readyAt.get(replacement.name),
        });
        const busy = x.revision === OLD ? (p.busy[a.ordinal] ?? 0) : 0;
        m.pods.set(a.podName, { ...x, drainAnnotation: a.value, status: probe(true, busy > 0 ? 1 : 0) });
        m.left.set(a.podName, busy);
        m.unreadyIn.set(a.podName, p.probeTicks);
      } else if (a.type === 'deletePod') {
        const x = m.pods.get(a.podName)!;
        assert.ok(x.status?.ok && x.status.body.in_progress_operations === 0, `${a.podName} deleted while busy`);
        assert.ok(!x.ready, `${a.podName} deleted while still in the Service`);
        run.deletes.push(a.podName);
        m.pods.set(a.podName, { ...x, deletionTimestamp: now });
      }
    }
    run.maxLive = Math.max(run.maxLive, live([...m.pods.values()]).length);
    // The cluster moves on: terminated pods go, new pods start, drains end.
    for (const [name, x] of [...m.pods]) {
      if (isTerminating(x)) {
        m.pods.delete(name);
        continue;
      }
      const left = (m.left.get(name) ?? 0) - 1;
      m.left.set(name, left);
      if (!x.ready && !isDraining(x) && left <= 0) {
        m.pods.set(name, { ...x, phase: 'Running', ready: true });
        m.readyAt.set(name, tick);
      }
      const unreadyIn = (m.unreadyIn.get(name) ?? 0) - 1;
      m.unreadyIn.set(name, unreadyIn);
      if (isDraining(x) && x.ready && unreadyIn < 0) m.pods.set(name, { ...m.pods.get(name)!, ready: false });
      if (isDraining(x) && left <= 0) m.pods.set(name, { ...m.pods.get(name)!, status: DRAINED });
    }
  }
  assert.fail('the rollout did not complete in 400 ticks');
}

test('surge rollouts complete: new pod Ready before its old one drains, no busy pod deleted, within replicas + maxSurge', () => {
  // biome-ignore lint/nursery/noFloatingPromises: fc.assert of a synchronous property returns void
  fc.assert(
    fc.property(
      fc.record({
        replicas: fc.integer({ min: 1, max: 4 }),
        maxSurge: fc.integer({ min: 1, max: 3 }),
        maxUnavailable: fc.integer({ min: 1, max: 2 }),
        busy: fc.array(fc.integer({ min: 0, max: 20 }), { minLength: 4, maxLength: 4 }),
        startTicks: fc.integer({ min: 1, max: 5 }),
        probeTicks: fc.integer({ min: 0, max: 3 }),
      }),
      (p) => {
        const run = playRollout(p);
        assert.ok(run.maxLive <= p.replicas + p.maxSurge, `live ${run.maxLive}`);
        assert.equal(run.drains.length, p.replicas, 'each old pod drained once');
        assert.deepEqual(run.deletes.sort(), run.drains.map((d) => d.pod).sort(), 'each drained pod deleted, nothing else');
        for (const d of run.drains) assert.ok(d.replacementReadyAt !== undefined && d.replacementReadyAt < d.at, `${d.pod} drained first`);
      },
    ),
    { numRuns: 200, seed: 7 },
  );
});

test('one surge rollout, step by step: 3 replicas, maxSurge 1, ordinal 1 busy', () => {
  const run = playRollout({ replicas: 3, maxSurge: 1, maxUnavailable: 1, busy: [0, 8, 0], startTicks: 2, probeTicks: 1 });
  assert.deepEqual(
    run.drains.map((d) => d.pod),
    [N(2, OLD), N(1, OLD), N(0, OLD)],
    'highest ordinal first',
  );
  assert.equal(run.maxLive, 4);
  assert.ok(run.ticks > 8, 'the busy pod held the rollout');
});
