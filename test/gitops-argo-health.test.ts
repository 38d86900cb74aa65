// deploy/argocd/health.lua and the real kstatus on AtlantisDeployment objects, table-driven:
// each condition set gives the Argo CD health and kstatus verdict it should (old controllers'
// statuses included), the two agree on every status the planner's table produces, and the
// argocd-cm snippet in docs/gitops.md is the script itself.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { planRollout } from '../src/controller/rollout/index.js';
import type { AtlantisDeploymentStatus } from '../src/controller/types.js';
import { HEALTH_LUA, argoHealthOf, kstatusOf } from './support/gitops.js';
import { NOW } from './support/rollout-planner.js';
import { rolloutRows } from './support/rollout-rows.js';
import { podRows } from './support/rollout-rows-pods.js';
import { surgeRows } from './support/rollout-surge.js';

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

const c = (type: string, status: string, reason: string, message = `${type} says ${reason}`) => ({
  type,
  status,
  reason,
  message,
  lastTransitionTime: '2026-06-01T12:00:00Z',
  observedGeneration: 3,
});
const ad = (status: unknown, generation = 3) => ({
  apiVersion: 'atlantis-operator.dev/v1alpha1',
  kind: 'AtlantisDeployment',
  metadata: { name: 'atlantis', namespace: 'atlantis', generation },
  spec: { image: 'atlantis-operator:v2' },
  ...(status === undefined ? {} : { status }),
});
const st = (conditions: unknown[], observedGeneration = 3) => ({ observedGeneration, conditions });

const rows: Array<{ name: string; obj: unknown; argo: [string, string]; kstatus: [string, string] }> = [
  {
    name: 'no status yet',
    obj: ad(undefined),
    argo: ['Progressing', 'Waiting for the controller to report status'],
    kstatus: ['Current', 'Resource is current'],
  },
  {
    name: 'a spec the controller has not seen, over a stale Ready',
    obj: ad(st([c('Ready', 'True', 'RolloutComplete')], 2)),
    argo: ['Progressing', 'Waiting for the controller to observe generation 3'],
    kstatus: ['InProgress', 'AtlantisDeployment generation is 3, but latest observed generation is 2'],
  },
  {
    name: 'draining',
    obj: ad(
      st([
        c('Reconciling', 'True', 'DrainInProgress', 'Draining atlantis-1: 1 operation(s) in progress'),
        c('Stalled', 'False', 'NotStalled'),
        c('Ready', 'False', 'DrainInProgress', 'Draining atlantis-1: 1 operation(s) in progress'),
      ]),
    ),
    argo: ['Progressing', 'DrainInProgress: Draining atlantis-1: 1 operation(s) in progress'],
    kstatus: ['InProgress', 'Draining atlantis-1: 1 operation(s) in progress'],
  },
  {
    name: 'paused mid-rollout',
    obj: ad(
      st([
        c('Reconciling', 'True', 'RolloutPaused', 'Rollout paused (spec.paused), no new drain starts'),
        c('Stalled', 'False', 'NotStalled'),
        c('Ready', 'False', 'RolloutPaused'),
      ]),
    ),
    argo: ['Suspended', 'RolloutPaused: Rollout paused (spec.paused), no new drain starts'],
    kstatus: ['InProgress', 'Rollout paused (spec.paused), no new drain starts'],
  },
  {
    name: 'stalled',
    obj: ad(
      st([
        c('Reconciling', 'False', 'DrainTimeout'),
        c(
          'Stalled',
          'True',
          'DrainTimeout',
          'Drains past drainTimeoutSeconds 3, waiting (onDrainTimeout=Wait): atlantis-0: 1 operation(s) in progress',
        ),
        c('Ready', 'False', 'DrainTimeout'),
      ]),
    ),
    argo: [
      'Degraded',
      'DrainTimeout: Drains past drainTimeoutSeconds 3, waiting (onDrainTimeout=Wait): atlantis-0: 1 operation(s) in progress',
    ],
    kstatus: ['Failed', 'Drains past drainTimeoutSeconds 3, waiting (onDrainTimeout=Wait): atlantis-0: 1 operation(s) in progress'],
  },
  {
    name: 'done',
    obj: ad(
      st([
        c('Reconciling', 'False', 'RolloutComplete'),
        c('Stalled', 'False', 'RolloutComplete'),
        c('Ready', 'True', 'RolloutComplete', 'All 2 pod(s) at revision abc and Ready'),
      ]),
    ),
    argo: ['Healthy', 'All 2 pod(s) at revision abc and Ready'],
    kstatus: ['Current', 'Resource is Ready'],
  },
  // A controller from before the kstatus conditions: kstatus calls a rollout in progress
  // Current (no condition it knows), which is why they were added; the script still tells.
  {
    name: 'old controller, rollout in progress',
    obj: ad(
      st([
        c('Progressing', 'True', 'RolloutInProgress', 'Waiting: atlantis-1: OperationsInProgress'),
        c('Degraded', 'False', 'PodsHealthy'),
      ]),
    ),
    argo: ['Progressing', 'RolloutInProgress: Waiting: atlantis-1: OperationsInProgress'],
    kstatus: ['Current', 'Resource is current'],
  },
  {
    name: 'old controller, complete',
    obj: ad(
      st([c('Progressing', 'True', 'RolloutComplete', 'All 2 pod(s) at revision abc and Ready'), c('Degraded', 'False', 'PodsHealthy')]),
    ),
    argo: ['Healthy', 'All 2 pod(s) at revision abc and Ready'],
    kstatus: ['Current', 'Resource is current'],
  },
  {
    name: 'old controller, degraded',
    obj: ad(
      st([c('Progressing', 'False', 'PodsFailing'), c('Degraded', 'True', 'PodsFailing', 'Pods failing: atlantis-1: ImagePullBackOff')]),
    ),
    argo: ['Degraded', 'PodsFailing: Pods failing: atlantis-1: ImagePullBackOff'],
    kstatus: ['Current', 'Resource is current'],
  },
  {
    name: 'old controller, drain timeout',
    obj: ad(
      st([
        c('Progressing', 'False', 'DrainTimeout', 'Drains past drainTimeoutSeconds, waiting (onDrainTimeout=Wait): atlantis-0'),
        c('Degraded', 'False', 'PodsHealthy'),
      ]),
    ),
    argo: ['Degraded', 'DrainTimeout: Drains past drainTimeoutSeconds, waiting (onDrainTimeout=Wait): atlantis-0'],
    kstatus: ['Current', 'Resource is current'],
  },
];

test('the Argo CD script and kstatus on each kind of status', async (t) => {
  for (const row of rows)
    await t.test(row.name, async () => {
      const argo = await argoHealthOf(row.obj);
      assert.deepEqual([argo.status, argo.message], row.argo, 'Argo CD');
      const ks = await kstatusOf(row.obj);
      assert.deepEqual([ks.status, ks.message], row.kstatus, 'kstatus');
    });
});

test('on every status of the planner table, Argo CD and kstatus agree', async () => {
  const agree: Record<string, string[]> = { InProgress: ['Progressing', 'Suspended'], Current: ['Healthy'], Failed: ['Degraded'] };
  const seen = new Set<string>();
  for (const row of [...rolloutRows, ...podRows, ...surgeRows]) {
    const status: AtlantisDeploymentStatus = planRollout(row.state, row.now ?? NOW).status;
    const obj = ad(status, row.state.generation);
    const [ks, argo] = [await kstatusOf(obj), await argoHealthOf(obj)];
    assert.ok(agree[ks.status]?.includes(argo.status), `${row.name}: kstatus ${ks.status} but Argo CD ${argo.status}`);
    seen.add(`${ks.status}/${argo.status}`);
  }
  assert.deepEqual([...seen].sort(), ['Current/Healthy', 'Failed/Degraded', 'InProgress/Progressing', 'InProgress/Suspended']);
});

test('the argocd-cm snippet in docs/gitops.md is deploy/argocd/health.lua', () => {
  const doc = fs.readFileSync(path.join(repoRoot, 'docs', 'gitops.md'), 'utf8').split('\n');
  const start = doc.findIndex((l) => l.trim() === 'resource.customizations.health.atlantis-operator.dev_AtlantisDeployment: |');
  assert.ok(start > 0, 'the snippet is in docs/gitops.md');
  const end = doc.findIndex((l, i) => i > start && l.startsWith('```'));
  const lua = doc
    .slice(start + 1, end)
    .map((l) => l.replace(/^ {4}/, ''))
    .join('\n');
  assert.equal(`${lua}\n`, fs.readFileSync(HEALTH_LUA, 'utf8'));
});
