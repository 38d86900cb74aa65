// `migrate helm-values` on the official chart's own values (values.yaml, its CI values,
// test-values.yaml, each README example, each helm-unittest case's `set:`) and on ours (a
// GitHub App, repos.yaml, extra volumes, basic auth, an Ingress, Redis, secrets everywhere):
// every output is applied with a server-side dry run on the local cluster's API server, with
// the CRD installed, and the values not converted are exactly the expected ones, each with
// its reason. Our files and the chart's go through the built CLI and `kubectl apply
// --server-side --dry-run=server`, as a user would pipe them; the unittest cases through
// convertValues and a server-side apply request.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { parseAllDocuments } from 'yaml';
import { convertValues } from '../src/cli/helm-values/convert.js';
import { APPLY_PATCH, apiPath, kubeRequest } from '../src/k8s/client.js';
import { API_VERSION, PLURAL } from '../src/controller/types.js';
import { runCli } from './support/cli.js';
import { ensureCrd } from './support/controller.js';
import { statusOf } from './support/crd-objects.js';
import { CHART_FILES, OUR_FILES, fixturePath, unittestCases } from './support/helm-values.js';
import { deleteNamespace, freshNamespace, getCluster, type TestCluster } from './support/k8s.js';

let cluster: TestCluster;
let ns: string;

before(async () => {
  cluster = await getCluster();
  await ensureCrd(cluster);
  ns = await freshNamespace('helm-values');
});
after(async () => {
  if (ns) await deleteNamespace(ns);
});

/** The reasons of the values the fixtures leave unconverted, by value (`n`: the AtlantisDeployment's name). */
const REASONS: Record<string, (n: string) => string | RegExp> = {
  ingress: (n) =>
    n === 'nohost'
      ? "no host: the chart's Ingress answers every host; spec.ingress needs one (set host)"
      : `the operator makes one Ingress, webhook_ingress's, for the webhooks; this one (the web pages) is not made: expose them with spec.ingress.exposeUI and spec.atlantis.basicAuth, or an Ingress of yours to the Service ${n}`,
  webhook_ingress: () => "no host: the chart's Ingress answers every host; spec.ingress needs one (set host)",
  extraManifests: () => /^objects beside Atlantis \(.+\) are not copied: apply them yourself \(the chart renders them as templates\)$/,
  extraSecretManifests: () =>
    /^objects beside Atlantis \(.+\) are not copied: apply them yourself \(the chart renders them as templates\)$/,
  command: () => "the pods run this image's entrypoint with `server`; the Atlantis image's (docker-entrypoint.sh) is not in it",
  'service.sessionAffinity': (n) =>
    `spec.service has no sessionAffinity; the controller leaves alone what it does not set, so \`kubectl patch service ${n}\` with it stays`,
  'service.sessionAffinityConfig': (n) =>
    `spec.service has no sessionAffinityConfig; the controller leaves alone what it does not set, so \`kubectl patch service ${n}\` with it stays`,
  'service.internalTrafficPolicy': (n) =>
    `spec.service has no internalTrafficPolicy; the controller leaves alone what it does not set, so \`kubectl patch service ${n}\` with it stays`,
  'service.externalTrafficPolicy': (n) =>
    `spec.service has no externalTrafficPolicy; the controller leaves alone what it does not set, so \`kubectl patch service ${n}\` with it stays`,
  'service.portName': () => "the Service's port is named http",
  'service.loadBalancerSourceRanges': () => 'only with service.type LoadBalancer (Kubernetes ignores them otherwise)',
  'service.loadBalancerIP': () => "spec.service has no loadBalancerIP (deprecated in Kubernetes; your load balancer's annotation sets it)",
  'service.targetPort': () =>
    "the chart's Service went to a port other than Atlantis's; the Service's http port goes to the server, and service.extraPorts to a sidecar",
  'config.webhooks': () =>
    'HTTP webhooks are read from a --config file, which an AtlantisDeployment does not mount (Slack ones are not implemented)',
  config: () => 'not a mapping of flags (the file --config reads)',
  'environment.ATLANTIS_GH_TOKEN': () =>
    "ATLANTIS_GH_TOKEN is set by another chart value, which came later in the chart's pod and won; the AtlantisDeployment sets it from that value",
  'config.gh-token': () => 'ATLANTIS_GH_TOKEN is set by a chart value too, which Atlantis took over the config file',
  'config.web-password': () => 'ATLANTIS_WEB_PASSWORD is set by a chart value too, which Atlantis took over the config file',
  'extraArgs[1]': () =>
    'spec.atlantis.api sets --api-secret, which this argument overrode in the chart: put its value in the Secret that field reads instead',
  repoConfig: (n) =>
    `converted into the ConfigMap ${n}-repos, but this server refuses it and would not start: repos.yaml: must be a YAML map`,
  redis: () => 'lockingDbType is not redis, so Atlantis did not use this Redis; the embedded store is used',
  azuredevops: () => /^this server does not support --azuredevops-(user|token): only GitHub, GitLab and Gitea are supported$/,
  bitbucket: () => 'this server does not support --bitbucket-user: only GitHub, GitLab and Gitea are supported',
  enableKubernetesBackend: (n) =>
    `the operator grants the pods no Leases or Secrets for terraform's kubernetes backend: bind such a Role to the accounts ${n}-atlantis-<ordinal> yourself`,
  'route.main': (n) =>
    `Gateway API routes are not made by the operator: write an HTTPRoute to the Service ${n}, port http (/events for the webhooks)`,
  servicemonitor: (n) => `the operator makes no ServiceMonitor: write one for the Service ${n}, port http, path /metrics (docs/metrics.md)`,
  podMonitor: () => 'the operator makes no PodMonitor: write one for its pods, port 4141, path /metrics (docs/metrics.md)',
  'volumeClaim.accessModes': () => "the operator's PVCs are ReadWriteOnce, one per pod",
  'volumeClaim.volumeAttributesClassName': () => "the operator's PVCs have no VolumeAttributesClass",
  replicaCount: () =>
    '2 pods with the embedded store would each keep their own locks: spec.replicas is 1 (more need lockingDbType redis, spec.atlantis.lockingDB)',
  hostNetwork: () => "the operator's pods never use the node's network",
  'statefulSet.shareProcessNamespace': () =>
    "spec.podTemplate.spec has no shareProcessNamespace: the server's processes (terraform's too) stay its own",
  'serviceAccount.mount': () => "the server reads its own Pod (the drain annotation) with the account's token, which is always mounted",
  tlsSecretName: () => 'this server does not support --ssl-cert-file: TLS is not served; terminate it in front of the server',
  'github.org': () =>
    "this server does not support --gh-org: it is for Atlantis's App-creation web flow (/github-app/setup), which is not served; an App authenticates with --gh-app-id and its key",
  livenessProbe: () =>
    "the operator sets the server's probes (readiness /readyz every 2 s, so a draining pod leaves the Service at once; liveness /healthz)",
  readinessProbe: () =>
    "the operator sets the server's probes (readiness /readyz every 2 s, so a draining pod leaves the Service at once; liveness /healthz)",
};

/** The chart's default Ingress has no host: every case that leaves `ingress` alone has this one finding. */
const NO_HOST = ['ingress'];

/** The values not converted, by case, where they are not just NO_HOST. */
const EXPECTED: Record<string, string[]> = {
  'helm-chart/ci/ci-values.yaml': ['ingress'],
  'helm-chart/ci/ci-init-config-values.yaml': ['ingress'],
  'helm-chart/readme-examples/01.yaml': ['ingress', 'extraManifests'],
  'helm-chart/readme-examples/02.yaml': ['ingress', 'service.sessionAffinity', 'service.sessionAffinityConfig'],
  'helm-chart/readme-examples/04.yaml': ['ingress', 'extraManifests'],
  'helm-chart/readme-examples/06.yaml': ['ingress', 'extraManifests'],
  'helm-chart/readme-examples/07.yaml': ['ingress', 'command'],
  'helm-values/basic-auth.yaml': [],
  'helm-values/extra-volumes.yaml': [],
  'helm-values/github-app.yaml': [],
  'helm-values/ingress.yaml': [],
  'helm-values/redis.yaml': [],
  'helm-values/repos-yaml.yaml': ['config.webhooks'],
  'helm-values/secrets.yaml': ['environment.ATLANTIS_GH_TOKEN', 'config.gh-token', 'config.web-password', 'extraArgs[1]'],
  'tests/misc_test.yaml: ensure namespaces are specified in all resources': [
    'repoConfig',
    'redis',
    'azuredevops',
    'enableKubernetesBackend',
    'ingress',
    'webhook_ingress',
    'route.main',
    'config',
    'servicemonitor',
    'podMonitor',
    'extraManifests',
    'extraSecretManifests',
  ],
};
const add = (ids: string[], values: string[]) => {
  for (const id of ids) EXPECTED[id] = [...NO_HOST, ...values];
};
add(
  ['renders with defaults', 'allows overriding interval', 'applies metricRelabeling - replace', 'applies metricRelabeling - regex'].map(
    (t) => `tests/podmonitor.yaml: ${t}`,
  ),
  ['podMonitor'],
);
add(['tests/pvc_test.yaml: accessModes'], ['volumeClaim.accessModes']);
add(['tests/pvc_test.yaml: volumeAttributesClassName'], ['volumeClaim.volumeAttributesClassName']);
add(
  [
    'should create HTTPRoute with default values',
    'should create HTTPRoute with custom apiVersion and kind',
    'should create HTTPRoute with hostnames',
    'should create HTTPRoute with parentRefs',
    'should create HTTPRoute with https redirect',
    'should create HTTPRoute with additional rules',
    'should add labels and annotations',
  ].map((t) => `tests/route_test.yaml: ${t}`),
  ['route.main'],
);
add(
  ['defined repositories and vcsSecretName', 'azuredevops only token set', 'azuredevops', 'commonLabels'].map(
    (t) => `tests/secret-webhook_test.yaml: ${t}`,
  ),
  ['azuredevops'],
);
add(
  ['bitbucket only user set', 'bitbucket user and token are set', 'bitbucket server only user and token are set', 'bitbucket server'].map(
    (t) => `tests/secret-webhook_test.yaml: ${t}`,
  ),
  ['bitbucket'],
);
add(
  ['tests/service_affinity_test.yaml: renders sessionAffinity ClientIP and sessionAffinityConfig when set'],
  ['service.sessionAffinity', 'service.sessionAffinityConfig'],
);
add(['tests/service_affinity_test.yaml: renders internalTrafficPolicy when set'], ['service.internalTrafficPolicy']);
add(['tests/service_test.yaml: externalTrafficPolicy'], ['service.externalTrafficPolicy']);
add(['tests/service_test.yaml: portName'], ['service.portName']);
add(['tests/service_test.yaml: loadBalancerSourceRanges'], ['service.loadBalancerSourceRanges']);
add(['tests/service_test.yaml: loadBalancerIP'], ['service.loadBalancerIP']);
add(['tests/statefulset_test.yaml: replicaCount'], ['replicaCount']);
add(['tests/statefulset_test.yaml: hostNetwork'], ['hostNetwork']);
add(['tests/statefulset_test.yaml: shareProcessNamespace'], ['statefulSet.shareProcessNamespace']);
add(['tests/statefulset_test.yaml: automountServiceAccountToken'], ['serviceAccount.mount']);
add(['tests/statefulset_test.yaml: tlsSecretName'], ['tlsSecretName']);
add(['tests/statefulset_test.yaml: github org'], ['github.org']);
add(['tests/statefulset_test.yaml: bitbucket', 'tests/statefulset_test.yaml: bitbucket server'], ['bitbucket']);
add(['tests/statefulset_test.yaml: azuredevops'], ['azuredevops']);
add(
  [
    'redisHost',
    'redisPassword',
    'redisSecretName',
    'redisSecretPasswordKey',
    'redisPort',
    'redisDb',
    'redisTlsEnabled',
    'redisInsecureSkipVerify',
  ].map((t) => `tests/statefulset_test.yaml: ${t}`),
  ['redis'],
);
add(['tests/statefulset_test.yaml: command'], ['command']);
add(['tests/statefulset_test.yaml: liveneessProbe false', 'tests/statefulset_test.yaml: liveneessProbe'], ['livenessProbe']);
add(['tests/statefulset_test.yaml: readinessProbe false', 'tests/statefulset_test.yaml: readinessProbe'], ['readinessProbe']);

interface Finding {
  value: string;
  reason: string;
}

function checkFindings(id: string, name: string, got: Finding[]): void {
  const want = EXPECTED[id] ?? NO_HOST;
  assert.deepEqual(got.map((f) => f.value).sort(), [...want].sort(), `${id}: the values not converted`);
  for (const f of got) {
    const r = REASONS[f.value];
    assert.ok(r, `${id}: ${f.value} has an expected reason`);
    // The default Ingress's finding has its own text.
    const expected = r(f.value === 'ingress' && f.reason.startsWith('no host') ? 'nohost' : name);
    if (expected instanceof RegExp) assert.match(f.reason, expected, `${id}: ${f.value}`);
    else assert.equal(f.reason, expected, `${id}: ${f.value}`);
  }
}

/** The findings the CLI wrote in the comment block at the top of its output. */
function findingsOf(stdout: string): Finding[] {
  const lines = stdout.split('\n');
  const start = lines.findIndex((l) => /^# Not converted/.test(l));
  assert.ok(start >= 0, 'the output lists the values not converted');
  const out: Finding[] = [];
  for (const l of lines.slice(start + 1)) {
    const m = /^# {3}([^ :]+): (.*)$/.exec(l);
    if (!m) break;
    out.push({ value: m[1] as string, reason: m[2] as string });
  }
  return out;
}

describe('migrate helm-values: the output of every values file applies to the API server', () => {
  it('every expected case exists', () => {
    const ids = new Set([...CHART_FILES, ...OUR_FILES, ...unittestCases().map((c) => c.id)]);
    for (const id of Object.keys(EXPECTED)) assert.ok(ids.has(id), `${id} is a case`);
    assert.ok(unittestCases().length > 100, 'the chart has over a hundred unittest cases that set values');
  });

  for (const file of [...CHART_FILES, ...OUR_FILES]) {
    it(`${file}: the CLI's output, through kubectl apply --server-side --dry-run=server`, async () => {
      const r = runCli(['migrate', 'helm-values', fixturePath(file)]);
      const findings = findingsOf(r.stdout);
      assert.equal(r.code, findings.length ? 3 : 0, `exit code; stderr: ${r.stderr}`);
      checkFindings(file, 'atlantis', findings);
      // stderr lists the same values, for the person at the terminal.
      for (const f of findings) assert.ok(r.stderr.includes(`  ${f.value}: ${f.reason}`), `stderr lists ${f.value}`);
      const docs = parseAllDocuments(r.stdout).map((d) => d.toJSON() as { kind: string });
      assert.equal(docs.at(-1)?.kind, 'AtlantisDeployment');
      const applied = await cluster.kubectl(['apply', '-n', ns, '--server-side', '--dry-run=server', '-o', 'json', '-f', '-'], {
        input: r.stdout,
      });
      assert.equal(applied.exitCode, 0, `${file}: ${applied.stderr}`);
      const items = JSON.parse(applied.stdout) as { kind: string; items?: Array<{ kind: string }> };
      const kinds = (items.items ?? [items]).map((i) => i.kind);
      assert.deepEqual(
        kinds,
        docs.map((d) => d.kind),
      );
    });
  }

  it("each helm-unittest case's values: converted, applied (dry run), with exactly the expected findings", async () => {
    for (const c of unittestCases()) {
      const r = convertValues([c.values], { release: c.release, image: 'atlantis-operator:test' });
      checkFindings(c.id, r.fullname, r.unmapped);
      for (const o of [...r.configMaps, r.deployment]) {
        const isCm = o.kind === 'ConfigMap';
        const path = isCm ? apiPath('v1', 'configmaps', ns, o.metadata?.name) : apiPath(API_VERSION, PLURAL, ns, o.metadata?.name);
        const res = await kubeRequest(cluster.kc, 'PATCH', path, o, {
          contentType: APPLY_PATCH,
          query: { dryRun: 'All', fieldManager: 'helm-values-test', fieldValidation: 'Strict', force: 'true' },
        });
        assert.equal(res.status, 201, `${c.id}: ${o.kind} ${o.metadata?.name}: ${statusOf(res.body).message ?? JSON.stringify(res.body)}`);
      }
    }
    // The same request refuses what the CRD refuses: the dry run validates.
    const bad = convertValues([{}], { release: 'atlantis', image: 'bad image' }).deployment;
    const res = await kubeRequest(cluster.kc, 'PATCH', apiPath(API_VERSION, PLURAL, ns, 'atlantis'), bad, {
      contentType: APPLY_PATCH,
      query: { dryRun: 'All', fieldManager: 'helm-values-test', fieldValidation: 'Strict', force: 'true' },
    });
    assert.equal(res.status, 422);
    assert.match(statusOf(res.body).message ?? '', /spec.image must not contain whitespace/);
  });

  it('the fixtures hold no file left out', () => {
    const onDisk = fs.readdirSync(fixturePath('helm-chart/ci')).length + fs.readdirSync(fixturePath('helm-chart/readme-examples')).length;
    assert.equal(CHART_FILES.length, onDisk + 2);
  });
});
