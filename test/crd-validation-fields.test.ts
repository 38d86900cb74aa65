// The fields a real install configures (issue 32), on the real API server: an object using
// every one of them is accepted and read back as written; typical typos in the Kubernetes
// types (validated with their real schemas) and in our own fields are refused with 422 and
// the API server's message, through the API and through `kubectl apply`.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { parse, parseAllDocuments } from 'yaml';
import { apiPath, kubeRequest, kubeRequestOk } from '../src/k8s/client.js';
import { API_VERSION, PLURAL, type AtlantisDeployment } from '../src/controller/types.js';
import { CRD_FILE, ensureCrd, getAd } from './support/controller.js';
import { type BadCase, type Obj, assertRefused, at, crObject, statusOf } from './support/crd-objects.js';
import { everyField } from './support/every-field.js';
import { deleteNamespace, freshNamespace, getCluster, type TestCluster } from './support/k8s.js';

let cluster: TestCluster;
let ns: string;

before(async () => {
  cluster = await getCluster();
  await ensureCrd(cluster);
  ns = await freshNamespace('crd-fields');
});
after(async () => {
  if (ns) await deleteNamespace(ns);
});

const cr = (name: string, mutate?: (o: { metadata: Obj; spec: Obj }) => void): Obj => crObject(ns, name, mutate);
const podSpec = (o: { spec: Obj }): Obj => at(o.spec, 'podTemplate.spec');
const PS = 'spec.podTemplate.spec';

const BAD: BadCase[] = [
  // Kubernetes types, with their real schemas.
  {
    what: 'a volume without a source (a misspelt `configmap:` is pruned)',
    obj: (n) => cr(n, (o) => (podSpec(o).extraVolumes = [{ name: 'repos', configmap: { name: 'x' } }])),
    expect: [`${PS}.extraVolumes[0]`, 'volume repos needs exactly one source'],
  },
  {
    what: 'a volume with two sources',
    obj: (n) => cr(n, (o) => (podSpec(o).extraVolumes = [{ name: 'v', emptyDir: {}, secret: { secretName: 's' } }])),
    expect: [`${PS}.extraVolumes[0]`, 'volume v needs exactly one source'],
  },
  {
    what: 'memory: 2GB',
    obj: (n) => cr(n, (o) => (podSpec(o).resources = { limits: { memory: '2GB' } })),
    expect: [`${PS}.resources.limits.memory`, 'should match'],
  },
  {
    what: 'cpu: one',
    obj: (n) => cr(n, (o) => (podSpec(o).extraContainers = [{ name: 'proxy', image: 'p', resources: { requests: { cpu: 'one' } } }])),
    expect: [`${PS}.extraContainers[0].resources.requests.cpu`, 'should match'],
  },
  {
    what: 'a container without a name',
    obj: (n) => cr(n, (o) => (podSpec(o).initContainers = [{ image: 'busybox' }])),
    expect: [`${PS}.initContainers[0].name`, 'Required value'],
  },
  {
    what: 'a container port as a name',
    obj: (n) => cr(n, (o) => (podSpec(o).extraContainers = [{ name: 'proxy', image: 'p', ports: [{ containerPort: 'http' }] }])),
    expect: [`${PS}.extraContainers[0].ports[0].containerPort`, 'must be of type integer'],
  },
  {
    what: 'a volume mount without mountPath',
    obj: (n) => cr(n, (o) => (podSpec(o).extraVolumeMounts = [{ name: 'v' }])),
    expect: [`${PS}.extraVolumeMounts[0].mountPath`, 'Required value'],
  },
  {
    what: 'imagePullSecrets as strings',
    obj: (n) => cr(n, (o) => (podSpec(o).imagePullSecrets = ['regcred'])),
    expect: [`${PS}.imagePullSecrets[0]`, 'must be of type object'],
  },
  {
    what: 'a topology spread constraint without topologyKey',
    obj: (n) => cr(n, (o) => (podSpec(o).topologySpreadConstraints = [{ maxSkew: 1, whenUnsatisfiable: 'DoNotSchedule' }])),
    expect: [`${PS}.topologySpreadConstraints[0].topologyKey`, 'Required value'],
  },
  {
    what: 'runAsUser as a name',
    obj: (n) => cr(n, (o) => (podSpec(o).securityContext = { runAsUser: 'atlantis' })),
    expect: [`${PS}.securityContext.runAsUser`, 'must be of type integer'],
  },
  {
    what: 'a node affinity term without its selector terms',
    obj: (n) => cr(n, (o) => (podSpec(o).affinity = { nodeAffinity: { requiredDuringSchedulingIgnoredDuringExecution: {} } })),
    expect: [`${PS}.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms`, 'Required value'],
  },
  {
    what: 'envFrom with a Secret name as a string',
    obj: (n) => cr(n, (o) => (at(o.spec, 'atlantis').envFrom = [{ secretRef: 'aws' }])),
    expect: ['spec.atlantis.envFrom[0].secretRef', 'must be of type object'],
  },
  {
    what: 'a host alias without an ip',
    obj: (n) => cr(n, (o) => (podSpec(o).hostAliases = [{ hostnames: ['github.internal'] }])),
    expect: [`${PS}.hostAliases[0].ip`, 'Required value'],
  },
  {
    what: 'dnsPolicy Cluster',
    obj: (n) => cr(n, (o) => (podSpec(o).dnsPolicy = 'Cluster')),
    expect: [`${PS}.dnsPolicy`, 'Unsupported value'],
  },
  {
    what: 'a lifecycle hook that is not a handler list',
    obj: (n) => cr(n, (o) => (podSpec(o).lifecycle = { preStop: { exec: { command: 'sleep 5' } } })),
    expect: [`${PS}.lifecycle.preStop.exec.command`, 'must be of type array'],
  },
  // Our own fields around them.
  {
    what: 'an extra volume named data',
    obj: (n) => cr(n, (o) => (podSpec(o).extraVolumes = [{ name: 'data', emptyDir: {} }])),
    expect: [`${PS}.extraVolumes[0]`, "the name data is the operator's"],
  },
  {
    what: "an extra volume named shared-state-key (the Redis key's)",
    obj: (n) => cr(n, (o) => (podSpec(o).extraVolumes = [{ name: 'shared-state-key', secret: { secretName: 'mine' } }])),
    expect: [`${PS}.extraVolumes[0]`, "the name shared-state-key is the operator's"],
  },
  {
    what: 'an extra container named atlantis',
    obj: (n) => cr(n, (o) => (podSpec(o).extraContainers = [{ name: 'atlantis', image: 'x' }])),
    expect: [`${PS}.extraContainers[0]`, "the name atlantis is the server container's"],
  },
  {
    what: 'an extra mount on the data dir',
    obj: (n) => cr(n, (o) => (podSpec(o).extraVolumeMounts = [{ name: 'v', mountPath: '/atlantis' }])),
    expect: [`${PS}.extraVolumeMounts[0]`, '/atlantis is the data dir'],
  },
  {
    what: 'a preStop sleep longer than the grace period allows',
    obj: (n) => cr(n, (o) => (podSpec(o).lifecycle = { preStop: { sleep: { seconds: 61 } } })),
    expect: [`${PS}.lifecycle.preStop.sleep.seconds`, 'too long for terminationGracePeriodSeconds'],
  },
  {
    what: 'githubApp without its key',
    obj: (n) => cr(n, (o) => (at(o.spec, 'atlantis').githubApp = { id: 1 })),
    expect: ['spec.atlantis.githubApp.keySecretRef', 'Required value'],
  },
  {
    what: 'githubApp id 0',
    obj: (n) => cr(n, (o) => (at(o.spec, 'atlantis').githubApp = { id: 0, keySecretRef: { name: 'app', key: 'key.pem' } })),
    expect: ['spec.atlantis.githubApp.id', 'must be a positive integer'],
  },
  {
    what: 'githubApp beside github.user',
    obj: (n) => cr(n, (o) => (at(o.spec, 'atlantis').githubApp = { id: 1, keySecretRef: { name: 'app', key: 'key.pem' } })),
    expect: ['spec.atlantis', 'github.user and spec.atlantis.githubApp are both set'],
  },
  {
    what: 'githubApp slug with capitals',
    obj: (n) =>
      cr(n, (o) => {
        delete at(o.spec, 'atlantis.github').user;
        at(o.spec, 'atlantis').githubApp = { id: 1, slug: 'My App', keySecretRef: { name: 'app', key: 'key.pem' } };
      }),
    expect: ['spec.atlantis.githubApp.slug', "lowercase letters, digits and '-'"],
  },
  {
    what: 'basicAuth without a password',
    obj: (n) => cr(n, (o) => (at(o.spec, 'atlantis').basicAuth = { username: 'admin' })),
    expect: ['spec.atlantis.basicAuth.passwordSecretRef', 'Required value'],
  },
  {
    what: 'api without its secret',
    obj: (n) => cr(n, (o) => (at(o.spec, 'atlantis').api = {})),
    expect: ['spec.atlantis.api.secretRef', 'Required value'],
  },
  {
    what: 'repoConfig without a ConfigMap name',
    obj: (n) => cr(n, (o) => (at(o.spec, 'atlantis').repoConfig = { configMapRef: { key: 'repos.yaml' } })),
    expect: ['spec.atlantis.repoConfig.configMapRef.name', 'Required value'],
  },
  {
    what: 'env sets ATLANTIS_REPLICA_ID',
    obj: (n) => cr(n, (o) => (at(o.spec, 'atlantis').env = [{ name: 'ATLANTIS_REPLICA_ID', value: 'x' }])),
    expect: ['spec.atlantis.env[0]', 'must not set ATLANTIS_REPLICA_ID', 'the operator sets it'],
  },
  {
    what: 'env sets ATLANTIS_REPLICA_URL',
    obj: (n) => cr(n, (o) => (at(o.spec, 'atlantis').env = [{ name: 'ATLANTIS_REPLICA_URL', value: 'http://[$(POD_IP)]:4141' }])),
    expect: ['spec.atlantis.env[0]', 'must not set ATLANTIS_REPLICA_URL'],
  },
  {
    what: 'env sets ATLANTIS_SHARED_STATE_KEY_FILE',
    obj: (n) => cr(n, (o) => (at(o.spec, 'atlantis').env = [{ name: 'ATLANTIS_SHARED_STATE_KEY_FILE', value: '/tmp/key' }])),
    expect: ['spec.atlantis.env[0]', 'must not set ATLANTIS_SHARED_STATE_KEY_FILE', 'set spec.atlantis.lockingDB instead'],
  },
  {
    what: 'env sets ATLANTIS_REPO_CONFIG beside repoConfig',
    obj: (n) =>
      cr(n, (o) => {
        at(o.spec, 'atlantis').repoConfig = { configMapRef: { name: 'repos' } };
        at(o.spec, 'atlantis').env = [{ name: 'ATLANTIS_REPO_CONFIG', value: '/x.yaml' }];
      }),
    expect: ['spec.atlantis', 'must not set ATLANTIS_REPO_CONFIG, ATLANTIS_REPO_CONFIG_JSON with spec.atlantis.repoConfig'],
  },
  {
    what: 'env sets ATLANTIS_WEB_PASSWORD beside basicAuth',
    obj: (n) =>
      cr(n, (o) => {
        at(o.spec, 'atlantis').basicAuth = { passwordSecretRef: { name: 'web', key: 'password' } };
        at(o.spec, 'atlantis').env = [{ name: 'ATLANTIS_WEB_PASSWORD', value: 'plain' }];
      }),
    expect: ['spec.atlantis', 'with spec.atlantis.basicAuth'],
  },
  {
    what: 'extraArgs giving --port',
    obj: (n) => cr(n, (o) => (at(o.spec, 'atlantis').extraArgs = ['--log-level=debug', '--port=8080'])),
    expect: ['spec.atlantis.extraArgs[1]', 'must not give --port=8080'],
  },
  {
    what: 'extraArgs giving --shared-state-key-file',
    obj: (n) => cr(n, (o) => (at(o.spec, 'atlantis').extraArgs = ['--shared-state-key-file', '/tmp/key'])),
    expect: ['spec.atlantis.extraArgs[0]', 'must not give --shared-state-key-file'],
  },
  {
    what: 'nodePort on a ClusterIP Service',
    obj: (n) => cr(n, (o) => (at(o.spec, 'service').nodePort = 30080)),
    expect: ['spec.service', 'nodePort needs type NodePort or LoadBalancer'],
  },
  {
    what: 'loadBalancerSourceRanges not a CIDR',
    obj: (n) => cr(n, (o) => (o.spec.service = { type: 'LoadBalancer', loadBalancerSourceRanges: ['140.82.112.0'] })),
    expect: ['spec.service.loadBalancerSourceRanges[0]', '140.82.112.0 is not a CIDR'],
  },
  {
    what: 'loadBalancerSourceRanges on a NodePort Service',
    obj: (n) => cr(n, (o) => (o.spec.service = { type: 'NodePort', loadBalancerSourceRanges: ['140.82.112.0/20'] })),
    expect: ['spec.service', 'loadBalancerSourceRanges needs type LoadBalancer'],
  },
  {
    what: 'an operator label on the Service',
    obj: (n) => cr(n, (o) => (at(o.spec, 'service').labels = { 'app.kubernetes.io/managed-by': 'me' })),
    expect: ['spec.service.labels', 'must not set app.kubernetes.io/name, instance, managed-by'],
  },
  {
    what: 'an extra Service port named http',
    obj: (n) => cr(n, (o) => (at(o.spec, 'service').extraPorts = [{ name: 'http', port: 8080 }])),
    expect: ['spec.service.extraPorts[0]', "the port name http is the server's"],
  },
  {
    what: 'an extra Service port without a port',
    obj: (n) => cr(n, (o) => (at(o.spec, 'service').extraPorts = [{ name: 'proxy', targetPort: 4180 }])),
    expect: ['spec.service.extraPorts[0].port', 'Required value'],
  },
  {
    what: 'an ingress without a host',
    obj: (n) => cr(n, (o) => (o.spec.ingress = { ingressClassName: 'nginx' })),
    expect: ['spec.ingress.host', 'Required value'],
  },
  {
    what: 'an ingress host with a scheme',
    obj: (n) => cr(n, (o) => (o.spec.ingress = { host: 'https://atlantis.example.com' })),
    expect: ['spec.ingress.host', 'must be a lowercase DNS name'],
  },
  {
    what: 'the whole UI on the ingress without basic auth',
    obj: (n) => cr(n, (o) => (o.spec.ingress = { host: 'atlantis.example.com', exposeUI: true })),
    expect: ['spec.ingress.exposeUI', 'needs spec.atlantis.basicAuth'],
  },
  {
    what: 'a ServiceAccount annotation of the operator',
    obj: (n) => cr(n, (o) => (at(o.spec, 'serviceAccount').annotations = { 'atlantis-operator.dev/x': 'y' })),
    expect: ['spec.serviceAccount.annotations', 'must not set atlantis-operator.dev/* annotations'],
  },
];

describe('every new field', () => {
  it('is accepted and read back from the API server as written', async () => {
    const o = everyField(ns, 'every-field');
    const created = await kubeRequest<AtlantisDeployment>(cluster.kc, 'POST', apiPath(API_VERSION, PLURAL, ns), o, {
      query: { fieldValidation: 'Strict' },
    });
    assert.equal(created.status, 201, `accepted with strict field validation: ${statusOf(created.body).message}`);
    const got = await getAd(cluster.kc, ns, 'every-field');
    const want = (o as { spec: AtlantisDeployment['spec'] }).spec;
    for (const [path, pick] of [
      ['githubApp', (s: AtlantisDeployment['spec']) => s.atlantis?.githubApp],
      ['repoConfig', (s: AtlantisDeployment['spec']) => s.atlantis?.repoConfig],
      ['api', (s: AtlantisDeployment['spec']) => s.atlantis?.api],
      ['basicAuth', (s: AtlantisDeployment['spec']) => s.atlantis?.basicAuth],
      ['envFrom', (s: AtlantisDeployment['spec']) => s.atlantis?.envFrom],
      ['extraArgs', (s: AtlantisDeployment['spec']) => s.atlantis?.extraArgs],
      ['podTemplate', (s: AtlantisDeployment['spec']) => s.podTemplate],
      ['serviceAccount', (s: AtlantisDeployment['spec']) => s.serviceAccount],
    ] as const)
      assert.deepEqual(pick(got.spec), pick(want), `spec ${path} read back as written`);
    assert.deepEqual(got.spec.service, want.service, 'service');
    assert.deepEqual(got.spec.ingress, { ...want.ingress, exposeUI: true }, 'ingress');
  });

  it('the key of a repo config defaults to repos.yaml; an Ingress shows only /events unless asked', async () => {
    const r = await kubeRequestOk<AtlantisDeployment>(
      cluster.kc,
      'POST',
      apiPath(API_VERSION, PLURAL, ns),
      cr('field-defaults', (o) => {
        at(o.spec, 'atlantis').repoConfig = { configMapRef: { name: 'repos' } };
        o.spec.ingress = { host: 'atlantis.example.com' };
      }),
    );
    assert.deepEqual(r.spec.atlantis?.repoConfig, { configMapRef: { name: 'repos', key: 'repos.yaml' } });
    assert.equal(r.spec.ingress?.exposeUI, false);
  });
});

describe('typos are refused through the API with 422 and the API server message', () => {
  for (const [i, c] of BAD.entries()) it(c.what, () => assertRefused(cluster.kc, ns, `bad-field-${i}`, c));
});

describe('kubectl apply', () => {
  const CASES = [
    'a volume without a source (a misspelt `configmap:` is pruned)',
    'memory: 2GB',
    'cpu: one',
    'a container without a name',
    'a container port as a name',
    'a volume mount without mountPath',
    'a topology spread constraint without topologyKey',
    'runAsUser as a name',
    'githubApp without its key',
    'env sets ATLANTIS_REPLICA_URL',
    'loadBalancerSourceRanges not a CIDR',
    'the whole UI on the ingress without basic auth',
  ];
  for (const what of CASES) {
    it(`refuses: ${what}`, async () => {
      const c = BAD.find((b) => b.what === what)!;
      const name = `bad-field-kubectl-${CASES.indexOf(what)}`;
      // The misspelt source is an unknown field too: kubectl's strict validation names it first.
      const r = await cluster.kubectl(['apply', '--validate=false', '-f', '-'], { input: JSON.stringify(c.obj(name)) });
      assert.notEqual(r.exitCode, 0, `kubectl apply should fail; stdout: ${r.stdout}`);
      assert.match(r.stderr, new RegExp(`The AtlantisDeployment "${name}" is invalid`), `stderr: ${r.stderr}`);
      for (const s of c.expect) assert.ok(r.stderr.includes(s), `stderr should contain ${JSON.stringify(s)}; got: ${r.stderr}`);
    });
  }

  it('refuses an unknown field in a container (kubectl validates strictly by default)', async () => {
    const obj = cr('field-unknown', (o) => (podSpec(o).extraContainers = [{ name: 'proxy', image: 'p', imagePullPolicyy: 'Always' }]));
    const r = await cluster.kubectl(['apply', '-f', '-'], { input: JSON.stringify(obj) });
    assert.notEqual(r.exitCode, 0, `stdout: ${r.stdout}`);
    assert.match(r.stderr, /unknown field "spec\.podTemplate\.spec\.extraContainers\[0\]\.imagePullPolicyy"/, `stderr: ${r.stderr}`);
  });

  it('refuses a misspelt volume source by name', async () => {
    const obj = cr('field-misspelt', (o) => (podSpec(o).extraVolumes = [{ name: 'repos', configmap: { name: 'x' } }]));
    const r = await cluster.kubectl(['apply', '-f', '-'], { input: JSON.stringify(obj) });
    assert.notEqual(r.exitCode, 0, `stdout: ${r.stdout}`);
    assert.match(r.stderr, /unknown field "spec\.podTemplate\.spec\.extraVolumes\[0\]\.configmap"/, `stderr: ${r.stderr}`);
  });
});

describe('the real install of docs/controller.md (manifests/example-github-app)', () => {
  it('passes a server-side dry run: the GitHub App, repos.yaml, the projected AWS credentials, the oauth2-proxy sidecar and port, the Ingresses', async () => {
    const built = await cluster.kubectl(['kustomize', path.join(path.dirname(CRD_FILE), '..', 'manifests', 'example-github-app')]);
    assert.equal(built.exitCode, 0, built.stderr);
    // Into the test's namespace: a dry-run Namespace would not exist for the objects after it.
    const docs = parseAllDocuments(built.stdout)
      .map((d) => d.toJSON() as Obj & { metadata: Obj })
      .filter((d) => d.kind !== 'Namespace')
      .map((d) => ({ ...d, metadata: { ...d.metadata, namespace: ns } }));
    const r = await cluster.kubectl(['apply', '--server-side', '--dry-run=server', '-o', 'json', '-f', '-'], {
      input: JSON.stringify({ apiVersion: 'v1', kind: 'List', items: docs }),
    });
    assert.equal(r.exitCode, 0, `stderr: ${r.stderr}`);
    const items = (JSON.parse(r.stdout) as { items: Obj[] }).items;
    assert.deepEqual(items.map((i) => i.kind).sort(), ['AtlantisDeployment', 'ConfigMap', 'Ingress', 'Secret', 'Secret']);
    const ad = items.find((i) => i.kind === 'AtlantisDeployment') as unknown as AtlantisDeployment;
    assert.equal(ad.spec.atlantis?.githubApp?.keySecretRef.name, 'github-app');
    assert.equal(ad.spec.podTemplate?.spec?.extraContainers?.[0]?.name, 'oauth2-proxy');
    assert.equal(ad.spec.ingress?.exposeUI, false, 'the operator Ingress routes /events only');
  });

  it('the block of docs/controller.md is accepted as it is written', async () => {
    const doc = fs.readFileSync(path.join(path.dirname(CRD_FILE), '..', 'docs', 'controller.md'), 'utf8');
    const section = doc.slice(doc.indexOf('\n## A real install\n'));
    const block = /```yaml\n([\s\S]*?)```/.exec(section)?.[1];
    assert.ok(block, 'a yaml block in the section');
    const o = parse(block) as Obj & { metadata: Obj };
    const r = await kubeRequest(
      cluster.kc,
      'POST',
      apiPath(API_VERSION, PLURAL, ns),
      { ...o, metadata: { ...o.metadata, namespace: ns } },
      {
        query: { dryRun: 'All', fieldValidation: 'Strict' },
      },
    );
    assert.equal(r.status, 201, `accepted: ${statusOf(r.body).message}`);
  });
});
