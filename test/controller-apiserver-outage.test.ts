// kube-apiserver goes away for 30 s in the middle of a rollout and comes back (same port,
// certificates and etcd data; etcd and kube-controller-manager keep running). Two pods drain
// at once, each with a long `atlantis apply`: atl-1's apply ends while the API server is
// down, atl-0's only after it is back. The controller process must wait through the outage
// (log errors, no crash, no exit), resume on its own and complete the rollout, deleting each
// pod only after its apply ended as its /status reported (reason Drained), without a
// SIGKILL, every apply finished with its state written.
//
// This test stops an API server, so it always starts its own cluster and local node (in this
// process, dev/stack.ts), also under `make test`, where every other test shares one cluster
// that must stay up.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { V1Pod } from '@kubernetes/client-node';
import type { KubeClientConfig } from '../src/k8s/kubeconfig.js';
import { startStack, type Stack } from '../dev/stack.js';
import { kubeRequest, kubeRequestOk } from '../src/k8s/client.js';
import type { StatusBody } from '../src/contract/drain-protocol.js';
import { type CliProcess, assertBuilt, startCli } from './support/cli.js';
import { gatedConfig } from './support/git-repos.js';
import {
  atlantisDeployment,
  controllerRevision,
  createAd,
  createVcsSecret,
  ensureCrd,
  getAd,
  listPods,
  patchAdSpec,
} from './support/controller.js';
import {
  applyEndedAt,
  cond,
  describePods,
  describeStatus,
  parseJsonLog,
  rolloutComplete,
  serverStatus,
  waitForAd,
  waitForReadyPods,
  REVISION,
  type JsonLogLine,
} from './support/controller-asserts.js';
import { clientNodeConfig, readFileOr, waitFor, type TestCluster } from './support/k8s.js';
import { WEBHOOK_SECRET, type WorkflowEnv, createWorkflowEnv } from './support/workflow-env.js';

const NAME = 'atl';
const HOST = '127.0.201.1';
const OUTAGE_MS = 30_000;

let stack: Stack | undefined;
let cluster: TestCluster;
let kc: KubeClientConfig;
let env: WorkflowEnv | undefined;
let ctrl: CliProcess | undefined;
let tmp = '';
let passed = false;
const ns = 'outage';

function controllerLog(): JsonLogLine[] {
  return parseJsonLog(ctrl?.output() ?? '');
}
const ms = (iso: string) => Date.parse(iso);
const iso = (t: number) => new Date(t).toISOString();
const sleep = (t: number) => new Promise((r) => setTimeout(r, t));

before(async () => {
  assertBuilt();
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'apiserver-outage-'));
  // Our own control plane and local node, never the shared one of `make test`.
  stack = await startStack({ node: { crashBackoffBaseMs: 1_000 } });
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
  // Without --leader-elect: a leader that cannot renew its Lease for 30 s exits by design
  // (docs/leader-election.md); this test is about the reconciler riding out the outage.
  ctrl = startCli(['controller', '--kubeconfig', c.kubeconfigPath, '--namespace', ns, '--metrics-bind-address', `${HOST}:8080`]);
  await waitFor(
    'the controller to be ready',
    async () => {
      if (ctrl!.child.exitCode !== null) throw new Error(`the controller exited (${ctrl!.child.exitCode}):\n${ctrl!.output()}`);
      return (await fetch(`http://${HOST}:8080/readyz`, { signal: AbortSignal.timeout(1000) })).status === 200;
    },
    { timeoutMs: 60_000, intervalMs: 200 },
  );
});

after(async () => {
  const t0 = Date.now();
  if (ctrl && ctrl.child.exitCode === null) {
    ctrl.child.kill('SIGTERM');
    await Promise.race([ctrl.exited, sleep(15_000)]);
    if (ctrl.child.exitCode === null) ctrl.child.kill('SIGKILL');
  }
  if (!passed && ctrl) process.stderr.write(`controller output (last 20000 chars):\n${ctrl.output().slice(-20_000)}\n`);
  await env?.close();
  if (stack) {
    if (!passed) process.stderr.write(`cluster logs and local node state kept in ${stack.cluster.dir}\n`);
    const t1 = Date.now();
    await stack.stop({ keepDir: !passed });
    process.stderr.write(
      `teardown: controller and GitHub stand-in ${((t1 - t0) / 1000).toFixed(1)} s, cluster and local node ${((Date.now() - t1) / 1000).toFixed(1)} s\n`,
    );
  }
  if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
});

interface Seen {
  at: number;
  pod: string;
  status: StatusBody | undefined;
}

describe('kube-apiserver down for 30 s during a rollout', () => {
  it('the controller waits, resumes and completes the rollout; no busy pod deleted, no SIGKILL, applies complete', {
    timeout: 420_000,
  }, async () => {
    const node = stack!.node!;
    const c = stack!.cluster;
    await createAd(
      kc,
      atlantisDeployment(ns, NAME, {
        replicas: 2,
        terminationGracePeriodSeconds: 60,
        updateStrategy: { maxUnavailable: 2 },
        atlantis: { env: [{ name: 'ATLANTIS_GH_API_URL', value: env!.gh.url }] },
      } as never),
    );
    const pods = await waitForReadyPods(kc, ns, NAME, [`${NAME}-0`, `${NAME}-1`]);
    const rev1 = pods[0]!.metadata!.labels![REVISION]!;
    const byName = (n: string) => pods.find((p) => p.metadata!.name === `${NAME}-${n}`)!;
    // atl-1's apply is released while the API server is down, atl-0's after it is back.
    const work = [
      { pod: byName('1'), pull: 901, gate: path.join(tmp, 'gate-1') },
      { pod: byName('0'), pull: 902, gate: path.join(tmp, 'gate-0') },
    ].map((w) => ({
      ...w,
      ip: w.pod.status!.podIP!,
      url: `http://${w.pod.status!.podIP}:4141`,
      name: w.pod.metadata!.name!,
      uid: w.pod.metadata!.uid!,
      marker: `out${w.pull}`,
    }));
    for (const w of work) {
      assert.equal(
        (await env!.openPull(w.url, w.pull, `outage-${w.pull}`, { [`${w.marker}/main.tf`]: gatedConfig(w.marker, w.gate) })).status,
        200,
      );
    }
    for (const w of work) {
      await env!.waitForComment(w.pull, /^Ran Plan for dir/, { timeoutMs: 120_000 });
      assert.equal((await env!.comment(w.url, w.pull, 'atlantis apply')).status, 200);
    }
    await waitFor(
      'an apply running on both pods',
      async () => {
        const st = await Promise.all(work.map((w) => serverStatus(w.ip)));
        return st.every((s) => s?.operations.some((o) => o.command === 'apply'));
      },
      { timeoutMs: 60_000 },
    );

    // The rollout starts: both pods drain (maxUnavailable 2) and wait for their applies.
    const tV2 = Date.now();
    await patchAdSpec(kc, ns, NAME, { image: 'atlantis-operator:v2' });
    const rev2 = await controllerRevision(kc, await getAd(kc, ns, NAME));
    assert.notEqual(rev2, rev1);
    await waitForAd(
      kc,
      ns,
      NAME,
      'both pods draining, waiting on their applies',
      (ad) =>
        ad.status?.updateRevision === rev2 &&
        ad.status.drainingReplicas === 2 &&
        /atl-1: OperationsInProgress/.test(cond(ad, 'Progressing')?.message ?? '') &&
        /atl-0: OperationsInProgress/.test(cond(ad, 'Progressing')?.message ?? ''),
      60_000,
    );
    for (const w of work) {
      const st = await serverStatus(w.ip);
      assert.ok(st?.shutting_down && st.in_progress_operations === 1, `${w.name} drains with its apply running: ${JSON.stringify(st)}`);
    }

    // Watch the pods' /status through the outage (the pods do not need the API server).
    const seen: Seen[] = [];
    let polling = true;
    const poller = (async () => {
      while (polling) {
        await Promise.all(work.map(async (w) => seen.push({ at: Date.now(), pod: w.name, status: await serverStatus(w.ip, 1000) })));
        await sleep(300);
      }
    })();

    // kube-apiserver goes away: it stops listening at once on SIGTERM (its process may take
    // a few seconds more to exit; SIGKILL after 10 s).
    const tDown = Date.now();
    await c.stopApiServer();
    const tExited = Date.now();
    assert.equal(c.isRunning('kube-apiserver'), false);
    await assert.rejects(kubeRequest(kc, 'GET', '/readyz', undefined, { timeoutMs: 2_000 }), 'the API server does not answer');

    // atl-1's apply ends during the outage: the drained pod cannot be deleted yet.
    await sleep(8_000);
    const w1 = work[0]!;
    const w0 = work[1]!;
    fs.writeFileSync(w1.gate, 'go');
    await waitFor(
      'atl-1 to report no work left (during the outage)',
      async () => (await serverStatus(w1.ip))?.in_progress_operations === 0,
      { timeoutMs: 20_000 },
    );
    const left = tDown + OUTAGE_MS - Date.now();
    assert.ok(left > 0, 'atl-1 finished its apply while the API server was down');
    await sleep(left);
    assert.equal(ctrl!.child.exitCode, null, 'the controller process kept running through the outage');
    assert.ok(c.isRunning('etcd') && c.isRunning('kube-controller-manager'), 'etcd and kube-controller-manager kept running');

    // kube-apiserver is started again 30 s after it went away: same port, same data. It
    // accepts connections before /readyz says 200 (requests wait until it serves).
    const tRestart = Date.now();
    await c.restartApiServer();
    const tUp = Date.now();
    process.stderr.write(
      `kube-apiserver stopped at ${iso(tDown)} (process gone after ${((tExited - tDown) / 1000).toFixed(1)} s), started again at ${iso(tRestart)}, /readyz 200 after ${((tUp - tRestart) / 1000).toFixed(1)} s more\n`,
    );
    const outageLog = controllerLog().filter((l) => ms(l.time) > tDown && ms(l.time) < tUp);
    assert.ok(
      outageLog.some((l) => l.level === 'error' || l.level === 'warn'),
      'the controller logged the failing API server',
    );

    // The controller resumes: atl-1 (drained) is deleted; atl-0 still runs its apply and waits.
    const sigterm = (w: typeof w1) => node.events({ namespace: ns, pod: w.name }).find((e) => e.uid === w.uid && e.type === 'SIGTERM sent');
    await waitFor('the controller to delete the drained atl-1 after the outage', () => sigterm(w1), {
      timeoutMs: 120_000,
      intervalMs: 250,
    });
    process.stderr.write(
      `atl-1 deleted (SIGTERM) ${((ms(sigterm(w1)!.time) - tRestart) / 1000).toFixed(1)} s after the API server was started again\n`,
    );
    await waitForAd(
      kc,
      ns,
      NAME,
      'the controller to wait on atl-0 after the outage',
      (ad) =>
        /atl-0: OperationsInProgress/.test(cond(ad, 'Progressing')?.message ?? '') &&
        !/atl-1: OperationsInProgress/.test(cond(ad, 'Progressing')?.message ?? ''),
      60_000,
    );
    await sleep(3_000);
    const busy0 = await serverStatus(w0.ip);
    assert.equal(busy0?.in_progress_operations, 1, 'atl-0 still runs its apply');
    assert.equal(sigterm(w0), undefined, 'busy atl-0 not deleted');
    const tRelease0 = Date.now();
    fs.writeFileSync(w0.gate, 'go');

    const done = await waitForAd(
      kc,
      ns,
      NAME,
      'the rollout to complete',
      (ad) => rolloutComplete(2)(ad) && ad.status!.updateRevision === rev2,
      180_000,
    );
    assert.equal(done.status?.currentRevision, rev2);
    const finalPods = await waitForReadyPods(kc, ns, NAME, [`${NAME}-0`, `${NAME}-1`], { revision: rev2 });
    assert.ok(
      finalPods.every((p: V1Pod) => p.spec?.containers[0]?.image === 'atlantis-operator:v2'),
      describePods(finalPods),
    );
    polling = false;
    await poller;

    // Every apply completed, with its state written; no SIGKILL; each old pod was deleted
    // (every delete attempt, and the node's SIGTERM) only after its apply ended by the
    // server's own clock, and only as Drained (a /status read with no work left).
    const log = controllerLog();
    for (const w of work) {
      const applied = await env!.waitForComment(w.pull, /^Ran Apply for dir/, { timeoutMs: 30_000 });
      assert.match(applied.body, new RegExp(`applied ${w.marker}`));
      assert.doesNotMatch(applied.body, /Interrupted/);
      const ordinal = w.name.slice(-1);
      const statePath = path.join(
        node.pvDir(ns, `${NAME}-data-${ordinal}`),
        'repos',
        'acme/infra',
        String(w.pull),
        'default',
        w.marker,
        'terraform.tfstate',
      );
      const state = JSON.parse(fs.readFileSync(statePath, 'utf8')) as { resources: Array<{ type: string }> };
      assert.ok(
        state.resources.some((r) => r.type === 'terraform_data'),
        `${w.name}: the state holds the applied resource`,
      );

      const evs = node.events({ namespace: ns, pod: w.name }).filter((e) => e.uid === w.uid);
      assert.ok(!evs.some((e) => e.type === 'SIGKILL sent'), `${w.name} got no SIGKILL`);
      const logText = readFileOr(node.logPath(ns, w.name, 'atlantis', w.uid));
      const applyEnded = applyEndedAt(node, ns, w.name, w.uid);
      assert.ok(applyEnded !== undefined, `${w.name} logged the end of its apply`);
      const deletes = log.filter((l) => l.msg === 'Deleting pod' && l.uid === w.uid);
      assert.ok(deletes.length >= 1, `the controller deleted ${w.name}`);
      for (const d of deletes) {
        assert.equal(d.reason, 'Drained', `${w.name} deleted as Drained: ${JSON.stringify(d)}`);
        assert.ok(ms(d.time) >= applyEnded, `${w.name}: delete attempt at ${d.time} after its apply ended at ${iso(applyEnded)}`);
      }
      const term = sigterm(w)!;
      assert.ok(ms(term.time) >= applyEnded, `${w.name}: SIGTERM at ${term.time} after its apply ended at ${iso(applyEnded)}`);
      assert.ok(ms(term.time) >= tRestart, `${w.name} deleted only once the API server was back`);
      // /status as the test saw it: the pod reported its apply until it ended, and only then 0.
      const mine = seen.filter((s) => s.pod === w.name && s.status);
      assert.ok(
        mine.filter((s) => s.at < ms(term.time)).every((s) => s.status!.shutting_down),
        `${w.name} reported shutting_down until deleted`,
      );
      assert.ok(
        !mine.some((s) => s.at > applyEnded + 2_000 && s.status!.in_progress_operations > 0),
        `${w.name}: no work reported after its apply ended`,
      );
      assert.match(logText, /"msg":"Drain finished","exitCode":0/);
      assert.doesNotMatch(logText, /Interrupting terraform|Killing terraform/);
    }
    const [end1, end0] = work.map((w) => applyEndedAt(node, ns, w.name, w.uid));
    assert.ok(end1! > tDown && end1! < tRestart, `atl-1's apply ended during the outage (${iso(end1!)})`);
    assert.ok(end0! >= tRelease0 && end0! > tUp, `atl-0's apply ended after the API server was back (${iso(end0!)})`);
    // atl-1 was drained during the outage: the controller tried to delete it then, failed and retried.
    const duringOutage = log.filter((l) => ms(l.time) > tDown && ms(l.time) < tRestart);
    assert.ok(
      duringOutage.some((l) => l.msg === 'Deleting pod' && l.uid === w1.uid),
      'the controller tried to delete the drained atl-1 while the API server was down',
    );
    assert.ok(
      duringOutage.some((l) => l.msg === 'Reconcile failed'),
      'and logged the failure',
    );
    // Pods created in the rollout are at the new revision.
    const created = log.filter((l) => l.msg === 'Creating pod' && ms(l.time) >= tV2);
    assert.deepEqual(
      [...new Set(created.map((l) => `${l.pod}@${l.revision}`))].sort(),
      [`${NAME}-0@${rev2}`, `${NAME}-1@${rev2}`],
      describeStatus(done),
    );
    assert.deepEqual(
      node.events({ namespace: ns }).filter((e) => e.type === 'SIGKILL sent'),
      [],
      'no SIGKILL in the namespace',
    );

    // The controller process kept running.
    assert.equal(ctrl!.child.exitCode, null, 'the controller is still running');
    assert.equal((await fetch(`http://${HOST}:8080/healthz`)).status, 200);
    assert.ok(c.isRunning('etcd') && c.isRunning('kube-apiserver') && c.isRunning('kube-controller-manager'));
    assert.ok((await listPods(kc, ns, NAME)).length === 2);
    passed = true;
  });
});
