// Issue 6 (security), on the real local API server (RBAC authorizer, PodSecurity admission):
//
// - manifests/ is applied for real (moved into a namespace of its own) and the controller runs
//   as a Pod made from the Deployment's template, so it has exactly the RBAC the manifests
//   grant (the local node gives it a token of the template's ServiceAccount);
// - Pod Security: the controller's namespace (labels from manifests/namespace.yaml) and the
//   AtlantisDeployment's namespace enforce `restricted:latest`; the controller pod and the
//   server pods the controller creates are admitted and become Ready; non-compliant pods are
//   refused with the PodSecurity message, so the labels are really enforced;
// - RBAC: a table of (who, verb, resource, namespace, name) -> allowed, asked with
//   SubjectAccessReviews (a few also with `kubectl auth can-i --as`); then "nothing more":
//   SelfSubjectRulesReviews made with the accounts' real tokens list exactly the expected
//   rules in each namespace; and real requests with those tokens are refused (403) or allowed.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { KubeConfig, type V1Pod, type V1Role, type V1RoleBinding, type V1ServiceAccount } from '@kubernetes/client-node';
import { MERGE_PATCH, PARTIAL_OBJECT_METADATA, apiPath, kubeRequest, kubeRequestOk } from '../src/k8s/client.js';
import { renderPod } from '../src/controller/resources/index.js';
import type { AtlantisDeployment } from '../src/controller/types.js';
import { atlantisDeployment, createAd, createVcsSecret, isReady, listPods } from './support/controller.js';
import { freshNamespace, getCluster, getLocalNode, readFileOr, waitFor, type TestCluster } from './support/k8s.js';
import { assertBuilt } from './support/cli.js';
import { type OperatorInstall, controllerPod, createControllerPod, installOperator } from './support/operator-install.js';

let cluster: TestCluster;
let op: OperatorInstall;
let adNs: string;
let otherNs: string;
const NAME = 'atl';
/** The instance-wide account: only for a custom serviceAccountName or pods made before accounts were per pod. */
const SHARED_SA = `${NAME}-atlantis`;
/** Pod 0's own account: the server of the RBAC table below. */
const SERVER_SA = `${NAME}-atlantis-0`;
const CTRL_POD = 'atlantis-operator-0';
const LEASE = 'atlantis-operator-leader';

before(async () => {
  assertBuilt();
  cluster = await getCluster();
  op = await installOperator(cluster, 'rbac-ctrl');
  adNs = await freshNamespace('rbac-ad');
  otherNs = await freshNamespace('rbac-other');
  const l = await cluster.kubectl([
    'label',
    'namespace',
    adNs,
    'pod-security.kubernetes.io/enforce=restricted',
    'pod-security.kubernetes.io/enforce-version=latest',
  ]);
  assert.equal(l.exitCode, 0, l.stderr);
  await createVcsSecret(cluster.kc, adNs);
});

after(async () => {
  await op?.uninstall();
  for (const ns of [adNs, otherNs]) if (ns) await kubeRequest(cluster.kc, 'DELETE', `/api/v1/namespaces/${ns}`);
});

const PSS = /violates PodSecurity "restricted:latest"/;

async function createPod(ns: string, pod: V1Pod): Promise<{ status: number; message: string }> {
  const r = await kubeRequest<{ message?: string }>(cluster.kc, 'POST', apiPath('v1', 'pods', ns), pod);
  return { status: r.status, message: r.body?.message ?? '' };
}

async function ctrlLog(): Promise<string> {
  const node = await getLocalNode();
  return readFileOr(node.logPath(op.namespace, CTRL_POD, 'controller'));
}

describe('Pod Security: restricted:latest enforced where the controller and the servers run', () => {
  it('refuses non-compliant pods, admits the controller template and the server pods, which become Ready', {
    timeout: 240_000,
  }, async () => {
    // The labels: the controller's namespace has them from manifests/namespace.yaml.
    for (const ns of [op.namespace, adNs]) {
      const labels = (await kubeRequestOk<{ metadata: { labels: Record<string, string> } }>(cluster.kc, 'GET', `/api/v1/namespaces/${ns}`))
        .metadata.labels;
      assert.equal(labels['pod-security.kubernetes.io/enforce'], 'restricted', ns);
      assert.equal(labels['pod-security.kubernetes.io/enforce-version'], 'latest', ns);
    }

    // Negative: the label is enforced. A plain pod, the controller template without its
    // securityContext, and a server pod allowing privilege escalation are all refused.
    const bare: V1Pod = {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: 'not-restricted' },
      spec: { containers: [{ name: 'c', image: 'atlantis-operator:v1', args: ['version'] }] },
    };
    for (const ns of [op.namespace, adNs]) {
      const r = await createPod(ns, bare);
      assert.equal(r.status, 403, `${ns}: ${r.message}`);
      assert.match(r.message, PSS);
      assert.match(r.message, /allowPrivilegeEscalation != false.*unrestricted capabilities.*runAsNonRoot != true.*seccompProfile/);
    }
    const loose = controllerPod(op, 'controller-without-security-context', []);
    delete loose.spec!.securityContext;
    delete loose.spec!.containers[0]!.securityContext;
    const rl = await createPod(op.namespace, loose);
    assert.equal(rl.status, 403, rl.message);
    assert.match(rl.message, PSS);
    const ad0 = atlantisDeployment(adNs, 'probe', {}) as AtlantisDeployment;
    const escalating = renderPod({ ...ad0, metadata: { ...ad0.metadata, uid: '00000000-0000-4000-8000-000000000001' } }, 0);
    escalating.spec!.serviceAccountName = 'default'; // the ServiceAccount admission plugin runs first
    escalating.metadata!.ownerReferences = undefined;
    escalating.spec!.containers[0]!.securityContext = {
      ...escalating.spec!.containers[0]!.securityContext,
      allowPrivilegeEscalation: true,
    };
    const re = await createPod(adNs, escalating);
    assert.equal(re.status, 403, re.message);
    assert.match(re.message, PSS);
    assert.match(re.message, /allowPrivilegeEscalation != false \(container "atlantis"/);
    assert.doesNotMatch(re.message, /runAsNonRoot|seccompProfile|capabilities/, 'everything else the server pod sets is compliant');

    // The controller, a real Pod from the Deployment's template (admitted), watching only adNs.
    const created = await createControllerPod(cluster, op, CTRL_POD, ['--namespace', adNs]);
    assert.deepEqual(created.spec?.securityContext, op.deployment.spec!.template.spec!.securityContext, 'admitted as written');
    assert.equal(created.spec?.serviceAccountName, op.serviceAccount);
    await waitFor(
      'the controller pod Ready',
      async () => {
        const p = await kubeRequestOk<V1Pod>(cluster.kc, 'GET', apiPath('v1', 'pods', op.namespace, CTRL_POD));
        return isReady(p) ? p : undefined;
      },
      { timeoutMs: 60_000, intervalMs: 250 },
    ).catch(async (e: Error) => {
      throw new Error(`${e.message}\n${(await ctrlLog()).slice(-3000)}`);
    });
    await waitFor('it to lead', async () => /"msg":"Leader lease acquired"/.test(await ctrlLog()), { timeoutMs: 30_000, intervalMs: 250 });

    // Its server pods, created by it in the restricted namespace, are admitted and Ready.
    await createAd(cluster.kc, atlantisDeployment(adNs, NAME, { replicas: 2 }));
    const pods = await waitFor(
      '2 Ready server pods',
      async () => {
        const ps = await listPods(cluster.kc, adNs, NAME);
        return ps.length === 2 && ps.every(isReady) ? ps : undefined;
      },
      { timeoutMs: 120_000, intervalMs: 250 },
    ).catch(async (e: Error) => {
      throw new Error(`${e.message}\ncontroller log:\n${(await ctrlLog()).slice(-4000)}`);
    });
    for (const p of pods) {
      assert.equal(
        p.spec?.serviceAccountName,
        `${p.metadata!.name!.replace(/-(\d+)$/, '-atlantis-$1')}`,
        'each pod runs as its own account',
      );
      assert.equal(p.spec?.securityContext?.runAsNonRoot, true);
      assert.equal(p.spec?.securityContext?.seccompProfile?.type, 'RuntimeDefault');
      assert.equal(p.spec?.containers[0]?.securityContext?.allowPrivilegeEscalation, false);
      assert.deepEqual(p.spec?.containers[0]?.securityContext?.capabilities?.drop, ['ALL']);
    }

    // Both accounts' RBAC at work: the server sees a hand drain through its own-Pod watch (its
    // Role), the controller patches/deletes/recreates the pod (its ClusterRole); the
    // replacement is admitted too.
    const node = await getLocalNode();
    const old1 = pods.find((p) => p.metadata!.name === `${NAME}-1`)!;
    const serverLog = () => readFileOr(node.logPath(adNs, `${NAME}-1`, 'atlantis', old1.metadata!.uid));
    await waitFor('the server watching its own pod', () => /Watching own pod for the drain annotation/.test(serverLog()), {
      timeoutMs: 30_000,
      intervalMs: 250,
    });
    const an = await cluster.kubectl(['-n', adNs, 'annotate', 'pod', `${NAME}-1`, 'atlantis-operator.dev/drain=now']);
    assert.equal(an.exitCode, 0, an.stderr);
    await waitFor(
      'atl-1 replaced and Ready',
      async () => {
        const p = (await listPods(cluster.kc, adNs, NAME)).find((x) => x.metadata!.name === `${NAME}-1`);
        return p && p.metadata!.uid !== old1.metadata!.uid && isReady(p);
      },
      { timeoutMs: 90_000, intervalMs: 250 },
    ).catch(async (e: Error) => {
      throw new Error(`${e.message}\ncontroller log:\n${(await ctrlLog()).slice(-4000)}\nserver log:\n${serverLog().slice(-3000)}`);
    });
    assert.match(serverLog(), /"msg":"Drain started","reason":"annotation","annotation":"[^"]+"/);
    const log = await ctrlLog();
    assert.match(log, new RegExp(`"msg":"Deleting pod".*"uid":"${old1.metadata!.uid}"`));
    // No permission the controller uses was missing.
    assert.doesNotMatch(log, /forbidden|Forbidden|"status":403/, 'no 403 in the controller log');
    assert.doesNotMatch(serverLog(), /forbidden|Forbidden|Own pod watch failed/, 'no 403 in the server log');
    assert.equal(node.events({ namespace: adNs }).filter((e) => e.type === 'SIGKILL sent').length, 0);
  });
});

// ---- RBAC

const SA_GROUPS = (ns: string) => ['system:serviceaccounts', `system:serviceaccounts:${ns}`, 'system:authenticated'];
type Who = 'controller' | 'server';
type Where = 'ad' | 'ctrl' | 'other' | 'kube-system' | 'cluster';
/** [who, verb, group, resource(/subresource), where, name, allowed, why] */
type Row = [Who, string, string, string, Where, string | undefined, boolean, string];

const nsOf = (w: Where): string =>
  w === 'ad' ? adNs : w === 'ctrl' ? op.namespace : w === 'other' ? otherNs : w === 'kube-system' ? 'kube-system' : '';
const userOf = (w: Who): { user: string; groups: string[] } =>
  w === 'controller'
    ? { user: op.user, groups: SA_GROUPS(op.namespace) }
    : { user: `system:serviceaccount:${adNs}:${SERVER_SA}`, groups: SA_GROUPS(adNs) };

async function sar(row: Row): Promise<{ allowed: boolean; reason?: string }> {
  const [who, verb, group, res, where, name] = row;
  const [resource, subresource] = res.split('/');
  const body = {
    apiVersion: 'authorization.k8s.io/v1',
    kind: 'SubjectAccessReview',
    spec: { ...userOf(who), resourceAttributes: { verb, group, resource, subresource, namespace: nsOf(where), name } },
  };
  const r = await kubeRequestOk<{ status: { allowed: boolean; reason?: string } }>(
    cluster.kc,
    'POST',
    '/apis/authorization.k8s.io/v1/subjectaccessreviews',
    body,
  );
  return r.status;
}

// What the code does (src/controller/reconcile/*, src/controller/leader-election.ts) decides
// the "yes" rows; the "no" rows are the dangerous neighbours.
function table(): Row[] {
  const C = 'controller' as const;
  const S = 'server' as const;
  const ATD = 'atlantis-operator.dev';
  const RBAC = 'rbac.authorization.k8s.io';
  const rows: Row[] = [];
  const yes = (who: Who, verbs: string[], group: string, res: string, where: Where, why: string, name?: string) => {
    for (const v of verbs) rows.push([who, v, group, res, where, name, true, why]);
  };
  const no = (who: Who, verbs: string[], group: string, res: string, where: Where, why: string, name?: string) => {
    for (const v of verbs) rows.push([who, v, group, res, where, name, false, why]);
  };
  // controller: needs
  yes(C, ['list', 'watch'], ATD, 'atlantisdeployments', 'ad', 'informer');
  yes(C, ['list', 'watch'], ATD, 'atlantisdeployments', 'cluster', 'informer without --namespace: ADs may live anywhere');
  yes(C, ['patch'], ATD, 'atlantisdeployments/status', 'ad', 'status writes (merge patch)');
  yes(C, ['update'], ATD, 'atlantisdeployments/finalizers', 'ad', 'blockOwnerDeletion under OwnerReferencesPermissionEnforcement');
  yes(C, ['list', 'watch', 'create', 'patch', 'delete'], '', 'pods', 'ad', 'informer, create, drain annotation, delete when drained');
  yes(C, ['get'], '', 'pods', 'ad', 'RBAC lets it grant the server Role (get/list/watch pods) only if it holds that');
  yes(C, ['list', 'watch', 'create'], '', 'pods', 'other', 'cluster-wide: ADs may live in any namespace');
  yes(C, ['list', 'watch'], '', 'pods', 'cluster', 'cluster-wide informer');
  yes(C, ['list', 'watch', 'create'], '', 'persistentvolumeclaims', 'ad', 'informer, one PVC per ordinal');
  for (const [g, r] of [
    ['', 'services'],
    ['', 'serviceaccounts'],
    [RBAC, 'roles'],
    [RBAC, 'rolebindings'],
    ['policy', 'poddisruptionbudgets'],
  ] as const) {
    yes(C, ['list', 'watch', 'create', 'patch'], g, r, 'ad', 'owned object: informer, server-side apply (patch, and create when missing)');
  }
  yes(C, ['create'], '', 'events', 'ad', 'core/v1 Events about the AD');
  yes(
    C,
    ['list', 'watch', 'create', 'patch', 'delete'],
    'networking.k8s.io',
    'ingresses',
    'ad',
    'spec.ingress: applied, deleted when removed',
  );
  yes(C, ['get'], '', 'configmaps', 'ad', 'referenced content: the data of ConfigMaps the pods read is hashed into the revision');
  yes(
    C,
    ['get'],
    '',
    'secrets',
    'ad',
    'referenced content: a Secret the pods read, asked for as metadata only (RBAC cannot narrow get to metadata)',
  );
  yes(C, ['get', 'create', 'update'], 'coordination.k8s.io', 'leases', 'ctrl', 'leader election', LEASE);
  // controller: not needed, harmless, kept (test/manifests.test.ts asks for them)
  yes(C, ['get'], ATD, 'atlantisdeployments', 'ad', 'read (kept)');
  yes(C, ['update'], ATD, 'atlantisdeployments/status', 'ad', 'same power as patch (kept)');
  yes(C, ['patch'], '', 'events', 'ad', 'event series (kept)');
  // controller: FINDING, allowed by design of a cluster-wide operator (see the report / SECURITY.md)
  yes(
    C,
    ['create'],
    '',
    'pods',
    'kube-system',
    'FINDING: pod create in every namespace = may run a pod as any ServiceAccount and mount any Secret there',
  );
  // controller: must not
  no(C, ['list', 'watch'], '', 'secrets', 'ad', 'Secrets by name only: it cannot enumerate them or watch their data');
  no(C, ['list', 'watch'], '', 'secrets', 'kube-system', 'no Secrets listed anywhere');
  no(C, ['list', 'watch'], '', 'secrets', 'cluster', 'no cluster-wide Secrets read');
  no(C, ['create', 'update', 'patch', 'delete'], '', 'secrets', 'ad', 'never writes Secrets');
  no(C, ['list', 'watch'], '', 'configmaps', 'cluster', 'ConfigMaps by name only');
  no(C, ['create', 'update', 'patch', 'delete'], '', 'configmaps', 'ad', "never writes ConfigMaps (a repo config is the user's)");
  no(C, ['update'], 'networking.k8s.io', 'ingresses', 'ad', 'server-side apply only');
  no(C, ['*'], '', 'pods', 'ad', 'no * verb');
  no(C, ['*'], '*', '*', 'ad', 'no * anything');
  no(C, ['update'], '', 'pods', 'ad', 'patch only');
  no(C, ['create'], '', 'pods/exec', 'ad', 'no exec into pods');
  no(C, ['create'], '', 'pods/attach', 'ad', 'no attach');
  no(C, ['create'], '', 'pods/portforward', 'ad', 'no port-forward');
  no(C, ['get'], '', 'pods/log', 'ad', 'no logs (terraform output)');
  no(C, ['patch', 'update'], '', 'pods/ephemeralcontainers', 'ad', 'no debug containers injected');
  no(C, ['update', 'patch'], '', 'pods/status', 'ad', "status is the node's");
  no(C, ['create'], '', 'pods/eviction', 'ad', 'deletes with a uid precondition instead');
  no(C, ['create'], '', 'serviceaccounts/token', 'ad', 'cannot mint tokens');
  no(C, ['create'], '', 'serviceaccounts/token', 'kube-system', 'cannot mint tokens');
  for (const [g, r] of [
    ['', 'persistentvolumeclaims'],
    ['', 'services'],
    ['', 'serviceaccounts'],
    [RBAC, 'roles'],
    [RBAC, 'rolebindings'],
    ['policy', 'poddisruptionbudgets'],
  ] as const) {
    no(C, ['delete'], g, r, 'ad', 'owned objects go with the AD through the garbage collector');
  }
  no(C, ['update'], '', 'services', 'ad', 'server-side apply only');
  no(C, ['update'], RBAC, 'roles', 'ad', 'server-side apply only');
  no(C, ['update'], RBAC, 'rolebindings', 'ad', 'server-side apply only');
  no(C, ['create', 'update', 'patch', 'delete'], ATD, 'atlantisdeployments', 'ad', 'never writes the spec');
  no(C, ['escalate', 'bind'], RBAC, 'roles', 'ad', 'cannot grant more than it holds');
  no(C, ['create', 'update', 'escalate', 'bind'], RBAC, 'clusterroles', 'cluster', 'no cluster roles');
  no(C, ['bind'], RBAC, 'clusterroles', 'ad', 'cannot bind cluster-admin', 'cluster-admin');
  no(C, ['create'], RBAC, 'clusterrolebindings', 'cluster', 'no cluster role bindings');
  no(C, ['impersonate'], '', 'users', 'cluster', 'no impersonation');
  no(C, ['impersonate'], '', 'serviceaccounts', 'ad', 'no impersonation');
  no(C, ['impersonate'], '', 'groups', 'cluster', 'no impersonation');
  no(C, ['get', 'list'], '', 'nodes', 'cluster', 'no nodes');
  no(C, ['create', 'delete'], '', 'namespaces', 'cluster', 'no namespaces');
  no(C, ['get', 'list'], '', 'leases', 'ad', 'Leases only in its own namespace');
  no(C, ['create'], 'coordination.k8s.io', 'leases', 'kube-system', 'Leases only in its own namespace');
  no(C, ['get', 'update'], 'coordination.k8s.io', 'leases', 'ad', 'Leases only in its own namespace', LEASE);
  no(C, ['delete'], 'coordination.k8s.io', 'leases', 'ctrl', 'get/create/update suffice', LEASE);
  no(C, ['list', 'watch', 'patch'], 'coordination.k8s.io', 'leases', 'ctrl', 'get/create/update suffice');
  no(C, ['patch', 'update', 'delete'], 'apps', 'deployments', 'ctrl', 'cannot change its own Deployment');
  no(C, ['create', 'update'], 'apiextensions.k8s.io', 'customresourcedefinitions', 'cluster', 'no CRDs');
  no(C, ['create'], 'admissionregistration.k8s.io', 'mutatingwebhookconfigurations', 'cluster', 'no webhooks');
  no(C, ['create'], 'events.k8s.io', 'events', 'ad', 'it writes core/v1 Events only');
  // server pod 0: its own Pod by name, nothing else (issue 16: not its sibling)
  yes(S, ['get', 'list', 'watch'], '', 'pods', 'ad', 'own Pod by name (list/watch with metadata.name field selector)', `${NAME}-0`);
  no(S, ['get', 'list', 'watch'], '', 'pods', 'ad', 'not its sibling pod', `${NAME}-1`);
  no(S, ['get', 'list', 'watch'], '', 'pods', 'ad', 'not another ordinal', `${NAME}-2`);
  no(S, ['list', 'watch'], '', 'pods', 'ad', 'no list/watch of all pods');
  no(S, ['patch', 'update', 'delete'], '', 'pods', 'ad', 'cannot change or delete its own Pod', `${NAME}-0`);
  no(S, ['create'], '', 'pods', 'ad', 'no pods');
  no(S, ['create'], '', 'pods/exec', 'ad', 'no exec', `${NAME}-1`);
  no(S, ['patch'], RBAC, 'roles', 'ad', "cannot widen its sibling's Role", `${NAME}-atlantis-1`);
  no(S, ['get'], '', 'pods/log', 'ad', "no other pod's output", `${NAME}-1`);
  no(S, ['create'], '', 'pods/eviction', 'ad', 'no evictions', `${NAME}-1`);
  no(S, ['get'], '', 'pods', 'other', 'no pods in other namespaces', `${NAME}-0`);
  no(S, ['get'], '', 'pods', 'ctrl', "not the controller's pods", CTRL_POD);
  no(S, ['list'], '', 'pods', 'cluster', 'no cluster-wide pods');
  no(S, ['get'], '', 'secrets', 'ad', 'not even its own token Secret', 'vcs');
  no(S, ['list'], '', 'secrets', 'ad', 'no secrets');
  no(S, ['get'], '', 'configmaps', 'ad', 'nothing else');
  no(S, ['get'], '', 'services', 'ad', 'nothing else', NAME);
  no(S, ['create'], '', 'events', 'ad', 'nothing else');
  no(S, ['get', 'patch'], ATD, 'atlantisdeployments', 'ad', 'not its AD', NAME);
  no(S, ['get'], 'coordination.k8s.io', 'leases', 'ctrl', 'not the controller Lease', LEASE);
  no(S, ['create'], '', 'serviceaccounts/token', 'ad', 'cannot mint tokens', SERVER_SA);
  no(S, ['patch'], RBAC, 'roles', 'ad', 'cannot widen its Role', SERVER_SA);
  return rows;
}

const fmt = (r: Row) =>
  `${r[0]}: ${r[1]} ${r[2] || 'core'}/${r[3]}${r[5] ? ` ${r[5]}` : ''} in ${r[4] === 'cluster' ? 'all namespaces' : r[4]}`;

async function token(ns: string, sa: string): Promise<KubeConfig> {
  const tr = await kubeRequestOk<{ status: { token: string } }>(
    cluster.kc,
    'POST',
    `/api/v1/namespaces/${ns}/serviceaccounts/${sa}/token`,
    { apiVersion: 'authentication.k8s.io/v1', kind: 'TokenRequest', spec: { expirationSeconds: 3600 } },
  );
  const cl = cluster.full.getCurrentCluster()!;
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: 'c', server: cl.server, caData: cl.caData, caFile: cl.caFile, skipTLSVerify: false }],
    users: [{ name: sa, token: tr.status.token }],
    contexts: [{ name: 'x', cluster: 'c', user: sa }],
    currentContext: 'x',
  });
  return kc;
}

/** "verb group/resource[names]" for every rule SelfSubjectRulesReview lists for `kc` in `ns`. */
async function rulesOf(kc: KubeConfig, ns: string): Promise<Set<string>> {
  const r = await kubeRequestOk<{
    status: {
      resourceRules: Array<{ verbs: string[]; apiGroups?: string[]; resources?: string[]; resourceNames?: string[] }>;
      incomplete: boolean;
      evaluationError?: string;
    };
  }>(kc, 'POST', '/apis/authorization.k8s.io/v1/selfsubjectrulesreviews', {
    apiVersion: 'authorization.k8s.io/v1',
    kind: 'SelfSubjectRulesReview',
    spec: { namespace: ns },
  });
  assert.equal(r.status.incomplete, false, r.status.evaluationError);
  const out = new Set<string>();
  for (const rule of r.status.resourceRules)
    for (const v of rule.verbs)
      for (const g of rule.apiGroups ?? [''])
        for (const res of rule.resources ?? [])
          out.add(`${v} ${g || 'core'}/${res}${rule.resourceNames?.length ? `[${[...rule.resourceNames].sort().join(',')}]` : ''}`);
  return out;
}

const expand = (spec: Array<[string, string, string[], string[]?]>): string[] =>
  spec.flatMap(([g, r, verbs, names]) => verbs.map((v) => `${v} ${g || 'core'}/${r}${names ? `[${names.join(',')}]` : ''}`));

describe('RBAC of the controller and of the server pods, asked of the API server', () => {
  before(async () => {
    // The per-AD objects the controller created (test above); waits in case it is run alone.
    await waitFor(
      'the server Roles of atl-0 and atl-1',
      async () => {
        for (const i of [0, 1]) {
          const r = await kubeRequest<V1Role>(
            cluster.kc,
            'GET',
            apiPath('rbac.authorization.k8s.io/v1', 'roles', adNs, `${NAME}-atlantis-${i}`),
          );
          if (r.status !== 200 || JSON.stringify(r.body.rules?.[0]?.resourceNames) !== JSON.stringify([`${NAME}-${i}`])) return false;
        }
        return true;
      },
      { timeoutMs: 120_000, intervalMs: 500 },
    );
  });

  it('the controller created a ServiceAccount, Role and RoleBinding per server pod, owned by the AD', async () => {
    const owner = (o: { metadata?: { ownerReferences?: Array<{ kind: string; name: string; controller?: boolean }> } }) =>
      o.metadata?.ownerReferences?.map((x) => `${x.kind}/${x.name}/${x.controller}`);
    const get = async (n: string) => ({
      sa: await kubeRequestOk<V1ServiceAccount>(cluster.kc, 'GET', apiPath('v1', 'serviceaccounts', adNs, n)),
      role: await kubeRequestOk<V1Role>(cluster.kc, 'GET', apiPath('rbac.authorization.k8s.io/v1', 'roles', adNs, n)),
      rb: await kubeRequestOk<V1RoleBinding>(cluster.kc, 'GET', apiPath('rbac.authorization.k8s.io/v1', 'rolebindings', adNs, n)),
    });
    for (const i of [0, 1]) {
      const account = `${NAME}-atlantis-${i}`;
      const { sa, role, rb } = await get(account);
      for (const o of [sa, role, rb]) assert.deepEqual(owner(o), [`AtlantisDeployment/${NAME}/true`]);
      assert.deepEqual(role.rules, [
        { apiGroups: [''], resources: ['pods'], verbs: ['get', 'list', 'watch'], resourceNames: [`${NAME}-${i}`] },
      ]);
      assert.deepEqual(rb.roleRef, { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: account });
      assert.deepEqual(rb.subjects, [{ kind: 'ServiceAccount', name: account, namespace: adNs }]);
    }
    // The instance-wide account: no pod runs as it, so its Role grants nothing.
    const shared = await get(SHARED_SA);
    assert.deepEqual(shared.role.rules ?? [], []);
  });

  it('SubjectAccessReview table: the controller and the server may do what they need and not the rest', async () => {
    const rows = table();
    const results: Array<{ row: Row; allowed: boolean; reason?: string }> = [];
    for (let i = 0; i < rows.length; i += 16) {
      const batch = rows.slice(i, i + 16);
      results.push(...(await Promise.all(batch.map(async (row) => ({ row, ...(await sar(row)) })))));
    }
    const wrong = results
      .filter((r) => r.allowed !== r.row[6])
      .map(
        (r) =>
          `${fmt(r.row)}: expected ${r.row[6] ? 'allowed' : 'denied'}, got ${r.allowed ? 'allowed' : 'denied'} (${r.row[7]})${r.reason ? ` [${r.reason}]` : ''}`,
      );
    console.log(
      `# RBAC table: ${rows.length} rows, ${rows.filter((r) => r[6]).length} allowed, ${rows.filter((r) => !r[6]).length} denied, ${wrong.length} wrong`,
    );
    assert.deepEqual(wrong, []);

    // The same answers through impersonation (kubectl auth can-i --as), for a sample.
    const sample = rows.filter((r, i) => i % 9 === 0 && !r[1].includes('*') && !r[3].includes('*'));
    for (const row of sample) {
      const [who, verb, group, res, where, name, allowed] = row;
      const [resource, sub] = res.split('/');
      const target = `${resource}${group ? `.${group}` : ''}${name ? `/${name}` : ''}`;
      const args = [
        'auth',
        'can-i',
        verb,
        target,
        `--as=${userOf(who).user}`,
        ...(sub ? [`--subresource=${sub}`] : []),
        ...(where === 'cluster' ? ['--all-namespaces'] : ['-n', nsOf(where)]),
      ];
      const r = await cluster.kubectl(args);
      assert.equal(r.stdout.trim(), allowed ? 'yes' : 'no', `kubectl ${args.join(' ')}: ${r.stdout} ${r.stderr}`);
    }
  });

  it('nothing more: SelfSubjectRulesReview with the real tokens lists exactly the expected rules', async () => {
    const ctrlKc = await token(op.namespace, op.serviceAccount);
    const serverKc = await token(adNs, SERVER_SA);
    const plainKc = await token(otherNs, 'default'); // no bindings: what every ServiceAccount has
    const ATD = 'atlantis-operator.dev';
    const RBAC = 'rbac.authorization.k8s.io';
    const controllerEverywhere = expand([
      [ATD, 'atlantisdeployments', ['get', 'list', 'watch']],
      [ATD, 'atlantisdeployments/status', ['update', 'patch']],
      [ATD, 'atlantisdeployments/finalizers', ['update']],
      ['', 'pods', ['get', 'list', 'watch', 'create', 'patch', 'delete']],
      ['', 'persistentvolumeclaims', ['get', 'list', 'watch', 'create']],
      ['', 'services', ['get', 'list', 'watch', 'create', 'patch']],
      ['', 'serviceaccounts', ['get', 'list', 'watch', 'create', 'patch']],
      [RBAC, 'roles', ['get', 'list', 'watch', 'create', 'patch']],
      [RBAC, 'rolebindings', ['get', 'list', 'watch', 'create', 'patch']],
      ['policy', 'poddisruptionbudgets', ['get', 'list', 'watch', 'create', 'patch']],
      ['networking.k8s.io', 'ingresses', ['get', 'list', 'watch', 'create', 'patch', 'delete']],
      ['', 'configmaps', ['get']],
      ['', 'secrets', ['get']],
      ['', 'events', ['create', 'patch']],
    ]);
    const leases = expand([['coordination.k8s.io', 'leases', ['get', 'create', 'update']]]);
    const serverOwn = expand([['', 'pods', ['get', 'list', 'watch'], [`${NAME}-0`]]]);
    const sharedKc = await token(adNs, SHARED_SA);
    const cases: Array<[string, KubeConfig, string, string[]]> = [
      ['controller in the AD namespace', ctrlKc, adNs, controllerEverywhere],
      ['controller in another namespace', ctrlKc, otherNs, controllerEverywhere],
      ['controller in kube-system', ctrlKc, 'kube-system', controllerEverywhere],
      ['controller in its own namespace', ctrlKc, op.namespace, [...controllerEverywhere, ...leases]],
      ['server in its namespace', serverKc, adNs, serverOwn],
      ['server in another namespace', serverKc, otherNs, []],
      ['server in the controller namespace', serverKc, op.namespace, []],
      ['instance-wide account (no pod runs as it)', sharedKc, adNs, []],
    ];
    for (const [label, kc, ns, want] of cases) {
      const base = await rulesOf(plainKc, ns);
      const got = [...(await rulesOf(kc, ns))].filter((x) => !base.has(x)).sort();
      assert.deepEqual(got, [...want].sort(), label);
    }
    // The baseline subtracted above is what every authenticated user has: self-reviews and
    // the public ClusterTrustBundles (discovery URLs are not resource rules).
    assert.deepEqual([...(await rulesOf(plainKc, adNs))].sort(), [
      'create authentication.k8s.io/selfsubjectreviews',
      'create authorization.k8s.io/selfsubjectaccessreviews',
      'create authorization.k8s.io/selfsubjectrulesreviews',
      'get certificates.k8s.io/clustertrustbundles',
      'list certificates.k8s.io/clustertrustbundles',
      'watch certificates.k8s.io/clustertrustbundles',
    ]);
  });

  it('real requests with the real tokens: refused with 403, or allowed', async () => {
    const ctrlKc = await token(op.namespace, op.serviceAccount);
    const serverKc = await token(adNs, SERVER_SA);
    const status = async (
      kc: KubeConfig,
      method: 'GET' | 'POST' | 'PATCH' | 'DELETE',
      path: string,
      body?: unknown,
      query?: Record<string, string>,
    ) => (await kubeRequest(kc, method, path, body, { query, contentType: method === 'PATCH' ? MERGE_PATCH : undefined })).status;
    const metadataStatus = async (kc: KubeConfig, path: string) => {
      const r = await kubeRequest<{ kind?: string; data?: unknown }>(kc, 'GET', path, undefined, { accept: PARTIAL_OBJECT_METADATA });
      // The API server sends the metadata only: no data reaches the controller.
      assert.equal(r.body?.kind, 'PartialObjectMetadata');
      assert.equal(r.body?.data, undefined);
      return r.status;
    };
    const pod0 = apiPath('v1', 'pods', adNs, `${NAME}-0`);
    const rows: Array<[string, () => Promise<number>, number]> = [
      [
        "controller reads the vcs Secret's metadata (what its code asks for)",
        () => metadataStatus(ctrlKc, apiPath('v1', 'secrets', adNs, 'vcs')),
        200,
      ],
      ['controller lists Secrets in the namespace', () => status(ctrlKc, 'GET', apiPath('v1', 'secrets', adNs)), 403],
      ['controller lists Secrets cluster-wide', () => status(ctrlKc, 'GET', '/api/v1/secrets'), 403],
      ['controller watches Secrets', () => status(ctrlKc, 'GET', apiPath('v1', 'secrets', adNs), undefined, { watch: 'true' }), 403],
      ['controller lists ConfigMaps', () => status(ctrlKc, 'GET', apiPath('v1', 'configmaps', adNs)), 403],
      [
        'controller mints a token for the server account',
        () =>
          status(ctrlKc, 'POST', `/api/v1/namespaces/${adNs}/serviceaccounts/${SERVER_SA}/token`, {
            apiVersion: 'authentication.k8s.io/v1',
            kind: 'TokenRequest',
            spec: {},
          }),
        403,
      ],
      [
        'controller binds cluster-admin in another namespace',
        () =>
          status(ctrlKc, 'POST', apiPath('rbac.authorization.k8s.io/v1', 'rolebindings', otherNs), {
            apiVersion: 'rbac.authorization.k8s.io/v1',
            kind: 'RoleBinding',
            metadata: { name: 'escalate' },
            roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'cluster-admin' },
            subjects: [{ kind: 'ServiceAccount', name: 'default', namespace: otherNs }],
          }),
        403,
      ],
      [
        'controller creates a Role granting a list of Secrets',
        () =>
          status(ctrlKc, 'POST', apiPath('rbac.authorization.k8s.io/v1', 'roles', otherNs), {
            apiVersion: 'rbac.authorization.k8s.io/v1',
            kind: 'Role',
            metadata: { name: 'escalate' },
            rules: [{ apiGroups: [''], resources: ['secrets'], verbs: ['get', 'list'] }],
          }),
        403,
      ],
      [
        'controller creates a ClusterRoleBinding',
        () =>
          status(ctrlKc, 'POST', '/apis/rbac.authorization.k8s.io/v1/clusterrolebindings', {
            apiVersion: 'rbac.authorization.k8s.io/v1',
            kind: 'ClusterRoleBinding',
            metadata: { name: `escalate-${otherNs}` },
            roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'view' },
            subjects: [{ kind: 'ServiceAccount', name: 'default', namespace: otherNs }],
          }),
        403,
      ],
      ['controller deletes the server Service', () => status(ctrlKc, 'DELETE', apiPath('v1', 'services', adNs, NAME)), 403],
      ['controller lists pods cluster-wide', () => status(ctrlKc, 'GET', '/api/v1/pods', undefined, { limit: '1' }), 200],
      ['controller reads its Lease', () => status(ctrlKc, 'GET', apiPath('coordination.k8s.io/v1', 'leases', op.namespace, LEASE)), 200],
      ['server reads its own Pod', () => status(serverKc, 'GET', pod0), 200],
      ['server 0 reads its sibling pod 1', () => status(serverKc, 'GET', apiPath('v1', 'pods', adNs, `${NAME}-1`)), 403],
      [
        'server 0 lists its sibling pod 1 by field selector',
        () => status(serverKc, 'GET', apiPath('v1', 'pods', adNs), undefined, { fieldSelector: `metadata.name=${NAME}-1` }),
        403,
      ],
      [
        'server lists its own Pod by field selector',
        () => status(serverKc, 'GET', apiPath('v1', 'pods', adNs), undefined, { fieldSelector: `metadata.name=${NAME}-0` }),
        200,
      ],
      ['server lists all pods', () => status(serverKc, 'GET', apiPath('v1', 'pods', adNs)), 403],
      [
        'server annotates its own Pod (could cancel or start drains)',
        () => status(serverKc, 'PATCH', pod0, { metadata: { annotations: { x: 'y' } } }),
        403,
      ],
      ['server deletes its own Pod', () => status(serverKc, 'DELETE', pod0), 403],
      ['server reads the vcs Secret', () => status(serverKc, 'GET', apiPath('v1', 'secrets', adNs, 'vcs')), 403],
      ['server reads a pod of another namespace', () => status(serverKc, 'GET', apiPath('v1', 'pods', op.namespace, CTRL_POD)), 403],
      [
        'server reads its AtlantisDeployment',
        () => status(serverKc, 'GET', apiPath('atlantis-operator.dev/v1alpha1', 'atlantisdeployments', adNs, NAME)),
        403,
      ],
    ];
    const wrong: string[] = [];
    for (const [label, f, want] of rows) {
      const got = await f();
      if (got !== want) wrong.push(`${label}: HTTP ${got}, expected ${want}`);
    }
    assert.deepEqual(wrong, []);
  });
});
