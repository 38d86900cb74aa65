// The chart installed with a real helm on a real cluster: `helm install` (CRD from the chart's
// crds/, the controller Deployment rolled out by the real Deployment and ReplicaSet
// controllers, its pods admitted under the restricted Pod Security Standard of
// manifests/namespace.yaml and Ready), an AtlantisDeployment reconciled by the installed
// controller; `helm upgrade` with a changed resource and one watched namespace rolls the
// controller (old pods SIGTERMed, exit 0, never SIGKILLed), which then acts in that namespace
// through a RoleBinding only; `helm uninstall` removes everything the chart made: what remains
// is exactly what docs/gitops.md says.
//
// Its own cluster and local node (dev/stack.ts) plus a kube-controller-manager with the
// Deployment and ReplicaSet controllers (test/support/helm.ts says why), also under make test.
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import type { V1Deployment, V1Pod } from '@kubernetes/client-node';
import { startStack, type Stack } from '../dev/stack.js';
import type { GroupProcess } from '../dev/procs.js';
import { apiPath, kubeRequest, kubeRequestOk } from '../src/k8s/client.js';
import type { KubeClientConfig } from '../src/k8s/kubeconfig.js';
import type { Lease } from '../src/controller/leader-election.js';
import { assertBuilt } from './support/cli.js';
import { atlantisDeployment, createAd, createVcsSecret, isReady, patchAdSpec } from './support/controller.js';
import { rolloutComplete, waitForAd } from './support/controller-asserts.js';
import { CHART_DIR, type Helm, helmRunner, parseObjects, startWorkloadControllers } from './support/helm.js';
import { waitFor } from './support/k8s.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const NS = 'atlantis-operator';
const RELEASE = 'atlantis-operator';
const TEAM = 'team';
const AD = 'atlantis';
const CRD = 'atlantisdeployments.atlantis-operator.dev';
const SELECTOR = 'app.kubernetes.io/name=atlantis-operator,app.kubernetes.io/component=controller';
const SA_USER = `system:serviceaccount:${NS}:atlantis-operator`;
/**
 * The local node runs every pod in the host's network namespace: each controller binds its
 * own pod IP instead of 0.0.0.0:8080, where two replicas would collide.
 */
const LOCAL_NODE_VALUES = {
  extraEnv: [{ name: 'POD_IP', valueFrom: { fieldRef: { fieldPath: 'status.podIP' } } }],
  extraArgs: ['--metrics-bind-address=$(POD_IP):8080'],
};

let stack: Stack | undefined;
let workloads: GroupProcess | undefined;
let helm: Helm | undefined;
let kc: KubeClientConfig;
let passed = 0;
/** Objects (kind/namespace/name) cluster-wide and in NS before the install. */
let before0: Map<string, Obj>;

type Obj = {
  kind?: string;
  metadata: { name: string; namespace?: string; uid?: string; annotations?: Record<string, string> };
  spec?: Record<string, unknown>;
};

async function getDeployment(): Promise<V1Deployment> {
  return kubeRequestOk<V1Deployment>(kc, 'GET', apiPath('apps/v1', 'deployments', NS, RELEASE));
}

async function controllerPods(): Promise<V1Pod[]> {
  const r = await kubeRequestOk<{ items: V1Pod[] }>(kc, 'GET', apiPath('v1', 'pods', NS), undefined, {
    query: { labelSelector: SELECTOR },
  });
  return r.items;
}

function describeDeployment(d: V1Deployment | undefined): string {
  if (!d) return '(none)';
  const s = d.status ?? {};
  const conds = (s.conditions ?? []).map((c) => `${c.type}=${c.status}/${c.reason}`).join(' ');
  return `generation ${d.metadata?.generation} observed ${s.observedGeneration}; replicas ${s.replicas} updated ${s.updatedReplicas} ready ${s.readyReplicas} available ${s.availableReplicas}; ${conds}`;
}

/** Bounded polling of the Deployment's status until the rollout of its current generation is complete. */
async function waitForRollout(replicas: number, what: string): Promise<V1Deployment> {
  let last: V1Deployment | undefined;
  try {
    return await waitFor(
      what,
      async () => {
        last = await getDeployment();
        const s = last.status ?? {};
        const cond = (t: string) => s.conditions?.find((c) => c.type === t);
        const done =
          s.observedGeneration === last.metadata!.generation &&
          s.replicas === replicas &&
          s.updatedReplicas === replicas &&
          s.readyReplicas === replicas &&
          s.availableReplicas === replicas &&
          cond('Available')?.status === 'True' &&
          cond('Progressing')?.status === 'True' &&
          cond('Progressing')?.reason === 'NewReplicaSetAvailable';
        return done ? last : undefined;
      },
      { timeoutMs: 180_000, intervalMs: 250 },
    );
  } catch (e) {
    throw new Error(`${(e as Error).message}; Deployment: ${describeDeployment(last)}`);
  }
}

/** The Deployment's live pods (not terminating), each Ready and made by its current ReplicaSet. */
async function currentPods(d: V1Deployment, replicas: number): Promise<V1Pod[]> {
  const rs = await kubeRequestOk<{
    items: Array<{ metadata: { name: string; ownerReferences?: Array<{ uid: string }> }; spec: { replicas: number } }>;
  }>(kc, 'GET', apiPath('apps/v1', 'replicasets', NS), undefined, { query: { labelSelector: SELECTOR } });
  const current = rs.items.filter((r) => r.spec.replicas > 0 && r.metadata.ownerReferences?.some((o) => o.uid === d.metadata!.uid));
  assert.equal(current.length, 1, `one scaled ReplicaSet: ${rs.items.map((r) => `${r.metadata.name}=${r.spec.replicas}`).join(', ')}`);
  const pods = (await controllerPods()).filter((p) => !p.metadata!.deletionTimestamp);
  assert.equal(pods.length, replicas, `${replicas} live controller pods: ${pods.map((p) => p.metadata!.name).join(', ')}`);
  for (const p of pods) {
    assert.ok(isReady(p), `${p.metadata!.name} Ready`);
    assert.equal(p.metadata!.ownerReferences?.[0]?.name, current[0]!.metadata.name, `${p.metadata!.name} made by the current ReplicaSet`);
  }
  return pods;
}

async function leaseHolder(): Promise<string | undefined> {
  const r = await kubeRequest<Lease>(kc, 'GET', apiPath('coordination.k8s.io/v1', 'leases', NS, 'atlantis-operator-leader'));
  return r.status === 200 ? (r.body.spec?.holderIdentity ?? undefined) : undefined;
}

async function canI(verb: string, resource: string, namespace?: string): Promise<boolean> {
  const r = await stack!.cluster.kubectl(['auth', 'can-i', verb, resource, '--as', SA_USER, ...(namespace ? ['-n', namespace] : ['-A'])]);
  return r.stdout.trim() === 'yes';
}

interface ApiResource {
  path: string;
  namespaced: boolean;
  kind: string;
}

/** Every resource type the API server lists (discovery), subresources left out. */
async function listableResources(): Promise<ApiResource[]> {
  type List = { resources: Array<{ name: string; namespaced: boolean; kind: string; verbs: string[] }> };
  const groups = await kubeRequestOk<{ groups: Array<{ preferredVersion: { groupVersion: string } }> }>(kc, 'GET', '/apis');
  const versions = ['v1', ...groups.groups.map((g) => g.preferredVersion.groupVersion)];
  const out: ApiResource[] = [];
  for (const gv of versions) {
    const list = await kubeRequestOk<List>(kc, 'GET', gv === 'v1' ? '/api/v1' : `/apis/${gv}`);
    for (const r of list.resources)
      if (!r.name.includes('/') && r.verbs.includes('list'))
        out.push({ path: apiPath(gv, r.name), namespaced: r.namespaced, kind: r.kind });
  }
  return out;
}

async function listAll(res: ApiResource, namespace?: string): Promise<Obj[]> {
  const p = namespace ? res.path.replace(/\/([^/]+)$/, `/namespaces/${namespace}/$1`) : res.path;
  const r = await kubeRequestOk<{ items: Obj[] }>(kc, 'GET', p);
  return r.items.map((o) => ({ ...o, kind: res.kind }));
}

/**
 * Cluster-scoped objects and those in NS, by kind/namespace/name. Events are left out: the
 * Deployment controller, the local node and the controller record them, and they expire.
 */
async function snapshot(): Promise<Map<string, Obj>> {
  const out = new Map<string, Obj>();
  for (const res of await listableResources()) {
    if (res.kind === 'Event') continue;
    for (const o of await listAll(res, res.namespaced ? NS : undefined))
      out.set(`${res.kind}/${o.metadata.namespace ?? ''}/${o.metadata.name}`, o);
  }
  return out;
}

function nodeEvents(pod: V1Pod) {
  return stack!.node!.events({ namespace: NS, pod: pod.metadata!.name! }).filter((e) => e.uid === pod.metadata!.uid);
}

before(async () => {
  assertBuilt();
  stack = await startStack({ node: { crashBackoffBaseMs: 1_000 } });
  kc = stack.cluster.kubeConfig;
  workloads = startWorkloadControllers(stack.cluster);
  helm = helmRunner({ kubeconfig: stack.cluster.kubeconfigPath });
  // The namespace as the docs say: manifests/namespace.yaml, with its Pod Security labels.
  const ns = await stack.cluster.kubectl(['apply', '-f', path.join(root, 'manifests/namespace.yaml')]);
  assert.equal(ns.exitCode, 0, ns.stderr);
  await kubeRequestOk(kc, 'POST', '/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: TEAM } });
  for (const n of [NS, TEAM])
    await waitFor(
      `${n}: its default ServiceAccount and kube-root-ca.crt`,
      async () =>
        (await kubeRequest(kc, 'GET', apiPath('v1', 'serviceaccounts', n, 'default'))).status === 200 &&
        (await kubeRequest(kc, 'GET', apiPath('v1', 'configmaps', n, 'kube-root-ca.crt'))).status === 200,
      { timeoutMs: 30_000 },
    );
  await createVcsSecret(kc, TEAM);
  before0 = await snapshot();
});

after(async () => {
  const ok = passed === 3;
  await workloads?.stop(5_000);
  if (stack) {
    if (!ok) process.stderr.write(`cluster logs and local node state kept in ${stack.cluster.dir}\n`);
    await stack.stop({ keepDir: !ok });
  }
  helm?.cleanup();
});

describe('the chart on a real cluster', () => {
  let firstPods: V1Pod[] = [];

  it('helm install: the CRD from crds/, the controller Deployment rolled out with 2 Ready replicas, an AtlantisDeployment reconciled', {
    timeout: 300_000,
  }, async () => {
    const r = await helm!.run(
      ['install', RELEASE, CHART_DIR, '--namespace', NS, '-f', helm!.valuesFile(LOCAL_NODE_VALUES), '--wait', '--timeout', '180s'],
      { timeoutMs: 200_000 },
    );
    assert.equal(r.exitCode, 0, `helm install: ${r.stdout}\n${r.stderr}`);
    assert.match(r.stdout, /STATUS: deployed/);
    assert.match(
      r.stdout,
      /NOTES:[\s\S]*2 controller replica\(s\), leader election on the Lease atlantis-operator-leader;\s+watching all namespaces/,
    );
    assert.doesNotMatch(r.stderr, /PodSecurity|would violate/, 'the namespace warns of nothing (restricted)');

    const crd = await kubeRequestOk<{
      status: { conditions: Array<{ type: string; status: string }> };
      metadata: { labels?: Record<string, string> };
    }>(kc, 'GET', `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${CRD}`);
    assert.equal(crd.status.conditions.find((c) => c.type === 'Established')?.status, 'True', 'the CRD is Established');
    const manifest = parseObjects((await helm!.run(['get', 'manifest', RELEASE, '-n', NS])).stdout);
    assert.ok(
      !manifest.some((o) => o.kind === 'CustomResourceDefinition'),
      'the CRD is not part of the release (crds/): helm never upgrades or deletes it',
    );

    const dep = await waitForRollout(
      2,
      'the controller Deployment rolled out (2 updated, ready, available; Available, Progressing=NewReplicaSetAvailable)',
    );
    assert.equal(dep.metadata!.annotations?.['deployment.kubernetes.io/revision'], '1');
    firstPods = await currentPods(dep, 2);
    for (const p of firstPods)
      assert.deepEqual(p.spec!.containers[0]!.args, ['controller', '--leader-elect', '--metrics-bind-address=$(POD_IP):8080']);
    const names = firstPods.map((p) => p.metadata!.name!);
    const holder = await waitFor('a controller pod to hold the Lease', async () => {
      const h = await leaseHolder();
      return h && names.some((n) => h.startsWith(`${n}_`)) ? h : undefined;
    });
    assert.ok(holder);

    const ad = await createAd(kc, atlantisDeployment(TEAM, AD, { replicas: 1, terminationGracePeriodSeconds: 30 }));
    const done = await waitForAd(kc, TEAM, AD, 'the installed controller to reconcile the AtlantisDeployment', rolloutComplete(1), 120_000);
    assert.equal(done.status?.observedGeneration, ad.metadata.generation);
    assert.equal(done.metadata.generation, 1);
    passed++;
  });

  it('helm upgrade with a changed resource and one watched namespace rolls the controller; it then acts through a RoleBinding there only', {
    timeout: 300_000,
  }, async () => {
    const crdBefore = await kubeRequestOk<Obj & { metadata: { resourceVersion: string } }>(
      kc,
      'GET',
      `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${CRD}`,
    );
    const r = await helm!.run(
      [
        'upgrade',
        RELEASE,
        CHART_DIR,
        '--namespace',
        NS,
        '-f',
        helm!.valuesFile({ ...LOCAL_NODE_VALUES, resources: { requests: { cpu: '60m' } }, watchNamespaces: [TEAM] }),
        '--wait',
        '--timeout',
        '180s',
      ],
      { timeoutMs: 200_000 },
    );
    assert.equal(r.exitCode, 0, `helm upgrade: ${r.stdout}\n${r.stderr}`);
    assert.match(r.stdout, /REVISION: 2/);
    assert.match(r.stdout, /watching the namespace team/);

    const dep = await waitForRollout(2, 'the upgraded Deployment rolled out');
    assert.equal(dep.metadata!.generation, 2);
    assert.equal(dep.metadata!.annotations?.['deployment.kubernetes.io/revision'], '2');
    const pods = await currentPods(dep, 2);
    const oldUids = new Set(firstPods.map((p) => p.metadata!.uid));
    for (const p of pods) {
      assert.ok(!oldUids.has(p.metadata!.uid), `${p.metadata!.name} is a new pod`);
      const c = p.spec!.containers[0]!;
      assert.equal(c.resources?.requests?.cpu, '60m');
      assert.deepEqual(c.args, ['controller', '--leader-elect', '--namespace=team', '--metrics-bind-address=$(POD_IP):8080']);
    }
    // The old pods were stopped by SIGTERM and exited by themselves (0), never SIGKILLed.
    for (const p of firstPods) {
      await waitFor(
        `old pod ${p.metadata!.name} gone`,
        async () => {
          const g = await kubeRequest<V1Pod>(kc, 'GET', apiPath('v1', 'pods', NS, p.metadata!.name!));
          return g.status === 404 || g.body.metadata?.uid !== p.metadata!.uid;
        },
        { timeoutMs: 60_000, intervalMs: 250 },
      );
      const evs = nodeEvents(p);
      assert.ok(
        evs.some((e) => e.type === 'SIGTERM sent'),
        `${p.metadata!.name}: SIGTERM`,
      );
      assert.ok(!evs.some((e) => e.type === 'SIGKILL sent'), `${p.metadata!.name}: no SIGKILL`);
      assert.equal(evs.find((e) => e.type === 'ContainerExited')?.exitCode, 0, `${p.metadata!.name} exited 0`);
    }
    const names = pods.map((p) => p.metadata!.name!);
    await waitFor(
      'a new controller pod to hold the Lease',
      async () => {
        const h = await leaseHolder();
        return h && names.some((n) => h.startsWith(`${n}_`));
      },
      { timeoutMs: 60_000, intervalMs: 250 },
    );

    // RBAC: the ClusterRole is bound in team only.
    const crb = await kubeRequest(kc, 'GET', `/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/${RELEASE}`);
    assert.equal(crb.status, 404, 'the ClusterRoleBinding is gone');
    await kubeRequestOk(kc, 'GET', apiPath('rbac.authorization.k8s.io/v1', 'rolebindings', TEAM, RELEASE));
    assert.equal(await canI('create', 'pods', TEAM), true, 'create pods in team');
    assert.equal(await canI('list', 'pods'), false, 'no list of pods in all namespaces');
    assert.equal(await canI('create', 'pods', 'default'), false, 'no pods in another namespace');

    // The upgraded controller acts on the AtlantisDeployment.
    await patchAdSpec(kc, TEAM, AD, { replicas: 0 });
    const ad = await waitForAd(
      kc,
      TEAM,
      AD,
      'the upgraded controller to scale the AtlantisDeployment to 0',
      (a) => a.status?.replicas === 0,
      120_000,
    );
    assert.equal(ad.status?.observedGeneration, 2);

    const crdAfter = await kubeRequestOk<Obj & { metadata: { resourceVersion: string } }>(
      kc,
      'GET',
      `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${CRD}`,
    );
    assert.equal(crdAfter.metadata.resourceVersion, crdBefore.metadata.resourceVersion, 'helm upgrade left the CRD untouched');
    passed++;
  });

  it("helm uninstall removes everything the chart made: left are the CRD (with its APIService), the Lease and the user's AtlantisDeployment", {
    timeout: 240_000,
  }, async () => {
    const lastPods = (await controllerPods()).filter((p) => !p.metadata!.deletionTimestamp);
    assert.equal(lastPods.length, 2);
    const r = await helm!.run(['uninstall', RELEASE, '--namespace', NS, '--wait', '--timeout', '120s'], { timeoutMs: 140_000 });
    assert.equal(r.exitCode, 0, `helm uninstall: ${r.stdout}\n${r.stderr}`);
    assert.match(r.stdout, /release "atlantis-operator" uninstalled/);
    // The garbage collector removes the ReplicaSets, the local node the pods (SIGTERM, exit 0).
    await waitFor(
      'no controller pods or ReplicaSets left',
      async () => {
        const rs = await kubeRequestOk<{ items: unknown[] }>(kc, 'GET', apiPath('apps/v1', 'replicasets', NS));
        return (
          rs.items.length === 0 && (await kubeRequestOk<{ items: unknown[] }>(kc, 'GET', apiPath('v1', 'pods', NS))).items.length === 0
        );
      },
      { timeoutMs: 120_000, intervalMs: 250 },
    );

    const now = await snapshot();
    const removed = [...before0.keys()].filter((k) => !now.has(k));
    assert.deepEqual(removed, [], 'nothing that was there before the install is gone');
    const added = [...now.entries()].filter(([k]) => !before0.has(k));
    // Not the chart's: the AtlantisDeployment's volume (bound to its claim in team) and its
    // Service's cluster IP.
    const theUsers = (o: Obj) =>
      (o.kind === 'PersistentVolume' && (o.spec?.claimRef as { namespace?: string } | undefined)?.namespace === TEAM) ||
      (o.kind === 'IPAddress' && (o.spec?.parentRef as { namespace?: string } | undefined)?.namespace === TEAM);
    assert.deepEqual(
      added
        .filter(([, o]) => !theUsers(o))
        .map(([k]) => k)
        .sort(),
      ['APIService//v1alpha1.atlantis-operator.dev', `CustomResourceDefinition//${CRD}`, `Lease/${NS}/atlantis-operator-leader`],
      "left behind: the CRD (and the APIService the API server registers for its group), the controller's Lease",
    );
    // Helm deletes the leader-election Role with the Deployment, before the pods stop, so the
    // last leader may fail to release the Lease (403): it stays with a holder until it expires.
    for (const p of lastPods) {
      const evs = nodeEvents(p);
      assert.ok(!evs.some((e) => e.type === 'SIGKILL sent'), `${p.metadata!.name}: no SIGKILL`);
      assert.equal(evs.find((e) => e.type === 'ContainerExited')?.exitCode, 0, `${p.metadata!.name} exited 0`);
    }

    // Anywhere in the cluster: nothing of the release (the RoleBinding in team included).
    const ofRelease: string[] = [];
    for (const res of await listableResources())
      for (const o of await listAll(res))
        if (o.metadata.annotations?.['meta.helm.sh/release-name'] === RELEASE)
          ofRelease.push(`${res.kind}/${o.metadata.namespace ?? ''}/${o.metadata.name}`);
    assert.deepEqual(ofRelease, [], 'no object of the release is left');
    assert.equal((await helm!.run(['list', '--all-namespaces', '--all', '-q'])).stdout.trim(), '', 'helm knows no release');
    // The user's AtlantisDeployment stays (the CRD stays), now without a controller.
    await kubeRequestOk(kc, 'GET', apiPath('atlantis-operator.dev/v1alpha1', 'atlantisdeployments', TEAM, AD));
    passed++;
  });
});
