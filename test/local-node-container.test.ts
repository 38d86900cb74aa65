// The local node's container mode (dev/local-node/container-runtime.ts): a pod whose image is
// in local container storage (`make image`) runs in a real container with podman/runc, as a
// kubelet runs it: securityContext, env and valueFrom, volumes (PVC, emptyDir, secret, the
// projected ServiceAccount token), fsGroup, probes (httpGet and exec), the preStop hook and
// the termination path. An image that is not there waits in ErrImageNeverPull.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { before, test } from 'node:test';
import type { V1Container, V1Pod } from '@kubernetes/client-node';
import { podman } from '../dev/local-node/podman.js';
import { ANNOTATION_DRAIN } from '../src/contract/drain-protocol.js';
import { kubeRequest, kubeRequestOk } from '../src/k8s/client.js';
import { IMAGE, ensureImage } from './support/container.js';
import { deleteNamespace, freshNamespace, getCluster, getLocalNode, waitFor } from './support/k8s.js';

async function createPod(ns: string, name: string, spec: V1Pod['spec']): Promise<V1Pod> {
  const c = await getCluster();
  return kubeRequestOk<V1Pod>(c.kc, 'POST', `/api/v1/namespaces/${ns}/pods`, { apiVersion: 'v1', kind: 'Pod', metadata: { name }, spec });
}

async function getPod(ns: string, name: string): Promise<V1Pod | undefined> {
  const c = await getCluster();
  const r = await kubeRequest<V1Pod>(c.kc, 'GET', `/api/v1/namespaces/${ns}/pods/${name}`);
  return r.status === 200 ? r.body : undefined;
}

const isReady = (p: V1Pod | undefined) => p?.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') ?? false;

async function waitReady(ns: string, name: string): Promise<V1Pod> {
  return waitFor(
    `pod ${ns}/${name} Ready`,
    async () => {
      const p = await getPod(ns, name);
      const w = p?.status?.containerStatuses?.[0]?.state?.waiting;
      if (w && /Error|ErrImage/.test(w.reason ?? '')) throw new Error(`pod ${name} waits: ${w.reason}: ${w.message}`);
      return isReady(p) ? p : undefined;
    },
    { timeoutMs: 120_000, intervalMs: 200 },
  );
}

/** Deletes the pod and waits for its object to go and for the node to record it deleted (it records that after the object goes). */
async function deleteAndWait(ns: string, name: string): Promise<void> {
  const c = await getCluster();
  const node = await getLocalNode();
  await kubeRequestOk(c.kc, 'DELETE', `/api/v1/namespaces/${ns}/pods/${name}`);
  await waitFor(`pod ${ns}/${name} gone`, async () => (await getPod(ns, name)) === undefined, { timeoutMs: 60_000, intervalMs: 200 });
  await waitFor(
    `the node's PodDeleted for ${ns}/${name}`,
    async () => node.events({ namespace: ns, pod: name }).some((e) => e.type === 'PodDeleted'),
    {
      timeoutMs: 30_000,
      intervalMs: 100,
    },
  );
}

/** The server container as the controller renders it, reduced to what this test needs. */
function server(extra: Partial<V1Container> = {}): V1Container {
  return {
    name: 'server',
    image: IMAGE,
    args: ['server', '--insecure-no-webhook-secret', '--port', '4141'],
    env: [
      { name: 'ATLANTIS_DATA_DIR', value: '/atlantis' },
      { name: 'ATLANTIS_REPO_ALLOWLIST', value: 'github.com/acme/*' },
      { name: 'ATLANTIS_GH_USER', value: 'atlantis-bot' },
      { name: 'ATLANTIS_GH_TOKEN', valueFrom: { secretKeyRef: { name: 'vcs', key: 'token' } } },
      { name: 'POD_NAME', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } },
      { name: 'POD_NAMESPACE', valueFrom: { fieldRef: { fieldPath: 'metadata.namespace' } } },
      { name: 'POD_IP', valueFrom: { fieldRef: { fieldPath: 'status.podIP' } } },
      { name: 'GREETING', value: 'hello from $(POD_NAME)' },
    ],
    ports: [{ name: 'http', containerPort: 4141 }],
    readinessProbe: { httpGet: { path: '/readyz', port: 'http' }, periodSeconds: 1 },
    livenessProbe: { exec: { command: ['sh', '-c', 'test -w /tmp && test -w /atlantis'] }, periodSeconds: 2, failureThreshold: 3 },
    lifecycle: { preStop: { exec: { command: ['atlantis-operator', 'drain'] } } },
    volumeMounts: [
      { name: 'data', mountPath: '/atlantis' },
      { name: 'tmp', mountPath: '/tmp' },
      { name: 'vcs', mountPath: '/etc/vcs' },
    ],
    securityContext: { readOnlyRootFilesystem: true, allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] } },
    ...extra,
  };
}

function podSpec(claim: string, sc: NonNullable<V1Pod['spec']>['securityContext'], extra: Partial<V1Container> = {}): V1Pod['spec'] {
  return {
    securityContext: sc,
    automountServiceAccountToken: true,
    terminationGracePeriodSeconds: 30,
    containers: [server(extra)],
    volumes: [
      { name: 'data', persistentVolumeClaim: { claimName: claim } },
      { name: 'tmp', emptyDir: { sizeLimit: '64Mi' } },
      { name: 'vcs', secret: { secretName: 'vcs' } },
    ],
  };
}

async function exec(pod: V1Pod, command: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const id = pod.status?.containerStatuses?.[0]?.containerID ?? '';
  assert.match(id, /^podman:\/\//);
  return podman(['exec', id.slice('podman://'.length), ...command]);
}

let ns = '';
before(async () => {
  await ensureImage();
  ns = await freshNamespace('node-ctr');
  const c = await getCluster();
  await kubeRequestOk(c.kc, 'POST', `/api/v1/namespaces/${ns}/secrets`, {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: { name: 'vcs' },
    stringData: { token: 'ghp_not_a_real_token' },
  });
  // The server watches its own Pod (the drain annotation) with the pod's token.
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
  await kubeRequestOk(c.kc, 'POST', `/api/v1/namespaces/${ns}/persistentvolumeclaims`, {
    apiVersion: 'v1',
    kind: 'PersistentVolumeClaim',
    metadata: { name: 'data' },
    spec: { accessModes: ['ReadWriteOnce'], resources: { requests: { storage: '1Gi' } } },
  });
});

test('a pod of a locally built image runs in a container as a kubelet runs it; deletion runs the preStop drain, then SIGTERM, no SIGKILL', async () => {
  const node = await getLocalNode();
  await createPod(
    ns,
    'atlantis-0',
    podSpec('data', { runAsNonRoot: true, runAsUser: 1000, runAsGroup: 1000, fsGroup: 1000, seccompProfile: { type: 'RuntimeDefault' } }),
  );
  const pod = await waitReady(ns, 'atlantis-0');
  const cs = pod.status?.containerStatuses?.[0];
  assert.match(cs?.containerID ?? '', /^podman:\/\/ato-/);
  assert.match(cs?.imageID ?? '', /^sha256:[0-9a-f]{64}$/);
  const ip = pod.status?.podIP ?? '';
  const st = await fetch(`http://${ip}:4141/status`);
  assert.equal(st.status, 200, 'the server answers on the pod IP');

  // The user, groups, root filesystem and capabilities the securityContext asked for.
  const who = await exec(pod, ['sh', '-c', 'id -u; id -G; grep CapEff /proc/self/status; touch /x 2>&1; true']);
  assert.equal(who.code, 0, who.stderr);
  const [uid, groups, caps, touch] = who.stdout.trim().split('\n');
  assert.equal(uid, '1000');
  assert.deepEqual(groups?.split(' ').sort(), ['1000']);
  assert.match(caps ?? '', /CapEff:\s+0000000000000000/);
  assert.match(touch ?? '', /Read-only file system/);
  // env and valueFrom; the secret and the ServiceAccount token as files; the token works against the API server.
  const env = await exec(pod, [
    'sh',
    '-c',
    'echo "$POD_IP|$GREETING|$ATLANTIS_GH_TOKEN|$KUBERNETES_SERVICE_HOST"; cat /etc/vcs/token; echo; ls /var/run/secrets/kubernetes.io/serviceaccount',
  ]);
  assert.equal(env.code, 0, env.stderr);
  const lines = env.stdout.split('\n');
  assert.equal(lines[0], `${ip}|hello from atlantis-0|ghp_not_a_real_token|127.0.0.1`);
  assert.equal(lines[1], 'ghp_not_a_real_token');
  assert.deepEqual(lines.slice(2).filter(Boolean).sort(), ['ca.crt', 'namespace', 'token']);
  // The server watches its own Pod with that token (in-cluster config): the drain annotation reaches it.
  const c = await getCluster();
  await kubeRequestOk(
    c.kc,
    'PATCH',
    `/api/v1/namespaces/${ns}/pods/atlantis-0`,
    { metadata: { annotations: { [ANNOTATION_DRAIN]: new Date().toISOString().replace(/\.\d+Z$/, 'Z') } } },
    { contentType: 'application/merge-patch+json' },
  );
  await waitFor(
    'the server drains on its annotation',
    async () => {
      const s = (await (await fetch(`http://${ip}:4141/status`)).json()) as { shutting_down: boolean; drain_reason: string | null };
      return s.shutting_down && s.drain_reason === 'annotation';
    },
    { timeoutMs: 60_000 },
  );
  // fsGroup on the PVC: the data the server wrote has the group.
  const db = path.join(node.pvDir(ns, 'data'), 'atlantis-operator.db');
  assert.equal(fs.statSync(db).uid, 1000);

  await deleteAndWait(ns, 'atlantis-0');
  const evs = node
    .events({ namespace: ns, pod: 'atlantis-0' })
    .map((e) => `${e.type}${e.type === 'ContainerExited' ? ` ${e.exitCode}` : ''}`);
  assert.deepEqual(
    evs.filter((e) => /PreStop|SIGTERM|SIGKILL|Exited|PodDeleted/.test(e)),
    ['PreStopStarted', 'PreStopFinished', 'SIGTERM sent', 'ContainerExited 0', 'PodDeleted'],
  );
  const gone = await podman(['ps', '-a', '--filter', `name=${cs?.containerID?.slice('podman://'.length)}`, '--format', '{{.Names}}']);
  assert.equal(gone.stdout.trim(), '', 'the container is removed');
});

test("fsGroup change: a pod with another user and fsGroup reads the PVC's data the first one wrote", async () => {
  await createPod(ns, 'atlantis-1', podSpec('data', { runAsNonRoot: true, runAsUser: 1001, runAsGroup: 1001, fsGroup: 2000 }));
  const pod = await waitReady(ns, 'atlantis-1');
  const node = await getLocalNode();
  const dir = node.pvDir(ns, 'data');
  const db = fs.statSync(path.join(dir, 'atlantis-operator.db'));
  assert.equal(db.uid, 1000, 'written by the first pod');
  assert.equal(db.gid, 2000, 'the group is the new fsGroup');
  assert.equal(db.mode & 0o060, 0o060, 'readable and writable for the group');
  const r = await exec(pod, [
    'sh',
    '-c',
    'id -G; test -r /atlantis/atlantis-operator.db && test -w /atlantis/atlantis-operator.db && echo rw',
  ]);
  assert.equal(r.code, 0, r.stderr);
  assert.deepEqual(r.stdout.split('\n')[0]?.split(' ').sort(), ['1001', '2000']);
  assert.equal(r.stdout.split('\n')[1], 'rw');
  const log = fs.readFileSync(node.logPath(ns, 'atlantis-1', 'server') ?? '', 'utf8');
  assert.match(log, /"msg":"Server started"/);
  assert.doesNotMatch(log, /EACCES|SQLITE_CANTOPEN|SQLITE_READONLY/);
  await deleteAndWait(ns, 'atlantis-1');
});

test('a container that ignores SIGTERM gets SIGKILL when the grace period ends', async () => {
  const node = await getLocalNode();
  await createPod(ns, 'stubborn', {
    terminationGracePeriodSeconds: 2,
    securityContext: { runAsUser: 1000, runAsGroup: 1000 },
    containers: [
      {
        name: 'main',
        image: IMAGE,
        // tini passes SIGTERM on; the shell ignores it.
        command: ['/usr/bin/tini', '--', 'sh', '-c', "trap '' TERM; echo trapped; while :; do sleep 1; done"],
      },
    ],
  });
  await waitReady(ns, 'stubborn');
  await waitFor('the trap set', () => fs.readFileSync(node.logPath(ns, 'stubborn', 'main') ?? '', 'utf8').includes('trapped'), {
    timeoutMs: 30_000,
  });
  const t0 = Date.now();
  await deleteAndWait(ns, 'stubborn');
  const evs = node.events({ namespace: ns, pod: 'stubborn' });
  const types = evs.map((e) => `${e.type}${e.type === 'ContainerExited' ? ` ${e.exitCode}` : ''}`);
  assert.deepEqual(
    types.filter((e) => /SIGTERM|SIGKILL|Exited|PodDeleted/.test(e)),
    ['SIGTERM sent', 'SIGKILL sent', 'ContainerExited 137', 'PodDeleted'],
  );
  const term = Date.parse(evs.find((e) => e.type === 'SIGTERM sent')!.time);
  const kill = Date.parse(evs.find((e) => e.type === 'SIGKILL sent')!.time);
  assert.ok(kill - term >= 1_000 && kill >= t0, `SIGKILL after the grace period (${kill - term} ms after SIGTERM; times in whole seconds)`);
});

test('runAsNonRoot against a root user is refused (CreateContainerConfigError); an image not in local storage waits in ErrImageNeverPull; the node goes on', async () => {
  await createPod(ns, 'root', podSpec('data', { runAsNonRoot: true, runAsUser: 0 }));
  await createPod(ns, 'missing', podSpec('data', { runAsUser: 1000 }, { image: 'localhost/atlantis-operator:no-such-tag' }));
  const waiting = async (name: string, reason: string) =>
    waitFor(
      `${name} waiting in ${reason}`,
      async () => {
        const p = await getPod(ns, name);
        return p?.status?.containerStatuses?.[0]?.state?.waiting?.reason === reason ? p : undefined;
      },
      { timeoutMs: 60_000, intervalMs: 200 },
    );
  const root = await waiting('root', 'CreateContainerConfigError');
  assert.match(root.status?.containerStatuses?.[0]?.state?.waiting?.message ?? '', /runAsNonRoot and image will run as root/);
  const missing = await waiting('missing', 'ErrImageNeverPull');
  assert.equal(missing.status?.phase, 'Pending');
  assert.match(missing.status?.containerStatuses?.[0]?.state?.waiting?.message ?? '', /not present with pull policy of Never/);
  const node = await getLocalNode();
  assert.ok(!node.events({ namespace: ns }).some((e) => e.type === 'ContainerStarted' && (e.pod === 'root' || e.pod === 'missing')));
  // The node still runs pods.
  await createPod(ns, 'after', podSpec('data', { runAsUser: 1000, runAsGroup: 1000, fsGroup: 1000 }));
  await waitReady(ns, 'after');
  await deleteNamespace(ns);
});
