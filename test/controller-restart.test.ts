// Two controller processes with leader election on the real control plane: only the leader
// acts; the leader is SIGKILLed in the middle of a drain and the other carries on from what
// it observes, without deleting anything twice.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { atlantisDeployment, createAd, events, getAd, isReady, listPods, patchAdSpec } from './support/controller.js';
import { controllerTestNamespace } from './support/controller-suite.js';
import { terraformConfig } from './support/git-repos.js';
import { getLocalNode, waitFor, type TestCluster } from './support/k8s.js';
import { type CliProcess, startCli } from './support/cli.js';
import { childList } from './support/children.js';
import { type WorkflowEnv, createWorkflowEnv } from './support/workflow-env.js';

let cluster: TestCluster;
let env: WorkflowEnv;
let ns: string;
const procs = childList();
const NAME = 'atl';

before(async () => {
  env = await createWorkflowEnv();
  ({ cluster, ns } = await controllerTestNamespace('restart', { env }));
});
after(async () => {
  procs.killAll();
  await env?.close();
});

function startController(host: string): CliProcess & { metricsUrl: string } {
  const p = startCli([
    'controller',
    '--kubeconfig',
    cluster.kubeconfigPath,
    '--namespace',
    ns,
    '--metrics-bind-address',
    `${host}:8080`,
    '--leader-elect',
    '--leader-election-namespace',
    ns,
    '--leader-elect-lease-duration',
    '4s',
    '--leader-elect-renew-deadline',
    '3s',
    '--leader-elect-retry-period',
    '500ms',
  ]);
  procs.push(p);
  return Object.assign(p, { metricsUrl: `http://${host}:8080/metrics` });
}

async function isLeader(metricsUrl: string): Promise<boolean | undefined> {
  try {
    const t = await (await fetch(metricsUrl, { signal: AbortSignal.timeout(1000) })).text();
    return /^atlantis_operator_leader 1$/m.test(t);
  } catch {
    return undefined;
  }
}

describe('controller restarts and leader election', () => {
  it('the standby takes over a half-done drain after the leader is SIGKILLed, with no double delete', { timeout: 300_000 }, async () => {
    const a = startController('127.0.88.1');
    const b = startController('127.0.88.2');
    const leaderOf = async () => {
      const [la, lb] = await Promise.all([isLeader(a.metricsUrl), isLeader(b.metricsUrl)]);
      return la && !lb ? a : lb && !la ? b : undefined;
    };
    const leader = await waitFor('exactly one leader', leaderOf, { timeoutMs: 30_000 });
    const standby = leader === a ? b : a;

    await createAd(
      cluster.kc,
      atlantisDeployment(ns, NAME, { replicas: 2, atlantis: { env: [{ name: 'ATLANTIS_GH_API_URL', value: env.gh.url }] } as never }),
    );
    const pods = await waitFor(
      '2 Ready pods',
      async () => {
        const ps = await listPods(cluster.kc, ns, NAME);
        return ps.length === 2 && ps.every(isReady) ? ps : undefined;
      },
      { timeoutMs: 90_000 },
    );
    assert.doesNotMatch(standby.output(), /"msg":"(Creating pod|Starting drain|Deleting pod)"/, 'the standby did nothing');

    // A long apply on the highest ordinal, so its drain is in progress when the leader dies.
    const pod1 = pods.find((p) => p.metadata!.name === `${NAME}-1`)!;
    const url = `http://${pod1.status!.podIP}:4141`;
    await env.openPull(url, 700, 'restart-700', { 'rs700/main.tf': terraformConfig({ marker: 'rs700', sleepSeconds: 15 }) });
    await env.waitForComment(700, /^Ran Plan for dir/, { timeoutMs: 90_000 });
    await env.comment(url, 700, 'atlantis apply');
    await waitFor(
      'the apply to run',
      async () => ((await (await fetch(`${url}/status`)).json()) as { in_progress_operations: number }).in_progress_operations === 1,
      { timeoutMs: 60_000 },
    );

    await patchAdSpec(cluster.kc, ns, NAME, { image: 'atlantis-operator:v2' });
    await waitFor(
      'the leader to start draining atl-1',
      async () =>
        (await listPods(cluster.kc, ns, NAME)).find((p) => p.metadata!.uid === pod1.metadata!.uid)?.metadata?.annotations?.[
          'atlantis-operator.dev/drain'
        ],
      { timeoutMs: 30_000 },
    );
    leader.child.kill('SIGKILL');
    await leader.exited;

    await waitFor('the standby to lead', () => isLeader(standby.metricsUrl), { timeoutMs: 30_000 });
    const done = await waitFor(
      'the rollout to complete',
      async () => {
        const ad = await getAd(cluster.kc, ns, NAME);
        const ps = await listPods(cluster.kc, ns, NAME);
        return ad.status?.updatedReplicas === 2 &&
          ad.status.readyReplicas === 2 &&
          ps.length === 2 &&
          ps.every((p) => isReady(p) && p.spec?.containers[0]?.image === 'atlantis-operator:v2')
          ? ad
          : undefined;
      },
      { timeoutMs: 180_000 },
    );
    assert.equal(done.status?.currentRevision, done.status?.updateRevision);
    await env.waitForComment(700, /^Ran Apply for dir/, { timeoutMs: 30_000 });

    const evs = await events(cluster.kc, ns);
    const replaced1 = evs.filter((e) => e.reason === 'PodReplaced' && e.message.includes(`pod ${NAME}-1 `));
    assert.equal(replaced1.length, 1, `atl-1 replaced exactly once: ${JSON.stringify(replaced1)}`);
    const node = await getLocalNode();
    const terms = node.events({ namespace: ns, pod: `${NAME}-1` }).filter((e) => e.uid === pod1.metadata!.uid && e.type === 'SIGTERM sent');
    assert.equal(terms.length, 1);
    assert.match(standby.output(), /"msg":"Deleting pod".*"pod":"atl-1"/, 'the new leader finished the drain it inherited');
  });
});
