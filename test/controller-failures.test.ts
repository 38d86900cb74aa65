// Rollouts that meet failures, on the real local control plane with the in-process
// controller (SPEC section 7, rules 1, 3 and 5): an image that never starts leaves the old
// pod serving and sets Degraded without exceeding maxUnavailable; a pod stuck Pending is
// replaced without a drain once it is outdated again; a pod drained by hand is replaced
// once drained although its revision is current.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { V1Node, V1Pod } from '@kubernetes/client-node';
import { apiPath, kubeRequestOk } from '../src/k8s/client.js';
import type { StatusBody } from '../src/contract/drain-protocol.js';
import { atlantisDeployment, createAd, getAd, listPods, patchAdSpec, startController, type TestController } from './support/controller.js';
import { controllerTestNamespace, stopTestController } from './support/controller-suite.js';
import {
  DRAIN,
  REVISION,
  cond,
  eventsSince,
  describePods,
  describeStatus,
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
  ({ cluster, ns } = await controllerTestNamespace('ctrl-fail'));
  ctrl = await startController(cluster.kc, ns);
});
after(() => stopTestController(ctrl));

const revisionOf = (p: V1Pod): string => p.metadata!.labels![REVISION]!;
const waitingReason = (p: V1Pod): string | undefined => p.status?.containerStatuses?.[0]?.state?.waiting?.reason;

/** Creates an AtlantisDeployment of 2 replicas and waits until both pods are Ready. */
async function healthy(name: string): Promise<{ pods: V1Pod[]; revision: string }> {
  await createAd(cluster.kc, atlantisDeployment(ns, name, { replicas: 2, terminationGracePeriodSeconds: 30 }));
  const ad = await waitForAd(cluster.kc, ns, name, `${name}: first rollout complete`, rolloutComplete(2), 120_000);
  const pods = await waitForReadyPods(cluster.kc, ns, name, [`${name}-0`, `${name}-1`], {
    revision: ad.status!.updateRevision,
    timeoutMs: 30_000,
  });
  return { pods, revision: ad.status!.updateRevision };
}

describe('rollout failures', () => {
  it('an image that never starts: one pod replaced, the other keeps serving, Degraded=True, maxUnavailable respected', {
    timeout: 240_000,
  }, async () => {
    const NAME = 'broken';
    const { pods: start, revision: goodRev } = await healthy(NAME);
    const old0 = start[0]!;
    const old1 = start[1]!;

    const newEvents = await eventsSince(cluster.kc, ns, NAME);
    const rec = await recordPods(cluster.kc, ns, NAME, { replicas: () => 2 });
    try {
      await patchAdSpec(cluster.kc, ns, NAME, { image: 'example.invalid/atlantis:broken' });
      const degraded = await waitForAd(
        cluster.kc,
        ns,
        NAME,
        'Degraded=True after the broken image',
        (a) => cond(a, 'Degraded')?.status === 'True',
        120_000,
      );
      const badRev = degraded.status!.updateRevision;
      assert.notEqual(badRev, goodRev);
      assert.equal(cond(degraded, 'Degraded')?.reason, 'PodsFailing');
      assert.match(
        cond(degraded, 'Degraded')!.message,
        new RegExp(`${NAME}-1: (ErrImagePull|ImagePullBackOff)`),
        'the Degraded message names the failing pod and why',
      );
      assert.equal(cond(degraded, 'Progressing')?.status, 'False');
      assert.equal(cond(degraded, 'Progressing')?.reason, 'PodsFailing');
      assert.equal(
        cond(degraded, 'Available')?.status,
        'True',
        `1 of 2 available is enough with maxUnavailable 1: ${describeStatus(degraded)}`,
      );

      // Stay a while: the controller must not touch the last serving pod.
      const end = Date.now() + 10_000;
      while (Date.now() < end) {
        const pods = await listPods(cluster.kc, ns, NAME);
        const p0 = pods.find((p) => p.metadata!.name === `${NAME}-0`);
        const p1 = pods.find((p) => p.metadata!.name === `${NAME}-1`);
        assert.equal(p0?.metadata?.uid, old0.metadata!.uid, `${NAME}-0 is still the old pod: ${describePods(pods)}`);
        assert.ok(p0 && !p0.metadata?.annotations?.[DRAIN], `${NAME}-0 is not drained: ${describePods(pods)}`);
        assert.ok(
          p0.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True'),
          `${NAME}-0 stays Ready: ${describePods(pods)}`,
        );
        const st = await serverStatus(old0.status!.podIP!);
        assert.ok(st, `${NAME}-0 answers /status on ${old0.status!.podIP}`);
        assert.equal(st.shutting_down, false, `${NAME}-0 is not shutting down`);
        assert.ok(p1, `${NAME}-1 exists: ${describePods(pods)}`);
        if (p1.metadata!.uid !== old1.metadata!.uid && !p1.metadata?.deletionTimestamp) {
          assert.equal(revisionOf(p1), badRev, `the new ${NAME}-1 is at the new revision`);
          assert.equal(p1.spec!.containers[0]!.image, 'example.invalid/atlantis:broken');
          assert.notEqual(p1.status?.phase, 'Running', `the new ${NAME}-1 never runs: ${describePods(pods)}`);
        }
        await sleep(1000);
      }
      const pods = await listPods(cluster.kc, ns, NAME);
      const p1 = pods.find((p) => p.metadata!.name === `${NAME}-1`)!;
      assert.notEqual(p1.metadata!.uid, old1.metadata!.uid, `${NAME}-1 (highest ordinal) was replaced`);
      assert.match(
        waitingReason(p1) ?? '',
        /^(ErrImagePull|ImagePullBackOff)$/,
        `the new ${NAME}-1 waits on the image: ${describePods(pods)}`,
      );
      const now = await getAd(cluster.kc, ns, NAME);
      assert.equal(now.status!.readyReplicas, 1, describeStatus(now));
      assert.equal(now.status!.updatedReplicas, 1, describeStatus(now));
    } finally {
      await rec.stop();
    }
    assert.ok(rec.maxUnavailable() <= 1, `never more than maxUnavailable=1 pod not-ready-or-draining; saw ${rec.maxUnavailable()}`);
    // Which pods drained: from the servers' own logs, the controller's Events and the watch.
    const node = await getLocalNode();
    const drainStarts = (p: V1Pod) => serverLog(node, ns, p.metadata!.name!, p.metadata!.uid!).filter((l) => l.msg === 'Drain started');
    assert.deepEqual(
      drainStarts(old1).map((l) => l.reason),
      ['annotation'],
      `the old ${NAME}-1 drained once, because of the annotation`,
    );
    assert.deepEqual(drainStarts(old0), [], `${NAME}-0 never started a drain`);
    const drainEvents = (await newEvents()).filter((e) => e.reason === 'DrainStarted');
    assert.deepEqual(
      drainEvents.map((e) => e.message.split(':')[0]),
      [`Draining pod ${NAME}-1`],
      'one DrainStarted event, for the old pod 1',
    );
    for (const r of rec.drainOrder())
      assert.equal(r.uid, old1.metadata!.uid, `only the old ${NAME}-1 was seen with the drain annotation, not ${r.name} (${r.uid})`);

    // Fix the image: the broken pod is not Running, so it is replaced without a drain, and
    // the pod that kept serving is already at the (same) good revision: it stays.
    const rec2 = await recordPods(cluster.kc, ns, NAME, { replicas: () => 2 });
    let brokenUid = '';
    try {
      brokenUid = (await listPods(cluster.kc, ns, NAME)).find((p) => p.metadata!.name === `${NAME}-1`)!.metadata!.uid!;
      await patchAdSpec(cluster.kc, ns, NAME, { image: 'atlantis-operator:v1' });
      const fixed = await waitForAd(
        cluster.kc,
        ns,
        NAME,
        'recovery after fixing the image',
        (a) => rolloutComplete(2)(a) && cond(a, 'Degraded')?.status === 'False',
        120_000,
      );
      assert.equal(fixed.status!.updateRevision, goodRev, 'the old template hashes to the old revision');
      assert.equal(cond(fixed, 'Degraded')?.reason, 'PodsHealthy');
    } finally {
      await rec2.stop();
    }
    const pods = await waitForReadyPods(cluster.kc, ns, NAME, [`${NAME}-0`, `${NAME}-1`], { revision: goodRev, timeoutMs: 30_000 });
    assert.equal(pods[0]!.metadata!.uid, old0.metadata!.uid, `${NAME}-0 was never replaced`);
    assert.equal(rec2.records.get(brokenUid)?.drainSeen, undefined, 'the never-started pod was deleted without a drain');
    assert.ok(rec2.records.get(brokenUid)?.goneSeen !== undefined, 'the never-started pod was deleted');
  });

  it('a pod stuck Pending is replaced without a drain once it is outdated again', { timeout: 240_000 }, async () => {
    const NAME = 'pending';
    const { pods: start, revision: rev0 } = await healthy(NAME);
    const node = await getLocalNode();
    const nodeObj = await kubeRequestOk<V1Node>(cluster.kc, 'GET', apiPath('v1', 'nodes', undefined, node.name));
    const hostname = nodeObj.metadata!.labels!['kubernetes.io/hostname'];
    assert.ok(hostname, 'the node has a kubernetes.io/hostname label');

    // A selector no node matches: the highest ordinal is replaced and its new pod stays Pending.
    await patchAdSpec(cluster.kc, ns, NAME, { podTemplate: { spec: { nodeSelector: { 'atlantis-test/no-such-label': 'true' } } } });
    const stuck = await waitFor(
      `${NAME}-1 recreated and Pending (Unschedulable)`,
      async () => {
        const p = (await listPods(cluster.kc, ns, NAME)).find((x) => x.metadata!.name === `${NAME}-1`);
        return p &&
          p.metadata!.uid !== start[1]!.metadata!.uid &&
          !p.metadata?.deletionTimestamp &&
          p.status?.phase === 'Pending' &&
          p.status.conditions?.some((c) => c.type === 'PodScheduled' && c.status === 'False' && c.reason === 'Unschedulable')
          ? p
          : undefined;
      },
      { timeoutMs: 90_000, intervalMs: 250 },
    );
    const badRev = revisionOf(stuck);
    assert.notEqual(badRev, rev0);
    await sleep(4000);
    let pods = await listPods(cluster.kc, ns, NAME);
    assert.equal(
      pods.find((p) => p.metadata!.name === `${NAME}-0`)?.metadata?.uid,
      start[0]!.metadata!.uid,
      `${NAME}-0 is kept while ${NAME}-1 is Pending: ${describePods(pods)}`,
    );
    assert.equal(
      pods.find((p) => p.metadata!.name === `${NAME}-0`)?.metadata?.annotations?.[DRAIN],
      undefined,
      `${NAME}-0 not drained (maxUnavailable 1 is used by the Pending pod)`,
    );
    assert.equal(
      pods.find((p) => p.metadata!.name === `${NAME}-1`)?.metadata?.uid,
      stuck.metadata!.uid,
      'the Pending pod at the current revision is left alone',
    );
    // No node fits the pod: reported at once (planner: an unschedulable pod is failing).
    const waiting = await getAd(cluster.kc, ns, NAME);
    assert.equal(cond(waiting, 'Degraded')?.status, 'True', describeStatus(waiting));
    assert.equal(cond(waiting, 'Degraded')?.reason, 'PodsFailing');
    assert.match(cond(waiting, 'Degraded')!.message, new RegExp(`${NAME}-1: Unschedulable`), describeStatus(waiting));

    // A selector the node matches: the Pending pod is outdated again and is deleted at once
    // (nothing runs in it, nothing to drain); then the rollout goes on to ordinal 0.
    const rec = await recordPods(cluster.kc, ns, NAME, { replicas: () => 2 });
    const fixedAt = Date.now();
    let goneAfterMs = -1;
    try {
      // A merge patch merges maps: remove the bad key explicitly.
      await patchAdSpec(cluster.kc, ns, NAME, {
        podTemplate: { spec: { nodeSelector: { 'atlantis-test/no-such-label': null, 'kubernetes.io/hostname': hostname } } },
      });
      await waitFor(
        'the Pending pod to be deleted',
        async () => {
          const gone = !(await listPods(cluster.kc, ns, NAME)).some((p) => p.metadata!.uid === stuck.metadata!.uid);
          if (gone) goneAfterMs = Date.now() - fixedAt;
          return gone;
        },
        { timeoutMs: 30_000, intervalMs: 100 },
      );
      const done = await waitForAd(
        cluster.kc,
        ns,
        NAME,
        'rollout to the matching selector',
        (a) =>
          a.status!.updateRevision !== badRev &&
          a.status!.updateRevision !== rev0 &&
          rolloutComplete(2)(a) &&
          cond(a, 'Degraded')?.status === 'False',
        150_000,
      );
      pods = await waitForReadyPods(cluster.kc, ns, NAME, [`${NAME}-0`, `${NAME}-1`], {
        revision: done.status!.updateRevision,
        timeoutMs: 30_000,
      });
    } finally {
      await rec.stop();
    }
    assert.equal(rec.records.get(stuck.metadata!.uid!)?.drainSeen, undefined, 'the Pending pod got no drain annotation');
    assert.ok(
      goneAfterMs >= 0 && goneAfterMs < 15_000,
      `the Pending pod was deleted promptly (${goneAfterMs} ms), not after a drain timeout`,
    );
    for (const p of pods) assert.deepEqual(p.spec!.nodeSelector, { 'kubernetes.io/hostname': hostname });
    assert.notEqual(pods[0]!.metadata!.uid, start[0]!.metadata!.uid, `${NAME}-0 was then rolled out too`);
    // The Running pod 0 was drained before it was deleted and replaced. The order comes from
    // the cluster's and the processes' own records, never from a poll (a 150 ms poll once
    // missed an idle pod annotated, drained and deleted in 20 ms): the watch saw the drain
    // annotation before the deletion, the server logged the drain the annotation started,
    // and the node sent SIGTERM only after the server had drained.
    const oldUid = start[0]!.metadata!.uid!;
    const old0 = rec.records.get(oldUid);
    assert.ok(old0?.drainSeen !== undefined, `the watch saw the drain annotation on the Running ${NAME}-0: ${JSON.stringify(old0)}`);
    assert.ok(
      old0.drainSeen <= (old0.deletingSeen ?? old0.goneSeen ?? Infinity),
      `${NAME}-0 was annotated before it was deleted: ${JSON.stringify(old0)}`,
    );
    const log0 = serverLog(node, ns, `${NAME}-0`, oldUid);
    const started0 = log0.find((l) => l.msg === 'Drain started');
    assert.equal(
      started0?.reason,
      'annotation',
      `${NAME}-0's server logged a drain started by the annotation: ${JSON.stringify(started0)}`,
    );
    const since0 = Date.parse(String(started0!.since));
    const sigterm0 = node.events({ namespace: ns, pod: `${NAME}-0` }).find((e) => e.uid === oldUid && e.type === 'SIGTERM sent');
    assert.ok(sigterm0, `the node stopped the old ${NAME}-0`);
    assert.ok(
      Number.isFinite(since0) && since0 <= Date.parse(sigterm0.time),
      `the drain (${started0!.since}) took effect before the node's SIGTERM (${sigterm0.time})`,
    );
    const new0 = pods.find((p) => p.metadata!.name === `${NAME}-0`)!;
    const started = node
      .events({ namespace: ns, pod: `${NAME}-0` })
      .find((e) => e.uid === new0.metadata!.uid && e.type === 'ContainerStarted');
    assert.ok(
      started && Date.parse(started.time) >= Date.parse(sigterm0.time),
      `the new ${NAME}-0 started (${started?.time}) after the old one was stopped (${sigterm0.time})`,
    );
  });

  it('a pod drained by hand is replaced once drained, although its revision is current', { timeout: 180_000 }, async () => {
    const NAME = 'hand';
    const { pods: start, revision } = await healthy(NAME);
    const target = start[0]!;
    const ip = target.status!.podIP!;
    const newEvents = await eventsSince(cluster.kc, ns, NAME);

    // Watch the target's /status closely from before the annotation until it stops answering.
    const seen: StatusBody[] = [];
    let polling = true;
    const poller = (async () => {
      while (polling) {
        const st = await serverStatus(ip, 500);
        if (st) seen.push(st);
        await sleep(30);
      }
    })();
    const rec = await recordPods(cluster.kc, ns, NAME, { replicas: () => 2 });
    let pods: V1Pod[];
    try {
      const r = await cluster.kubectl(['-n', ns, 'annotate', 'pod', `${NAME}-0`, `${DRAIN}=now`]);
      assert.equal(r.exitCode, 0, `kubectl annotate: ${r.stderr}`);
      await waitFor(
        `the hand-drained ${NAME}-0 to be deleted`,
        async () => !(await listPods(cluster.kc, ns, NAME)).some((p) => p.metadata!.uid === target.metadata!.uid),
        { timeoutMs: 60_000, intervalMs: 100 },
      );
      pods = await waitForReadyPods(cluster.kc, ns, NAME, [`${NAME}-0`, `${NAME}-1`], { revision, timeoutMs: 90_000 });
      await waitForAd(cluster.kc, ns, NAME, 'complete again', rolloutComplete(2), 60_000);
    } finally {
      polling = false;
      await poller;
      await rec.stop();
    }
    assert.ok(
      seen.some((s) => !s.shutting_down),
      `${NAME}-0 answered /status before the drain`,
    );
    // An idle pod can drain and be deleted between two polls, so the polled answers are only
    // checked for what they say when they caught the drain; the order comes from the logs.
    for (const s of seen.filter((x) => x.shutting_down)) {
      assert.equal(s.drain_reason, 'annotation', 'the server drained because of the annotation');
      assert.equal(s.in_progress_operations, 0, 'the idle server reported no work');
    }
    const node = await getLocalNode();
    const log = serverLog(node, ns, `${NAME}-0`, target.metadata!.uid!);
    const started = log.find((l) => l.msg === 'Drain started');
    const drained = log.find((l) => l.msg === 'Drained');
    assert.equal(started?.reason, 'annotation', `${NAME}-0's server logged a drain started by the annotation`);
    assert.ok(drained, `${NAME}-0's server logged that it was drained`);
    const deletes = ctrl.logs.filter((l) => l.msg === 'Deleting pod' && l.fields.uid === target.metadata!.uid);
    assert.ok(deletes.length >= 1, `the controller deleted ${NAME}-0`);
    // `since`: when the drain took effect, before the held answer went out (the line itself
    // is written after it).
    const startedAt = Date.parse(String(started!.since));
    assert.ok(Number.isFinite(startedAt), `"Drain started" carries since: ${JSON.stringify(started)}`);
    for (const d of deletes) {
      // 'Drained' is the planner's word for "its /status said shutting_down and 0 operations".
      assert.equal(d.fields.reason, 'Drained', 'deleted because its /status said it was drained');
      assert.ok(
        d.at >= startedAt,
        `the delete (${new Date(d.at).toISOString()}) came after the server's drain started (${started!.since})`,
      );
    }

    const new0 = pods[0]!;
    assert.notEqual(new0.metadata!.uid, target.metadata!.uid, `${NAME}-0 was recreated`);
    assert.equal(revisionOf(new0), revision, 'the new pod has the same (current) revision');
    assert.equal(new0.metadata?.annotations?.[DRAIN], undefined, 'the new pod is not draining');
    assert.equal(pods[1]!.metadata!.uid, start[1]!.metadata!.uid, `${NAME}-1 was left alone`);
    assert.equal(rec.deletionOrder().length, 1, 'exactly one pod deleted');

    const evs = await newEvents();
    assert.ok(
      evs.some((e) => e.reason === 'Drained' && e.message.startsWith(`Pod ${NAME}-0 drained`)),
      `a Drained event for ${NAME}-0; got ${evs.map((e) => e.reason).join(', ')}`,
    );
    assert.ok(
      evs.some((e) => e.reason === 'PodReplaced' && e.message.includes(`${NAME}-0`)),
      `a PodReplaced event for ${NAME}-0; got ${evs.map((e) => e.reason).join(', ')}`,
    );
    assert.ok(!evs.some((e) => e.reason === 'DrainStarted'), 'the controller started no drain of its own');
    // The server exited by itself after SIGTERM, it was not killed.
    const kills = node
      .events({ namespace: ns, pod: `${NAME}-0` })
      .filter((e) => e.uid === target.metadata!.uid && e.type === 'SIGKILL sent');
    assert.deepEqual(kills, [], 'no SIGKILL for the hand-drained pod');
  });
});
