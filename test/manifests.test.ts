// The CRD and the kustomize manifests: structural schema, defaults in step with the code,
// RBAC covering what the controller does, hardened controller Deployment, a valid example.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { execFileSync } from 'node:child_process';
import { parse, parseAllDocuments } from 'yaml';
import type { V1CustomResourceDefinition, V1Deployment, V1PolicyRule, V1ClusterRole, V1Role } from '@kubernetes/client-node';
import { DEFAULTS, MIN_GRACE_SECONDS, podTemplateRevision, renderPod, renderRole } from '../src/controller/resources/index.js';
import type { AtlantisDeployment } from '../src/controller/types.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const CRD_PATH = path.join(root, 'crds/atlantisdeployments.atlantis-operator.dev.yaml');
/** An OpenAPI schema node as written in YAML (client-node's V1JSONSchemaProps renames keys like `enum`). */
interface Schema {
  type?: string;
  properties?: Record<string, Schema>;
  items?: Schema;
  additionalProperties?: Schema | boolean;
  required?: string[];
  enum?: unknown[];
  default?: unknown;
  pattern?: string;
  'x-kubernetes-validations'?: Array<{ rule: string; message?: string; messageExpression?: string }>;
  'x-kubernetes-preserve-unknown-fields'?: boolean;
  'x-kubernetes-list-type'?: string;
  [k: string]: unknown;
}
type V1JSONSchemaProps = Schema;

const crd = parse(fs.readFileSync(CRD_PATH, 'utf8')) as V1CustomResourceDefinition;
const version = crd.spec.versions[0]!;
const schema = version.schema!.openAPIV3Schema as unknown as Schema;
const specSchema = schema.properties!.spec!;
const prop = (s: V1JSONSchemaProps, dotted: string): V1JSONSchemaProps =>
  dotted.split('.').reduce((acc, k) => {
    const next = acc.properties?.[k];
    assert.ok(next, `schema has ${dotted}`);
    return next;
  }, s);

type KObj = { apiVersion: string; kind: string; metadata: { name: string; namespace?: string }; [k: string]: unknown };

function kustomize(dir: string): KObj[] {
  const out = execFileSync('kubectl', ['kustomize', path.join(root, dir)], { encoding: 'utf8' });
  return parseAllDocuments(out).map((d) => d.toJSON() as KObj);
}

/** Walks every schema node with its path. */
function walk(s: V1JSONSchemaProps, at: string, visit: (s: V1JSONSchemaProps, at: string) => void): void {
  visit(s, at);
  for (const [k, v] of Object.entries(s.properties ?? {})) walk(v, `${at}.${k}`, visit);
  if (s.items) walk(s.items, `${at}[]`, visit);
  if (s.additionalProperties && typeof s.additionalProperties === 'object') walk(s.additionalProperties, `${at}{}`, visit);
}

test('CRD identity, subresources and printer columns', () => {
  assert.equal(crd.apiVersion, 'apiextensions.k8s.io/v1');
  assert.equal(crd.metadata?.name, 'atlantisdeployments.atlantis-operator.dev');
  assert.equal(crd.spec.group, 'atlantis-operator.dev');
  assert.equal(crd.spec.scope, 'Namespaced');
  assert.deepEqual(
    {
      kind: crd.spec.names.kind,
      plural: crd.spec.names.plural,
      shortNames: crd.spec.names.shortNames,
      categories: crd.spec.names.categories,
    },
    { kind: 'AtlantisDeployment', plural: 'atlantisdeployments', shortNames: ['atd'], categories: ['atlantis'] },
  );
  assert.equal(crd.spec.versions.length, 1);
  assert.equal(version.name, 'v1alpha1');
  assert.equal(version.served && version.storage, true);
  assert.deepEqual(version.subresources, {
    status: {},
    scale: { specReplicasPath: '.spec.replicas', statusReplicasPath: '.status.replicas', labelSelectorPath: '.status.selector' },
  });
  const cols = (version.additionalPrinterColumns ?? []).filter((c) => !c.priority).map((c) => `${c.name}=${c.jsonPath}`);
  assert.deepEqual(cols, [
    'Replicas=.spec.replicas',
    'Ready=.status.readyReplicas',
    'Up-to-date=.status.updatedReplicas',
    'Draining=.status.drainingReplicas',
    'Surge=.status.surgeReplicas',
    'Phase=.status.rolloutPhase',
    'Age=.metadata.creationTimestamp',
  ]);
});

test('CRD schema is structural', () => {
  walk(schema, '', (s, at) => {
    if (at === '.metadata') {
      assert.deepEqual(s, { type: 'object' }, 'metadata may only say type: object');
      return;
    }
    const preserve = s['x-kubernetes-preserve-unknown-fields'] === true;
    // An int-or-string (a Quantity, an IntOrString) has no type, only the one anyOf allowed.
    const intOrString = (s as Record<string, unknown>)['x-kubernetes-int-or-string'] === true;
    assert.ok(s.type || preserve || intOrString, `${at || '<root>'} has a type`);
    if (intOrString) {
      assert.equal(s.type, undefined, `${at}: int-or-string without a type`);
      assert.deepEqual((s as Record<string, unknown>).anyOf, [{ type: 'integer' }, { type: 'string' }], `${at}: the int-or-string anyOf`);
    }
    if (s.properties) assert.equal(s.type, 'object', `${at} with properties is an object`);
    if (s.items) assert.equal(s.type, 'array', `${at} with items is an array`);
    if (s.type === 'array') assert.ok(s.items, `${at} array has items`);
    for (const banned of ['$ref', 'allOf', 'oneOf', 'not', ...(intOrString ? [] : ['anyOf'])])
      assert.equal((s as Record<string, unknown>)[banned], undefined, `${at}: ${banned}`);
    for (const v of s['x-kubernetes-validations'] ?? []) {
      assert.ok(v.rule.length > 0, `${at}: rule`);
      assert.ok(v.message || v.messageExpression, `${at}: CEL rule "${v.rule}" has a readable message`);
    }
    if (s.default !== undefined) {
      const d = s.default;
      const t = typeof d === 'object' && d !== null ? 'object' : typeof d === 'number' ? 'integer' : typeof d;
      assert.equal(t, s.type, `${at}: default matches the type`);
    }
  });
});

test('CRD defaults are the ones the code applies', () => {
  const def = (p: string): unknown => prop(specSchema, p).default;
  assert.equal(def('replicas'), DEFAULTS.replicas);
  assert.equal(def('storage.size'), DEFAULTS.storageSize);
  assert.equal(def('updateStrategy.maxUnavailable'), DEFAULTS.maxUnavailable);
  assert.equal(def('updateStrategy.drainTimeoutSeconds'), DEFAULTS.drainTimeoutSeconds);
  assert.equal(def('updateStrategy.onDrainTimeout'), DEFAULTS.onDrainTimeout);
  assert.equal(def('paused'), DEFAULTS.paused);
  assert.equal(def('terminationGracePeriodSeconds'), DEFAULTS.terminationGracePeriodSeconds);
  assert.equal(def('service.type'), DEFAULTS.serviceType);
  assert.equal(def('service.port'), DEFAULTS.servicePort);
  // Parents default to {} so their children's defaults apply when the parent is omitted.
  for (const parent of ['storage', 'updateStrategy', 'service']) assert.deepEqual(def(parent), {}, parent);
  assert.deepEqual(prop(specSchema, 'updateStrategy.onDrainTimeout').enum, ['Wait', 'Interrupt']);
  assert.deepEqual(prop(specSchema, 'service.type').enum, ['ClusterIP', 'NodePort', 'LoadBalancer']);
  assert.deepEqual(specSchema.required, ['image']);
});

test('CRD CEL rules cover the documented constraints', () => {
  const rules = (p: string): string[] => (prop(specSchema, p)['x-kubernetes-validations'] ?? []).map((v) => v.rule);
  assert.ok(rules('image').some((r) => r.includes('size(self) > 0')));
  assert.ok(rules('image').some((r) => r.includes('matches')));
  assert.ok(rules('updateStrategy.maxUnavailable').includes('self >= 1'));
  assert.ok(rules('updateStrategy.drainTimeoutSeconds').includes('self >= 0'));
  assert.ok(
    rules('terminationGracePeriodSeconds').includes(`self >= ${MIN_GRACE_SECONDS}`),
    'the CEL minimum is the timing formula minimum',
  );
  assert.ok(rules('service.port').includes('self >= 1 && self <= 65535'));
  assert.ok(rules('storage.size').includes('self == oldSelf'));
  assert.ok(rules('atlantis.github.tokenSecretRef').some((r) => r.includes('size(self.name) > 0 && size(self.key) > 0')));
  assert.ok(rules('replicas').includes('self >= 0'));
  const rootRules = (schema['x-kubernetes-validations'] ?? []).map((v) => v.rule);
  assert.ok(rootRules.some((r) => r.includes('self.metadata.name')));
});

test('status schema fits what the planner writes', () => {
  const status = schema.properties!.status!;
  for (const f of [
    'observedGeneration',
    'replicas',
    'readyReplicas',
    'updatedReplicas',
    'drainingReplicas',
    'currentRevision',
    'updateRevision',
    'selector',
    'conditions',
    'pods',
  ])
    assert.ok(status.properties?.[f], f);
  const cond = prop(status, 'conditions');
  assert.equal(cond['x-kubernetes-list-type'], 'map');
  const reason = new RegExp(prop(cond.items!, 'reason').pattern!);
  for (const r of [
    'MinimumReplicasAvailable',
    'MinimumReplicasUnavailable',
    'RolloutInProgress',
    'RolloutComplete',
    'RolloutPaused',
    'DrainTimeout',
    'PodsFailing',
    'PodsHealthy',
    'Paused',
    'NotPaused',
  ])
    assert.match(r, reason);
  assert.deepEqual(prop(cond.items!, 'status').enum, ['True', 'False', 'Unknown']);
});

test('kustomize base: objects, namespace, image', () => {
  const objs = kustomize('manifests');
  const kinds = objs.map((o) => `${o.kind}/${o.metadata.name}`).sort();
  assert.deepEqual(kinds, [
    'ClusterRole/atlantis-operator',
    'ClusterRoleBinding/atlantis-operator',
    'CustomResourceDefinition/atlantisdeployments.atlantis-operator.dev',
    'Deployment/atlantis-operator',
    'Namespace/atlantis-operator',
    'PodDisruptionBudget/atlantis-operator',
    'Role/atlantis-operator-leader-election',
    'RoleBinding/atlantis-operator-leader-election',
    'Service/atlantis-operator-metrics',
    'ServiceAccount/atlantis-operator',
  ]);
  for (const o of objs) {
    const clusterScoped = ['ClusterRole', 'ClusterRoleBinding', 'CustomResourceDefinition', 'Namespace'].includes(o.kind);
    assert.equal(o.metadata.namespace, clusterScoped ? undefined : 'atlantis-operator', `${o.kind} namespace`);
  }
  const crdOut = objs.find((o) => o.kind === 'CustomResourceDefinition') as unknown as V1CustomResourceDefinition;
  assert.deepEqual(crdOut.spec, crd.spec, 'the base ships the CRD unchanged');
});

test('controller Deployment: 2 replicas, leader election, probes, hardened', () => {
  const dep = kustomize('manifests').find((o) => o.kind === 'Deployment') as unknown as V1Deployment;
  assert.equal(dep.spec?.replicas, 2);
  const pod = dep.spec!.template.spec!;
  const c = pod.containers[0]!;
  assert.deepEqual(c.args, ['controller', '--leader-elect']);
  assert.equal(c.image, 'atlantis-operator:0.1.0');
  assert.equal(pod.serviceAccountName, 'atlantis-operator');
  assert.deepEqual(c.livenessProbe?.httpGet, { path: '/healthz', port: 'http' });
  assert.deepEqual(c.readinessProbe?.httpGet, { path: '/readyz', port: 'http' });
  assert.equal(c.ports?.find((p) => p.name === 'http')?.containerPort, 8080);
  assert.equal(pod.securityContext?.runAsNonRoot, true);
  assert.equal(pod.securityContext?.seccompProfile?.type, 'RuntimeDefault');
  assert.equal(c.securityContext?.readOnlyRootFilesystem, true);
  assert.equal(c.securityContext?.allowPrivilegeEscalation, false);
  assert.deepEqual(c.securityContext?.capabilities?.drop, ['ALL']);
  assert.ok(c.resources?.requests?.cpu && c.resources.requests.memory && c.resources.limits?.memory);
  assert.deepEqual(
    c.env?.map((e) => e.name),
    ['POD_NAME', 'POD_NAMESPACE'],
  );
});

function allows(rules: V1PolicyRule[], group: string, resource: string, verb: string): boolean {
  return rules.some(
    (r) => (r.apiGroups ?? []).includes(group) && r.resources?.includes(resource) && r.verbs.includes(verb) && !r.resourceNames?.length,
  );
}

test('RBAC: the controller may do what it does, and nothing it does not need', () => {
  const objs = kustomize('manifests');
  const cr = objs.find((o) => o.kind === 'ClusterRole') as unknown as V1ClusterRole;
  const rules = cr.rules ?? [];
  const needed: Array<[string, string, string[]]> = [
    ['atlantis-operator.dev', 'atlantisdeployments', ['get', 'list', 'watch']],
    ['atlantis-operator.dev', 'atlantisdeployments/status', ['update', 'patch']],
    ['atlantis-operator.dev', 'atlantisdeployments/finalizers', ['update']],
    ['', 'pods', ['get', 'list', 'watch', 'create', 'patch', 'delete']],
    ['', 'persistentvolumeclaims', ['get', 'list', 'watch', 'create']],
    ['', 'services', ['get', 'list', 'watch', 'create', 'patch']],
    ['', 'serviceaccounts', ['get', 'list', 'watch', 'create', 'patch']],
    ['rbac.authorization.k8s.io', 'roles', ['get', 'list', 'watch', 'create', 'patch']],
    ['rbac.authorization.k8s.io', 'rolebindings', ['get', 'list', 'watch', 'create', 'patch']],
    ['policy', 'poddisruptionbudgets', ['get', 'list', 'watch', 'create', 'patch']],
    ['', 'events', ['create', 'patch']],
    ['networking.k8s.io', 'ingresses', ['get', 'list', 'watch', 'create', 'patch', 'delete']],
    ['', 'configmaps', ['get']],
    ['', 'secrets', ['get']],
  ];
  for (const [g, r, verbs] of needed) for (const v of verbs) assert.ok(allows(rules, g, r, v), `${v} ${g}/${r}`);
  // Least privilege: no wildcards; Secrets and ConfigMaps by name only (get: the controller
  // asks for a Secret's metadata only), never listed, watched or written; no deletes of what
  // the garbage collector removes.
  for (const rule of rules) {
    assert.ok(!rule.verbs.includes('*') && !rule.resources?.includes('*') && !rule.apiGroups?.includes('*'), 'no wildcards');
    if (rule.resources?.includes('secrets') || rule.resources?.includes('configmaps'))
      assert.deepEqual(rule.verbs, ['get'], 'Secrets and ConfigMaps: get only');
  }
  for (const r of ['persistentvolumeclaims', 'services', 'serviceaccounts']) assert.ok(!allows(rules, '', r, 'delete'), `no delete ${r}`);
  assert.ok(
    !allows(rules, '', 'leases', 'get') && !allows(rules, 'coordination.k8s.io', 'leases', 'get'),
    'leases only in its own namespace',
  );
  const leaderRole = objs.find((o) => o.kind === 'Role') as unknown as V1Role;
  assert.equal(leaderRole.metadata?.namespace, 'atlantis-operator');
  for (const v of ['get', 'create', 'update']) assert.ok(allows(leaderRole.rules ?? [], 'coordination.k8s.io', 'leases', v), v);

  // RBAC refuses to create a Role granting more than the creator holds: the server pods'
  // Role must be covered by the ClusterRole.
  const ad = {
    apiVersion: 'atlantis-operator.dev/v1alpha1',
    kind: 'AtlantisDeployment',
    metadata: { name: 'a', namespace: 'n', uid: 'u' },
    spec: { image: 'i' },
  } as AtlantisDeployment;
  for (const rule of renderRole(ad, [0, 1]).rules ?? [])
    for (const g of rule.apiGroups ?? [])
      for (const res of rule.resources ?? []) for (const v of rule.verbs) assert.ok(allows(rules, g, res, v), `grantable: ${v} ${res}`);
});

test('example AtlantisDeployment is kept out of the base and renders', () => {
  const objs = kustomize('manifests/example');
  assert.deepEqual(
    objs.map((o) => o.kind),
    ['Namespace', 'Secret', 'AtlantisDeployment'],
  );
  const secret = objs.find((o) => o.kind === 'Secret') as KObj & { stringData: Record<string, string> };
  for (const v of Object.values(secret.stringData)) assert.match(v, /^REPLACE-/, 'placeholder values only');
  const ad = objs.find((o) => o.kind === 'AtlantisDeployment') as unknown as AtlantisDeployment;
  assert.equal(ad.apiVersion, 'atlantis-operator.dev/v1alpha1');
  const specProps = Object.keys(specSchema.properties ?? {});
  for (const k of Object.keys(ad.spec)) assert.ok(specProps.includes(k), `spec.${k} is in the schema`);
  const withUid: AtlantisDeployment = { ...ad, metadata: { ...ad.metadata, uid: 'example-uid' } };
  const pod = renderPod(withUid, 0);
  assert.equal(pod.metadata?.name, 'atlantis-0');
  assert.equal(
    pod.spec?.containers[0]?.env?.find((e) => e.name === 'ATLANTIS_GH_TOKEN')?.valueFrom?.secretKeyRef?.name,
    secret.metadata.name,
  );
  assert.match(podTemplateRevision(withUid), /^[0-9a-f]{10}$/);
});

// ---- against the real local API server: the CRD is accepted (CEL compiles and fits the
// cost budget), defaults apply, bad objects are rejected with the readable messages, and
// the whole base passes server-side validation.

import { stringify } from 'yaml';
import { freshNamespace, getCluster, waitFor, waitForCrdEstablished, type TestCluster } from './support/k8s.js';

let crdApplied: Promise<TestCluster> | undefined;
function clusterWithCRD(): Promise<TestCluster> {
  crdApplied ??= (async () => {
    const c = await getCluster();
    const r = await c.kubectl([
      'apply',
      '--server-side',
      '--force-conflicts',
      '--field-manager',
      'atlantis-operator-tests',
      '-f',
      CRD_PATH,
    ]);
    assert.equal(r.exitCode, 0, `CRD apply: ${r.stderr}`);
    await waitForCrdEstablished(c.kc, 'atlantisdeployments.atlantis-operator.dev');
    // Discovery can lag the Established condition by a moment.
    await waitFor('atd in discovery', async () => (await c.kubectl(['get', 'atd', '-A'])).exitCode === 0, {
      timeoutMs: 30_000,
      intervalMs: 200,
    });
    return c;
  })();
  return crdApplied;
}

function cr(ns: string, spec: Record<string, unknown>, name = 'atlantis'): string {
  return stringify({ apiVersion: 'atlantis-operator.dev/v1alpha1', kind: 'AtlantisDeployment', metadata: { name, namespace: ns }, spec });
}

test('API server accepts the CRD and applies its defaults', async () => {
  const c = await clusterWithCRD();
  const crdNow = JSON.parse(
    (await c.kubectl(['get', 'crd', 'atlantisdeployments.atlantis-operator.dev', '-o', 'json'])).stdout,
  ) as V1CustomResourceDefinition;
  const established = crdNow.status?.conditions?.find((x) => x.type === 'Established');
  assert.equal(established?.status, 'True');
  const ns = await freshNamespace('crd-defaults');
  const r = await c.kubectl(['create', '--dry-run=server', '-o', 'json', '-f', '-'], { input: cr(ns, { image: 'atlantis-operator:1' }) });
  assert.equal(r.exitCode, 0, r.stderr);
  const obj = JSON.parse(r.stdout) as { spec: Record<string, unknown> };
  assert.deepEqual(obj.spec, {
    image: 'atlantis-operator:1',
    replicas: 1,
    atlantis: {},
    storage: { size: '5Gi' },
    updateStrategy: { maxUnavailable: 1, drainTimeoutSeconds: 3600, onDrainTimeout: 'Wait' },
    paused: false,
    terminationGracePeriodSeconds: 120,
    service: { type: 'ClusterIP', port: 80 },
  });
});

test('API server rejects bad AtlantisDeployments with readable messages', async (t) => {
  const c = await clusterWithCRD();
  const ns = await freshNamespace('crd-bad');
  const ok = { image: 'atlantis-operator:1' };
  const rows: Array<[string, Record<string, unknown>, RegExp, string?]> = [
    ['missing image', { replicas: 1 }, /spec\.image: Required value/],
    ['empty image', { image: '' }, /spec\.image must not be empty/],
    ['image with whitespace', { image: 'atlantis operator:1' }, /spec\.image must not contain whitespace/],
    ['negative replicas', { ...ok, replicas: -1 }, /spec\.replicas must be 0 or more/],
    ['maxUnavailable 0', { ...ok, updateStrategy: { maxUnavailable: 0 } }, /spec\.updateStrategy\.maxUnavailable must be at least 1/],
    [
      'negative drain timeout',
      { ...ok, updateStrategy: { drainTimeoutSeconds: -1 } },
      /drainTimeoutSeconds must be 0 \(no timeout\) or more/,
    ],
    [
      'unknown onDrainTimeout',
      { ...ok, updateStrategy: { onDrainTimeout: 'Kill' } },
      /onDrainTimeout: Unsupported value: "Kill": supported values: "Wait", "Interrupt"/,
    ],
    [
      'grace period too small',
      { ...ok, terminationGracePeriodSeconds: 20 },
      /terminationGracePeriodSeconds must be at least 30 so the server drain timeout/,
    ],
    ['service port out of range', { ...ok, service: { port: 70000 } }, /spec\.service\.port must be between 1 and 65535/],
    ['unknown service type', { ...ok, service: { type: 'ExternalName' } }, /Unsupported value: "ExternalName"/],
    [
      'empty secret name',
      { ...ok, atlantis: { github: { tokenSecretRef: { name: '', key: 'token' } } } },
      /tokenSecretRef needs a non-empty name and key/,
    ],
    ['bad url', { ...ok, atlantis: { url: 'ftp://atlantis.example.com' } }, /spec\.atlantis\.url must be an absolute http/],
    ['bad storage size', { ...ok, storage: { size: 'lots' } }, /spec\.storage\.size must be a positive quantity/],
    [
      'env overrides POD_NAME',
      {
        ...ok,
        atlantis: {
          env: [
            { name: 'X', value: '1' },
            { name: 'POD_NAME', value: 'x' },
          ],
        },
      },
      /spec\.atlantis\.env\[1\].*spec\.atlantis\.env must not set POD_NAME: the operator sets it/,
    ],
    [
      'template label hijacks the selector',
      { ...ok, podTemplate: { metadata: { labels: { 'app.kubernetes.io/instance': 'other' } } } },
      /podTemplate\.metadata\.labels must not set/,
    ],
    [
      'template sets the drain annotation',
      { ...ok, podTemplate: { metadata: { annotations: { 'atlantis-operator.dev/drain': 'now' } } } },
      /podTemplate\.metadata\.annotations must not set atlantis-operator\.dev/,
    ],
    ['name that is not a DNS-1035 label', ok, /metadata\.name must start with a lowercase letter/, '1atlantis'],
  ];
  for (const [label, spec, want, name] of rows) {
    await t.test(label, async () => {
      const r = await c.kubectl(['create', '--dry-run=server', '-f', '-'], { input: cr(ns, spec, name) });
      assert.notEqual(r.exitCode, 0, `accepted: ${r.stdout}`);
      assert.match(r.stderr, want);
    });
  }
});

test('API server: storage.size is immutable; scale subresource and printer columns work', async () => {
  const c = await clusterWithCRD();
  const ns = await freshNamespace('crd-live');
  const created = await c.kubectl(['create', '-f', '-'], {
    input: cr(ns, { image: 'atlantis-operator:1', replicas: 0, storage: { size: '1Gi' } }, 'live'),
  });
  assert.equal(created.exitCode, 0, created.stderr);
  try {
    const resize = await c.kubectl(['-n', ns, 'patch', 'atd', 'live', '--type=merge', '-p', '{"spec":{"storage":{"size":"2Gi"}}}']);
    assert.notEqual(resize.exitCode, 0);
    assert.match(resize.stderr, /spec\.storage\.size cannot be changed/);
    const scaled = await c.kubectl(['-n', ns, 'scale', 'atd/live', '--replicas=2']);
    assert.equal(scaled.exitCode, 0, scaled.stderr);
    assert.equal((await c.kubectl(['-n', ns, 'get', 'atd', 'live', '-o', 'jsonpath={.spec.replicas}'])).stdout, '2');
    const table = await c.kubectl(['-n', ns, 'get', 'atd']);
    assert.match(table.stdout.split('\n')[0]!, /^NAME\s+REPLICAS\s+READY\s+UP-TO-DATE\s+DRAINING\s+SURGE\s+PHASE\s+AGE$/);
    const short = await c.kubectl(['get', 'atlantis', '-n', ns, '-o', 'name']);
    assert.match(short.stdout, /atlantisdeployment\.atlantis-operator\.dev\/live/, 'category "atlantis" lists it');
  } finally {
    await c.kubectl(['-n', ns, 'delete', 'atd', 'live', '--wait=false']);
  }
});

test('API server: the base and the example pass server-side validation', async () => {
  const c = await clusterWithCRD();
  const ns = await freshNamespace('manifests');
  // The base, moved into a fresh namespace (the Namespace object itself is left out: a
  // dry-run namespace would not exist for the objects that follow).
  const docs = kustomize('manifests')
    .filter((o) => o.kind !== 'Namespace')
    .map((o) => {
      const copy = structuredClone(o);
      if (copy.metadata.namespace) copy.metadata.namespace = ns;
      for (const s of (copy.subjects as Array<{ namespace?: string }> | undefined) ?? []) if (s.namespace) s.namespace = ns;
      return copy;
    });
  // The namespace warns about workload templates that break the restricted standard.
  const label = await c.kubectl(['label', 'namespace', ns, 'pod-security.kubernetes.io/warn=restricted']);
  assert.equal(label.exitCode, 0, label.stderr);
  const base = await c.kubectl(['apply', '--dry-run=server', '-f', '-'], { input: docs.map((d) => stringify(d)).join('---\n') });
  assert.equal(base.exitCode, 0, base.stderr);
  assert.doesNotMatch(base.stderr, /PodSecurity/, 'the controller Deployment meets the restricted Pod Security Standard');
  assert.match(base.stdout, /deployment\.apps\/atlantis-operator created \(server dry run\)/);
  const example = kustomize('manifests/example')
    .filter((o) => o.kind !== 'Namespace')
    .map((o) => ({ ...o, metadata: { ...o.metadata, namespace: ns } }));
  const ex = await c.kubectl(['apply', '--dry-run=server', '-f', '-'], { input: example.map((d) => stringify(d)).join('---\n') });
  assert.equal(ex.exitCode, 0, ex.stderr);
  assert.match(ex.stdout, /atlantisdeployment\.atlantis-operator\.dev\/atlantis created \(server dry run\)/);
});

// The rendered objects are valid for the real API server, and a server pod's Role is as
// narrow as docs/controller.md says: its own pod by name (get, list/watch with the
// metadata.name field selector), not a sibling's, nothing else.
import {
  renderPDB,
  renderPodRole,
  renderPodRoleBinding,
  renderPodServiceAccount,
  renderPVC,
  renderRoleBinding,
  renderService,
  renderServiceAccount,
} from '../src/controller/resources/index.js';

test("API server: rendered objects pass validation; a server pod's Role grants only its own pod", async () => {
  const c = await clusterWithCRD();
  const ns = await freshNamespace('render');
  const ad: AtlantisDeployment = {
    apiVersion: 'atlantis-operator.dev/v1alpha1',
    kind: 'AtlantisDeployment',
    metadata: { name: 'web', namespace: ns, uid: '7d3c1e9a-0000-4000-8000-000000000001' },
    spec: {
      image: 'atlantis-operator:1',
      replicas: 2,
      atlantis: {
        url: 'https://atlantis.example.com',
        github: { user: 'bot', tokenSecretRef: { name: 'vcs', key: 'token' }, webhookSecretRef: { name: 'vcs', key: 'webhook-secret' } },
      },
      podTemplate: {
        spec: { tolerations: [{ key: 'tf', operator: 'Exists', effect: 'NoSchedule' }], resources: { requests: { cpu: '100m' } } },
      },
    },
  };
  // RBAC for real first (a Role cannot be checked in a dry run, and a pod needs its account).
  const perPod = [0, 1].flatMap((i) => [renderPodServiceAccount(ad, i), renderPodRole(ad, i), renderPodRoleBinding(ad, i)]);
  const rbac = [renderServiceAccount(ad), renderRole(ad, []), renderRoleBinding(ad), ...perPod].map((o) => ({
    ...o,
    metadata: { ...o.metadata, ownerReferences: undefined },
  }));
  const created = await c.kubectl(['create', '-f', '-'], { input: rbac.map((o) => stringify(o)).join('---\n') });
  assert.equal(created.exitCode, 0, created.stderr);
  // Server pods meet the restricted Pod Security Standard.
  const label = await c.kubectl(['label', 'namespace', ns, 'pod-security.kubernetes.io/enforce=restricted']);
  assert.equal(label.exitCode, 0, label.stderr);
  const objs = [renderPod(ad, 0), renderPVC(ad, 0), renderService(ad), renderPDB(ad)];
  const dry = await c.kubectl(['create', '--dry-run=server', '-f', '-'], { input: objs.map((o) => stringify(o)).join('---\n') });
  assert.equal(dry.exitCode, 0, dry.stderr);

  // Pod 1's account (renderPod(ad, 1) runs as it).
  assert.equal(renderPod(ad, 1).spec?.serviceAccountName, 'web-atlantis-1');
  const as = ['--as', `system:serviceaccount:${ns}:web-atlantis-1`, '-n', ns];
  /** true = authorized (a NotFound is authorized too), false = Forbidden. */
  const allowed = async (args: string[]): Promise<boolean> => {
    const r = await c.kubectl([...args, ...as]);
    if (r.exitCode === 0 || /NotFound|not found/.test(r.stderr)) return true;
    if (/Forbidden|forbidden/.test(r.stderr)) return false;
    throw new Error(`unexpected: ${r.stderr}`);
  };
  // RBAC changes reach the authorizer's cache within moments.
  await waitFor('the Role to take effect', () => allowed(['get', 'pod', 'web-1']), { timeoutMs: 15_000, intervalMs: 200 });
  assert.equal(await allowed(['get', 'pod', 'web-1']), true, 'get its own pod (ordinal 1)');
  assert.equal(await allowed(['get', 'pods', '--field-selector', 'metadata.name=web-1']), true, 'list with the name field selector');
  assert.equal(
    await allowed(['get', '--raw', `/api/v1/namespaces/${ns}/pods?fieldSelector=metadata.name%3Dweb-1&watch=true&timeoutSeconds=1`]),
    true,
    'watch with the name field selector',
  );
  assert.equal(await allowed(['get', 'pod', 'web-0']), false, 'not its sibling (ordinal 0)');
  assert.equal(await allowed(['get', 'pods', '--field-selector', 'metadata.name=web-0']), false, 'no list of its sibling');
  assert.equal(await allowed(['get', 'pod', 'web-2']), false, 'no other pod');
  assert.equal(await allowed(['get', 'pods']), false, 'no list of all pods');
  assert.equal(await allowed(['get', '--raw', `/api/v1/namespaces/${ns}/pods?watch=true&timeoutSeconds=1`]), false, 'no watch of all pods');
  assert.equal(await allowed(['get', 'secrets']), false, 'no secrets');
  await c.kubectl(['delete', 'namespace', ns, '--wait=false']);
});
