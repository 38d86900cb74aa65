// The promise of the product, on the real local control plane: a rolling upgrade while a
// long `terraform apply` runs on each of 3 pods. Every apply completes with its state
// written, no process is SIGKILLed, pods are replaced one at a time from the highest
// ordinal, and no pod is deleted while its /status reported work.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { V1Pod } from '@kubernetes/client-node';
import type { StatusBody } from '../src/contract/drain-protocol.js';
import {
  atlantisDeployment,
  createAd,
  getAd,
  isReady,
  listPods,
  patchAdSpec,
  startController,
  type TestController,
} from './support/controller.js';
import { controllerTestNamespace } from './support/controller-suite.js';
import { recordPods } from './support/controller-asserts.js';
import { terraformConfig } from './support/git-repos.js';
import { getLocalNode, waitFor, readFileOr, type TestCluster } from './support/k8s.js';
import { type WorkflowEnv, createWorkflowEnv } from './support/workflow-env.js';

let cluster: TestCluster;
let env: WorkflowEnv;
let ctrl: TestController;
let ns: string;
const NAME = 'atlantis';

async function podStatus(ip: string): Promise<StatusBody | undefined> {
  try {
    const r = await fetch(`http://${ip}:4141/status`, { signal: AbortSignal.timeout(1000) });
    return (await r.json()) as StatusBody;
  } catch {
    return undefined;
  }
}

before(async () => {
  env = await createWorkflowEnv();
  ({ cluster, ns } = await controllerTestNamespace('rollout', { env }));
  ctrl = await startController(cluster.kc, ns);
});
after(async () => {
  await ctrl?.stop();
  await env?.close();
});

describe('rollout with a long apply in flight on every pod', () => {
  it('completes every apply, replaces pods highest ordinal first, never deletes a busy pod', { timeout: 300_000 }, async () => {
    await createAd(
      cluster.kc,
      atlantisDeployment(ns, NAME, {
        replicas: 3,
        terminationGracePeriodSeconds: 90,
        atlantis: { env: [{ name: 'ATLANTIS_GH_API_URL', value: env.gh.url }] } as never,
      }),
    );
    const pods = await waitFor(
      '3 Ready pods',
      async () => {
        const ps = await listPods(cluster.kc, ns, NAME);
        return ps.length === 3 && ps.every(isReady) ? ps : undefined;
      },
      { timeoutMs: 90_000 },
    );
    const oldRevision = pods[0]!.metadata!.labels!['atlantis-operator.dev/revision'];

    // One PR per pod, each with an apply that sleeps 12 s, sent straight to the pod's IP.
    const pulls: Array<{ pod: V1Pod; pull: number; url: string }> = pods.map((pod, i) => ({
      pod,
      pull: 300 + i,
      url: `http://${pod.status!.podIP}:4141`,
    }));
    // The test repo has one author work tree: open the PRs one after the other.
    for (const { pull, url } of pulls) {
      const opened = await env.openPull(url, pull, `rollout-${pull}`, {
        [`r${pull}/main.tf`]: terraformConfig({ marker: `r${pull}`, sleepSeconds: 12 }),
      });
      assert.equal(opened.status, 200, `PR #${pull} opened on ${url}`);
    }
    await Promise.all(
      pulls.map(async ({ pod, pull, url }) => {
        await env.waitForComment(pull, /^Ran Plan for dir/, { timeoutMs: 120_000 }).catch(async (e: Error) => {
          const node = await getLocalNode();
          throw new Error(
            `${e.message}\npod log:\n${readFileOr(node.logPath(ns, pod.metadata!.name!, 'atlantis', pod.metadata!.uid)).slice(-3000)}`,
          );
        });
        assert.equal((await env.comment(url, pull, 'atlantis apply')).status, 200);
      }),
    );
    await waitFor(
      'an apply running on every pod',
      async () => {
        const st = await Promise.all(pods.map((p) => podStatus(p.status!.podIP!)));
        return st.every((s) => s?.in_progress_operations === 1 && s.operations[0]?.command === 'apply');
      },
      { timeoutMs: 60_000 },
    );

    // Watch the pods while the rollout runs: every change, in the cluster's own order.
    const rec = await recordPods(cluster.kc, ns, NAME, { replicas: () => 3 });
    await patchAdSpec(cluster.kc, ns, NAME, { image: 'atlantis-operator:v2' });
    const done = await waitFor(
      'the rollout to complete',
      async () => {
        const ad = await getAd(cluster.kc, ns, NAME);
        const ps = await listPods(cluster.kc, ns, NAME);
        const progressing = ad.status?.conditions.find((c) => c.type === 'Progressing');
        return ad.status?.updatedReplicas === 3 &&
          ad.status.readyReplicas === 3 &&
          progressing?.reason === 'RolloutComplete' &&
          ad.status.updateRevision !== oldRevision &&
          ps.length === 3 &&
          ps.every(isReady)
          ? ad
          : undefined;
      },
      { timeoutMs: 180_000, intervalMs: 250 },
    ).finally(() => rec.stop());

    // Replaced one at a time, highest ordinal first, never while busy.
    const oldUids = new Set(pods.map((p) => p.metadata!.uid!));
    const order = rec
      .deletionOrder()
      .filter((r) => oldUids.has(r.uid))
      .map((r) => r.name);
    assert.deepEqual(order, [`${NAME}-2`, `${NAME}-1`, `${NAME}-0`]);
    assert.ok(rec.maxUnavailable() <= 1, `at most maxUnavailable=1 pod unavailable at once (saw ${rec.maxUnavailable()})`);
    assert.equal(done.status?.currentRevision, done.status?.updateRevision);

    // Every apply finished, with its output and state, and nothing was killed.
    for (const { pull } of pulls) {
      const c = await env.waitForComment(pull, /^Ran Apply for dir/, { timeoutMs: 30_000 });
      assert.match(c.body, new RegExp(`applied r${pull}`));
      assert.doesNotMatch(c.body, /Interrupted/);
    }
    const node = await getLocalNode();
    for (const pod of pods) {
      const evs = node.events({ namespace: ns, pod: pod.metadata!.name! }).filter((e) => e.uid === pod.metadata!.uid);
      assert.ok(
        evs.some((e) => e.type === 'SIGTERM sent'),
        `${pod.metadata!.name} was stopped with SIGTERM`,
      );
      assert.ok(!evs.some((e) => e.type === 'SIGKILL sent'), `${pod.metadata!.name} got no SIGKILL`);
      const log = readFileOr(node.logPath(ns, pod.metadata!.name!, 'atlantis', pod.metadata!.uid));
      assert.match(log, /"msg":"Drain started","reason":"annotation","annotation":"[^"]+"/);
      // Never deleted while busy: the kubelet's SIGTERM (sent once the controller deleted the
      // pod) comes after the apply operation ended, by the server's own clock.
      const finished = log.split('\n').find((l) => l.includes('"msg":"Command finished"') && l.includes('"command":"apply"'));
      assert.ok(finished, `${pod.metadata!.name} logged the end of its apply`);
      const sigterm = evs.find((e) => e.type === 'SIGTERM sent')!;
      assert.ok(
        Date.parse(sigterm.time) >= Date.parse((JSON.parse(finished) as { time: string }).time),
        `${pod.metadata!.name} was deleted after its apply ended`,
      );
      assert.doesNotMatch(log, /Interrupting terraform|Killing terraform/);
      assert.match(log, /"msg":"Drain finished","exitCode":0/);
    }
  });
});
