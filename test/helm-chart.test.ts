// The Helm chart (charts/atlantis-operator) with a real helm (make helm-bin): `helm lint
// --strict`; its CRD is the bytes of crds/; `helm template` with the default values renders the
// objects of manifests/ (kubectl kustomize), with only the differences docs/gitops.md lists;
// what each value changes (a table of values -> rendered facts) and the values it refuses.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { V1Deployment, V1PodDisruptionBudget, V1RoleBinding, V1Service } from '@kubernetes/client-node';
import { resolveBinaries } from '../dev/binaries.js';
import { CHART_DIR, type Helm, helmRunner, type KObj, parseObjects, renderChart, renderChartRaw } from './support/helm.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const CRD_FILE = 'atlantisdeployments.atlantis-operator.dev.yaml';

/** Labels the chart puts on objects beyond those of manifests/ (Helm's recommended labels). */
const HELM_LABELS = [
  'helm.sh/chart',
  'app.kubernetes.io/name',
  'app.kubernetes.io/instance',
  'app.kubernetes.io/version',
  'app.kubernetes.io/managed-by',
];

let helm: Helm;
before(() => {
  helm = helmRunner();
});
after(() => helm?.cleanup());

const key = (o: KObj) => `${o.kind}/${o.metadata.namespace ?? ''}/${o.metadata.name}`;
const find = <T>(objs: KObj[], kind: string, name?: string): T | undefined =>
  objs.find((o) => o.kind === kind && (name === undefined || o.metadata.name === name)) as T | undefined;

function withoutLabels(o: KObj): KObj {
  const { labels: _labels, ...metadata } = o.metadata;
  return { ...o, metadata };
}

test('helm lint --strict passes with the default values and with every option set', async () => {
  const full = {
    image: { repository: 'registry.example/atlantis-operator', tag: '0.2.0', pullPolicy: 'Always' },
    imagePullSecrets: [{ name: 'pull' }],
    replicaCount: 3,
    watchNamespaces: ['team'],
    extraArgs: ['--log-level=debug'],
    extraEnv: [{ name: 'X', value: '1' }],
    serviceAccount: { annotations: { a: 'b' } },
    metrics: { service: { type: 'NodePort', annotations: { a: 'b' } } },
    serviceMonitor: { enabled: true, namespace: 'monitoring', labels: { release: 'prometheus' }, interval: '30s', scrapeTimeout: '10s' },
    podDisruptionBudget: { minAvailable: 1 },
    podAntiAffinity: 'hard',
    nodeSelector: { 'kubernetes.io/os': 'linux' },
    tolerations: [{ key: 'ops', operator: 'Exists', effect: 'NoSchedule' }],
    priorityClassName: 'system-cluster-critical',
    podAnnotations: { a: 'b' },
    podLabels: { team: 'platform' },
    atlantisDeployment: { enabled: true, namespace: 'team', labels: { a: 'b' }, annotations: { a: 'b' }, spec: { replicas: 2 } },
  };
  for (const [label, values] of [
    ['defaults', {}],
    ['every option', full],
    ['one replica without leader election', { replicaCount: 1, leaderElection: { enabled: false } }],
  ] as const) {
    const r = await helm.run(['lint', '--strict', CHART_DIR, '-f', helm.valuesFile(values)]);
    assert.equal(r.exitCode, 0, `${label}: ${r.stdout}${r.stderr}`);
    assert.match(r.stdout, /1 chart\(s\) linted, 0 chart\(s\) failed/, label);
    assert.doesNotMatch(r.stdout, /\[(WARNING|ERROR)\]/, label);
  }
});

test("the chart's CRD is byte for byte crds/ (helm never templates crds/; both are written by make crds)", () => {
  const chartCrds = fs.readdirSync(path.join(CHART_DIR, 'crds')).sort();
  const sourceCrds = fs
    .readdirSync(path.join(root, 'crds'))
    .filter((f) => f !== 'kustomization.yaml')
    .sort();
  assert.deepEqual(chartCrds, sourceCrds, 'the same CRD files');
  for (const f of sourceCrds)
    assert.ok(
      fs.readFileSync(path.join(CHART_DIR, 'crds', f)).equals(fs.readFileSync(path.join(root, 'crds', f))),
      `charts/atlantis-operator/crds/${f} differs from crds/${f}: run make crds`,
    );
  assert.ok(sourceCrds.includes(CRD_FILE));
});

test('helm template with the default values renders the objects of manifests/, with only the documented differences', async () => {
  const kubectl = resolveBinaries().kubectl;
  const manifests = parseObjects(execFileSync(kubectl, ['kustomize', path.join(root, 'manifests')], { encoding: 'utf8' }));
  const chart = await renderChart(helm, {}, { includeCrds: true });
  const byKey = new Map(chart.map((o) => [key(o), o]));
  assert.equal(byKey.size, chart.length, 'no object rendered twice');

  // Documented difference 1: no Namespace in the chart (Helm installs into an existing one).
  const onlyInManifests = manifests.filter((o) => !byKey.has(key(o))).map(key);
  assert.deepEqual(onlyInManifests, ['Namespace//atlantis-operator']);
  const manifestKeys = new Set(manifests.map(key));
  assert.deepEqual(chart.filter((o) => !manifestKeys.has(key(o))).map(key), [], 'the chart renders nothing manifests/ does not have');

  for (const m of manifests.filter((o) => o.kind !== 'Namespace')) {
    const c = byKey.get(key(m))!;
    assert.deepEqual(withoutLabels(c), withoutLabels(m), `${key(m)}: the same object but for labels`);
    const ml = m.metadata.labels ?? {};
    const cl = c.metadata.labels ?? {};
    if (m.kind === 'CustomResourceDefinition') {
      // crds/ is not templated: the CRD is the same, labels too.
      assert.deepEqual(c, m, 'the CRD as crds/ has it');
      continue;
    }
    // Documented difference 2: Helm's labels on top of those of manifests/.
    for (const [k, v] of Object.entries(ml)) assert.equal(cl[k], v, `${key(m)}: label ${k}`);
    const extra = Object.keys(cl).filter((k) => !(k in ml));
    assert.deepEqual(
      extra.filter((k) => !HELM_LABELS.includes(k)),
      [],
      `${key(m)}: only Helm's labels added (${extra.join(', ')})`,
    );
    assert.equal(cl['app.kubernetes.io/managed-by'], 'Helm');
    assert.equal(cl['app.kubernetes.io/instance'], 'atlantis-operator');
  }
});

/** An object's labels other than those the chart puts on every object. */
function ownLabels(o: KObj): Record<string, string> {
  const common = [...HELM_LABELS.filter((k) => k !== 'app.kubernetes.io/name'), 'app.kubernetes.io/part-of'];
  return Object.fromEntries(Object.entries(o.metadata.labels ?? {}).filter(([k]) => !common.includes(k)));
}

/** What a rendering decides, in one comparable record. */
function facts(objs: KObj[]) {
  const dep = find<V1Deployment>(objs, 'Deployment')!;
  const pod = dep.spec!.template;
  const c = pod.spec!.containers[0]!;
  const crb = find<V1RoleBinding>(objs, 'ClusterRoleBinding');
  const rbs = objs.filter((o) => o.kind === 'RoleBinding') as unknown as V1RoleBinding[];
  const controllerRb = rbs.find((b) => b.roleRef.kind === 'ClusterRole');
  const svc = find<V1Service>(objs, 'Service');
  const pdb = find<V1PodDisruptionBudget>(objs, 'PodDisruptionBudget');
  const sm = find<KObj & { spec: Record<string, unknown> }>(objs, 'ServiceMonitor');
  const aff = pod.spec!.affinity;
  // Invariants of every rendering: the selectors pick the pods' labels.
  const podLabels = pod.metadata!.labels!;
  for (const sel of [dep.spec!.selector.matchLabels, svc?.spec?.selector, pdb?.spec?.selector?.matchLabels])
    for (const [k, v] of Object.entries(sel ?? {})) assert.equal(podLabels[k], v, `selector ${k}=${v} matches the pods`);
  return {
    kinds: objs.map((o) => `${o.kind}/${o.metadata.name}`).sort(),
    replicas: dep.spec!.replicas,
    args: c.args,
    env: (c.env ?? []).map((e) => e.name),
    strategy: dep.spec!.strategy!.type,
    image: c.image,
    pullPolicy: c.imagePullPolicy,
    resources: c.resources,
    version: dep.metadata!.labels!['app.kubernetes.io/version'],
    binding: crb ? 'ClusterRoleBinding' : controllerRb ? `RoleBinding in ${controllerRb.metadata!.namespace}` : 'none',
    bindingSubject: (crb ?? controllerRb)?.subjects?.[0],
    leaderElectionRole: objs.some((o) => o.kind === 'Role' && o.metadata.name.endsWith('-leader-election')),
    serviceAccount: pod.spec!.serviceAccountName,
    pdb: pdb ? { ...pdb.spec, selector: undefined } : null,
    metricsService: svc ? { type: svc.spec!.type, port: svc.spec!.ports![0]!.port } : null,
    serviceMonitor: sm ? { namespace: sm.metadata.namespace, labels: ownLabels(sm), spec: sm.spec } : null,
    affinity: aff?.podAntiAffinity?.preferredDuringSchedulingIgnoredDuringExecution
      ? 'soft'
      : aff?.podAntiAffinity?.requiredDuringSchedulingIgnoredDuringExecution
        ? 'hard'
        : aff
          ? aff
          : 'none',
    nodeSelector: pod.spec!.nodeSelector,
    tolerations: pod.spec!.tolerations,
    priorityClassName: pod.spec!.priorityClassName,
    podLabels,
    podAnnotations: pod.metadata!.annotations,
    imagePullSecrets: pod.spec!.imagePullSecrets,
  };
}
type Facts = ReturnType<typeof facts>;

const SEL = { 'app.kubernetes.io/name': 'atlantis-operator', 'app.kubernetes.io/component': 'controller' };
const ALL_OBJECTS = [
  'ClusterRole/atlantis-operator',
  'ClusterRoleBinding/atlantis-operator',
  'Deployment/atlantis-operator',
  'PodDisruptionBudget/atlantis-operator',
  'Role/atlantis-operator-leader-election',
  'RoleBinding/atlantis-operator-leader-election',
  'Service/atlantis-operator-metrics',
  'ServiceAccount/atlantis-operator',
];
const nodeAffinity = {
  nodeAffinity: {
    requiredDuringSchedulingIgnoredDuringExecution: {
      nodeSelectorTerms: [{ matchExpressions: [{ key: 'pool', operator: 'In', values: ['ops'] }] }],
    },
  },
};

const rows: Array<[string, Record<string, unknown>, Partial<Facts>]> = [
  [
    'defaults',
    {},
    {
      kinds: ALL_OBJECTS,
      replicas: 2,
      args: ['controller', '--leader-elect'],
      env: ['POD_NAME', 'POD_NAMESPACE'],
      strategy: 'RollingUpdate',
      image: 'atlantis-operator:0.1.0',
      pullPolicy: undefined,
      resources: { requests: { cpu: '50m', memory: '128Mi' }, limits: { cpu: '1', memory: '512Mi' } },
      binding: 'ClusterRoleBinding',
      bindingSubject: { kind: 'ServiceAccount', name: 'atlantis-operator', namespace: 'atlantis-operator' },
      leaderElectionRole: true,
      pdb: { maxUnavailable: 1, selector: undefined },
      metricsService: { type: undefined, port: 8080 },
      serviceMonitor: null,
      affinity: 'soft',
      podLabels: SEL,
      podAnnotations: undefined,
    },
  ],
  [
    'one replica keeps leader election (a rolling update runs two)',
    { replicaCount: 1 },
    { replicas: 1, args: ['controller', '--leader-elect'], strategy: 'RollingUpdate', leaderElectionRole: true },
  ],
  [
    'one replica without leader election: Recreate, no Lease Role',
    { replicaCount: 1, leaderElection: { enabled: false } },
    {
      args: ['controller'],
      strategy: 'Recreate',
      leaderElectionRole: false,
      kinds: ALL_OBJECTS.filter((k) => !k.includes('leader-election')),
    },
  ],
  ['zero replicas without leader election', { replicaCount: 0, leaderElection: { enabled: false } }, { replicas: 0, strategy: 'Recreate' }],
  [
    'one watched namespace: --namespace and the ClusterRole bound there only',
    { watchNamespaces: ['team'] },
    {
      args: ['controller', '--leader-elect', '--namespace=team'],
      binding: 'RoleBinding in team',
      bindingSubject: { kind: 'ServiceAccount', name: 'atlantis-operator', namespace: 'atlantis-operator' },
      leaderElectionRole: true,
    },
  ],
  [
    'ServiceMonitor for the metrics Service',
    {
      serviceMonitor: { enabled: true, namespace: 'monitoring', labels: { release: 'prometheus' }, interval: '30s', scrapeTimeout: '10s' },
    },
    {
      serviceMonitor: {
        namespace: 'monitoring',
        labels: { ...SEL, release: 'prometheus' },
        spec: {
          namespaceSelector: { matchNames: ['atlantis-operator'] },
          selector: { matchLabels: SEL },
          endpoints: [{ port: 'http', path: '/metrics', interval: '30s', scrapeTimeout: '10s' }],
        },
      },
    },
  ],
  [
    'ServiceMonitor in the release namespace, Prometheus defaults',
    { serviceMonitor: { enabled: true } },
    {
      serviceMonitor: {
        namespace: 'atlantis-operator',
        labels: SEL,
        spec: {
          namespaceSelector: { matchNames: ['atlantis-operator'] },
          selector: { matchLabels: SEL },
          endpoints: [{ port: 'http', path: '/metrics' }],
        },
      },
    },
  ],
  ['PDB with minAvailable', { podDisruptionBudget: { minAvailable: 1 } }, { pdb: { minAvailable: 1, selector: undefined } }],
  ['PDB off', { podDisruptionBudget: { enabled: false } }, { pdb: null }],
  ['metrics Service off', { metrics: { service: { enabled: false } } }, { metricsService: null }],
  [
    'metrics Service type and port',
    { metrics: { service: { type: 'NodePort', port: 9090 } } },
    { metricsService: { type: 'NodePort', port: 9090 } },
  ],
  [
    'an explicit ClusterIP renders as the default',
    { metrics: { service: { type: 'ClusterIP' } } },
    { metricsService: { type: undefined, port: 8080 } },
  ],
  [
    'image repository, tag and pull policy',
    {
      image: { repository: 'registry.example/atlantis-operator', tag: '0.2.0', pullPolicy: 'Always' },
      imagePullSecrets: [{ name: 'pull' }],
    },
    { image: 'registry.example/atlantis-operator:0.2.0', pullPolicy: 'Always', version: '0.2.0', imagePullSecrets: [{ name: 'pull' }] },
  ],
  [
    'a default resource key dropped with null',
    { resources: { limits: { cpu: null } } },
    { resources: { requests: { cpu: '50m', memory: '128Mi' }, limits: { memory: '512Mi' } } },
  ],
  ['hard anti-affinity', { podAntiAffinity: 'hard' }, { affinity: 'hard' }],
  ['no anti-affinity', { podAntiAffinity: '' }, { affinity: 'none' }],
  ['affinity given replaces the preset', { affinity: nodeAffinity }, { affinity: nodeAffinity as never }],
  [
    'no RBAC',
    { rbac: { create: false } },
    {
      kinds: [
        'Deployment/atlantis-operator',
        'PodDisruptionBudget/atlantis-operator',
        'Service/atlantis-operator-metrics',
        'ServiceAccount/atlantis-operator',
      ],
      binding: 'none',
    },
  ],
  [
    'an existing ServiceAccount',
    { serviceAccount: { create: false, name: 'ops-controller' } },
    {
      serviceAccount: 'ops-controller',
      bindingSubject: { kind: 'ServiceAccount', name: 'ops-controller', namespace: 'atlantis-operator' },
      kinds: ALL_OBJECTS.filter((k) => !k.startsWith('ServiceAccount/')),
    },
  ],
  [
    'resources, extra args and env, scheduling, pod labels and annotations',
    {
      resources: { requests: { cpu: '100m' } },
      extraArgs: ['--log-level=debug', '--max-concurrent-reconciles=4'],
      extraEnv: [{ name: 'TZ', value: 'UTC' }],
      nodeSelector: { pool: 'ops' },
      tolerations: [{ key: 'ops', operator: 'Exists', effect: 'NoSchedule' }],
      priorityClassName: 'system-cluster-critical',
      podLabels: { team: 'platform' },
      podAnnotations: { 'example.com/a': 'b' },
    },
    {
      // Helm merges maps with the defaults: the other requests and the limits stay.
      resources: { requests: { cpu: '100m', memory: '128Mi' }, limits: { cpu: '1', memory: '512Mi' } },
      args: ['controller', '--leader-elect', '--log-level=debug', '--max-concurrent-reconciles=4'],
      env: ['POD_NAME', 'POD_NAMESPACE', 'TZ'],
      nodeSelector: { pool: 'ops' },
      tolerations: [{ key: 'ops', operator: 'Exists', effect: 'NoSchedule' }],
      priorityClassName: 'system-cluster-critical',
      podLabels: { ...SEL, team: 'platform' },
      podAnnotations: { 'example.com/a': 'b' },
    },
  ],
];

test('what each value changes (values -> rendered facts)', async (t) => {
  for (const [label, values, want] of rows) {
    await t.test(label, async () => {
      const f = facts(await renderChart(helm, values));
      const got = Object.fromEntries(Object.keys(want).map((k) => [k, f[k as keyof Facts]]));
      assert.deepEqual(got, want);
    });
  }
});

test('a release of another name in another namespace: names follow the release, everything namespaced is in its namespace', async () => {
  const objs = await renderChart(helm, {}, { release: 'ops', namespace: 'infra' });
  assert.deepEqual(objs.map((o) => `${o.kind}/${o.metadata.namespace ?? '-'}/${o.metadata.name}`).sort(), [
    'ClusterRole/-/ops-atlantis-operator',
    'ClusterRoleBinding/-/ops-atlantis-operator',
    'Deployment/infra/ops-atlantis-operator',
    'PodDisruptionBudget/infra/ops-atlantis-operator',
    'Role/infra/ops-atlantis-operator-leader-election',
    'RoleBinding/infra/ops-atlantis-operator-leader-election',
    'Service/infra/ops-atlantis-operator-metrics',
    'ServiceAccount/infra/ops-atlantis-operator',
  ]);
  const f = facts(objs);
  assert.deepEqual(f.bindingSubject, { kind: 'ServiceAccount', name: 'ops-atlantis-operator', namespace: 'infra' });
  assert.equal(f.serviceAccount, 'ops-atlantis-operator');
});

test('values the chart refuses, each with a reason', async (t) => {
  const refusals: Array<[string, Record<string, unknown>, RegExp]> = [
    [
      'two watched namespaces',
      { watchNamespaces: ['a', 'b'] },
      /watchNamespaces: \[a b\] names 2 namespaces, but the controller's --namespace watches one.*one release per namespace/,
    ],
    [
      'several replicas without leader election',
      { leaderElection: { enabled: false } },
      /leaderElection.enabled is false with replicaCount 2: every replica would reconcile/,
    ],
    [
      'a ServiceMonitor without the metrics Service',
      { serviceMonitor: { enabled: true }, metrics: { service: { enabled: false } } },
      /serviceMonitor.enabled needs metrics.service.enabled/,
    ],
    [
      'an existing ServiceAccount without its name',
      { serviceAccount: { create: false } },
      /serviceAccount.name is required when serviceAccount.create is false/,
    ],
    ['a misspelt value', { replicas: 3 }, /additional properties 'replicas' not allowed/],
    ['an unknown anti-affinity preset', { podAntiAffinity: 'spread' }, /podAntiAffinity/],
    ['a namespace that is not a DNS label', { watchNamespaces: ['Team_A'] }, /watchNamespaces/],
    ['a negative replica count', { replicaCount: -1 }, /replicaCount/],
    [
      'an AtlantisDeployment name that is not a DNS label',
      { atlantisDeployment: { enabled: true, name: 'My_Atlantis' } },
      /atlantisDeployment/,
    ],
    ['a misspelt AtlantisDeployment value', { atlantisDeployment: { enable: true } }, /additional properties 'enable' not allowed/],
  ];
  for (const [label, values, want] of refusals) {
    await t.test(label, async () => {
      const r = await renderChartRaw(helm, values);
      assert.notEqual(r.exitCode, 0, `accepted: ${r.stdout.slice(0, 200)}`);
      assert.match(r.stderr, want);
    });
  }
});

test('an AtlantisDeployment from values: none by default; its spec as given, the image defaulting to the controller image', async () => {
  const none = await renderChart(helm, {});
  assert.equal(none.filter((o) => o.kind === 'AtlantisDeployment').length, 0, 'off by default');
  const spec = {
    replicas: 2,
    atlantis: { url: 'https://atlantis.example.com', github: { user: 'bot', tokenSecretRef: { name: 'vcs', key: 'token' } } },
    ingress: { host: 'atlantis.example.com' },
  };
  const objs = await renderChart(helm, {
    image: { repository: 'registry.example/atlantis-operator', tag: '0.3.0' },
    atlantisDeployment: { enabled: true, namespace: 'team', labels: { team: 'platform' }, spec },
  });
  const ad = objs.find((o) => o.kind === 'AtlantisDeployment') as KObj & { spec: Record<string, unknown> };
  assert.ok(ad, 'rendered');
  assert.equal(ad.apiVersion, 'atlantis-operator.dev/v1alpha1');
  assert.equal(ad.metadata.name, 'atlantis');
  assert.equal(ad.metadata.namespace, 'team');
  assert.equal(ad.metadata.labels?.team, 'platform');
  assert.equal(ad.metadata.labels?.['app.kubernetes.io/managed-by'], 'Helm');
  assert.deepEqual(ad.spec, { ...spec, image: 'registry.example/atlantis-operator:0.3.0' });
  const own = await renderChart(
    helm,
    { atlantisDeployment: { enabled: true, name: 'prod', spec: { image: 'mine:1' } } },
    { namespace: 'ops' },
  );
  const ad2 = own.find((o) => o.kind === 'AtlantisDeployment') as KObj & { spec: Record<string, unknown> };
  assert.deepEqual(
    [ad2.metadata.name, ad2.metadata.namespace, ad2.spec.image],
    ['prod', 'ops', 'mine:1'],
    'a name, the release namespace, its own image',
  );
});
