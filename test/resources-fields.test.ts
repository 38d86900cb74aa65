// What the fields of a real install (issue 32) render to, pure: the server container's env,
// args, mounts and hooks; the pod's volumes, containers and scheduling settings; the
// Service, the ServiceAccounts and the Ingress; the Secrets and ConfigMaps the pods read and
// how their content enters the revision; and which owned fields a removed setting drops.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { V1Container, V1EnvVar, V1PodSpec } from '@kubernetes/client-node';
import {
  ANNOTATION_REFERENCED_CONTENT,
  DATA_VOLUME,
  configMapToken,
  contentAnnotation,
  contentKeys,
  podReferences,
  podTemplateRevision,
  referencedObjects,
  renderIngress,
  renderPod,
  renderPodServiceAccount,
  renderPodTemplate,
  renderService,
  renderServiceAccount,
  secretToken,
  serverEnv,
  withDefaults,
} from '../src/controller/resources/index.js';
import { ownedDrift, ownsUnwanted } from '../src/controller/reconcile/owned-objects.js';
import type { AtlantisDeployment, AtlantisDeploymentSpecInput } from '../src/controller/types.js';
import type { KubeObject } from '../src/k8s/informer.js';
import { everyField } from './support/every-field.js';

const full = (): AtlantisDeployment => ({
  ...everyField('infra', 'atlantis'),
  metadata: { name: 'atlantis', namespace: 'infra', uid: 'uid-1' },
});

function ad(spec: Partial<AtlantisDeploymentSpecInput> = {}): AtlantisDeployment {
  return {
    apiVersion: 'atlantis-operator.dev/v1alpha1',
    kind: 'AtlantisDeployment',
    metadata: { name: 'atlantis', namespace: 'infra', uid: 'uid-1' },
    spec: {
      image: 'atlantis-operator:1',
      atlantis: { url: 'https://a.example.com', github: { user: 'bot', tokenSecretRef: { name: 'vcs', key: 'token' } } },
      ...spec,
    },
  };
}

const server = (a: AtlantisDeployment): V1Container => renderPod(a, 0).spec!.containers[0]!;
const env = (a: AtlantisDeployment, name: string): V1EnvVar | undefined => server(a).env!.find((e) => e.name === name);

test('the server container: App, repo config, API secret and basic auth as files and secretKeyRefs, args, envFrom, mounts, hooks', () => {
  const a = full();
  const c = server(a);
  assert.deepEqual(c.args, ['server', '--hide-prev-plan-comments']);
  assert.deepEqual(env(a, 'ATLANTIS_GH_APP_ID'), { name: 'ATLANTIS_GH_APP_ID', value: '4242' });
  assert.deepEqual(env(a, 'ATLANTIS_GH_APP_INSTALLATION_ID')?.value, '77');
  assert.deepEqual(env(a, 'ATLANTIS_GH_APP_SLUG')?.value, 'acme-atlantis');
  assert.deepEqual(env(a, 'ATLANTIS_GH_APP_KEY_FILE')?.value, '/var/github-app/key.pem');
  assert.equal(env(a, 'ATLANTIS_GH_APP_KEY'), undefined, 'the key never as a value');
  assert.deepEqual(env(a, 'ATLANTIS_REPO_CONFIG')?.value, '/etc/atlantis/repos.yaml');
  assert.deepEqual(env(a, 'ATLANTIS_API_SECRET')?.valueFrom, { secretKeyRef: { name: 'atlantis-api', key: 'secret' } });
  assert.deepEqual(env(a, 'ATLANTIS_WEB_BASIC_AUTH')?.value, 'true');
  assert.deepEqual(env(a, 'ATLANTIS_WEB_USERNAME')?.value, 'admin');
  assert.deepEqual(env(a, 'ATLANTIS_WEB_PASSWORD')?.valueFrom, { secretKeyRef: { name: 'atlantis-web', key: 'password' } });
  // No credential is ever a plain value in the pod spec.
  for (const e of c.env!)
    if (/TOKEN|SECRET|PASSWORD|KEY$/.test(e.name) && e.name !== 'ATLANTIS_GH_APP_KEY_FILE') assert.equal(e.value, undefined, e.name);
  assert.deepEqual(c.envFrom, a.spec.atlantis!.envFrom);
  assert.deepEqual(
    c.volumeMounts!.map((m) => [m.name, m.mountPath, m.readOnly ?? false]),
    [
      [DATA_VOLUME, '/atlantis', false],
      ['github-app-key', '/var/github-app', true],
      ['repo-config', '/etc/atlantis', true],
      ['cloud-credentials', '/home/atlantis/.cloud', true],
      ['plugins', '/plugins', false],
    ],
  );
  assert.deepEqual(c.lifecycle, a.spec.podTemplate!.spec!.lifecycle);
  assert.deepEqual(c.securityContext, { allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] }, readOnlyRootFilesystem: false });
  assert.deepEqual(c.resources, a.spec.podTemplate!.spec!.resources);
});

test('the pod: volumes (the key 0440), init and extra containers, scheduling and DNS settings, the security context merged', () => {
  const a = full();
  const spec = renderPod(a, 0).spec!;
  const vol = (n: string) => spec.volumes!.find((v) => v.name === n);
  assert.deepEqual(vol('github-app-key'), {
    name: 'github-app-key',
    secret: { secretName: 'github-app', items: [{ key: 'key.pem', path: 'key.pem' }], defaultMode: 0o440 },
  });
  assert.deepEqual(vol('repo-config'), {
    name: 'repo-config',
    configMap: { name: 'atlantis-repos', items: [{ key: 'repos.yaml', path: 'repos.yaml' }] },
  });
  assert.deepEqual(vol('cloud-credentials'), a.spec.podTemplate!.spec!.extraVolumes![0]);
  assert.deepEqual(spec.initContainers, a.spec.podTemplate!.spec!.initContainers);
  assert.deepEqual(
    spec.containers.map((c) => c.name),
    ['atlantis', 'sidecar'],
  );
  const us = a.spec.podTemplate!.spec!;
  for (const k of ['imagePullSecrets', 'topologySpreadConstraints', 'hostAliases', 'dnsConfig', 'tolerations'] as const)
    assert.deepEqual(spec[k as keyof V1PodSpec], us[k], k);
  assert.equal(spec.priorityClassName, undefined, 'an empty priorityClassName is not rendered');
  assert.deepEqual(spec.securityContext, {
    runAsNonRoot: true,
    runAsUser: 1000,
    runAsGroup: 1000,
    fsGroup: 1000,
    fsGroupChangePolicy: 'Always',
    seccompProfile: { type: 'RuntimeDefault' },
    supplementalGroups: [2000],
  });
  assert.equal(renderPod(ad(), 0).spec!.securityContext!.fsGroupChangePolicy, 'OnRootMismatch', 'the default');
});

test('nothing new is rendered when the new fields are unset (only fsGroupChangePolicy changes an older pod)', () => {
  const spec = renderPod(ad(), 0).spec!;
  assert.deepEqual(
    spec.volumes!.map((v) => v.name),
    [DATA_VOLUME],
  );
  assert.deepEqual(Object.keys(spec).sort(), [
    'automountServiceAccountToken',
    'containers',
    'enableServiceLinks',
    'restartPolicy',
    'securityContext',
    'serviceAccountName',
    'terminationGracePeriodSeconds',
    'volumes',
  ]);
  assert.deepEqual(server(ad()).args, ['server']);
  assert.equal(server(ad()).lifecycle, undefined);
});

test('drain timing: a preStop sleep comes off the drain timeout', () => {
  const timeout = (a: AtlantisDeployment) => serverEnv(withDefaults(a.spec)).find((e) => e.name === 'ATLANTIS_DRAIN_TIMEOUT')?.value;
  assert.equal(timeout(ad({ terminationGracePeriodSeconds: 120 })), '70s');
  assert.equal(
    timeout(ad({ terminationGracePeriodSeconds: 120, podTemplate: { spec: { lifecycle: { preStop: { sleep: { seconds: 15 } } } } } })),
    '55s',
  );
  assert.equal(
    timeout(ad({ terminationGracePeriodSeconds: 120, podTemplate: { spec: { lifecycle: { preStop: { exec: { command: ['true'] } } } } } })),
    '70s',
    'an exec hook has no known length',
  );
});

test('ATLANTIS_ATLANTIS_URL from the Ingress host when no url is given; the replica URL in brackets for IPv6', () => {
  const url = (a: AtlantisDeployment) => env(a, 'ATLANTIS_ATLANTIS_URL')?.value;
  const noUrl = (ingress: AtlantisDeploymentSpecInput['ingress']) =>
    ad({ atlantis: { github: { user: 'bot', tokenSecretRef: { name: 'vcs', key: 't' } } }, ingress });
  assert.equal(url(noUrl({ host: 'a.example.com' })), 'http://a.example.com');
  assert.equal(url(noUrl({ host: 'a.example.com', tls: [{ secretName: 'tls' }] })), 'https://a.example.com');
  assert.equal(url(noUrl(undefined)), undefined);
  assert.equal(url(ad({ ingress: { host: 'other.example.com' } })), 'https://a.example.com', 'spec.atlantis.url wins');
  const redis = (podIPFamily?: 'IPv4' | 'IPv6') =>
    ad({ atlantis: { lockingDB: { type: 'redis', redis: { host: 'r', ...(podIPFamily ? { podIPFamily } : {}) } } } });
  assert.equal(env(redis(), 'ATLANTIS_REPLICA_URL')?.value, 'http://$(POD_IP):4141');
  assert.equal(env(redis('IPv4'), 'ATLANTIS_REPLICA_URL')?.value, 'http://$(POD_IP):4141');
  assert.equal(env(redis('IPv6'), 'ATLANTIS_REPLICA_URL')?.value, 'http://[$(POD_IP)]:4141');
});

test('the Service: annotations, labels under ours, node port and source ranges only where the type has them', () => {
  const svc = renderService(full());
  assert.deepEqual(svc.metadata?.annotations, { 'service.beta.kubernetes.io/aws-load-balancer-internal': 'true' });
  assert.equal(svc.metadata?.labels?.exposure, 'webhooks');
  assert.equal(svc.metadata?.labels?.['app.kubernetes.io/managed-by'], 'atlantis-operator');
  assert.equal(svc.spec?.ports?.[0]?.nodePort, 30480);
  assert.deepEqual(svc.spec?.loadBalancerSourceRanges, ['140.82.112.0/20', '2606:50c0::/32']);
  const clusterIP = renderService(ad({ service: { type: 'ClusterIP', nodePort: 30480, loadBalancerSourceRanges: ['10.0.0.0/8'] } }));
  assert.equal(clusterIP.spec?.ports?.[0]?.nodePort, undefined);
  assert.equal(clusterIP.spec?.loadBalancerSourceRanges, undefined);
  assert.equal(renderService(ad()).metadata?.annotations, undefined);
  const sidecar = renderService(ad({ service: { extraPorts: [{ name: 'oauth2-proxy', port: 4180, targetPort: 'oauth2-proxy' }] } }));
  assert.deepEqual(
    sidecar.spec?.ports?.map((p) => [p.name, p.port, p.targetPort]),
    [
      ['http', 80, 4141],
      ['oauth2-proxy', 4180, 'oauth2-proxy'],
    ],
    'extra ports after the server',
  );
});

test('ServiceAccounts: the annotations (IRSA, Workload Identity) and labels on every account, ours kept', () => {
  const a = full();
  for (const sa of [renderServiceAccount(a), renderPodServiceAccount(a, 0), renderPodServiceAccount(a, 3)]) {
    assert.deepEqual(sa.metadata?.annotations, { 'eks.amazonaws.com/role-arn': 'arn:aws:iam::123456789012:role/atlantis' });
    assert.equal(sa.metadata?.labels?.team, 'platform');
    assert.equal(sa.metadata?.labels?.['app.kubernetes.io/instance'], 'atlantis');
  }
  assert.equal(renderPodServiceAccount(ad(), 0).metadata?.annotations, undefined);
});

test('the Ingress: only /events by default, every path with exposeUI; class, TLS, annotations; none without spec.ingress', () => {
  assert.equal(renderIngress(ad()), undefined);
  const only = renderIngress(ad({ ingress: { host: 'a.example.com' } }))!;
  assert.deepEqual(only.spec?.rules, [
    {
      host: 'a.example.com',
      http: { paths: [{ path: '/events', pathType: 'Exact', backend: { service: { name: 'atlantis', port: { name: 'http' } } } }] },
    },
  ]);
  const ui = renderIngress(full())!;
  assert.deepEqual(
    ui.spec?.rules?.[0]?.http?.paths.map((p) => [p.path, p.pathType]),
    [['/', 'Prefix']],
  );
  assert.equal(ui.spec?.ingressClassName, 'nginx');
  assert.deepEqual(ui.spec?.tls, [{ hosts: ['atlantis.example.com'], secretName: 'atlantis-tls' }]);
  assert.deepEqual(ui.metadata?.annotations, { 'cert-manager.io/cluster-issuer': 'letsencrypt' });
  assert.equal(ui.metadata?.ownerReferences?.[0]?.uid, 'uid-1');
});

test('referenced Secrets and ConfigMaps: env, envFrom, volumes and projected sources of every container; pull secrets are not content', () => {
  assert.deepEqual(podReferences(full()), {
    secrets: ['atlantis-api', 'atlantis-web', 'cloud-credentials', 'cloud-env', 'github-app', 'vcs'],
    configMaps: ['atlantis-env', 'atlantis-repos', 'cloud-config'],
  });
  const spec: V1PodSpec = {
    initContainers: [{ name: 'i', env: [{ name: 'A', valueFrom: { configMapKeyRef: { name: 'cm-init', key: 'k' } } }] }],
    containers: [{ name: 'c', envFrom: [{ secretRef: { name: 's-from' } }] }],
    volumes: [{ name: 'v', secret: { secretName: 's-vol' } }],
    imagePullSecrets: [{ name: 'regcred' }],
  };
  assert.deepEqual(referencedObjects(spec), { secrets: ['s-from', 's-vol'], configMaps: ['cm-init'] });
  assert.deepEqual(contentKeys(referencedObjects(spec)), ['secret/s-from', 'secret/s-vol', 'configmap/cm-init']);
});

test('the revision follows referenced content: a changed token is a new revision, nothing else is', () => {
  const a = full();
  const keys = contentKeys(podReferences(a));
  const content = Object.fromEntries(
    keys.map((k) => [k, k.startsWith('secret/') ? secretToken({ resourceVersion: '10' }) : configMapToken({ data: { a: 'b' } })]),
  );
  const base = podTemplateRevision(a, content);
  assert.equal(podTemplateRevision(a, { ...content }), base, 'same tokens, same revision');
  assert.notEqual(podTemplateRevision(a, { ...content, 'secret/github-app': 'rv:11' }), base, 'a Secret written');
  assert.notEqual(
    podTemplateRevision(a, { ...content, 'configmap/atlantis-repos': configMapToken({ data: { a: 'c' } }) }),
    base,
    'ConfigMap data',
  );
  assert.notEqual(podTemplateRevision(a, { ...content, 'secret/cloud-env': 'absent' }), base, 'a Secret deleted');
  assert.equal(podTemplateRevision(a, { ...content, 'secret/not-referenced': 'rv:99' }), base, 'an object the pods do not read');
  assert.match(renderPodTemplate(a, content).metadata.annotations[ANNOTATION_REFERENCED_CONTENT]!, /^[0-9a-f]{16}$/);
  assert.throws(() => renderPodTemplate(a, {}), /no content token for secret\//, 'never a revision without every token');
  // No reference: no annotation, the template's own revision.
  const none = ad({ atlantis: { url: 'https://a.example.com' } });
  assert.equal(contentAnnotation(contentKeys(podReferences(none)), {}), undefined);
  assert.equal(podTemplateRevision(none, {}), podTemplateRevision(none));
  // A ConfigMap's token is its data's, not its metadata's, and says nothing readable about it.
  assert.equal(configMapToken({ data: { a: 'b' } }), configMapToken({ data: { a: 'b' }, binaryData: {} }));
  assert.equal(secretToken(undefined), 'absent');
  assert.equal(configMapToken(undefined), 'absent');
});

test('a setting taken out of the spec is drift: our apply still owns it (managedFields)', () => {
  const applied = (o: KubeObject, fields: Record<string, unknown>): KubeObject => ({
    ...structuredClone(o),
    metadata: {
      ...o.metadata,
      uid: 'u',
      resourceVersion: '5',
      managedFields: [{ manager: 'atlantis-operator', operation: 'Apply', fieldsV1: fields }],
    },
  });
  const withAnn = renderService(
    ad({ service: { annotations: { a: '1' }, type: 'LoadBalancer', loadBalancerSourceRanges: ['10.0.0.0/8'] } }),
  );
  const fields = {
    'f:metadata': { 'f:annotations': { 'f:a': {} }, 'f:labels': { 'f:app.kubernetes.io/name': {} } },
    'f:spec': {
      'f:loadBalancerSourceRanges': {},
      'f:ports': { 'k:{"port":80,"protocol":"TCP"}': { '.': {}, 'f:name': {} } },
      'f:type': {},
    },
  };
  const stored = applied(withAnn, fields);
  assert.equal(ownsUnwanted(withAnn, stored), false, 'the same spec');
  assert.equal(ownedDrift(withAnn, stored), false);
  const without = renderService(ad({ service: { type: 'LoadBalancer', loadBalancerSourceRanges: ['10.0.0.0/8'] } }));
  assert.equal(ownsUnwanted(without, stored), true, 'annotation removed');
  assert.equal(ownedDrift(without, stored), true);
  const noRanges = renderService(ad({ service: { annotations: { a: '1' }, type: 'LoadBalancer' } }));
  assert.equal(ownsUnwanted(noRanges, stored), true, 'source ranges removed');
  const otherPort = renderService(
    ad({ service: { annotations: { a: '1' }, type: 'LoadBalancer', port: 81, loadBalancerSourceRanges: ['10.0.0.0/8'] } }),
  );
  assert.equal(ownsUnwanted(otherPort, stored), true, 'the port keyed 80 is gone');
  // Someone else's fields are theirs: only our manager's Apply entry counts.
  const theirs = {
    ...stored,
    metadata: { ...stored.metadata, managedFields: [{ manager: 'kubectl', operation: 'Update', fieldsV1: fields }] },
  };
  assert.equal(ownsUnwanted(without, theirs), false);
});
