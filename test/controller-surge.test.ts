// Surge-then-drain rollouts on the real local control plane: an AtlantisDeployment of 2 pods
// sharing a real redis-server (lockingDB redis, maxSurge 1) rolled out three times, each with
// a long `atlantis apply` held on one pod by a gate file:
//
// 1. the scenario: webhooks delivered throughout through the Service (dev/service-proxy, the
//    local cluster's kube-proxy), every delivery answered 2xx and every command run once;
//    each ordinal's new pod is Ready before its old pod's drain starts, and the old pod is
//    out of the Service (not Ready) before its deletion (the pods' own watch order); never
//    more than replicas + maxSurge pods; the busy pod deleted only after its apply ended; no SIGKILL; status,
//    events, metric and `kubectl get atd` show the surge while it lasts;
// 2. the controller SIGKILLed mid-surge (its new pod just created) and started again: it
//    carries on, never more pods, nothing deleted undrained, no pod created twice;
// 3. kube-apiserver stopped mid-surge and started again (the busy pod's apply ends during the
//    outage): the controller waits, resumes, and deletes that pod only once the API server is
//    back and its /status said drained.
//
// It stops an API server, so it starts its own cluster and local node (dev/stack.ts), also
// under `make test`.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { V1Pod } from '@kubernetes/client-node';
import { startStack, type Stack } from '../dev/stack.js';
import { podNameFor } from '../src/controller/resources/index.js';
import { kubeRequest, kubeRequestOk } from '../src/k8s/client.js';
import type { KubeClientConfig } from '../src/k8s/kubeconfig.js';
import { type CliProcess, assertBuilt, startCli } from './support/cli.js';
import { childList } from './support/children.js';
import { gatedConfig } from './support/git-repos.js';
import {
  atlantisDeployment,
  controllerRevision,
  createAd,
  createVcsSecret,
  ensureCrd,
  getAd,
  isReady,
  listPods,
  patchAdSpec,
  createSharedStateKeySecret,
} from './support/controller.js';
import {
  applyEndedAt,
  cond,
  eventsSince,
  parseJsonLog,
  recordPods,
  rolloutComplete,
  serverLog,
  serverStatus,
  waitForAd,
  waitForReadyPods,
  REVISION,
  type PodRecorder,
} from './support/controller-asserts.js';
import { maxLive, podHistories, startDeliveries, watchStatuses } from './support/controller-surge.js';
import { clientNodeConfig, waitFor, type TestCluster } from './support/k8s.js';
import { startRedisServer, type RedisServer } from './support/redis-server.js';
import { WEBHOOK_SECRET, type WorkflowEnv, createWorkflowEnv } from './support/workflow-env.js';

const NAME = 'sg';
const HOST = '127.0.203.1';
const ns = 'surge';
const REPLICAS = 2;
const MAX_SURGE = 1;

let stack: Stack | undefined;
let cluster: TestCluster;
let kc: KubeClientConfig;
let env: WorkflowEnv | undefined;
let redis: RedisServer | undefined;
let sharedKeyRef: { name: string; key: string };
let tmp = '';
let passed = 0;
/** Every controller process of the file, in start order; the last one runs. */
const ctrls = childList();
const sleep = (t: number) => new Promise((r) => setTimeout(r, t));

const podName = (ordinal: number, rev: string) => podNameFor(NAME, ordinal, rev, 'revision');
const ordinalOf = (r: { name: string }) => Number(r.name.split('-')[1]);
const controllerLog = () => ctrls.flatMap((c) => parseJsonLog(c.output()));

async function startController(): Promise<CliProcess> {
  const c = startCli(['controller', '--kubeconfig', cluster.kubeconfigPath, '--namespace', ns, '--metrics-bind-address', `${HOST}:8080`]);
  ctrls.push(c);
  await waitFor(
    'the controller to be ready',
    async () => {
      if (c.child.exitCode !== null) throw new Error(`the controller exited (${c.child.exitCode}):\n${c.output()}`);
      return (await fetch(`http://${HOST}:8080/readyz`, { signal: AbortSignal.timeout(1000) }).catch(() => undefined))?.status === 200;
    },
    { timeoutMs: 60_000, intervalMs: 200 },
  );
  return c;
}

before(async () => {
  assertBuilt();
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'surge-'));
  stack = await startStack({ node: { crashBackoffBaseMs: 1_000 }, serviceProxy: { namespace: ns } });
  const c = stack.cluster;
  kc = c.kubeConfig;
  cluster = {
    kubeconfigPath: c.kubeconfigPath,
    kc,
    full: clientNodeConfig(c.kubeconfigPath),
    server: c.server,
    shared: false,
    kubectl: (args, opts) => c.kubectl(args, opts),
  };
  await ensureCrd(cluster);
  await kubeRequestOk(kc, 'POST', '/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } });
  await waitFor(
    `ServiceAccount ${ns}/default`,
    async () => (await kubeRequest(kc, 'GET', `/api/v1/namespaces/${ns}/serviceaccounts/default`)).status === 200,
    { timeoutMs: 30_000 },
  );
  env = await createWorkflowEnv();
  await createVcsSecret(kc, ns, env.gh.token, WEBHOOK_SECRET);
  sharedKeyRef = (await createSharedStateKeySecret(kc, ns)).ref;
  redis = await startRedisServer();
  await startController();
});

after(async () => {
  for (const c of ctrls) if (c.child.exitCode === null && c.child.signalCode === null) c.child.kill('SIGTERM');
  await Promise.race([Promise.all(ctrls.map((c) => c.exited)), sleep(15_000)]);
  ctrls.killAll();
  const ok = passed === 3;
  if (!ok)
    process.stderr.write(
      `controller output (last 20000 chars):\n${ctrls
        .map((c) => c.output())
        .join('\n')
        .slice(-20_000)}\n`,
    );
  await env?.close();
  await redis?.cleanup();
  if (stack) {
    if (!ok) process.stderr.write(`cluster logs and local node state kept in ${stack.cluster.dir}\n`);
    await stack.stop({ keepDir: !ok });
  }
  if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
});

interface Busy {
  pull: number;
  gate: string;
  marker: string;
  pod: V1Pod;
  name: string;
  uid: string;
  ip: string;
}

/** A PR whose apply runs until its gate file exists, on whichever pod owns it; returns that pod. */
async function busyApply(pull: number, pods: V1Pod[]): Promise<Busy> {
  const marker = `sg${pull}`;
  const gate = path.join(tmp, `gate-${pull}`);
  const url = `http://${pods[0]!.status!.podIP}:4141`;
  assert.equal((await env!.openPull(url, pull, `surge-${pull}`, { [`${marker}/main.tf`]: gatedConfig(marker, gate) })).status, 200);
  await env!.waitForComment(pull, /^Ran Plan for dir/, { timeoutMs: 120_000 });
  assert.equal((await env!.comment(url, pull, 'atlantis apply')).status, 200);
  const pod = await waitFor(
    `the apply of PR #${pull} to run`,
    async () => {
      for (const p of pods) if ((await serverStatus(p.status!.podIP!))?.operations.some((o) => o.command === 'apply')) return p;
      return undefined;
    },
    { timeoutMs: 60_000, intervalMs: 200 },
  );
  return { pull, gate, marker, pod, name: pod.metadata!.name!, uid: pod.metadata!.uid!, ip: pod.status!.podIP! };
}

/** The busy pod draining beside its Ready replacement, its apply still running: status says so. */
async function busyDraining(b: Busy, rev: string): Promise<void> {
  await waitForAd(
    kc,
    ns,
    NAME,
    `${b.name} draining with its apply, beside its Ready replacement`,
    (ad) =>
      ad.status?.updateRevision === rev &&
      ad.status.surgeReplicas === 1 &&
      ad.status.rolloutPhase === 'Draining' &&
      new RegExp(`${b.name}: OperationsInProgress`).test(cond(ad, 'Progressing')?.message ?? ''),
    120_000,
  );
  const st = await serverStatus(b.ip);
  assert.ok(st?.shutting_down && st.in_progress_operations === 1, `${b.name} drains with its apply running: ${JSON.stringify(st)}`);
}

/**
 * The checks every surge rollout passes, from the pods' watches (the cluster's order), the
 * servers' and controllers' logs and the local node's records.
 */
async function checkSurgeRollout(old: V1Pod[], rev: string, recorders: PodRecorder[], busy: Busy): Promise<void> {
  const node = stack!.node!;
  const hist = podHistories(recorders, ordinalOf);
  assert.ok(maxLive(hist.values()) <= REPLICAS + MAX_SURGE, `never more than replicas + maxSurge pods (saw ${maxLive(hist.values())})`);
  for (let i = 0; i < REPLICAS; i++) {
    const created = [...hist.values()].filter((h) => h.ordinal === i && h.revision === rev);
    assert.equal(created.length, 1, `one pod of ordinal ${i} at the new revision: ${created.map((h) => h.uid).join(', ')}`);
  }
  const log = controllerLog();
  for (const p of old) {
    const h = hist.get(p.metadata!.uid!)!;
    const replacement = [...hist.values()].find((x) => x.ordinal === h.ordinal && x.revision === rev)!;
    assert.equal(replacement.name, podName(h.ordinal, rev));
    assert.ok(h.drainSeen !== undefined, `${h.name} was drained`);
    assert.ok(
      replacement.readySeen !== undefined && replacement.readySeen < h.drainSeen,
      `${replacement.name} Ready (at ${replacement.readySeen}) before ${h.name}'s drain started (at ${h.drainSeen})`,
    );
    assert.ok(h.deletingSeen !== undefined && h.deletingSeen > h.drainSeen, `${h.name} deleted after its drain`);
    // Out of the Service first (a watch event of its own; equal only when one list showed both).
    assert.ok(
      h.unreadySeen !== undefined && h.unreadySeen <= h.deletingSeen,
      `${h.name} not Ready (at ${h.unreadySeen}) before its deletion (at ${h.deletingSeen})`,
    );
    const deletes = log.filter((l) => l.msg === 'Deleting pod' && l.uid === h.uid);
    assert.ok(deletes.length >= 1, `the controller deleted ${h.name}`);
    for (const d of deletes) assert.equal(d.reason, 'Drained', `${h.name} deleted as Drained only: ${JSON.stringify(d)}`);
    const evs = node.events({ namespace: ns, pod: h.name }).filter((e) => e.uid === h.uid);
    assert.equal(evs.filter((e) => e.type === 'SIGTERM sent').length, 1, `${h.name} stopped once`);
    assert.ok(!evs.some((e) => e.type === 'SIGKILL sent'), `${h.name} got no SIGKILL`);
    assert.ok(
      serverLog(node, ns, h.name, h.uid).some((l) => l.msg === 'Drain finished' && l.exitCode === 0),
      `${h.name} drained cleanly`,
    );
  }
  // The busy pod: every delete attempt and the node's SIGTERM after its apply ended, by the server's clock.
  const ended = applyEndedAt(node, ns, busy.name, busy.uid);
  assert.ok(ended !== undefined, `${busy.name} logged the end of its apply`);
  for (const d of log.filter((l) => l.msg === 'Deleting pod' && l.uid === busy.uid)) assert.ok(d.at >= ended, `delete at ${d.time}`);
  const term = node.events({ namespace: ns, pod: busy.name }).find((e) => e.uid === busy.uid && e.type === 'SIGTERM sent')!;
  assert.ok(Date.parse(term.time) >= ended, `${busy.name}: SIGTERM at ${term.time} after its apply ended`);
  const applied = env!.commentsOn(busy.pull).filter((c) => /^Ran Apply for dir/.test(c.body));
  assert.equal(applied.length, 1, 'the apply answered once');
  assert.match(applied[0]!.body, new RegExp(`applied ${busy.marker}`));
  assert.doesNotMatch(applied[0]!.body, /Interrupted/);
}

/** Every command of these PRs ran once over all server pods (old and new), by their own logs. */
function commandsRun(pulls: number[]): Map<number, number> {
  const node = stack!.node!;
  const counts = new Map(pulls.map((p) => [p, 0]));
  const uids = new Set(node.events({ namespace: ns }).flatMap((e) => (e.uid && e.pod ? [`${e.pod} ${e.uid}`] : [])));
  for (const key of uids) {
    const [pod, uid] = key.split(' ') as [string, string];
    for (const l of serverLog(node, ns, pod, uid))
      if ((l.msg === 'Command finished' || l.msg === 'Command failed') && counts.has(Number(l.pull)))
        counts.set(Number(l.pull), counts.get(Number(l.pull))! + 1);
  }
  return counts;
}

async function currentPods(rev: string): Promise<V1Pod[]> {
  return waitForReadyPods(
    kc,
    ns,
    NAME,
    [0, 1].map((i) => podName(i, rev)),
    { revision: rev, timeoutMs: 150_000 },
  );
}

async function startRollout(image: string): Promise<string> {
  await patchAdSpec(kc, ns, NAME, { image });
  return controllerRevision(kc, await getAd(kc, ns, NAME));
}

describe('surge-then-drain rollouts on Redis (maxSurge 1)', () => {
  let rev = '';
  let pods: V1Pod[] = [];

  it('the scenario: deliveries all answered once, new pod Ready before the old drains, busy pod deleted after its apply', {
    timeout: 420_000,
  }, async () => {
    const ad = atlantisDeployment(ns, NAME, {
      replicas: REPLICAS,
      terminationGracePeriodSeconds: 60,
      updateStrategy: { maxSurge: MAX_SURGE },
      atlantis: {
        env: [{ name: 'ATLANTIS_GH_API_URL', value: env!.gh.url }],
        lockingDB: { type: 'redis', redis: { host: redis!.host, port: redis!.port, sharedStateKeySecretRef: sharedKeyRef } },
      },
    });
    await createAd(kc, ad);
    rev = await controllerRevision(kc, ad);
    pods = await currentPods(rev);
    await waitForAd(kc, ns, NAME, 'a complete rollout', rolloutComplete(REPLICAS));
    const busy = await busyApply(100, pods);

    const rec = await recordPods(kc, ns, NAME, { replicas: () => REPLICAS });
    const statuses = await watchStatuses(kc, ns, NAME);
    const newEvents = await eventsSince(kc, ns, NAME);
    const proxy = stack!.serviceProxy!;
    const service = await waitFor(
      `Service ${NAME} with ${REPLICAS} endpoints`,
      async () => (proxy.endpoints(NAME).length === REPLICAS ? proxy.addressOf(NAME, 'http') : undefined),
      { timeoutMs: 30_000, intervalMs: 100 },
    );
    const deliveries = startDeliveries(env!, service, { firstPull: 200, max: 40, intervalMs: 1500 });
    const old = pods;
    rev = await startRollout('atlantis-operator:v2');

    await busyDraining(busy, rev);
    // Mid-rollout, kubectl get atd says what is going on: 2 wanted, 1 pod beyond them, draining.
    const busyOrdinal = ordinalOf(busy);
    const want = ['2', '2', busyOrdinal === 1 ? '1' : '2', '1', '1', 'Draining'];
    await waitFor(
      `kubectl get atd to show ${want.join(' ')}`,
      async () => {
        const r = await cluster.kubectl(['-n', ns, 'get', 'atd', NAME, '--no-headers']);
        const cols = r.stdout.trim().split(/\s+/);
        return JSON.stringify(cols.slice(1, 7)) === JSON.stringify(want) ? cols : undefined;
      },
      { timeoutMs: 30_000, intervalMs: 250 },
    );
    const metrics = await (await fetch(`http://${HOST}:8080/metrics`)).text();
    assert.match(metrics, /^atlantis_operator_surge_pods 1$/m);
    assert.ok(
      (await listPods(kc, ns, NAME)).some((p) => p.metadata!.uid === busy.uid),
      `${busy.name} is not deleted while its apply runs`,
    );
    fs.writeFileSync(busy.gate, 'go');

    await waitForAd(
      kc,
      ns,
      NAME,
      'the rollout to complete',
      (a) => rolloutComplete(REPLICAS)(a) && a.status!.updateRevision === rev,
      180_000,
    );
    pods = await currentPods(rev);
    const sent = await deliveries.stop();
    await rec.stop();
    statuses.stop();
    await env!.waitForComment(busy.pull, /^Ran Apply for dir/, { timeoutMs: 30_000 });
    await checkSurgeRollout(old, rev, [rec], busy);

    // Every delivery answered 2xx, every PR planned once (its comment, and one run over all pods).
    assert.ok(sent.length >= 5, `deliveries throughout the rollout (${sent.length})`);
    const failed = sent.filter((d) => d.status === undefined || d.status < 200 || d.status >= 300);
    assert.deepEqual(
      failed,
      [],
      `deliveries not answered 2xx; the Service's endpoint changes: ${JSON.stringify(proxy.changes().filter((c) => c.service === NAME))}`,
    );
    for (const d of sent) await env!.waitForComment(d.pull, /^Ran Plan for dir/, { timeoutMs: 120_000 });
    for (const d of sent) assert.equal(env!.commentsOn(d.pull).filter((c) => /^Ran Plan for dir/.test(c.body)).length, 1, `PR #${d.pull}`);
    for (const [pull, n] of commandsRun([busy.pull, ...sent.map((d) => d.pull)]))
      assert.equal(n, pull === busy.pull ? 2 : 1, `PR #${pull}: commands run once each (plan${pull === busy.pull ? ', apply' : ''})`);

    // Status, events and the metric showed the surge while it lasted.
    const phases = statuses.statuses.map((s) => s.rolloutPhase);
    assert.ok(phases.includes('Surging') && phases.includes('Draining'), `phases seen: ${[...new Set(phases)].join(', ')}`);
    assert.equal(phases.at(-1), 'Complete');
    assert.equal(Math.max(...statuses.statuses.map((s) => s.surgeReplicas ?? 0)), 1);
    const surged = (await newEvents()).filter((e) => e.reason === 'SurgePodCreated');
    assert.deepEqual(surged.map((e) => e.message.split(' ')[2]).sort(), [podName(0, rev), podName(1, rev)]);
    assert.match(await (await fetch(`http://${HOST}:8080/metrics`)).text(), /^atlantis_operator_surge_pods 0$/m);
    process.stderr.write(
      `scenario: ${sent.length} deliveries during the rollout, busy pod ${busy.name}, phases ${[...new Set(phases)].join(' > ')}\n`,
    );
    passed++;
  });

  it('the controller SIGKILLed mid-surge and started again carries on: no extra pod, nothing deleted undrained', {
    timeout: 300_000,
  }, async () => {
    const busy = await busyApply(300, pods);
    const rec = await recordPods(kc, ns, NAME, { replicas: () => REPLICAS });
    const old = pods;
    rev = await startRollout('atlantis-operator:v3');
    const surge = await waitFor(
      'the first surge pod',
      async () => {
        const ps = await listPods(kc, ns, NAME);
        return ps.some((p) => p.metadata?.labels?.[REVISION] === rev) ? ps : undefined;
      },
      { timeoutMs: 60_000, intervalMs: 100 },
    );
    assert.equal(surge.length, REPLICAS + MAX_SURGE, 'killed mid-surge');
    process.stderr.write(`controller SIGKILLed with pods ${surge.map((p) => p.metadata!.name).join(', ')}; busy pod ${busy.name}\n`);
    const killed = ctrls.at(-1)!;
    killed.child.kill('SIGKILL');
    await killed.exited;
    await startController();

    await busyDraining(busy, rev);
    fs.writeFileSync(busy.gate, 'go');
    await waitForAd(
      kc,
      ns,
      NAME,
      'the rollout to complete',
      (a) => rolloutComplete(REPLICAS)(a) && a.status!.updateRevision === rev,
      180_000,
    );
    pods = await currentPods(rev);
    await rec.stop();
    await env!.waitForComment(busy.pull, /^Ran Apply for dir/, { timeoutMs: 30_000 });
    await checkSurgeRollout(old, rev, [rec], busy);
    const afterKill = parseJsonLog(ctrls.at(-1)!.output());
    assert.ok(
      afterKill.some((l) => l.msg === 'Deleting pod' && l.uid === busy.uid),
      'the restarted controller finished the drain it found',
    );
    passed++;
  });

  it('kube-apiserver stopped mid-surge and started again: the drained pod is deleted once it is back', { timeout: 300_000 }, async () => {
    const c = stack!.cluster;
    const busy = await busyApply(400, pods);
    const rec1 = await recordPods(kc, ns, NAME, { replicas: () => REPLICAS });
    const old = pods;
    rev = await startRollout('atlantis-operator:v4');
    await busyDraining(busy, rev);

    // The watches end with the API server; a new one starts once it is back (nothing changes in between).
    await rec1.stop();
    await c.stopApiServer();
    const outageStart = Date.now();
    fs.writeFileSync(busy.gate, 'go');
    await waitFor(
      'the busy pod to report its apply ended (during the outage)',
      async () => (await serverStatus(busy.ip))?.in_progress_operations === 0,
      {
        timeoutMs: 30_000,
      },
    );
    await sleep(Math.max(0, 10_000 - (Date.now() - outageStart)));
    assert.equal(ctrls.at(-1)!.child.exitCode, null, 'the controller kept running through the outage');
    const tRestart = Date.now();
    await c.restartApiServer();
    const rec2 = await recordPods(kc, ns, NAME, { replicas: () => REPLICAS });

    await waitForAd(
      kc,
      ns,
      NAME,
      'the rollout to complete',
      (a) => rolloutComplete(REPLICAS)(a) && a.status!.updateRevision === rev,
      180_000,
    );
    pods = await currentPods(rev);
    await rec2.stop();
    await env!.waitForComment(busy.pull, /^Ran Apply for dir/, { timeoutMs: 30_000 });
    await checkSurgeRollout(old, rev, [rec1, rec2], busy);
    const term = stack!.node!.events({ namespace: ns, pod: busy.name }).find((e) => e.uid === busy.uid && e.type === 'SIGTERM sent')!;
    assert.ok(Date.parse(term.time) >= tRestart, `${busy.name} deleted only once the API server was back`);
    assert.ok(pods.every((p) => isReady(p)));
    passed++;
  });
});
