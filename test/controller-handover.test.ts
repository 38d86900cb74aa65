// The controller Deployment's pods deleted during a rollout, on the real control plane with
// the local node (test/controller-restart.test.ts covers a SIGKILLed leader *process*; this
// is the graceful path of a pod deletion, twice, the second time while a hand-over is under
// way):
//
// - manifests/ installed for real; four controller replicas run as Pods made from the
//   Deployment's template (a Deployment in a rolling update has replicas + surge; the local
//   control plane has no Deployment controller, so the test makes the pods), with short
//   leader-election timings; deleting a Pod makes the local node send SIGTERM, as kubelet;
// - a 2-pod AtlantisDeployment is rolled out while a long `atlantis apply` runs on atl-1;
// - hand-over 1: while atl-1 drains, the leader's Pod is deleted: it stops its reconciler,
//   releases the Lease and exits 0; a standby acquires the Lease well within the lease
//   duration (Lease times) and carries on the drain;
// - hand-over 2: the new leader's Pod is deleted, and the standby that takes the Lease is
//   deleted the moment the Lease names it (while it starts its reconciler): it releases the
//   Lease it just took, exits 0, and the last replica acquires within the lease duration;
// - that replica completes the rollout: the apply finishes on the draining pod, one delete
//   per old pod UID across every controller's log, one SIGTERM per old pod, no SIGKILL
//   anywhere, every deleted controller exited 0, and the Lease never had two holders at once
//   (each leader's release is logged before the next one's acquire).
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { V1Pod } from '@kubernetes/client-node';
import { apiPath, kubeRequest } from '../src/k8s/client.js';
import { Informer } from '../src/k8s/informer.js';
import type { Lease } from '../src/controller/leader-election.js';
import { atlantisDeployment, createAd, createVcsSecret, events, getAd, isReady, listPods, patchAdSpec } from './support/controller.js';
import { terraformConfig } from './support/git-repos.js';
import { freshNamespace, getCluster, getLocalNode, readFileOr, waitFor, type LocalNodeHandle, type TestCluster } from './support/k8s.js';
import { assertBuilt } from './support/cli.js';
import { type OperatorInstall, createControllerPod, installOperator } from './support/operator-install.js';
import { WEBHOOK_SECRET, type WorkflowEnv, createWorkflowEnv } from './support/workflow-env.js';

const NAME = 'atl';
const LEASE = 'atlantis-operator-leader';
const LEASE_MS = 4_000;
const RETRY_MS = 500;
const TIMINGS = ['--leader-elect-lease-duration', '4s', '--leader-elect-renew-deadline', '3s', '--leader-elect-retry-period', '500ms'];
/** Scheduling noise on a loaded 2-CPU machine: the node's watch, process signals. */
const SLACK_MS = 2_000;
const APPLY_SECONDS = 30;
const REPLICAS = ['atlantis-operator-0', 'atlantis-operator-1', 'atlantis-operator-2', 'atlantis-operator-3'];

let cluster: TestCluster;
let node: LocalNodeHandle;
let op: OperatorInstall;
let env: WorkflowEnv;
let adNs: string;
let leases: Informer<Lease> | undefined;

interface LeaseSeen {
  at: number;
  holder: string;
  transitions: number;
  acquireTime: string;
  renewTime: string;
  rv: string;
}
const leaseLog: LeaseSeen[] = [];
const onHolder: Array<(s: LeaseSeen) => void> = [];

before(async () => {
  assertBuilt();
  cluster = await getCluster();
  node = await getLocalNode();
  op = await installOperator(cluster, 'handover-ctrl');
  adNs = await freshNamespace('handover');
  env = await createWorkflowEnv({ ghHost: '127.0.202.1' });
  await createVcsSecret(cluster.kc, adNs, env.gh.token, WEBHOOK_SECRET);
  // Every version of the Lease, as the API server hands them out.
  leases = new Informer<Lease>(cluster.kc, apiPath('coordination.k8s.io/v1', 'leases', op.namespace), {
    fieldSelector: `metadata.name=${LEASE}`,
  });
  leases.onEvent((_type, l) => {
    const s: LeaseSeen = {
      at: Date.now(),
      holder: l.spec?.holderIdentity ?? '',
      transitions: l.spec?.leaseTransitions ?? 0,
      acquireTime: String(l.spec?.acquireTime ?? ''),
      renewTime: String(l.spec?.renewTime ?? ''),
      rv: l.metadata?.resourceVersion ?? '',
    };
    const prev = leaseLog[leaseLog.length - 1];
    if (prev?.rv === s.rv) return;
    leaseLog.push(s);
    if (s.holder !== prev?.holder) for (const f of onHolder) f(s);
  });
  await leases.start();
  step(`installed manifests/ in ${op.namespace}; server namespace ${adNs}`);
});

after(async () => {
  leases?.stop();
  await op?.uninstall();
  if (adNs) await kubeRequest(cluster.kc, 'DELETE', `/api/v1/namespaces/${adNs}`);
  await env?.close();
});

const T0 = Date.now();
/** Progress with the time since the file started, so a slow run shows where the time went. */
const step = (m: string) => console.log(`# [${((Date.now() - T0) / 1000).toFixed(1)}s] ${m}`);
const podOf = (holder: string): string => holder.split('_')[0] ?? '';
const holder = (): string => leaseLog[leaseLog.length - 1]?.holder ?? '';
const ms = (t: string): number => {
  const v = Date.parse(t);
  assert.ok(Number.isFinite(v), `a time: ${t}`);
  return v;
};

async function getPod(ns: string, name: string): Promise<V1Pod | undefined> {
  const r = await kubeRequest<V1Pod>(cluster.kc, 'GET', apiPath('v1', 'pods', ns, name));
  return r.status === 200 ? r.body : undefined;
}

const uids = new Map<string, string>(); // controller pod name -> uid
function ctrlLog(name: string): string {
  return readFileOr(node.logPath(op.namespace, name, 'controller', uids.get(name)));
}
function ctrlLines(name: string): Array<Record<string, unknown> & { msg: string; time: string }> {
  return ctrlLog(name)
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as Record<string, unknown> & { msg: string; time: string });
}
function logTime(name: string, msg: string): number | undefined {
  const l = ctrlLines(name).find((x) => x.msg === msg);
  return l ? ms(l.time) : undefined;
}
function allLogs(): string {
  return REPLICAS.map((n) => `--- ${n} (${uids.get(n)})\n${ctrlLog(n).split('\n').slice(-40).join('\n')}`).join('\n');
}

/** Deletes a controller pod as `kubectl delete pod` does (the template's grace period). */
async function deleteCtrl(name: string): Promise<number> {
  const t = Date.now();
  const r = await kubeRequest(cluster.kc, 'DELETE', apiPath('v1', 'pods', op.namespace, name));
  assert.equal(r.status, 200, `delete ${name}: ${JSON.stringify(r.body)}`);
  return t;
}

function nodeEventsOf(name: string) {
  return node.events({ namespace: op.namespace, pod: name }).filter((e) => e.uid === uids.get(name));
}

/** The controller pod's container exited 0 by itself after SIGTERM (no SIGKILL), and the pod is gone. */
async function exitedCleanly(name: string): Promise<{ termToExitMs: number }> {
  await waitFor(`${name} gone`, async () => !(await getPod(op.namespace, name)), { timeoutMs: 60_000, intervalMs: 200 });
  const evs = nodeEventsOf(name);
  const term = evs.find((e) => e.type === 'SIGTERM sent');
  const exit = evs.find((e) => e.type === 'ContainerExited');
  assert.ok(term, `${name}: SIGTERM sent`);
  assert.equal(evs.filter((e) => e.type === 'SIGKILL sent').length, 0, `${name}: no SIGKILL`);
  assert.deepEqual(
    [exit?.exitCode, exit?.signal ?? null],
    [0, null],
    `${name} exit: ${JSON.stringify(exit)}\n${ctrlLog(name).slice(-3000)}`,
  );
  const msgs = ctrlLines(name).map((l) => l.msg);
  // A replica stopped while its acquire was in flight never logs the acquire nor starts a
  // reconciler; it still releases the Lease it took.
  for (const m of ['Leader lease released', 'Controller stopped'])
    assert.ok(msgs.includes(m), `${name} logged "${m}":\n${ctrlLog(name).slice(-3000)}`);
  if (msgs.includes('Reconciler starting'))
    assert.ok(
      msgs.includes('Reconciler stopped') && msgs.indexOf('Reconciler stopped') < msgs.indexOf('Leader lease released'),
      `${name}: reconciler stopped before the release`,
    );
  return { termToExitMs: ms(exit!.time) - ms(term.time) };
}

/** The first Lease version from index `from` on whose holder satisfies `pred`. */
async function waitHolder(from: number, pred: (h: string) => boolean, what: string, timeoutMs = 30_000): Promise<LeaseSeen> {
  return waitFor(what, () => leaseLog.slice(from).find((s) => pred(s.holder)), { timeoutMs, intervalMs: 20 }).catch((e: Error) => {
    throw new Error(`${e.message}; Lease history: ${JSON.stringify(holdersSince(0))}\n${allLogs()}`);
  });
}

/** The Lease history from index `from`: holders in order, consecutive duplicates dropped. */
function holdersSince(from: number): string[] {
  const out: string[] = [];
  for (const s of leaseLog.slice(from)) if (out[out.length - 1] !== podOf(s.holder)) out.push(podOf(s.holder));
  return out;
}

async function podStatus(ip: string): Promise<{ shutting_down: boolean; in_progress_operations: number } | undefined> {
  try {
    return (await (await fetch(`http://${ip}:4141/status`, { signal: AbortSignal.timeout(1500) })).json()) as {
      shutting_down: boolean;
      in_progress_operations: number;
    };
  } catch {
    return undefined;
  }
}

describe('controller pods deleted during leader-election hand-overs', () => {
  it('the standby takes over within the lease duration, twice, and completes the rollout: one delete per pod, no SIGKILL', {
    timeout: 420_000,
  }, async () => {
    // Replica 0 first, so it leads; then three standbys.
    const start = async (name: string) => {
      const p = await createControllerPod(cluster, op, name, ['--namespace', adNs, ...TIMINGS]);
      uids.set(name, p.metadata!.uid!);
    };
    await start(REPLICAS[0]!);
    await waitFor('replica 0 to lead', () => podOf(holder()) === REPLICAS[0], { timeoutMs: 60_000, intervalMs: 100 }).catch((e: Error) => {
      throw new Error(`${e.message}\n${allLogs()}`);
    });
    for (const n of REPLICAS.slice(1)) await start(n);
    await waitFor(
      '4 controller pods Ready',
      async () => {
        const ps = await Promise.all(REPLICAS.map((n) => getPod(op.namespace, n)));
        return ps.every((p) => p && isReady(p));
      },
      { timeoutMs: 90_000, intervalMs: 250 },
    ).catch((e: Error) => {
      throw new Error(`${e.message}\n${allLogs()}`);
    });
    assert.equal(podOf(holder()), REPLICAS[0], 'the standbys did not take the Lease');
    assert.equal(leaseLog[leaseLog.length - 1]!.transitions, 0);
    step('4 controller pods Ready, replica 0 leads');

    await createAd(
      cluster.kc,
      atlantisDeployment(adNs, NAME, {
        replicas: 2,
        terminationGracePeriodSeconds: 90,
        atlantis: { env: [{ name: 'ATLANTIS_GH_API_URL', value: env.gh.url }] } as never,
      }),
    );
    const pods = await waitFor(
      '2 Ready server pods',
      async () => {
        const ps = await listPods(cluster.kc, adNs, NAME);
        return ps.length === 2 && ps.every(isReady) ? ps : undefined;
      },
      { timeoutMs: 120_000, intervalMs: 250 },
    ).catch((e: Error) => {
      throw new Error(`${e.message}\n${allLogs()}`);
    });
    step('2 server pods Ready');
    const oldUids = new Map(pods.map((p) => [p.metadata!.uid!, p.metadata!.name!]));

    // A long apply on atl-1, the first pod the rollout drains.
    const pod1 = pods.find((p) => p.metadata!.name === `${NAME}-1`)!;
    const url = `http://${pod1.status!.podIP}:4141`;
    const opened = await env.openPull(url, 900, 'handover-900', {
      'ho900/main.tf': terraformConfig({ marker: 'ho900', sleepSeconds: APPLY_SECONDS }),
    });
    assert.equal(opened.status, 200);
    await env.waitForComment(900, /^Ran Plan for dir/, { timeoutMs: 120_000 });
    assert.equal((await env.comment(url, 900, 'atlantis apply')).status, 200);
    await waitFor('the apply to run', async () => (await podStatus(pod1.status!.podIP!))?.in_progress_operations === 1, {
      timeoutMs: 60_000,
      intervalMs: 200,
    });
    const applyStarted = Date.now();
    step('apply running on atl-1');

    await patchAdSpec(cluster.kc, adNs, NAME, { image: 'atlantis-operator:v2' });
    await waitFor(
      'replica 0 to start draining atl-1',
      async () => (await getPod(adNs, `${NAME}-1`))?.metadata?.annotations?.['atlantis-operator.dev/drain'],
      { timeoutMs: 60_000, intervalMs: 100 },
    );
    await waitFor(
      'replica 0 to wait on the apply',
      () => /"msg":"Pod waiting".*"pod":"atl-1".*OperationsInProgress/.test(ctrlLog(REPLICAS[0]!)),
      { timeoutMs: 30_000, intervalMs: 100 },
    );

    step('atl-1 draining, replica 0 waits on the apply');
    // ---- Hand-over 1: the leader's pod is deleted while atl-1 drains.
    const h1From = leaseLog.length;
    const del0 = await deleteCtrl(REPLICAS[0]!);
    const x = await waitHolder(h1From, (h) => h !== '' && podOf(h) !== REPLICAS[0], 'a standby to take the Lease');
    const X = podOf(x.holder);
    const released0 = leaseLog.slice(h1From).find((s) => s.holder === '');
    assert.ok(released0, `replica 0 released the Lease: ${JSON.stringify(holdersSince(h1From))}`);
    assert.deepEqual(holdersSince(h1From - 1), [REPLICAS[0], '', X], 'leader, released, next leader: nobody in between');
    const take1 = ms(x.acquireTime) - del0;
    const gap1 = ms(x.acquireTime) - ms(released0.renewTime);
    console.log(
      `# hand-over 1: ${REPLICAS[0]} deleted -> ${X} acquired ${take1} ms later (${gap1} ms after the release; lease ${LEASE_MS} ms, retry ${RETRY_MS} ms)`,
    );
    assert.ok(take1 <= LEASE_MS + SLACK_MS, `acquired ${take1} ms after the delete`);
    assert.ok(gap1 >= 0 && gap1 <= RETRY_MS * 1.2 + SLACK_MS, `acquired ${gap1} ms after the release: it did not wait for an expiry`);
    assert.equal(x.transitions, 1);
    // The new leader carries on the drain it inherited: it sees the apply and waits.
    await waitFor(`${X} to wait on the apply`, () => /"msg":"Pod waiting".*"pod":"atl-1".*OperationsInProgress/.test(ctrlLog(X)), {
      timeoutMs: 30_000,
      intervalMs: 100,
    }).catch((e: Error) => {
      throw new Error(`${e.message}\n${allLogs()}`);
    });

    // ---- Hand-over 2: the leader's pod is deleted, and so is the standby that takes the
    // Lease, the moment the Lease names it (it is starting its reconciler then).
    const h2From = leaseLog.length;
    let delY: Promise<{ name: string; t: number; lease: LeaseSeen }> | undefined;
    onHolder.push((s) => {
      if (delY || s.holder === '' || podOf(s.holder) === X) return;
      const name = podOf(s.holder);
      delY = deleteCtrl(name).then((t) => ({ name, t, lease: s }));
    });
    const delX = await deleteCtrl(X);
    await waitFor('a standby to take the Lease from X', () => delY, { timeoutMs: LEASE_MS + SLACK_MS + 10_000, intervalMs: 20 }).catch(
      (e: Error) => {
        throw new Error(`${e.message}; Lease history: ${JSON.stringify(holdersSince(h2From - 1))}\n${allLogs()}`);
      },
    );
    const y = await delY!;
    const Y = y.name;
    const z = await waitHolder(h2From, (h) => h !== '' && ![REPLICAS[0], X, Y].includes(podOf(h)), 'the last standby to take the Lease');
    const Z = podOf(z.holder);
    assert.deepEqual(holdersSince(h2From - 1), [X, '', Y, '', Z], 'each deleted leader released the Lease before the next took it');
    const takeY = ms(y.lease.acquireTime) - delX;
    const takeZ = ms(z.acquireTime) - y.t;
    const releasedY = leaseLog
      .slice(h2From)
      .filter((s) => s.holder === '')
      .pop()!;
    const gapZ = ms(z.acquireTime) - ms(releasedY.renewTime);
    const yHeld = ms(releasedY.renewTime) - ms(y.lease.acquireTime);
    const yDeletedAfter = y.t - ms(y.lease.acquireTime);
    console.log(
      `# hand-over 2: ${X} deleted -> ${Y} acquired ${takeY} ms later; ${Y} deleted ${yDeletedAfter} ms after its acquire, released after holding ${yHeld} ms -> ${Z} acquired ${takeZ} ms after ${Y}'s deletion (${gapZ} ms after the release)`,
    );
    assert.ok(takeY <= LEASE_MS + SLACK_MS, `${Y} acquired ${takeY} ms after ${X}'s deletion`);
    assert.ok(takeZ <= LEASE_MS + SLACK_MS, `${Z} acquired ${takeZ} ms after ${Y}'s deletion`);
    assert.ok(gapZ >= 0 && gapZ <= RETRY_MS * 1.2 + SLACK_MS, `${Z} acquired ${gapZ} ms after the release: it did not wait for an expiry`);
    assert.equal(z.transitions, 3);
    // Both hand-overs happened while the apply ran on the draining pod.
    const still = await getPod(adNs, `${NAME}-1`);
    assert.equal(
      still?.metadata?.uid,
      pod1.metadata!.uid,
      `atl-1 was not replaced during the hand-overs (apply of ${APPLY_SECONDS} s started ${Date.now() - applyStarted} ms ago)`,
    );
    assert.equal((await podStatus(pod1.status!.podIP!))?.in_progress_operations, 1, 'the apply still ran after both hand-overs');
    step('both hand-overs done while the apply runs');

    // The deleted replicas: SIGTERM, release, exit 0, no overlap with the next leader.
    // No overlap: the Lease history above shows every release before the next acquire; and
    // each old leader's reconciler had stopped (logged before its release is sent) before the
    // next leader acquired.
    const t0 = await exitedCleanly(REPLICAS[0]!);
    const tX = await exitedCleanly(X);
    const tY = await exitedCleanly(Y);
    for (const [old, next] of [
      [REPLICAS[0]!, x],
      [X, y.lease],
      [Y, z],
    ] as const) {
      const stopped = logTime(old, 'Reconciler stopped');
      if (old !== Y) assert.ok(stopped !== undefined, `${old} logged "Reconciler stopped"`);
      if (stopped !== undefined)
        assert.ok(stopped <= ms(next.acquireTime), `${old}'s reconciler stopped before ${podOf(next.holder)} acquired`);
    }
    const yMsgs = ctrlLines(Y).map((l) => l.msg);
    const yFrom = yMsgs.includes('Leader lease acquired') ? yMsgs.indexOf('Leader lease acquired') : yMsgs.indexOf('Controller stopping');
    console.log(`# ${Y} from its acquire to its release: ${yMsgs.slice(yFrom, yMsgs.indexOf('Leader lease released') + 1).join(' | ')}`);
    console.log(`# SIGTERM to exit: ${REPLICAS[0]} ${t0.termToExitMs} ms, ${X} ${tX.termToExitMs} ms, ${Y} ${tY.termToExitMs} ms`);

    // ---- The last replica completes the rollout.
    const done = await waitFor(
      'the rollout to complete',
      async () => {
        const ad = await getAd(cluster.kc, adNs, NAME);
        const ps = await listPods(cluster.kc, adNs, NAME);
        return ad.status?.updatedReplicas === 2 &&
          ad.status.readyReplicas === 2 &&
          ps.length === 2 &&
          ps.every((p) => isReady(p) && !oldUids.has(p.metadata!.uid!) && p.spec?.containers[0]?.image === 'atlantis-operator:v2')
          ? ad
          : undefined;
      },
      { timeoutMs: 180_000, intervalMs: 500 },
    ).catch((e: Error) => {
      throw new Error(`${e.message}\n${allLogs()}`);
    });
    assert.equal(done.status?.currentRevision, done.status?.updateRevision);
    const applied = await env.waitForComment(900, /^Ran Apply for dir/, { timeoutMs: 30_000 });
    assert.match(applied.body, /ho900/);
    assert.ok(!env.commentsOn(900).some((c) => /Interrupted/.test(c.body)), 'the apply was not interrupted');
    assert.equal(podOf(holder()), Z, `${Z} still leads`);
    step('rollout complete');

    // One delete per old pod UID, across every controller's log; the deletes of the rollout
    // were made by the last leader (the apply outlived the others).
    const deletes = REPLICAS.flatMap((n) =>
      ctrlLines(n)
        .filter((l) => l.msg === 'Deleting pod')
        .map((l) => ({ by: n, uid: String(l.uid), pod: String(l.pod) })),
    );
    assert.deepEqual(deletes.map((d) => d.uid).sort(), [...oldUids.keys()].sort(), `one delete per old pod: ${JSON.stringify(deletes)}`);
    assert.ok(
      deletes.every((d) => d.by === Z),
      `deleted by ${Z}: ${JSON.stringify(deletes)}`,
    );
    for (const [uid, name] of oldUids) {
      const evs = node.events({ namespace: adNs, pod: name }).filter((e) => e.uid === uid);
      assert.equal(evs.filter((e) => e.type === 'SIGTERM sent').length, 1, `${name} (${uid}): one SIGTERM`);
    }
    const replaced = (await events(cluster.kc, adNs)).filter((e) => e.reason === 'PodReplaced');
    for (const name of oldUids.values())
      assert.equal(
        replaced.filter((e) => e.message.includes(`pod ${name} `)).length,
        1,
        `${name} replaced once: ${JSON.stringify(replaced)}`,
      );
    for (const ns of [adNs, op.namespace]) {
      const kills = node.events({ namespace: ns }).filter((e) => e.type === 'SIGKILL sent');
      assert.deepEqual(kills, [], `no SIGKILL in ${ns}`);
    }
    assert.ok(Date.now() - applyStarted >= APPLY_SECONDS * 1000);
  });
});
