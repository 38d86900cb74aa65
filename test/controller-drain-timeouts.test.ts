// Drain timeouts and unreachable /status on the real control plane, with real terraform:
// onDrainTimeout Wait keeps the busy pod and says so; Interrupt deletes it and the server's
// own deadline interrupts terraform cleanly (SIGINT, state lock released); a pod whose
// /status does not answer is never deleted before the timeout, and then gets the policy:
// kept with Wait, deleted (SIGTERM, never SIGKILL) with Interrupt.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { V1Pod } from '@kubernetes/client-node';
import {
  atlantisDeployment,
  createAd,
  events,
  getAd,
  isReady,
  listPods,
  patchAdSpec,
  startController,
  type TestController,
} from './support/controller.js';
import { controllerTestNamespace } from './support/controller-suite.js';
import { terraformConfig } from './support/git-repos.js';
import { getLocalNode, readFileOr, waitFor, type TestCluster } from './support/k8s.js';
import { type WorkflowEnv, createWorkflowEnv } from './support/workflow-env.js';
import type { AtlantisDeploymentSpecInput } from '../src/controller/types.js';

let cluster: TestCluster;
let env: WorkflowEnv;
let ctrl: TestController;
let ns: string;
let pullSeq = 500;

before(async () => {
  env = await createWorkflowEnv();
  ({ cluster, ns } = await controllerTestNamespace('drainto', { env }));
  ctrl = await startController(cluster.kc, ns);
});
after(async () => {
  await ctrl?.stop();
  await env?.close();
});

async function readyPod(name: string, spec: Partial<AtlantisDeploymentSpecInput>): Promise<V1Pod> {
  await createAd(
    cluster.kc,
    atlantisDeployment(ns, name, {
      replicas: 1,
      ...spec,
      atlantis: { env: [{ name: 'ATLANTIS_GH_API_URL', value: env.gh.url }] } as never,
    }),
  );
  const [pod] = await waitFor(
    `${name}-0 Ready`,
    async () => {
      const ps = await listPods(cluster.kc, ns, name);
      return ps.length === 1 && isReady(ps[0]!) ? ps : undefined;
    },
    { timeoutMs: 90_000 },
  );
  return pod!;
}

/** Starts an apply that sleeps `seconds` on the pod; resolves when terraform is applying. */
async function longApply(pod: V1Pod, seconds: number): Promise<number> {
  const pull = pullSeq++;
  const url = `http://${pod.status!.podIP}:4141`;
  await env.openPull(url, pull, `to-${pull}`, { [`t${pull}/main.tf`]: terraformConfig({ marker: `t${pull}`, sleepSeconds: seconds }) });
  await env.waitForComment(pull, /^Ran Plan for dir/, { timeoutMs: 90_000 });
  await env.comment(url, pull, 'atlantis apply');
  await waitFor(
    'the apply to run',
    async () => {
      const r = await fetch(`${url}/status`).then((x) => x.json() as Promise<{ in_progress_operations: number }>);
      return r.in_progress_operations === 1;
    },
    { timeoutMs: 60_000 },
  );
  return pull;
}

const podAlive = async (name: string, uid: string) =>
  (await listPods(cluster.kc, ns, name)).some((p) => p.metadata?.uid === uid && !p.metadata.deletionTimestamp);

describe('drain timeouts', () => {
  it('onDrainTimeout Wait: keeps waiting, reports DrainTimeout, replaces the pod once the apply finishes', {
    timeout: 240_000,
  }, async () => {
    const name = 'wait';
    const pod = await readyPod(name, { updateStrategy: { maxUnavailable: 1, drainTimeoutSeconds: 3, onDrainTimeout: 'Wait' } });
    const pull = await longApply(pod, 20);
    await patchAdSpec(cluster.kc, ns, name, { image: 'atlantis-operator:v2' });
    const ad = await waitFor(
      'Progressing=False DrainTimeout',
      async () => {
        const a = await getAd(cluster.kc, ns, name);
        const c = a.status?.conditions.find((x) => x.type === 'Progressing');
        return c?.status === 'False' && c.reason === 'DrainTimeout' ? a : undefined;
      },
      { timeoutMs: 60_000 },
    );
    assert.ok(ad.status?.pods.some((p) => p.name === `${name}-0` && p.drainingSince));
    assert.deepEqual(ad.status?.timedOutPods, [`${name}-0`], 'the API server keeps the structured field (CRD schema)');
    assert.ok(await podAlive(name, pod.metadata!.uid!), 'the busy pod is not deleted');
    assert.ok(
      (await events(cluster.kc, ns)).some((e) => e.reason === 'DrainTimeout' && e.type === 'Warning' && e.message.includes(`${name}-0`)),
    );
    await env.waitForComment(pull, /^Ran Apply for dir/, { timeoutMs: 60_000 });
    await waitFor(
      'the pod to be replaced at the new revision',
      async () => {
        const ps = await listPods(cluster.kc, ns, name);
        return (
          ps.length === 1 &&
          ps[0]!.metadata!.uid !== pod.metadata!.uid &&
          isReady(ps[0]!) &&
          ps[0]!.spec?.containers[0]?.image === 'atlantis-operator:v2'
        );
      },
      { timeoutMs: 90_000 },
    );
    const node = await getLocalNode();
    assert.ok(!node.events({ namespace: ns, pod: `${name}-0` }).some((e) => e.uid === pod.metadata!.uid && e.type === 'SIGKILL sent'));
    // Polled every 500 ms for ~20 s past the timeout: the Warning came once, from the status change.
    const timeouts = (await events(cluster.kc, ns)).filter(
      (e) => e.reason === 'DrainTimeout' && e.message.includes(`Pod ${name}-0 `) && e.message.includes('onDrainTimeout=Wait'),
    );
    assert.equal(timeouts.length, 1, 'one DrainTimeout event');
    await waitFor(
      'timedOutPods to be cleared',
      async () => ((await getAd(cluster.kc, ns, name)).status?.timedOutPods?.length === 0 ? true : undefined),
      { timeoutMs: 30_000 },
    );
  });

  it('onDrainTimeout Interrupt: deletes the pod, the server interrupts terraform with SIGINT and tells the PR', {
    timeout: 240_000,
  }, async () => {
    const name = 'interrupt';
    const pod = await readyPod(name, {
      terminationGracePeriodSeconds: 30,
      updateStrategy: { maxUnavailable: 1, drainTimeoutSeconds: 3, onDrainTimeout: 'Interrupt' },
    });
    const pull = await longApply(pod, 120);
    await patchAdSpec(cluster.kc, ns, name, { image: 'atlantis-operator:v2' });
    const c = await env.waitForComment(pull, /Apply Interrupted/, { timeoutMs: 90_000 });
    assert.match(c.body, /drain deadline passed/);
    const node = await getLocalNode();
    await waitFor(
      'the old pod to be gone',
      async () => !(await listPods(cluster.kc, ns, name)).some((p) => p.metadata?.uid === pod.metadata!.uid),
      { timeoutMs: 60_000 },
    );
    const evs = node.events({ namespace: ns, pod: `${name}-0` }).filter((e) => e.uid === pod.metadata!.uid);
    assert.ok(evs.some((e) => e.type === 'SIGTERM sent'));
    assert.ok(!evs.some((e) => e.type === 'SIGKILL sent'), 'the kubelet never had to SIGKILL the server');
    const log = readFileOr(node.logPath(ns, `${name}-0`, 'atlantis', pod.metadata!.uid));
    assert.match(log, /"msg":"Interrupting terraform"/);
    assert.doesNotMatch(log, /Killing terraform after interrupt grace/);
    assert.match(log, /"msg":"Drain finished","exitCode":3/);
    assert.ok((await events(cluster.kc, ns)).some((e) => e.reason === 'DrainTimeout' && e.message.includes('Interrupt')));
  });

  it('a pod whose /status does not answer is not deleted before the drain timeout', { timeout: 240_000 }, async () => {
    const name = 'frozen';
    const pod = await readyPod(name, { updateStrategy: { maxUnavailable: 1, drainTimeoutSeconds: 8, onDrainTimeout: 'Wait' } });
    const node = await getLocalNode();
    const started = node.events({ namespace: ns, pod: `${name}-0` }).find((e) => e.uid === pod.metadata!.uid && e.pid);
    assert.ok(started?.pid, 'the node recorded the server pid');
    process.kill(started.pid, 'SIGSTOP');
    try {
      await patchAdSpec(cluster.kc, ns, name, { image: 'atlantis-operator:v2' });
      await waitFor(
        'the drain to start',
        async () => (await listPods(cluster.kc, ns, name))[0]?.metadata?.annotations?.['atlantis-operator.dev/drain'],
        { timeoutMs: 30_000 },
      );
      const a = await waitFor(
        'StatusUnreachable reported',
        async () => {
          const x = await getAd(cluster.kc, ns, name);
          return x.status?.conditions.some((c) => c.type === 'Progressing' && c.message.includes('StatusUnreachable')) ? x : undefined;
        },
        { timeoutMs: 30_000 },
      );
      assert.ok(a);
      await waitFor(
        'the drain timeout',
        async () => {
          const x = await getAd(cluster.kc, ns, name);
          return x.status?.conditions.some((c) => c.type === 'Progressing' && c.reason === 'DrainTimeout');
        },
        { timeoutMs: 30_000 },
      );
      assert.ok(await podAlive(name, pod.metadata!.uid!), 'never deleted while /status could not be read');
    } finally {
      process.kill(started.pid, 'SIGCONT');
    }
    // Back: it sees the annotation, reports drained, and is replaced.
    await waitFor(
      'replacement',
      async () => {
        const ps = await listPods(cluster.kc, ns, name);
        return ps.length === 1 && ps[0]!.metadata!.uid !== pod.metadata!.uid && isReady(ps[0]!);
      },
      { timeoutMs: 90_000 },
    );
  });
  it('a pod whose /status does not answer, onDrainTimeout Interrupt: deleted at the timeout, not before', {
    timeout: 240_000,
  }, async () => {
    const name = 'frozen-int';
    const timeoutS = 8;
    const pod = await readyPod(name, { updateStrategy: { maxUnavailable: 1, drainTimeoutSeconds: timeoutS, onDrainTimeout: 'Interrupt' } });
    const uid = pod.metadata!.uid!;
    const node = await getLocalNode();
    const started = node.events({ namespace: ns, pod: `${name}-0` }).find((e) => e.uid === uid && e.pid);
    assert.ok(started?.pid, 'the node recorded the server pid');
    process.kill(started.pid, 'SIGSTOP');
    let drainStart: string | undefined;
    try {
      await patchAdSpec(cluster.kc, ns, name, { image: 'atlantis-operator:v2' });
      drainStart = await waitFor(
        'the drain to start',
        async () => (await listPods(cluster.kc, ns, name))[0]?.metadata?.annotations?.['atlantis-operator.dev/drain'],
        { timeoutMs: 30_000 },
      );
      await waitFor('the controller to delete the pod', async () => !(await podAlive(name, uid)), { timeoutMs: 60_000, intervalMs: 100 });
    } finally {
      // Let the server take the kubelet's SIGTERM now, well inside its grace period.
      process.kill(started.pid, 'SIGCONT');
    }
    const sigterm = await waitFor(
      'the node to send SIGTERM',
      async () => node.events({ namespace: ns, pod: `${name}-0` }).find((e) => e.uid === uid && e.type === 'SIGTERM sent'),
      { timeoutMs: 30_000 },
    );
    // The controller counts from the annotation's time (whole seconds), so the delete cannot
    // come before it plus the timeout.
    const waitedMs = Date.parse(sigterm.time) - Date.parse(drainStart!);
    assert.ok(waitedMs >= timeoutS * 1000, `deleted ${waitedMs} ms after the drain started, before drainTimeoutSeconds ${timeoutS}`);
    // The Event is posted right after the delete; the node may send SIGTERM before it lands.
    await waitFor(
      'the DrainTimeout event',
      async () =>
        (await events(cluster.kc, ns)).some(
          (e) => e.reason === 'DrainTimeout' && e.message.includes(`Pod ${name}-0`) && e.message.includes('Interrupt'),
        ),
      { timeoutMs: 15_000 },
    );
    await waitFor(
      'replacement',
      async () => {
        const ps = await listPods(cluster.kc, ns, name);
        return ps.length === 1 && ps[0]!.metadata!.uid !== uid && isReady(ps[0]!);
      },
      { timeoutMs: 90_000 },
    );
    assert.ok(
      !node.events({ namespace: ns, pod: `${name}-0` }).some((e) => e.uid === uid && e.type === 'SIGKILL sent'),
      'the frozen server was stopped by SIGTERM, not SIGKILL',
    );
  });
});
