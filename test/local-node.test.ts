// The local node (dev/local-node/) on the shared local cluster: real pods of the project's
// image, a stand-in container (test/fixtures/local-node/stand-in.mjs) for signal timing,
// deletion like kubelet, preStop hooks, PVCs, restarts, scheduling and image errors.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { V1Pod, V1Container, V1PersistentVolumeClaim } from '@kubernetes/client-node';
import { kubeRequest, kubeRequestOk } from '../src/k8s/client.js';
import { kubeConfigFromFile } from '../src/k8s/kubeconfig.js';
import { deleteNamespace, freshNamespace, getCluster, getLocalNode, readFileOr, waitFor } from './support/k8s.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const STAND_IN = path.join(here, 'fixtures/local-node/stand-in.mjs');
const IMAGE = 'atlantis-operator:dev';

const PORT = 18080;

/** A stand-in container; with `ready` it serves on PORT and is Ready only once it listens (its signal handlers are set by then). */
function standIn(args: string[], extra: Partial<V1Container> = {}, ready = true): V1Container {
  const probe = ready ? { readinessProbe: { httpGet: { path: '/readyz', port: PORT }, periodSeconds: 1 } } : {};
  return {
    name: 'main',
    image: IMAGE,
    command: ['node', STAND_IN],
    args: ready ? ['--port', String(PORT), ...args] : args,
    ...probe,
    ...extra,
  };
}

async function createPod(ns: string, name: string, spec: Partial<V1Pod['spec']> & { containers: V1Container[] }): Promise<V1Pod> {
  const c = await getCluster();
  return kubeRequestOk<V1Pod>(c.kc, 'POST', `/api/v1/namespaces/${ns}/pods`, { apiVersion: 'v1', kind: 'Pod', metadata: { name }, spec });
}

async function getPod(ns: string, name: string): Promise<V1Pod | undefined> {
  const c = await getCluster();
  const r = await kubeRequest<V1Pod>(c.kc, 'GET', `/api/v1/namespaces/${ns}/pods/${name}`);
  return r.status === 200 ? r.body : undefined;
}

const isReady = (p: V1Pod | undefined) => p?.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') ?? false;

async function waitReady(ns: string, name: string, timeoutMs = 30_000): Promise<V1Pod> {
  return waitFor(
    `pod ${ns}/${name} Ready`,
    async () => {
      const p = await getPod(ns, name);
      return isReady(p) ? p : undefined;
    },
    { timeoutMs, intervalMs: 100 },
  );
}

async function deletePod(ns: string, name: string, gracePeriodSeconds?: number): Promise<void> {
  const c = await getCluster();
  await kubeRequestOk(
    c.kc,
    'DELETE',
    `/api/v1/namespaces/${ns}/pods/${name}`,
    gracePeriodSeconds === undefined ? undefined : { apiVersion: 'v1', kind: 'DeleteOptions', gracePeriodSeconds },
  );
}

async function waitGone(ns: string, name: string, timeoutMs = 30_000): Promise<void> {
  await waitFor(`pod ${ns}/${name} gone`, async () => (await getPod(ns, name)) === undefined, { timeoutMs, intervalMs: 100 });
}

async function status(ip: string, port: number): Promise<Record<string, unknown>> {
  const res = await fetch(`http://${ip}:${port}/status`, { signal: AbortSignal.timeout(2_000) });
  assert.equal(res.status, 200);
  return (await res.json()) as Record<string, unknown>;
}

test('a pod of the project image runs the real server: Running, Ready, own 127.0.N.M address, /status answers; deletion drains it without SIGKILL', async () => {
  const node = await getLocalNode();
  const ns = await freshNamespace('node-real');
  assert.ok(fs.existsSync(path.join(here, '../dist/atlantis-operator.cjs')), 'dist/atlantis-operator.cjs missing: run `make build` first');
  const c = await getCluster();
  await kubeRequestOk(c.kc, 'POST', `/api/v1/namespaces/${ns}/secrets`, {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: { name: 'vcs' },
    stringData: { token: 'ghp_not_a_real_token' },
  });
  await createPod(ns, 'atlantis-0', {
    containers: [
      {
        name: 'server',
        image: IMAGE,
        args: ['server', '--insecure-no-webhook-secret', '--port', '4141'],
        env: [
          { name: 'ATLANTIS_DATA_DIR', value: '/data' },
          { name: 'ATLANTIS_REPO_ALLOWLIST', value: 'github.com/acme/*' },
          { name: 'ATLANTIS_GH_USER', value: 'atlantis-bot' },
          { name: 'ATLANTIS_GH_TOKEN', valueFrom: { secretKeyRef: { name: 'vcs', key: 'token' } } },
          { name: 'POD_NAME', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } },
          { name: 'POD_NAMESPACE', valueFrom: { fieldRef: { fieldPath: 'metadata.namespace' } } },
        ],
        ports: [{ name: 'http', containerPort: 4141 }],
        readinessProbe: { httpGet: { path: '/readyz', port: 'http' }, periodSeconds: 1 },
        livenessProbe: { httpGet: { path: '/healthz', port: 4141 }, initialDelaySeconds: 10, periodSeconds: 2, failureThreshold: 3 },
        volumeMounts: [{ name: 'data', mountPath: '/data' }],
      },
    ],
    volumes: [{ name: 'data', emptyDir: {} }],
    terminationGracePeriodSeconds: 30,
  });
  const pod = await waitReady(ns, 'atlantis-0', 60_000);
  assert.equal(pod.status?.phase, 'Running');
  assert.equal(pod.spec?.nodeName, node.name);
  const ip = pod.status?.podIP ?? '';
  assert.match(ip, /^127\.1\.([1-9]\d{0,2})\.([1-9]\d{0,2})$/);
  assert.deepEqual(pod.status?.podIPs, [{ ip }]);
  assert.equal(pod.status?.hostIP, '127.0.0.1');
  const cs = pod.status?.containerStatuses?.[0];
  assert.equal(cs?.ready, true);
  assert.equal(cs?.started, true);
  assert.equal(cs?.restartCount, 0);
  assert.ok(cs?.state?.running?.startedAt);
  assert.equal(cs?.image, IMAGE);
  for (const t of ['PodScheduled', 'Initialized', 'ContainersReady', 'Ready']) {
    assert.equal(pod.status?.conditions?.find((c) => c.type === t)?.status, 'True', t);
  }
  const st = await status(ip, 4141);
  assert.equal(st.shutting_down, false);
  assert.equal(st.in_progress_operations, 0);
  // the data dir was rewritten to the pod's emptyDir on the host
  const dir = node.podDir(ns, 'atlantis-0');
  assert.ok(dir && fs.existsSync(path.join(dir, 'volumes', 'data')));
  // a second pod gets another address
  await createPod(ns, 'atlantis-1', { containers: [{ ...standIn([]), resources: { requests: { cpu: '250m' } } }] });
  const other = await waitReady(ns, 'atlantis-1');
  assert.notEqual(other.status?.podIP, ip);
  assert.equal((await status(other.status!.podIP!, PORT)).version, 'stand-in');
  // Each pod in a CPU cgroup of its own inside the node's, with kubelet's cpu.shares for its
  // requests (2 for none), where this machine lets the node make cgroups (it logs whether).
  for (const [p, shares] of [
    [pod, 2],
    [other, 256],
  ] as const) {
    const pid = node.events({ namespace: ns, pod: p.metadata!.name! }).find((e) => e.type === 'ContainerStarted')?.pid;
    const cpuLine =
      fs
        .readFileSync(`/proc/${pid}/cgroup`, 'utf8')
        .split('\n')
        .find((l) => /:cpu(,[a-z]+)*:/.test(l)) ?? '';
    if (!cpuLine.includes('atlantis-local-node-')) continue;
    const dir = cpuLine.split(':')[2]!;
    assert.ok(dir.endsWith(`/pod${p.metadata!.uid}`), `${p.metadata!.name} in its own cgroup: ${dir}`);
    assert.equal(fs.readFileSync(`/sys/fs/cgroup/cpu${dir}/cpu.shares`, 'utf8').trim(), String(shares));
  }

  const t0 = Date.now();
  await deletePod(ns, 'atlantis-0');
  await waitGone(ns, 'atlantis-0', 40_000);
  const evs = node.events({ namespace: ns, pod: 'atlantis-0' });
  assert.ok(
    evs.some((e) => e.type === 'SIGTERM sent'),
    JSON.stringify(evs),
  );
  assert.ok(!evs.some((e) => e.type === 'SIGKILL sent'), 'the server drained and exited on SIGTERM');
  const exited = evs.find((e) => e.type === 'ContainerExited');
  assert.equal(exited?.exitCode, 0, 'the server exits 0 after its drain');
  assert.ok(Date.now() - t0 < 30_000);
  await deleteNamespace(ns); // frees the pods' processes
});

test('deletion sends SIGTERM and waits for the process to finish its drain before removing the pod', async () => {
  const node = await getLocalNode();
  const ns = await freshNamespace('node-term');
  await createPod(ns, 'p', { containers: [standIn(['--term-delay-ms', '2000'])], terminationGracePeriodSeconds: 20 });
  await waitReady(ns, 'p');
  const t0 = Date.now();
  await deletePod(ns, 'p');
  await new Promise((r) => setTimeout(r, 1_000));
  const during = await getPod(ns, 'p');
  assert.ok(during?.metadata?.deletionTimestamp, 'the pod is still there, terminating, while the process drains');
  await waitGone(ns, 'p', 20_000);
  const took = Date.now() - t0;
  assert.ok(took >= 1_900, `pod removed after ${took} ms, before the process finished`);
  const evs = node.events({ namespace: ns, pod: 'p' });
  const types = evs.map((e) => e.type);
  assert.ok(types.includes('SIGTERM sent'));
  assert.ok(!types.includes('SIGKILL sent'));
  assert.ok(types.indexOf('SIGTERM sent') < types.indexOf('ContainerExited'));
  assert.equal(evs.find((e) => e.type === 'ContainerExited')?.exitCode, 0);
  const log = readFileOr(node.logPath(ns, 'p', 'main'));
  assert.match(log, /signal SIGTERM\n[\s\S]*drained, exiting/);
  await deleteNamespace(ns); // frees the pods' processes
});

test('a process that ignores SIGTERM gets SIGKILL when the grace period ends', async () => {
  const node = await getLocalNode();
  const ns = await freshNamespace('node-kill');
  await createPod(ns, 'p', { containers: [standIn(['--ignore-term'])], terminationGracePeriodSeconds: 2 });
  await waitReady(ns, 'p');
  const t0 = Date.now();
  await deletePod(ns, 'p');
  await waitGone(ns, 'p', 20_000);
  const took = Date.now() - t0;
  assert.ok(took >= 1_800 && took < 10_000, `took ${took} ms`);
  const evs = node.events({ namespace: ns, pod: 'p' });
  const term = evs.find((e) => e.type === 'SIGTERM sent');
  const kill = evs.find((e) => e.type === 'SIGKILL sent');
  assert.ok(term && kill, JSON.stringify(evs));
  const gap = Date.parse(kill.time) - Date.parse(term.time);
  assert.ok(gap >= 1_800 && gap < 3_500, `SIGKILL ${gap} ms after SIGTERM`);
  assert.equal(evs.find((e) => e.type === 'ContainerExited')?.signal, 'SIGKILL');
  assert.match(readFileOr(node.logPath(ns, 'p', 'main')), /signal SIGTERM/);
  await deleteNamespace(ns); // frees the pods' processes
});

test('a preStop exec hook runs to completion before SIGTERM', async () => {
  const node = await getLocalNode();
  const ns = await freshNamespace('node-prestop');
  await createPod(ns, 'p', {
    containers: [
      standIn(['--data-dir', '/scratch'], {
        volumeMounts: [{ name: 'work', mountPath: '/scratch' }],
        lifecycle: {
          preStop: {
            exec: {
              command: [
                'sh',
                '-c',
                'echo "prestop start $(date +%s%N)" >> /scratch/hook.log; sleep 1; echo "prestop end $(date +%s%N)" >> /scratch/hook.log',
              ],
            },
          },
        },
      }),
    ],
    volumes: [{ name: 'work', emptyDir: {} }],
    terminationGracePeriodSeconds: 15,
  });
  await waitReady(ns, 'p');
  await deletePod(ns, 'p');
  await waitGone(ns, 'p', 20_000);
  const evs = node.events({ namespace: ns, pod: 'p' }).map((e) => e.type);
  const i = (t: string) => evs.indexOf(t as never);
  assert.ok(
    i('PreStopStarted') >= 0 && i('PreStopStarted') < i('PreStopFinished') && i('PreStopFinished') < i('SIGTERM sent'),
    evs.join(', '),
  );
  assert.ok(!evs.includes('SIGKILL sent'));
  const hook = readFileOr(path.join(node.podDir(ns, 'p')!, 'volumes', 'work', 'hook.log'));
  assert.match(hook, /prestop start \d+\nprestop end \d+/, 'the hook saw /scratch rewritten to the emptyDir');
  assert.match(readFileOr(node.logPath(ns, 'p', 'main')), /signal SIGTERM/);
  await deleteNamespace(ns); // frees the pods' processes
});

test('a PVC is bound to a local directory whose files survive pod replacement', async () => {
  const node = await getLocalNode();
  const c = await getCluster();
  const ns = await freshNamespace('node-pvc');
  await kubeRequestOk(c.kc, 'POST', `/api/v1/namespaces/${ns}/persistentvolumeclaims`, {
    apiVersion: 'v1',
    kind: 'PersistentVolumeClaim',
    metadata: { name: 'data-0' },
    spec: { accessModes: ['ReadWriteOnce'], resources: { requests: { storage: '1Gi' } } },
  });
  const spec = () => ({
    containers: [standIn(['--data-dir', '/data/state'], { volumeMounts: [{ name: 'data', mountPath: '/data' }] })],
    volumes: [{ name: 'data', persistentVolumeClaim: { claimName: 'data-0' } }],
    terminationGracePeriodSeconds: 5,
  });
  await createPod(ns, 'srv-0', spec());
  await waitReady(ns, 'srv-0');
  const pvc = await kubeRequestOk<V1PersistentVolumeClaim>(c.kc, 'GET', `/api/v1/namespaces/${ns}/persistentvolumeclaims/data-0`);
  assert.equal(pvc.status?.phase, 'Bound');
  assert.ok(pvc.spec?.volumeName);
  const pv = await kubeRequestOk<{
    spec: { hostPath?: { path: string }; claimRef?: { name?: string; uid?: string } };
    status?: { phase?: string };
  }>(c.kc, 'GET', `/api/v1/persistentvolumes/${pvc.spec!.volumeName}`);
  assert.equal(pv.spec.claimRef?.uid, pvc.metadata?.uid);
  assert.equal(pv.status?.phase, 'Bound');
  const boots = path.join(node.pvDir(ns, 'data-0'), 'state', 'boots.log');
  assert.equal(pv.spec.hostPath?.path, node.pvDir(ns, 'data-0'));
  await waitFor('first boot recorded', () => readFileOr(boots).split('\n').filter(Boolean).length === 1, { timeoutMs: 5_000 });
  await deletePod(ns, 'srv-0');
  await waitGone(ns, 'srv-0');
  await createPod(ns, 'srv-0', spec());
  await waitReady(ns, 'srv-0');
  await waitFor('second boot recorded', () => readFileOr(boots).split('\n').filter(Boolean).length === 2, { timeoutMs: 5_000 });
  const lines = readFileOr(boots).trim().split('\n');
  assert.notEqual(lines[0], lines[1], 'two different processes wrote to the same directory');
  await deleteNamespace(ns); // frees the pods' processes
});

test('a crashed container is restarted with backoff (CrashLoopBackOff, restartCount, lastState)', async () => {
  const ns = await freshNamespace('node-crash');
  await createPod(ns, 'p', { containers: [standIn(['--crash-after-ms', '300'], {}, false)] });
  const seenReasons = new Set<string>();
  const p = await waitFor(
    'two restarts',
    async () => {
      const pod = await getPod(ns, 'p');
      const cs = pod?.status?.containerStatuses?.[0];
      if (cs?.state?.waiting?.reason) seenReasons.add(cs.state.waiting.reason);
      return (cs?.restartCount ?? 0) >= 2 ? pod : undefined;
    },
    { timeoutMs: 30_000, intervalMs: 100 },
  );
  const cs = p.status!.containerStatuses![0]!;
  assert.equal(cs.lastState?.terminated?.exitCode, 3);
  assert.equal(cs.lastState?.terminated?.reason, 'Error');
  assert.equal(p.status?.phase, 'Running');
  assert.ok(seenReasons.has('CrashLoopBackOff'), [...seenReasons].join(','));
  const node = await getLocalNode();
  await waitFor(
    'three starts in the one log',
    () => (readFileOr(node.logPath(ns, 'p', 'main')).match(/stand-in started/g) ?? []).length >= 3,
    { timeoutMs: 5_000 },
  );
  const starts = node.events({ namespace: ns, pod: 'p' }).filter((e) => e.type === 'ContainerStarted');
  assert.ok(starts.length >= 3);
  const gap1 = Date.parse(starts[1]!.time) - Date.parse(starts[0]!.time);
  const gap2 = Date.parse(starts[2]!.time) - Date.parse(starts[1]!.time);
  assert.ok(gap2 > gap1, `the backoff grows (${gap1} ms, then ${gap2} ms)`);
  await deleteNamespace(ns); // frees the pods' processes
});

test('a pod whose nodeSelector does not match the node stays Pending and unscheduled', async () => {
  const ns = await freshNamespace('node-sel');
  await createPod(ns, 'p', { containers: [standIn([])], nodeSelector: { disktype: 'ssd-that-no-node-has' } });
  const pod = await waitFor(
    'Unschedulable condition',
    async () => {
      const x = await getPod(ns, 'p');
      return x?.status?.conditions?.some((c) => c.type === 'PodScheduled' && c.status === 'False' && c.reason === 'Unschedulable')
        ? x
        : undefined;
    },
    { timeoutMs: 10_000 },
  );
  assert.match(pod.status?.conditions?.find((c) => c.type === 'PodScheduled')?.message ?? '', /didn't match Pod's node affinity\/selector/);
  await new Promise((r) => setTimeout(r, 2_000));
  const later = await getPod(ns, 'p');
  assert.equal(later?.status?.phase, 'Pending');
  assert.equal(later?.spec?.nodeName, undefined);
  // a matching selector is scheduled
  const node = await getLocalNode();
  await createPod(ns, 'q', { containers: [standIn([])], nodeSelector: { 'kubernetes.io/hostname': node.name } });
  const q = await waitReady(ns, 'q');
  assert.equal(q.spec?.nodeName, node.name);
  await deleteNamespace(ns); // frees the pods' processes
});

test('an image the node does not have never starts: ErrImagePull / ImagePullBackOff, Pending, not Ready', async () => {
  const ns = await freshNamespace('node-image');
  await createPod(ns, 'p', { containers: [{ name: 'web', image: 'nginx:1.27' }] });
  const pod = await waitFor(
    'image pull error',
    async () => {
      const x = await getPod(ns, 'p');
      const r = x?.status?.containerStatuses?.[0]?.state?.waiting?.reason;
      return r === 'ErrImagePull' || r === 'ImagePullBackOff' ? x : undefined;
    },
    { timeoutMs: 15_000 },
  );
  assert.equal(pod.status?.phase, 'Pending');
  assert.equal(isReady(pod), false);
  await waitFor(
    'ImagePullBackOff',
    async () => (await getPod(ns, 'p'))?.status?.containerStatuses?.[0]?.state?.waiting?.reason === 'ImagePullBackOff',
    { timeoutMs: 10_000 },
  );
  const node = await getLocalNode();
  assert.ok(!node.events({ namespace: ns, pod: 'p' }).some((e) => e.type === 'ContainerStarted'));
  await deletePod(ns, 'p');
  await waitGone(ns, 'p', 10_000);
  await deleteNamespace(ns); // frees the pods' processes
});

test('env like kubelet (value, $(VAR), fieldRef, secretKeyRef, configMapKeyRef, envFrom) and a working in-pod kubeconfig', async () => {
  const c = await getCluster();
  const node = await getLocalNode();
  const ns = await freshNamespace('node-env');
  await kubeRequestOk(c.kc, 'POST', `/api/v1/namespaces/${ns}/secrets`, {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: { name: 's' },
    stringData: { token: 'sekret' },
  });
  await kubeRequestOk(c.kc, 'POST', `/api/v1/namespaces/${ns}/configmaps`, {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: { name: 'cm' },
    data: { color: 'blue', EXTRA_ONE: 'x1' },
  });
  await createPod(ns, 'p', {
    containers: [
      standIn([], {
        env: [
          { name: 'POD_NAME', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } },
          { name: 'POD_NAMESPACE', valueFrom: { fieldRef: { fieldPath: 'metadata.namespace' } } },
          { name: 'FROM_SECRET', valueFrom: { secretKeyRef: { name: 's', key: 'token' } } },
          { name: 'FROM_CM', valueFrom: { configMapKeyRef: { name: 'cm', key: 'color' } } },
          { name: 'DATA', value: '/data/$(POD_NAME)' },
        ],
        envFrom: [{ configMapRef: { name: 'cm' }, prefix: 'CM_' }],
        volumeMounts: [{ name: 'd', mountPath: '/data' }],
      }),
    ],
    volumes: [{ name: 'd', emptyDir: {} }],
  });
  const pod = await waitReady(ns, 'p');
  const log = await waitFor(
    'env line',
    () => {
      const l = readFileOr(node.logPath(ns, 'p', 'main'));
      return l.includes('env POD_NAME') ? l : undefined;
    },
    { timeoutMs: 5_000 },
  );
  const vol = path.join(node.podDir(ns, 'p')!, 'volumes', 'd');
  assert.match(log, new RegExp(`env POD_NAME=p POD_NAMESPACE=${ns} FROM_SECRET=sekret FROM_CM=blue DATA=${vol}/p KUBECONFIG=(\\S+)`));
  assert.match(log, new RegExp(`bind=${pod.status!.podIP!.replace(/\./g, '\\.')}`));
  const kubeconfig = /KUBECONFIG=(\S+)/.exec(log)![1]!;
  // the token is the pod's service account's: authenticated, RBAC decides
  const podKc = kubeConfigFromFile(kubeconfig);
  const r = await kubeRequest<{ message?: string }>(podKc, 'GET', `/api/v1/namespaces/${ns}/pods/p`);
  assert.equal(r.status, 403);
  assert.match(r.body.message ?? '', new RegExp(`system:serviceaccount:${ns}:default`));
  // a missing secret: CreateContainerConfigError, the pod does not start
  await createPod(ns, 'bad', {
    containers: [standIn([], { env: [{ name: 'X', valueFrom: { secretKeyRef: { name: 'nope', key: 'k' } } }] })],
  });
  await waitFor(
    'CreateContainerConfigError',
    async () => (await getPod(ns, 'bad'))?.status?.containerStatuses?.[0]?.state?.waiting?.reason === 'CreateContainerConfigError',
    { timeoutMs: 10_000 },
  );
  await deleteNamespace(ns); // frees the pods' processes
});

test("the server's own-Pod watch, for real: annotating the pod drains the server (not Ready, /status shutting_down); deletion then ends it at once", async () => {
  const c = await getCluster();
  const node = await getLocalNode();
  const ns = await freshNamespace('node-annot');
  await kubeRequestOk(c.kc, 'POST', `/api/v1/namespaces/${ns}/secrets`, {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: { name: 'vcs' },
    stringData: { token: 'ghp_not_a_real_token' },
  });
  // what the controller's Role gives a server pod: read its own Pod
  await kubeRequestOk(c.kc, 'POST', `/apis/rbac.authorization.k8s.io/v1/namespaces/${ns}/roles`, {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'Role',
    metadata: { name: 'own-pod' },
    rules: [{ apiGroups: [''], resources: ['pods'], verbs: ['get', 'list', 'watch'] }],
  });
  await kubeRequestOk(c.kc, 'POST', `/apis/rbac.authorization.k8s.io/v1/namespaces/${ns}/rolebindings`, {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'RoleBinding',
    metadata: { name: 'own-pod' },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'own-pod' },
    subjects: [{ kind: 'ServiceAccount', name: 'default', namespace: ns }],
  });
  await createPod(ns, 'atlantis-0', {
    restartPolicy: 'Never',
    containers: [
      {
        name: 'server',
        image: IMAGE,
        args: ['server', '--insecure-no-webhook-secret', '--port', '4141', '--data-dir', '/data'],
        env: [
          { name: 'ATLANTIS_REPO_ALLOWLIST', value: 'github.com/acme/*' },
          { name: 'ATLANTIS_GH_USER', value: 'atlantis-bot' },
          { name: 'ATLANTIS_GH_TOKEN', valueFrom: { secretKeyRef: { name: 'vcs', key: 'token' } } },
          { name: 'POD_NAME', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } },
          { name: 'POD_NAMESPACE', valueFrom: { fieldRef: { fieldPath: 'metadata.namespace' } } },
        ],
        readinessProbe: { httpGet: { path: '/readyz', port: 4141 }, periodSeconds: 1 },
        volumeMounts: [{ name: 'data', mountPath: '/data' }],
      },
    ],
    volumes: [{ name: 'data', emptyDir: {} }],
  });
  const pod = await waitReady(ns, 'atlantis-0', 60_000);
  const ip = pod.status!.podIP!;
  const logPath = node.logPath(ns, 'atlantis-0', 'server');
  await waitFor('the server watches its own pod', () => /Watching own pod for the drain annotation/.test(readFileOr(logPath)), {
    timeoutMs: 20_000,
  });
  assert.equal((await status(ip, 4141)).shutting_down, false);
  const a = await c.kubectl(['annotate', '-n', ns, 'pod', 'atlantis-0', 'atlantis-operator.dev/drain=now']);
  assert.equal(a.exitCode, 0, a.stderr);
  const drained = await waitFor(
    '/status shutting_down',
    async () => {
      const st = await status(ip, 4141);
      return st.shutting_down === true ? st : undefined;
    },
    { timeoutMs: 20_000, intervalMs: 100 },
  );
  assert.equal(drained.in_progress_operations, 0);
  assert.equal(drained.drain_reason, 'annotation');
  assert.match(readFileOr(logPath), /"msg":"Drain started","reason":"annotation","annotation":"[^"]+"/);
  // /readyz is 503 while draining: the readiness probe takes the pod out of Ready
  await waitFor('pod not Ready', async () => !isReady(await getPod(ns, 'atlantis-0')), { timeoutMs: 10_000 });
  assert.ok(
    !node.events({ namespace: ns, pod: 'atlantis-0' }).some((e) => e.type === 'SIGTERM sent'),
    'the annotation alone started the drain',
  );
  // what the controller does next: delete the drained pod
  const t0 = Date.now();
  await deletePod(ns, 'atlantis-0');
  await waitGone(ns, 'atlantis-0', 20_000);
  const evs = node.events({ namespace: ns, pod: 'atlantis-0' });
  assert.equal(evs.find((e) => e.type === 'ContainerExited')?.exitCode, 0);
  assert.ok(!evs.some((e) => e.type === 'SIGKILL sent'));
  assert.ok(Date.now() - t0 < 15_000);
  await deleteNamespace(ns);
});

test('volumes like kubelet: ConfigMap, Secret (bytes as stored) and projected files, items to paths, modes, a missing key stops the pod', async () => {
  const c = await getCluster();
  const node = await getLocalNode();
  const ns = await freshNamespace('node-vol');
  const binary = Buffer.from([0, 1, 2, 0xfe, 0xff]);
  await kubeRequestOk(c.kc, 'POST', `/api/v1/namespaces/${ns}/secrets`, {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: { name: 'app' },
    data: { 'key.pem': Buffer.from('-----BEGIN KEY-----\n').toString('base64'), blob: binary.toString('base64') },
  });
  await kubeRequestOk(c.kc, 'POST', `/api/v1/namespaces/${ns}/configmaps`, {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: { name: 'repos' },
    data: { 'repos.yaml': 'repos: []\n', other: 'x' },
  });
  await createPod(ns, 'p', {
    containers: [standIn([])],
    volumes: [
      { name: 'key', secret: { secretName: 'app', items: [{ key: 'key.pem', path: 'key.pem' }], defaultMode: 0o440 } },
      { name: 'cfg', configMap: { name: 'repos', items: [{ key: 'repos.yaml', path: 'conf/repos.yaml', mode: 0o600 }] } },
      { name: 'all', secret: { secretName: 'app' } },
      {
        name: 'proj',
        projected: {
          defaultMode: 0o400,
          sources: [
            { secret: { name: 'app', items: [{ key: 'blob', path: 'bin/blob' }] } },
            { configMap: { name: 'repos', items: [{ key: 'other', path: 'other', mode: 0o444 }] } },
            { downwardAPI: { items: [{ path: 'name', fieldRef: { fieldPath: 'metadata.name' } }] } },
            { secret: { name: 'absent', optional: true } },
          ],
        },
      },
    ],
  });
  await waitReady(ns, 'p');
  const vol = (v: string, f: string) => path.join(node.podDir(ns, 'p')!, 'volumes', v, f);
  const mode = (f: string) => fs.statSync(f).mode & 0o777;
  assert.equal(fs.readFileSync(vol('key', 'key.pem'), 'utf8'), '-----BEGIN KEY-----\n');
  assert.equal(mode(vol('key', 'key.pem')), 0o440, 'the volume defaultMode');
  assert.deepEqual(fs.readdirSync(path.join(node.podDir(ns, 'p')!, 'volumes', 'key')), ['key.pem'], 'only the items asked for');
  assert.equal(fs.readFileSync(vol('cfg', 'conf/repos.yaml'), 'utf8'), 'repos: []\n');
  assert.equal(mode(vol('cfg', 'conf/repos.yaml')), 0o600, "the item's mode");
  assert.deepEqual(
    fs.readdirSync(path.join(node.podDir(ns, 'p')!, 'volumes', 'all')).sort(),
    ['blob', 'key.pem'],
    'every key without items',
  );
  assert.equal(mode(vol('all', 'blob')), 0o644, "kubelet's default mode");
  assert.ok(fs.readFileSync(vol('all', 'blob')).equals(binary), 'a Secret value written as its bytes');
  assert.ok(fs.readFileSync(vol('proj', 'bin/blob')).equals(binary));
  assert.equal(mode(vol('proj', 'bin/blob')), 0o400, "the projected volume's defaultMode");
  assert.equal(mode(vol('proj', 'other')), 0o444);
  assert.equal(fs.readFileSync(vol('proj', 'name'), 'utf8'), 'p');
  // An item naming a key the Secret does not have: the pod stays ContainerCreating, as kubelet.
  await createPod(ns, 'missing', {
    containers: [standIn([])],
    volumes: [{ name: 'key', secret: { secretName: 'app', items: [{ key: 'nope', path: 'x' }] } }],
  });
  await waitFor(
    'a pod waiting on a missing key',
    async () => {
      const s = (await getPod(ns, 'missing'))?.status?.containerStatuses?.[0]?.state?.waiting;
      return s?.reason === 'ContainerCreating' && s.message?.includes("couldn't find key nope in Secret") ? s : undefined;
    },
    { timeoutMs: 10_000 },
  );
  await deleteNamespace(ns); // frees the pods' processes
});
