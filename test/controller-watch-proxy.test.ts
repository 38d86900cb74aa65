// The controller process on a bad network: its kubeconfig points at a TCP proxy on loopback
// (TLS end to end through it) in front of the real API server. During a rollout that waits
// on a long `atlantis apply`, the proxy (a) cuts every connection, then (b) turns into a
// black hole for longer than the controller's --watch-silence-timeout: open connections stay
// open but carry nothing, so the watches hang without an error. While it is silent the
// AtlantisDeployment's image is changed directly on the API server. Then the proxy passes
// again. The informers must come back on their own (errors after the cut, the silence
// watchdog after the black hole) and the controller must act on the change it missed: the
// rollout ends at the image set during the gap, never at the one it replaced, and no
// terraform run is harmed. (test/informer.test.ts covers the Informer class alone.)
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { finished } from 'node:stream/promises';
import { after, before, describe, it } from 'node:test';
import type { V1Pod } from '@kubernetes/client-node';
import { API_VERSION, PLURAL } from '../src/controller/types.js';
import { withTimeout } from '../src/async.js';
import { apiPath } from '../src/k8s/client.js';
import { type CliProcess, startCli } from './support/cli.js';
import { gatedConfig } from './support/git-repos.js';
import { atlantisDeployment, controllerRevision, createAd, getAd, listPods, patchAdSpec } from './support/controller.js';
import { controllerTestNamespace } from './support/controller-suite.js';
import {
  DRAIN,
  REVISION,
  applyEndedAt,
  cond,
  describePods,
  describeStatus,
  parseJsonLog,
  rolloutComplete,
  serverStatus,
  waitForAd,
  waitForReadyPods,
  type JsonLogLine,
} from './support/controller-asserts.js';
import { deleteNamespace, getLocalNode, readFileOr, waitFor, type TestCluster } from './support/k8s.js';
import { TcpProxy } from './support/tcp-proxy.js';
import { reportOpenHandlesAfter } from './support/open-handles.js';
import { type WorkflowEnv, createWorkflowEnv } from './support/workflow-env.js';

const NAME = 'atl';
const HOST = '127.0.201.2';
/** --watch-silence-timeout of the controller; its watchdog looks every SILENCE_MS / 4. */
const SILENCE_MS = 4_000;
const WATCHDOG_TICK_MS = SILENCE_MS / 4;
const PULL = 801;

let cluster: TestCluster;
let env: WorkflowEnv;
let ns: string;
let proxy: TcpProxy;
let ctrl: CliProcess | undefined;
let tmp: string;
let passed = false;

function controllerLog(): JsonLogLine[] {
  return parseJsonLog(ctrl?.output() ?? '');
}
const ms = (iso: string) => Date.parse(iso);

/** The admin kubeconfig, but with the proxy as server (the API server's certificate names kubernetes.default.svc). */
function proxyKubeconfig(): string {
  const cl = cluster.full.getCurrentCluster()!;
  const user = cluster.full.getCurrentUser()!;
  const b64 = (data: string | undefined, file: string | undefined) => data ?? fs.readFileSync(file!).toString('base64');
  const text = [
    'apiVersion: v1',
    'kind: Config',
    'clusters:',
    '- name: via-proxy',
    '  cluster:',
    `    server: https://${proxy.address}`,
    '    tls-server-name: kubernetes.default.svc',
    `    certificate-authority-data: ${b64(cl.caData, cl.caFile)}`,
    'users:',
    '- name: admin',
    '  user:',
    `    client-certificate-data: ${b64(user.certData, user.certFile)}`,
    `    client-key-data: ${b64(user.keyData, user.keyFile)}`,
    'contexts:',
    '- name: via-proxy',
    '  context: {cluster: via-proxy, user: admin}',
    'current-context: via-proxy',
    '',
  ].join('\n');
  const file = path.join(tmp, 'controller.kubeconfig');
  fs.writeFileSync(file, text, { mode: 0o600 });
  return file;
}

before(async () => {
  env = await createWorkflowEnv();
  ({ cluster, ns } = await controllerTestNamespace('watchproxy', { env }));
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'watch-proxy-'));
  const api = new URL(cluster.server);
  proxy = new TcpProxy({ host: HOST, target: { host: api.hostname, port: Number(api.port) } });
  await proxy.listen();
  ctrl = startCli([
    'controller',
    '--kubeconfig',
    proxyKubeconfig(),
    '--namespace',
    ns,
    '--metrics-bind-address',
    `${HOST}:8080`,
    '--watch-silence-timeout',
    `${SILENCE_MS / 1000}s`,
  ]);
  await waitFor(
    'the controller to be ready',
    async () => {
      if (ctrl!.child.exitCode !== null) throw new Error(`the controller exited (${ctrl!.child.exitCode}):\n${ctrl!.output()}`);
      return (await fetch(`http://${HOST}:8080/readyz`, { signal: AbortSignal.timeout(1000) })).status === 200;
    },
    { timeoutMs: 60_000, intervalMs: 200 },
  );
});

/**
 * One step of the teardown: at most `ms`, and whatever it does (hangs, throws) the next step
 * still runs; a step that does not finish in time is named on stderr.
 */
async function teardownStep(what: string, ms: number, fn: () => Promise<unknown>): Promise<void> {
  try {
    if ((await withTimeout(fn(), ms)) === 'timeout') process.stderr.write(`after(): ${what} did not finish within ${ms} ms\n`);
  } catch (e) {
    process.stderr.write(`after(): ${what} failed: ${(e as Error).message}\n`);
  }
}

after(async () => {
  const c = ctrl;
  if (c) {
    const running = () => c.child.exitCode === null && c.child.signalCode === null;
    if (running()) {
      c.child.kill('SIGTERM');
      await teardownStep('the controller to exit on SIGTERM', 15_000, () => c.exited);
    }
    if (running()) {
      c.child.kill('SIGKILL');
      await teardownStep('the controller to exit on SIGKILL', 5_000, () => c.exited);
    }
    // The rest of its output, then its pipes are closed here: a process that inherited them
    // must not keep this one alive.
    await teardownStep('the controller output to end', 2_000, () =>
      Promise.all([c.child.stdout, c.child.stderr].map((s) => (s ? finished(s).catch(() => {}) : undefined))),
    );
    c.child.stdout?.destroy();
    c.child.stderr?.destroy();
    if (!passed)
      process.stderr.write(`controller output (last 20000 chars):\n${c.output().slice(-20_000)}\nproxy: ${JSON.stringify(proxy?.stats)}\n`);
  }
  if (proxy) await teardownStep('proxy.close()', 10_000, () => proxy.close());
  if (env) await teardownStep('the GitHub stand-in to close', 10_000, () => env.close());
  // the server pods are processes on this machine: let the garbage collector stop them
  if (passed && ns) await teardownStep(`the delete of namespace ${ns}`, 40_000, () => deleteNamespace(ns));
  if (tmp) await teardownStep(`the removal of ${tmp}`, 10_000, async () => fs.rmSync(tmp, { recursive: true, force: true }));
  // Nothing of this file should be left now: should the process not exit, it says why.
  reportOpenHandlesAfter(10_000, 'controller-watch-proxy.test.ts', () => ({
    proxy: proxy?.stats,
    proxyOpenSockets: proxy?.openSockets(),
    proxyOpenConnections: proxy?.openCounts(),
    controller: c && { pid: c.child.pid, exitCode: c.child.exitCode, signal: c.child.signalCode },
  }));
});

describe('controller behind a proxy that cuts and then black-holes its connections', () => {
  it('informers recover (errors, then the silence watchdog) and the rollout ends at the image set during the gap', {
    timeout: 300_000,
  }, async () => {
    const kc = cluster.kc;
    const node = await getLocalNode();
    const adPath = apiPath(API_VERSION, PLURAL, ns);
    const informerPaths = [
      adPath,
      ...['pods', 'persistentvolumeclaims', 'services', 'serviceaccounts'].map((p) => apiPath('v1', p, ns)),
      apiPath('rbac.authorization.k8s.io/v1', 'roles', ns),
      apiPath('rbac.authorization.k8s.io/v1', 'rolebindings', ns),
      apiPath('policy/v1', 'poddisruptionbudgets', ns),
    ];

    await createAd(
      kc,
      atlantisDeployment(ns, NAME, {
        replicas: 2,
        terminationGracePeriodSeconds: 60,
        atlantis: { env: [{ name: 'ATLANTIS_GH_API_URL', value: env.gh.url }] } as never,
      }),
    );
    const pods = await waitForReadyPods(kc, ns, NAME, [`${NAME}-0`, `${NAME}-1`]);
    const rev1 = pods[0]!.metadata!.labels![REVISION]!;
    const pod1 = pods.find((p) => p.metadata!.name === `${NAME}-1`)!;
    const url1 = `http://${pod1.status!.podIP}:4141`;

    // A long apply on atl-1, the first pod the rollout drains; it ends when the test says so.
    const gate = path.join(tmp, 'gate');
    assert.equal((await env.openPull(url1, PULL, `wp-${PULL}`, { [`wp${PULL}/main.tf`]: gatedConfig(`wp${PULL}`, gate) })).status, 200);
    await env.waitForComment(PULL, /^Ran Plan for dir/, { timeoutMs: 120_000 });
    assert.equal((await env.comment(url1, PULL, 'atlantis apply')).status, 200);
    await waitFor(
      'the apply to run on atl-1',
      async () => (await serverStatus(pod1.status!.podIP!))?.operations.some((o) => o.command === 'apply'),
      { timeoutMs: 60_000 },
    );

    // The rollout to v2 starts (through the proxy, which passes): atl-1 drains and waits for its apply.
    const tV2 = Date.now();
    await patchAdSpec(kc, ns, NAME, { image: 'atlantis-operator:v2' });
    const rev2 = await controllerRevision(kc, await getAd(kc, ns, NAME));
    assert.notEqual(rev2, rev1);
    await waitForAd(
      kc,
      ns,
      NAME,
      'the controller waiting on the apply of the draining atl-1',
      (ad) =>
        ad.status?.updateRevision === rev2 &&
        ad.status.drainingReplicas === 1 &&
        ad.status.readyReplicas === 1 &&
        /atl-1: OperationsInProgress/.test(cond(ad, 'Progressing')?.message ?? ''),
      60_000,
    );
    const drained = (await listPods(kc, ns, NAME)).find((p) => p.metadata!.uid === pod1.metadata!.uid);
    assert.ok(drained?.metadata?.annotations?.[DRAIN], 'atl-1 carries the drain annotation');

    // (a) Every connection is cut, twice (so a watch that was being renewed at one cut is
    // caught by the other). The informers see errors and reconnect at once (with backoff).
    const logBeforeCut = controllerLog().length;
    for (let round = 1; round <= 2; round++) {
      const tCut = Date.now();
      const cut = proxy.dropAll();
      assert.ok(cut >= informerPaths.length - 1, `cut ${round}: the proxy cut the controller's watches (${cut} connections)`);
      await waitFor(
        `the watches to be open again through the proxy after cut ${round}`,
        () =>
          proxy.openCounts().forwarding >= informerPaths.length &&
          proxy.connections().filter((c) => c.acceptedAt > tCut && c.bytesDown > 0).length >= informerPaths.length,
        { timeoutMs: 20_000 },
      );
      await new Promise((r) => setTimeout(r, 500));
    }
    const failed = new Set(
      controllerLog()
        .slice(logBeforeCut)
        .filter((l) => l.msg === 'Watch failed, retrying')
        .map((l) => l.informer),
    );
    assert.deepEqual(
      informerPaths.filter((p) => !failed.has(p)),
      [],
      'every informer saw a cut watch and retried',
    );
    assert.equal(ctrl!.child.exitCode, null, 'the controller runs on after the cuts');

    // (b) The proxy goes silent for 2.5 watchdog periods; meanwhile the image changes to v3,
    // written straight to the API server (not through the proxy).
    const logBeforeSilence = controllerLog().length;
    const tSilent = Date.now();
    proxy.silence();
    await new Promise((r) => setTimeout(r, 1_000));
    await patchAdSpec(kc, ns, NAME, { image: 'atlantis-operator:v3' });
    const rev3 = await controllerRevision(kc, await getAd(kc, ns, NAME));
    assert.notEqual(rev3, rev2);
    await waitFor(
      'the watchdog to restart every silent watch',
      () => {
        const silent = new Set(
          controllerLog()
            .slice(logBeforeSilence)
            .filter((l) => l.msg === 'Watch silent, restarting it')
            .map((l) => l.informer),
        );
        return informerPaths.every((p) => silent.has(p));
      },
      { timeoutMs: SILENCE_MS * 3 },
    );
    const silentFor = SILENCE_MS * 2.5 - (Date.now() - tSilent);
    if (silentFor > 0) await new Promise((r) => setTimeout(r, silentFor));
    // Nothing got through: the controller has not seen v3 (its status still names v2).
    const during = await getAd(kc, ns, NAME);
    assert.equal(during.status?.updateRevision, rev2, `the controller did not see v3 through the black hole: ${describeStatus(during)}`);
    assert.ok(
      proxy.openCounts().blackhole >= 1 && proxy.stats.blackholed >= informerPaths.length * 2,
      `watches hung in black holes: ${JSON.stringify(proxy.openCounts())} ${JSON.stringify(proxy.stats)}`,
    );
    assert.equal(
      (await listPods(kc, ns, NAME)).find((p) => p.metadata!.uid === pod1.metadata!.uid)?.metadata?.deletionTimestamp,
      undefined,
      'busy atl-1 not deleted',
    );

    // The network is back. The hung watches are restarted by the watchdog (a watch started
    // during the silence hangs for up to SILENCE_MS, checked every WATCHDOG_TICK_MS), resume
    // from their resourceVersion and bring the v3 change; the controller then writes status.
    const tPass = Date.now();
    proxy.pass();
    const seen = await waitForAd(
      kc,
      ns,
      NAME,
      'the controller to see v3 (updateRevision)',
      (ad) => ad.status?.updateRevision === rev3,
      60_000,
    );
    const recoverMs = Date.now() - tPass;
    process.stderr.write(
      `controller saw the change made during the silence ${recoverMs} ms after the proxy passed again (watch silence timeout ${SILENCE_MS} ms)\n`,
    );
    const bound = SILENCE_MS + WATCHDOG_TICK_MS + 6_000;
    assert.ok(
      recoverMs <= bound,
      `the informers recovered within the watchdog interval: ${recoverMs} ms <= ${bound} ms; ${describeStatus(seen)}`,
    );
    assert.equal(
      (await listPods(kc, ns, NAME)).find((p) => p.metadata!.uid === pod1.metadata!.uid)?.metadata?.deletionTimestamp,
      undefined,
      'atl-1 still not deleted: its apply runs',
    );

    // The apply ends; the rollout goes on, to v3.
    const tRelease = Date.now();
    fs.writeFileSync(gate, 'go');
    const done = await waitForAd(
      kc,
      ns,
      NAME,
      'the rollout to complete at v3',
      (ad) => rolloutComplete(2)(ad) && ad.status!.updateRevision === rev3,
      180_000,
    );
    const finalPods = await waitForReadyPods(kc, ns, NAME, [`${NAME}-0`, `${NAME}-1`], { revision: rev3 });
    assert.ok(
      finalPods.every((p: V1Pod) => p.spec?.containers[0]?.image === 'atlantis-operator:v3'),
      describePods(finalPods),
    );
    assert.equal(done.status?.currentRevision, rev3);
    process.stderr.write(`rollout complete ${((Date.now() - tRelease) / 1000).toFixed(1)} s after the apply was released\n`);

    // The controller never created a pod of the revision it missed the end of (v2): every
    // pod it created is at v3.
    const log = controllerLog();
    const created = log.filter((l) => l.msg === 'Creating pod' && ms(l.time) >= tV2);
    assert.deepEqual(
      [...new Set(created.map((l) => `${l.pod}@${l.revision}`))].sort(),
      [`${NAME}-0@${rev3}`, `${NAME}-1@${rev3}`],
      'pods created in the rollout',
    );
    assert.ok(!created.some((l) => l.revision === rev2), 'no pod at the revision replaced during the gap');

    // The apply finished with its state, nothing was killed, atl-1 was deleted only after its apply ended.
    const applied = await env.waitForComment(PULL, /^Ran Apply for dir/, { timeoutMs: 30_000 });
    assert.match(applied.body, new RegExp(`applied wp${PULL}`));
    assert.doesNotMatch(applied.body, /Interrupted/);
    const state = JSON.parse(
      fs.readFileSync(
        path.join(node.pvDir(ns, `${NAME}-data-1`), 'repos', 'acme/infra', String(PULL), 'default', `wp${PULL}`, 'terraform.tfstate'),
        'utf8',
      ),
    ) as { resources: Array<{ type: string }> };
    assert.ok(
      state.resources.some((r) => r.type === 'terraform_data'),
      'the state holds the applied resource',
    );
    for (const p of pods) {
      const evs = node.events({ namespace: ns, pod: p.metadata!.name! }).filter((e) => e.uid === p.metadata!.uid);
      assert.ok(
        evs.some((e) => e.type === 'SIGTERM sent'),
        `${p.metadata!.name} was stopped`,
      );
    }
    assert.deepEqual(
      node.events({ namespace: ns }).filter((e) => e.type === 'SIGKILL sent'),
      [],
      'no SIGKILL in the namespace',
    );
    const logText = readFileOr(node.logPath(ns, `${NAME}-1`, 'atlantis', pod1.metadata!.uid));
    const applyEnded = applyEndedAt(node, ns, `${NAME}-1`, pod1.metadata!.uid!);
    assert.ok(applyEnded !== undefined, 'atl-1 logged the end of its apply');
    const del1 = log.find((l) => l.msg === 'Deleting pod' && l.uid === pod1.metadata!.uid);
    assert.ok(del1, 'the controller deleted atl-1');
    assert.equal(del1.reason, 'Drained');
    assert.ok(ms(del1.time) >= applyEnded, `atl-1 deleted (${del1.time}) after its apply ended (${new Date(applyEnded).toISOString()})`);
    const sigterm1 = node
      .events({ namespace: ns, pod: `${NAME}-1` })
      .find((e) => e.uid === pod1.metadata!.uid && e.type === 'SIGTERM sent')!;
    assert.ok(ms(sigterm1.time) >= applyEnded, 'SIGTERM of atl-1 after its apply ended');
    assert.ok(ms(sigterm1.time) >= tRelease, 'nothing deleted atl-1 before the apply was released');
    assert.match(logText, /"msg":"Drain finished","exitCode":0/);
    assert.doesNotMatch(logText, /Interrupting terraform|Killing terraform/);

    // The controller process ran through it all.
    assert.equal(ctrl!.child.exitCode, null, 'the controller is still running');
    assert.equal((await fetch(`http://${HOST}:8080/healthz`)).status, 200);
    passed = true;
  });
});
