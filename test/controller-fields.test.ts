// A real install's AtlantisDeployment (issue 32) on the local cluster with the in-process
// controller: every new field read back from the API server on the pod, the Service, the
// ServiceAccounts and the Ingress; the server started as a GitHub App from the key file
// mounted from a Secret, with its repos.yaml from a ConfigMap, planning a PR through the
// GitHub stand-in; basic auth from a Secret; a setting taken out of the spec taken off the
// objects (the Ingress deleted). The local node does not run init containers or postStart
// hooks (docs/local-cluster.md): for those the pod object is what is checked.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import { after, before, describe, it } from 'node:test';
import type { V1Ingress, V1Pod, V1Service, V1ServiceAccount } from '@kubernetes/client-node';
import { apiPath, kubeRequest, kubeRequestOk } from '../src/k8s/client.js';
import { ANNOTATION_REFERENCED_CONTENT } from '../src/controller/resources/index.js';
import type { AtlantisDeployment } from '../src/controller/types.js';
import { assertBuilt } from './support/cli.js';
import { createAd, ensureCrd, getAd, listPods, patchAdSpec, startController, type TestController } from './support/controller.js';
import { rolloutComplete, serverEnviron, waitForAd } from './support/controller-asserts.js';
import { everyField } from './support/every-field.js';
import { terraformConfig } from './support/git-repos.js';
import { StandinApp } from './support/github-standin-app.js';
import {
  deleteNamespace,
  freshNamespace,
  getCluster,
  getLocalNode,
  waitFor,
  type LocalNodeHandle,
  type TestCluster,
} from './support/k8s.js';
import { WEBHOOK_SECRET, type WorkflowEnv, createWorkflowEnv } from './support/workflow-env.js';

const NAME = 'install';
const APP_ID = 4242;
const SLUG = 'acme-atlantis';
const { privateKeyPem, publicKey } = StandinApp.keyPair();
// Random per run, so finding one in an object read back means it leaked there.
const API_SECRET = randomBytes(16).toString('hex');
const WEB_PASSWORD = randomBytes(16).toString('hex');
// The server-side repo config: apply only once approved (the stand-in's PR has no review).
const REPOS_YAML = `repos:
  - id: /.*/
    apply_requirements: [approved]
`;

let cluster: TestCluster;
let node: LocalNodeHandle;
let ctrl: TestController | undefined;
let env: WorkflowEnv | undefined;
let ns = '';

async function create(kind: 'secrets' | 'configmaps', name: string, data: Record<string, string>): Promise<void> {
  await kubeRequestOk(cluster.kc, 'POST', apiPath('v1', kind, ns), {
    apiVersion: 'v1',
    kind: kind === 'secrets' ? 'Secret' : 'ConfigMap',
    metadata: { name },
    ...(kind === 'secrets' ? { stringData: data } : { data }),
  });
}

before(async () => {
  assertBuilt();
  cluster = await getCluster();
  node = await getLocalNode();
  await ensureCrd(cluster);
  ns = await freshNamespace('ctrl-fields');
  env = await createWorkflowEnv();
  env.gh.app = new StandinApp({ appId: APP_ID, slug: SLUG, publicKey, installations: [{ id: 77, account: 'acme' }] });
  // Comments made with an installation token are the App bot's, as on GitHub.
  env.gh.botLogin = `${SLUG}[bot]`;
  await create('secrets', 'vcs', { 'webhook-secret': WEBHOOK_SECRET });
  await create('secrets', 'github-app', { 'key.pem': privateKeyPem });
  await create('secrets', 'atlantis-api', { secret: API_SECRET });
  await create('secrets', 'atlantis-web', { password: WEB_PASSWORD });
  await create('secrets', 'cloud-credentials', { aws: '[default]\nregion = eu-west-1\n' });
  await create('configmaps', 'atlantis-repos', { 'repos.yaml': REPOS_YAML });
  await create('configmaps', 'atlantis-env', { TF_IN_AUTOMATION: 'true' });
  await create('configmaps', 'cloud-config', { 'aws-config': '[profile ci]\n' });
  ctrl = await startController(cluster.kc, ns);
});
after(async () => {
  await ctrl?.stop();
  await env?.close();
  if (ns) await deleteNamespace(ns);
});

const get = <T>(plural: string, name: string, apiVersion = 'v1') =>
  kubeRequestOk<T>(cluster.kc, 'GET', apiPath(apiVersion, plural, ns, name));

describe('an AtlantisDeployment with every field of a real install', () => {
  let ad: AtlantisDeployment;
  let pod: V1Pod;
  const nodePort = 30000 + Math.floor(Math.random() * 2700);

  it('the pod, Service, ServiceAccounts and Ingress carry every field; no secret value in them', { timeout: 180_000 }, async () => {
    ad = everyField(ns, NAME);
    ad.spec.atlantis!.env!.push({ name: 'ATLANTIS_GH_API_URL', value: env!.gh.url });
    ad.spec.service!.nodePort = nodePort;
    await createAd(cluster.kc, ad);
    await waitForAd(cluster.kc, ns, NAME, 'a complete rollout', rolloutComplete(1), 150_000);
    [pod] = await listPods(cluster.kc, ns, NAME);
    const want = ad.spec.podTemplate!.spec!;
    const spec = pod!.spec!;
    const server = spec.containers[0]!;
    assert.deepEqual(
      spec.containers.map((c) => c.name),
      ['atlantis', 'sidecar'],
    );
    assert.deepEqual(spec.initContainers?.[0]?.command, want.initContainers![0]!.command);
    assert.deepEqual(server.args, ['server', '--hide-prev-plan-comments']);
    assert.deepEqual(server.envFrom, ad.spec.atlantis!.envFrom);
    assert.deepEqual(server.lifecycle, want.lifecycle);
    assert.equal(server.securityContext?.readOnlyRootFilesystem, false);
    assert.deepEqual(server.resources, want.resources);
    const mounts = Object.fromEntries(server.volumeMounts!.map((m) => [m.name, m.mountPath]));
    assert.equal(mounts['github-app-key'], '/var/github-app');
    assert.equal(mounts['repo-config'], '/etc/atlantis');
    assert.equal(mounts['cloud-credentials'], '/home/atlantis/.cloud');
    const vol = (n: string) => spec.volumes!.find((v) => v.name === n);
    assert.equal(vol('github-app-key')?.secret?.defaultMode, 0o440);
    assert.equal(vol('repo-config')?.configMap?.name, 'atlantis-repos');
    assert.deepEqual(vol('cloud-credentials')?.projected?.sources, want.extraVolumes![0]!.projected!.sources);
    assert.deepEqual(spec.imagePullSecrets, want.imagePullSecrets);
    assert.deepEqual(spec.topologySpreadConstraints, want.topologySpreadConstraints);
    assert.deepEqual(spec.hostAliases, want.hostAliases);
    assert.deepEqual(spec.dnsConfig, want.dnsConfig);
    assert.deepEqual(
      spec.tolerations?.filter((t) => t.key === 'dedicated'),
      want.tolerations,
    );
    assert.equal(spec.securityContext?.fsGroupChangePolicy, 'Always');
    assert.deepEqual(spec.securityContext?.supplementalGroups, [2000]);
    assert.equal(pod!.metadata?.labels?.team, 'platform');
    assert.equal(pod!.metadata?.annotations?.['example.com/owner'], 'platform');
    assert.match(pod!.metadata?.annotations?.[ANNOTATION_REFERENCED_CONTENT] ?? '', /^[0-9a-f]{16}$/);

    const svc = await get<V1Service>('services', NAME);
    assert.equal(svc.spec?.type, 'LoadBalancer');
    assert.equal(svc.spec?.ports?.[0]?.nodePort, nodePort);
    assert.deepEqual(svc.spec?.loadBalancerSourceRanges, ['140.82.112.0/20', '2606:50c0::/32']);
    assert.equal(svc.metadata?.annotations?.['service.beta.kubernetes.io/aws-load-balancer-internal'], 'true');
    assert.equal(svc.metadata?.labels?.exposure, 'webhooks');
    const sa = await get<V1ServiceAccount>('serviceaccounts', `${NAME}-atlantis-0`);
    assert.equal(sa.metadata?.annotations?.['eks.amazonaws.com/role-arn'], 'arn:aws:iam::123456789012:role/atlantis');
    assert.equal(sa.metadata?.labels?.team, 'platform');
    assert.equal(spec.serviceAccountName, `${NAME}-atlantis-0`, 'the per-pod account is kept');
    const ing = await get<V1Ingress>('ingresses', NAME, 'networking.k8s.io/v1');
    assert.equal(ing.spec?.ingressClassName, 'nginx');
    assert.deepEqual(ing.spec?.tls, [{ hosts: ['atlantis.example.com'], secretName: 'atlantis-tls' }]);
    assert.deepEqual(
      ing.spec?.rules?.[0]?.http?.paths.map((p) => [p.path, p.pathType, p.backend.service?.name]),
      [['/', 'Prefix', NAME]],
    );
    assert.equal(ing.metadata?.annotations?.['cert-manager.io/cluster-issuer'], 'letsencrypt');
    assert.equal(ing.metadata?.ownerReferences?.[0]?.name, NAME);

    const keyLines = privateKeyPem.split('\n').filter((l) => l.length > 20 && !l.startsWith('-----'));
    const stored = JSON.stringify([pod, svc, sa, ing, await getAd(cluster.kc, ns, NAME)]);
    for (const secret of [API_SECRET, WEB_PASSWORD, WEBHOOK_SECRET, ...keyLines]) assert.ok(!stored.includes(secret), 'no secret value');
  });

  it('the server runs as the GitHub App from the key file, with repos.yaml from the ConfigMap: a PR planned by the bot, its apply refused as repos.yaml says', {
    timeout: 180_000,
  }, async () => {
    const environ = serverEnviron(node, pod);
    const keyFile = environ.find((e) => e.startsWith('ATLANTIS_GH_APP_KEY_FILE='))?.split('=')[1] ?? '';
    assert.ok(keyFile.endsWith('/key.pem'), `the key file: ${keyFile}`);
    assert.equal(fs.readFileSync(keyFile, 'utf8'), privateKeyPem, 'the file holds the Secret key');
    assert.equal(fs.statSync(keyFile).mode & 0o777, 0o440);
    assert.ok(!environ.some((e) => e.startsWith('ATLANTIS_GH_APP_KEY=')), 'the key is not in the environment');
    assert.ok(environ.includes(`ATLANTIS_API_SECRET=${API_SECRET}`), 'the API secret from its Secret');
    assert.ok(environ.includes('TF_IN_AUTOMATION=true'), 'envFrom a ConfigMap');
    // Started as the App: a JWT for the installation's token.
    const tokenCall = env!.gh.callsTo('POST', /^\/app\/installations\/77\/access_tokens$/)[0];
    assert.equal(tokenCall?.status, 201, 'an installation token minted with the key');
    assert.match(String(tokenCall?.headers.authorization), /^Bearer [\w-]+\.[\w-]+\.[\w-]+$/);

    const url = `http://${pod.status!.podIP}:4141`;
    const { status } = await env!.openPull(url, 1, 'install-change', { 'stack/main.tf': terraformConfig({ marker: 'install' }) });
    assert.equal(status, 200);
    const c = await env!.waitForComment(1, /^Ran Plan for dir: `stack`/, { timeoutMs: 120_000 });
    assert.equal(c.user, `${SLUG}[bot]`, 'commented with the installation token');
    const before = env!.commentsOn(1).length;
    assert.equal((await env!.comment(url, 1, 'atlantis apply')).status, 200);
    await env!.waitForComment(1, /must be approved according to the project's approval rules before running apply/, {
      after: before,
      timeoutMs: 60_000,
    });

    // Basic auth from the Secret: the pages need it, /events does not.
    const page = (auth?: string) =>
      fetch(`${url}/`, { headers: auth ? { authorization: `Basic ${Buffer.from(auth).toString('base64')}` } : {} });
    assert.equal((await page()).status, 401);
    assert.equal((await page(`admin:${WEB_PASSWORD}`)).status, 200);
  });

  it('the preStop hook runs before the SIGTERM that starts the drain; its sleep came off the drain timeout', {
    timeout: 90_000,
  }, async () => {
    // G 90: I = 30, D = 90 - 30 - 10 - 5 (the sleep) = 45.
    assert.ok(serverEnviron(node, pod).includes('ATLANTIS_DRAIN_TIMEOUT=45s'));
    const uid = pod.metadata!.uid!;
    await kubeRequestOk(cluster.kc, 'DELETE', apiPath('v1', 'pods', ns, pod.metadata!.name!));
    const evs = await waitFor(
      'the pod gone',
      async () => {
        const e = node.events({ namespace: ns, pod: pod.metadata!.name! }).filter((x) => x.uid === uid);
        return e.some((x) => x.type === 'PodDeleted') ? e : undefined;
      },
      { timeoutMs: 60_000, intervalMs: 200 },
    );
    const server = evs.filter((e) => e.container === 'atlantis' || e.type === 'PodDeleted');
    const at = (type: string) => server.findIndex((e) => e.type === type);
    assert.ok(at('PreStopStarted') >= 0 && at('PreStopStarted') < at('PreStopFinished'), JSON.stringify(server.map((e) => e.type)));
    assert.ok(at('PreStopFinished') < at('SIGTERM sent'), 'the hook ended before the SIGTERM');
    const started = Date.parse(server[at('PreStopStarted')]!.time);
    assert.ok(Date.parse(server[at('SIGTERM sent')]!.time) - started >= 4_900, 'the sleep of 5 s ran first');
    assert.equal(at('SIGKILL sent'), -1, 'no SIGKILL: the server drained and exited by itself');
    assert.equal(server.find((e) => e.type === 'ContainerExited')?.exitCode, 0);
    // The controller makes the ordinal's pod again.
    await waitForAd(cluster.kc, ns, NAME, 'the pod made again', rolloutComplete(1), 120_000);
    [pod] = await listPods(cluster.kc, ns, NAME);
  });

  it('taken out of the spec: the Ingress is deleted, the Service annotation and the account annotation removed', {
    timeout: 60_000,
  }, async () => {
    await patchAdSpec(cluster.kc, ns, NAME, {
      ingress: null,
      service: { annotations: null },
      serviceAccount: { annotations: null },
    });
    await waitFor(
      'the Ingress gone',
      async () => (await kubeRequest(cluster.kc, 'GET', apiPath('networking.k8s.io/v1', 'ingresses', ns, NAME))).status === 404,
      { timeoutMs: 30_000, intervalMs: 200 },
    );
    await waitFor(
      'the Service annotation removed',
      async () =>
        (await get<V1Service>('services', NAME)).metadata?.annotations?.['service.beta.kubernetes.io/aws-load-balancer-internal'] ===
        undefined,
      { timeoutMs: 30_000, intervalMs: 200 },
    );
    await waitFor(
      'the ServiceAccount annotation removed',
      async () =>
        (await get<V1ServiceAccount>('serviceaccounts', `${NAME}-atlantis-0`)).metadata?.annotations?.['eks.amazonaws.com/role-arn'] ===
        undefined,
      { timeoutMs: 30_000, intervalMs: 200 },
    );
    const svc = await get<V1Service>('services', NAME);
    assert.equal(svc.metadata?.labels?.exposure, 'webhooks', 'what is still in the spec stays');
  });
});
