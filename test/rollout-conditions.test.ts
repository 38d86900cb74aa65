// The kstatus conditions (Reconciling, Stalled, Ready), table-driven: the decision on its own,
// then through the planner on observed states, and properties over the planner's whole table.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { type KstatusFacts, kstatusConditions } from '../src/controller/rollout/conditions.js';
import { planRollout, type ObservedState, type Plan } from '../src/controller/rollout/index.js';
import { NOW, NEW, ago, probe, unreachable, pod, old, draining, observed, completeStatus } from './support/rollout-planner.js';
import { rolloutRows } from './support/rollout-rows.js';
import { podRows } from './support/rollout-rows-pods.js';
import { surgeRows } from './support/rollout-surge.js';

const facts = (f: Partial<KstatusFacts>): KstatusFacts => ({
  replicas: 2,
  updateRevision: NEW,
  complete: false,
  available: true,
  paused: false,
  drainTimeoutSeconds: 3600,
  rejected: null,
  timedOut: [],
  failing: [],
  drains: [],
  waits: [],
  ...f,
});

/** `type status/reason: message` of Reconciling, Stalled and Ready. */
const show = (cs: Array<{ type: string; status: string; reason: string; message: string }>): string[] =>
  ['Reconciling', 'Stalled', 'Ready'].map((type) => {
    const c = cs.find((x) => x.type === type);
    return c ? `${type} ${c.status}/${c.reason}: ${c.message}` : `${type} missing`;
  });

const decisionRows: Array<{ name: string; facts: Partial<KstatusFacts>; want: string[] }> = [
  {
    name: 'complete and available: Ready',
    facts: { complete: true },
    want: [
      `Reconciling False/RolloutComplete: All 2 pod(s) at revision ${NEW} and Ready`,
      `Stalled False/RolloutComplete: All 2 pod(s) at revision ${NEW} and Ready`,
      `Ready True/RolloutComplete: All 2 pod(s) at revision ${NEW} and Ready`,
    ],
  },
  {
    name: 'a drain with an operation in flight: Reconciling DrainInProgress names the pod and its operations',
    facts: {
      drains: [{ podName: 'atlantis-1', detail: '1 operation(s) in progress' }],
      waits: [{ podName: 'atlantis-0', guards: ['HigherOrdinalFirst'] }],
    },
    want: [
      'Reconciling True/DrainInProgress: Draining atlantis-1: 1 operation(s) in progress; waiting: atlantis-0: HigherOrdinalFirst',
      'Stalled False/NotStalled: The rollout can go on by itself',
      'Ready False/DrainInProgress: Draining atlantis-1: 1 operation(s) in progress; waiting: atlantis-0: HigherOrdinalFirst',
    ],
  },
  {
    name: 'two drains at once (maxUnavailable 2), the drain guards of the drained pods not repeated',
    facts: {
      drains: [
        { podName: 'atlantis-1', detail: '2 operation(s) in progress' },
        { podName: 'atlantis-0', detail: 'server not shutting down yet' },
      ],
      waits: [
        { podName: 'atlantis-1', guards: ['OperationsInProgress'] },
        { podName: 'atlantis-0', guards: ['DrainInProgress'] },
      ],
    },
    want: [
      'Reconciling True/DrainInProgress: Draining atlantis-1: 2 operation(s) in progress; atlantis-0: server not shutting down yet',
      'Stalled False/NotStalled: The rollout can go on by itself',
      'Ready False/DrainInProgress: Draining atlantis-1: 2 operation(s) in progress; atlantis-0: server not shutting down yet',
    ],
  },
  {
    name: 'no drain, a new pod not Ready yet: the guard is the reason',
    facts: { waits: [{ podName: 'atlantis-1', guards: ['WaitingForReadiness'] }] },
    want: [
      'Reconciling True/WaitingForReadiness: Waiting: atlantis-1: WaitingForReadiness',
      'Stalled False/NotStalled: The rollout can go on by itself',
      'Ready False/WaitingForReadiness: Waiting: atlantis-1: WaitingForReadiness',
    ],
  },
  {
    name: 'nothing waits, pods being created: RolloutInProgress',
    facts: {},
    want: [
      `Reconciling True/RolloutInProgress: Rolling out revision ${NEW}`,
      'Stalled False/NotStalled: The rollout can go on by itself',
      `Ready False/RolloutInProgress: Rolling out revision ${NEW}`,
    ],
  },
  {
    name: 'complete but not available (cannot happen from the planner): not Ready',
    facts: { complete: true, available: false },
    want: [
      `Reconciling True/RolloutInProgress: Rolling out revision ${NEW}`,
      'Stalled False/NotStalled: The rollout can go on by itself',
      `Ready False/RolloutInProgress: Rolling out revision ${NEW}`,
    ],
  },
  {
    name: 'paused mid-rollout: Reconciling RolloutPaused, with the drain that goes on',
    facts: {
      paused: true,
      drains: [{ podName: 'atlantis-1', detail: '1 operation(s) in progress' }],
      waits: [{ podName: 'atlantis-0', guards: ['Paused'] }],
    },
    want: [
      'Reconciling True/RolloutPaused: Rollout paused (spec.paused), no new drain starts; draining atlantis-1: 1 operation(s) in progress; waiting: atlantis-0: Paused',
      'Stalled False/NotStalled: The rollout can go on by itself',
      'Ready False/RolloutPaused: Rollout paused (spec.paused), no new drain starts; draining atlantis-1: 1 operation(s) in progress; waiting: atlantis-0: Paused',
    ],
  },
  {
    name: 'paused and complete: Ready',
    facts: { paused: true, complete: true },
    want: [
      `Reconciling False/RolloutComplete: All 2 pod(s) at revision ${NEW} and Ready`,
      `Stalled False/RolloutComplete: All 2 pod(s) at revision ${NEW} and Ready`,
      `Ready True/RolloutComplete: All 2 pod(s) at revision ${NEW} and Ready`,
    ],
  },
  {
    name: 'a drain past its timeout with Wait: Stalled DrainTimeout',
    facts: { drainTimeoutSeconds: 3, timedOut: [{ podName: 'atlantis-1', detail: '1 operation(s) in progress' }] },
    want: [
      'Reconciling False/DrainTimeout: Not progressing: Drains past drainTimeoutSeconds 3, waiting (onDrainTimeout=Wait): atlantis-1: 1 operation(s) in progress',
      'Stalled True/DrainTimeout: Drains past drainTimeoutSeconds 3, waiting (onDrainTimeout=Wait): atlantis-1: 1 operation(s) in progress',
      'Ready False/DrainTimeout: Drains past drainTimeoutSeconds 3, waiting (onDrainTimeout=Wait): atlantis-1: 1 operation(s) in progress',
    ],
  },
  {
    name: 'an image that never starts: Stalled PodsFailing',
    facts: { failing: ['atlantis-1: ImagePullBackOff'] },
    want: [
      'Reconciling False/PodsFailing: Not progressing: Pods failing: atlantis-1: ImagePullBackOff',
      'Stalled True/PodsFailing: Pods failing: atlantis-1: ImagePullBackOff',
      'Ready False/PodsFailing: Pods failing: atlantis-1: ImagePullBackOff',
    ],
  },
  {
    name: 'a refused replacement comes first, before a timed-out drain and failing pods',
    facts: {
      rejected: 'quantities must match',
      timedOut: [{ podName: 'atlantis-1', detail: '1 operation(s) in progress' }],
      failing: ['atlantis-0: CrashLoopBackOff'],
    },
    want: [
      `Reconciling False/ReplacementRejected: Not progressing: The API server refuses pods of revision ${NEW}, so no pod is drained or deleted for it: quantities must match`,
      `Stalled True/ReplacementRejected: The API server refuses pods of revision ${NEW}, so no pod is drained or deleted for it: quantities must match`,
      `Ready False/ReplacementRejected: The API server refuses pods of revision ${NEW}, so no pod is drained or deleted for it: quantities must match`,
    ],
  },
  {
    name: 'a timed-out drain before failing pods',
    facts: { timedOut: [{ podName: 'atlantis-1', detail: '/status unreachable' }], failing: ['atlantis-0: CrashLoopBackOff'] },
    want: [
      'Reconciling False/DrainTimeout: Not progressing: Drains past drainTimeoutSeconds 3600, waiting (onDrainTimeout=Wait): atlantis-1: /status unreachable',
      'Stalled True/DrainTimeout: Drains past drainTimeoutSeconds 3600, waiting (onDrainTimeout=Wait): atlantis-1: /status unreachable',
      'Ready False/DrainTimeout: Drains past drainTimeoutSeconds 3600, waiting (onDrainTimeout=Wait): atlantis-1: /status unreachable',
    ],
  },
];

test('kstatus conditions: the decision', async (t) => {
  for (const row of decisionRows) await t.test(row.name, () => assert.deepEqual(show(kstatusConditions(facts(row.facts))), row.want));
});

const kstatusOf = (plan: Plan): string[] => show(plan.status.conditions);
const twoPods = (pods: ObservedState['pods'], spec: Partial<ObservedState['spec']> = {}, extra: Partial<ObservedState> = {}) =>
  observed(pods, { replicas: 2, ...spec }, extra);

const plannerRows: Array<{ name: string; state: ObservedState; want: string[] }> = [
  {
    name: 'an image change only: the drain of the busy pod is DrainInProgress with its operation count',
    state: twoPods([old(0), draining(1, 20, probe(true, 1))]),
    want: [
      'Reconciling True/DrainInProgress: Draining atlantis-1: 1 operation(s) in progress; waiting: atlantis-0: HigherOrdinalFirst',
      'Stalled False/NotStalled: The rollout can go on by itself',
      'Ready False/DrainInProgress: Draining atlantis-1: 1 operation(s) in progress; waiting: atlantis-0: HigherOrdinalFirst',
    ],
  },
  {
    name: 'the plan that starts a drain already says so',
    state: twoPods([old(0), old(1)]),
    want: [
      'Reconciling True/DrainInProgress: Draining atlantis-1: no /status answer yet; waiting: atlantis-0: HigherOrdinalFirst',
      'Stalled False/NotStalled: The rollout can go on by itself',
      'Ready False/DrainInProgress: Draining atlantis-1: no /status answer yet; waiting: atlantis-0: HigherOrdinalFirst',
    ],
  },
  {
    name: 'a draining pod whose /status does not answer',
    state: twoPods([old(0), draining(1, 20, unreachable)]),
    want: [
      'Reconciling True/DrainInProgress: Draining atlantis-1: /status unreachable; waiting: atlantis-0: HigherOrdinalFirst',
      'Stalled False/NotStalled: The rollout can go on by itself',
      'Ready False/DrainInProgress: Draining atlantis-1: /status unreachable; waiting: atlantis-0: HigherOrdinalFirst',
    ],
  },
  {
    name: 'the replacement not Ready yet',
    state: twoPods([old(0), pod(1, { ready: false, createdAt: ago(5) })]),
    want: [
      'Reconciling True/WaitingForReadiness: Waiting: atlantis-1: WaitingForReadiness; atlantis-0: HigherOrdinalFirst',
      'Stalled False/NotStalled: The rollout can go on by itself',
      'Ready False/WaitingForReadiness: Waiting: atlantis-1: WaitingForReadiness; atlantis-0: HigherOrdinalFirst',
    ],
  },
  {
    name: 'done',
    state: twoPods([pod(0), pod(1)]),
    want: [
      `Reconciling False/RolloutComplete: All 2 pod(s) at revision ${NEW} and Ready`,
      `Stalled False/RolloutComplete: All 2 pod(s) at revision ${NEW} and Ready`,
      `Ready True/RolloutComplete: All 2 pod(s) at revision ${NEW} and Ready`,
    ],
  },
  {
    name: 'past drainTimeoutSeconds with Wait: Stalled, with what the server reports',
    state: twoPods([old(0), draining(1, 20, probe(true, 1))], { drainTimeoutSeconds: 3, onDrainTimeout: 'Wait' }),
    want: [
      'Reconciling False/DrainTimeout: Not progressing: Drains past drainTimeoutSeconds 3, waiting (onDrainTimeout=Wait): atlantis-1: 1 operation(s) in progress',
      'Stalled True/DrainTimeout: Drains past drainTimeoutSeconds 3, waiting (onDrainTimeout=Wait): atlantis-1: 1 operation(s) in progress',
      'Ready False/DrainTimeout: Drains past drainTimeoutSeconds 3, waiting (onDrainTimeout=Wait): atlantis-1: 1 operation(s) in progress',
    ],
  },
  {
    name: 'the new image never starts',
    state: twoPods([old(0), pod(1, { phase: 'Pending', ready: false, waitingReason: 'ImagePullBackOff', createdAt: ago(30) })]),
    want: [
      'Reconciling False/PodsFailing: Not progressing: Pods failing: atlantis-1: ImagePullBackOff',
      'Stalled True/PodsFailing: Pods failing: atlantis-1: ImagePullBackOff',
      'Ready False/PodsFailing: Pods failing: atlantis-1: ImagePullBackOff',
    ],
  },
  {
    name: 'an up-to-date pod not Ready within the progress deadline',
    state: twoPods([old(0), pod(1, { ready: false, createdAt: ago(700) })]),
    want: [
      'Reconciling False/PodsFailing: Not progressing: Pods failing: atlantis-1: not Ready within 600s of creation',
      'Stalled True/PodsFailing: Pods failing: atlantis-1: not Ready within 600s of creation',
      'Ready False/PodsFailing: Pods failing: atlantis-1: not Ready within 600s of creation',
    ],
  },
  {
    name: 'the API server refuses the new revision',
    state: twoPods([old(0), old(1)], {}, { replacementRejected: 'quantities must match' }),
    want: [
      `Reconciling False/ReplacementRejected: Not progressing: The API server refuses pods of revision ${NEW}, so no pod is drained or deleted for it: quantities must match`,
      `Stalled True/ReplacementRejected: The API server refuses pods of revision ${NEW}, so no pod is drained or deleted for it: quantities must match`,
      `Ready False/ReplacementRejected: The API server refuses pods of revision ${NEW}, so no pod is drained or deleted for it: quantities must match`,
    ],
  },
  {
    name: 'paused before the rollout starts',
    state: twoPods([old(0), old(1)], { paused: true }),
    want: [
      'Reconciling True/RolloutPaused: Rollout paused (spec.paused), no new drain starts; waiting: atlantis-1: Paused; atlantis-0: Paused',
      'Stalled False/NotStalled: The rollout can go on by itself',
      'Ready False/RolloutPaused: Rollout paused (spec.paused), no new drain starts; waiting: atlantis-1: Paused; atlantis-0: Paused',
    ],
  },
];

test('kstatus conditions: through the planner', async (t) => {
  for (const row of plannerRows) await t.test(row.name, () => assert.deepEqual(kstatusOf(planRollout(row.state, NOW)), row.want));
});

test('kstatus conditions keep their words while a drain goes on (no elapsed time), and carry observedGeneration', () => {
  const early = planRollout(twoPods([old(0), draining(1, 20, probe(true, 1))]), NOW);
  const later = planRollout(twoPods([old(0), draining(1, 1900, probe(true, 1))]), NOW);
  assert.deepEqual(kstatusOf(later), kstatusOf(early));
  for (const c of early.status.conditions) assert.equal(c.observedGeneration, 7);
});

test('lastTransitionTime of a kstatus condition stays while its status does', () => {
  const first = planRollout(twoPods([old(0), draining(1, 20, probe(true, 2))]), NOW);
  const next = planRollout(
    twoPods([old(0), draining(1, 25, probe(true, 1))], {}, { previousStatus: first.status }),
    new Date(NOW.getTime() + 5000),
  );
  const at = (p: Plan, type: string) => p.status.conditions.find((c) => c.type === type)?.lastTransitionTime;
  assert.equal(at(next, 'Reconciling'), at(first, 'Reconciling'));
  assert.equal(at(next, 'Ready'), at(first, 'Ready'));
  // A status from before these conditions existed: they start now.
  const legacy = completeStatus(NEW);
  legacy.conditions = legacy.conditions.filter((c) => !['Reconciling', 'Stalled', 'Ready'].includes(c.type));
  const upgraded = planRollout(twoPods([pod(0), pod(1)], {}, { previousStatus: legacy }), NOW);
  assert.equal(at(upgraded, 'Ready'), '2026-06-01T12:00:00Z');
  assert.equal(at(upgraded, 'Progressing'), '2026-01-01T00:00:00Z');
});

test('over the whole planner table (surge rows too): exactly one of Ready, Reconciling, Stalled is True, and Ready only when complete', () => {
  for (const row of [...rolloutRows, ...podRows, ...surgeRows]) {
    const plan = planRollout(row.state, row.now ?? NOW);
    const status = (type: string) => plan.status.conditions.find((c) => c.type === type)?.status;
    const trues = ['Ready', 'Reconciling', 'Stalled'].filter((t) => status(t) === 'True');
    assert.equal(trues.length, 1, `${row.name}: True: ${trues.join(', ') || 'none'}`);
    assert.equal(status('Ready') === 'True', plan.complete, `${row.name}: Ready iff complete`);
    if (status('Ready') === 'True') assert.equal(status('Available'), 'True', `${row.name}: Ready implies Available`);
    if (status('Stalled') === 'True') assert.equal(status('Progressing'), 'False', `${row.name}: Stalled as Progressing=False`);
    for (const c of plan.status.conditions) assert.match(c.reason, /^[A-Z][A-Za-z]*$/, `${row.name}: CamelCase ${c.reason}`);
  }
});
