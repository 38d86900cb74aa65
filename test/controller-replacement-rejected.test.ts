// Issue 16 item 8, on the real local control plane with the in-process controller: a spec
// whose pods the API server refuses must not cost a running pod. Before, the CRD took
// `resources.limits.memory: 2GB`; the controller drained and deleted the running pod, could
// not create its replacement, and status still said Available=True with nothing wrong. (The
// CRD now refuses 2GB itself, with the Quantity schema; what it still cannot see is a rule
// across fields of the Pod, such as a memory request above its limit, used here.)
// Now the controller dry-runs the replacement first: no pod is drained or deleted, Degraded
// carries the API server's message, and once the spec is fixed the rollout goes on. What happened to the pods is judged from a watch
// (every change, in the cluster's order) and from the servers' own logs, never from a poll.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { V1Pod } from '@kubernetes/client-node';
import { atlantisDeployment, createAd, getAd, patchAdSpec, startController, type TestController } from './support/controller.js';
import { controllerTestNamespace, stopTestController } from './support/controller-suite.js';
import {
  cond,
  describeStatus,
  eventsSince,
  recordPods,
  rolloutComplete,
  serverLog,
  serverStatus,
  sleep,
  waitForAd,
  waitForReadyPods,
} from './support/controller-asserts.js';
import { getLocalNode, waitFor, type TestCluster } from './support/k8s.js';

let cluster: TestCluster;
let ctrl: TestController;
let ns: string;

before(async () => {
  ({ cluster, ns } = await controllerTestNamespace('ctrl-refused'));
  ctrl = await startController(cluster.kc, ns);
});
after(() => stopTestController(ctrl));

describe('a spec whose pods the API server refuses', () => {
  it("drains and deletes nothing, reports Degraded with the API server's message, and rolls out once fixed", {
    timeout: 300_000,
  }, async () => {
    const NAME = 'refused';
    await createAd(cluster.kc, atlantisDeployment(ns, NAME, { replicas: 2, terminationGracePeriodSeconds: 30 }));
    const first = await waitForAd(cluster.kc, ns, NAME, 'first rollout complete', rolloutComplete(2), 120_000);
    const start = await waitForReadyPods(cluster.kc, ns, NAME, [`${NAME}-0`, `${NAME}-1`], {
      revision: first.status!.updateRevision,
      timeoutMs: 30_000,
    });
    const node = await getLocalNode();

    // A request above its limit: every field is valid alone, so the CRD takes it; a pod is refused.
    const newEvents = await eventsSince(cluster.kc, ns, NAME);
    const rec = await recordPods(cluster.kc, ns, NAME, { replicas: () => 2 });
    let degradedMessage = '';
    try {
      await patchAdSpec(cluster.kc, ns, NAME, {
        podTemplate: { spec: { resources: { requests: { memory: '2Gi' }, limits: { memory: '1Gi' } } } },
      });
      assert.equal((await getAd(cluster.kc, ns, NAME)).spec.podTemplate?.spec?.resources?.requests?.memory, '2Gi', 'the CRD accepted it');
      const degraded = await waitForAd(
        cluster.kc,
        ns,
        NAME,
        'Degraded=True/ReplacementRejected',
        (a) => cond(a, 'Degraded')?.reason === 'ReplacementRejected',
        60_000,
      );
      assert.notEqual(degraded.status!.updateRevision, first.status!.updateRevision, 'a new revision');
      assert.equal(cond(degraded, 'Degraded')?.status, 'True', describeStatus(degraded));
      degradedMessage = cond(degraded, 'Degraded')!.message;
      assert.match(
        degradedMessage,
        /^The API server refuses pods of revision \w+, so no pod is drained or deleted for it: /,
        degradedMessage,
      );
      // The API server's own words (a 422 of Pod validation).
      assert.match(
        degradedMessage,
        /resources\.requests: Invalid value: "2Gi": must be less than or equal to memory limit/,
        degradedMessage,
      );
      assert.equal(cond(degraded, 'Progressing')?.status, 'False');
      assert.equal(cond(degraded, 'Progressing')?.reason, 'ReplacementRejected');
      assert.equal(cond(degraded, 'Available')?.status, 'True', `both old pods still serve: ${describeStatus(degraded)}`);
      assert.equal(degraded.status!.readyReplicas, 2);
      assert.equal(degraded.status!.currentRevision, first.status!.updateRevision, 'still at the old revision');
      // Give the controller time to act wrongly: status writes and pod events wake it.
      await sleep(8000);
      for (const p of start) assert.ok(await serverStatus(p.status!.podIP!), `${p.metadata!.name} still answers /status`);
    } finally {
      await rec.stop();
    }
    // Nothing happened to either pod: the watch saw every change, the servers logged no drain.
    for (const p of start) {
      const seen = rec.records.get(p.metadata!.uid!);
      assert.ok(seen, `the watch saw ${p.metadata!.name}`);
      assert.equal(seen.drainSeen, undefined, `${p.metadata!.name} never got the drain annotation`);
      assert.equal(seen.deletingSeen ?? seen.goneSeen, undefined, `${p.metadata!.name} was not deleted`);
      assert.deepEqual(
        serverLog(node, ns, p.metadata!.name!, p.metadata!.uid!).filter((l) => l.msg === 'Drain started'),
        [],
        `${p.metadata!.name}'s server never started a drain`,
      );
      assert.equal(
        node.events({ namespace: ns, pod: p.metadata!.name! }).filter((e) => e.uid === p.metadata!.uid && e.type === 'SIGTERM sent').length,
        0,
        `${p.metadata!.name} was never stopped`,
      );
    }
    assert.equal(rec.records.size, 2, 'no other pod was created');
    assert.ok(rec.maxUnavailable() === 0, `both pods available all along; saw ${rec.maxUnavailable()} unavailable`);
    const evs = await newEvents();
    assert.deepEqual(
      evs.filter((e) => e.reason === 'DrainStarted' || e.reason === 'PodReplaced'),
      [],
      'no drain or replacement event',
    );
    const warned = evs.filter((e) => e.reason === 'ReplacementRejected');
    assert.equal(warned.length, 1, `one ReplacementRejected event; got ${JSON.stringify(evs)}`);
    assert.equal(warned[0]!.type, 'Warning');
    assert.match(warned[0]!.message, /must be less than or equal to memory limit/);
    assert.ok(
      ctrl.logs.some((l) => l.level === 'warn' && l.msg.startsWith('The API server refuses pods of the update revision')),
      'the controller logged the refusal',
    );

    // A drain already under way (here by hand) still ends, but the drained pod is kept: its
    // replacement could not be created, and an empty ordinal would serve nobody either.
    const [pod0, pod1] = start as [V1Pod, V1Pod];
    const recHand = await recordPods(cluster.kc, ns, NAME, { replicas: () => 2 });
    try {
      const an = await cluster.kubectl(['-n', ns, 'annotate', 'pod', `${NAME}-0`, 'atlantis-operator.dev/drain=now']);
      assert.equal(an.exitCode, 0, an.stderr);
      await waitFor(
        `${NAME}-0's server to log that it drained`,
        () => serverLog(node, ns, `${NAME}-0`, pod0.metadata!.uid!).some((l) => l.msg === 'Drained'),
        { timeoutMs: 30_000, intervalMs: 200 },
      );
      const held = await waitForAd(
        cluster.kc,
        ns,
        NAME,
        `${NAME}-0 draining in status, the rollout still held`,
        (a) => cond(a, 'Degraded')?.reason === 'ReplacementRejected' && a.status?.drainingReplicas === 1,
        30_000,
      );
      assert.equal(cond(held, 'Degraded')?.reason, 'ReplacementRejected', describeStatus(held));
      // Several reconciles pass (the drained server's answer wakes the controller at once).
      await sleep(6000);
    } finally {
      await recHand.stop();
    }
    const hand = recHand.records.get(pod0.metadata!.uid!);
    assert.ok(hand?.drainSeen !== undefined, `the watch saw the hand drain of ${NAME}-0`);
    assert.equal(hand.deletingSeen ?? hand.goneSeen, undefined, `the drained ${NAME}-0 was kept: ${JSON.stringify(hand)}`);
    assert.equal(
      node.events({ namespace: ns, pod: `${NAME}-0` }).filter((e) => e.uid === pod0.metadata!.uid && e.type === 'SIGTERM sent').length,
      0,
      `${NAME}-0 was not stopped`,
    );
    assert.equal(recHand.records.get(pod1.metadata!.uid!)?.drainSeen, undefined, `${NAME}-1 was not drained`);
    assert.ok(await serverStatus(pod1.status!.podIP!), `${NAME}-1 still serves`);
    assert.ok(!ctrl.logs.some((l) => l.msg === 'Deleting pod'), 'the controller deleted no pod');

    // Fixed: a valid spec (a new revision again) rolls out, each pod drained before it is deleted.
    const rec2 = await recordPods(cluster.kc, ns, NAME, { replicas: () => 2 });
    let pods: V1Pod[];
    try {
      await patchAdSpec(cluster.kc, ns, NAME, {
        podTemplate: { spec: { resources: { requests: { memory: '64Mi' }, limits: { memory: '1Gi' } } } },
      });
      const done = await waitForAd(
        cluster.kc,
        ns,
        NAME,
        'the fixed spec rolled out',
        (a) => rolloutComplete(2)(a) && cond(a, 'Degraded')?.status === 'False',
        180_000,
      );
      assert.equal(cond(done, 'Degraded')?.reason, 'PodsHealthy');
      pods = await waitForReadyPods(cluster.kc, ns, NAME, [`${NAME}-0`, `${NAME}-1`], {
        revision: done.status!.updateRevision,
        timeoutMs: 30_000,
      });
    } finally {
      await rec2.stop();
    }
    for (const p of pods) assert.deepEqual(p.spec!.containers[0]!.resources, { requests: { memory: '64Mi' }, limits: { memory: '1Gi' } });
    for (const p of start) {
      const seen = rec2.records.get(p.metadata!.uid!);
      assert.ok(
        seen?.drainSeen !== undefined && seen.drainSeen < (seen.deletingSeen ?? seen.goneSeen ?? Infinity),
        `${p.metadata!.name} was drained, then deleted: ${JSON.stringify(seen)}`,
      );
      assert.deepEqual(
        serverLog(node, ns, p.metadata!.name!, p.metadata!.uid!)
          .filter((l) => l.msg === 'Drain started')
          .map((l) => l.reason),
        ['annotation'],
        `${p.metadata!.name}'s server drained because of the annotation`,
      );
    }
    assert.ok(rec2.maxUnavailable() <= 1, `never more than maxUnavailable=1; saw ${rec2.maxUnavailable()}`);
  });
});
