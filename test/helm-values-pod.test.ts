// `migrate helm-values`, value by value (no cluster): the pod (image, scheduling, the
// StatefulSet's settings, probes, accounts, volumes, containers, files from Secrets, the data
// volume) and the network (Service, Ingress, routes), with the exact reasons of what is not
// converted.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { convertValues } from '../src/cli/helm-values/convert.js';
import type { Obj } from '../src/cli/helm-values/values.js';

const convert = (values: Obj) =>
  convertValues([{ ingress: { enabled: false }, ...values }], { release: 'atlantis', image: 'atlantis-operator:test' });
const pod = (values: Obj) => convert(values).deployment.spec.podTemplate?.spec;
const unmapped = (values: Obj) => convert(values).unmapped;
const notes = (values: Obj) => convert(values).notes.map((n) => n.value);
const one = (value: string, reason: string) => [{ value, reason }];

describe('migrate helm-values: the pod', () => {
  it("the image is this server's; the chart's is said, one of your own is reported", () => {
    const r = convert({ image: { tag: 'v0.47.0' } });
    assert.equal(r.deployment.spec.image, 'atlantis-operator:test');
    assert.deepEqual(r.notes[0], {
      value: 'image',
      reason:
        "the chart runs Atlantis itself (ghcr.io/runatlantis/atlantis:v0.47.0), which cannot run here: spec.image is atlantis-operator's, atlantis-operator:test (--image)",
    });
    assert.deepEqual(
      unmapped({ image: { repository: 'registry.acme.com/atlantis-terragrunt' } }),
      one(
        'image.repository',
        "an Atlantis image of your own (tools built in?) cannot run here: spec.image is this server's, atlantis-operator:test; build yours FROM it and give it with --image",
      ),
    );
    assert.deepEqual(pod({ imagePullSecrets: ['regcred'] })?.imagePullSecrets, [{ name: 'regcred' }]);
  });

  it('resources, scheduling and DNS as the pod fields; a fractional quantity as text', () => {
    const p = pod({
      resources: { requests: { cpu: 0.5, memory: '1Gi' }, limits: { cpu: 2 } },
      nodeSelector: { pool: 'tf' },
      tolerations: [{ key: 'tf', operator: 'Exists' }],
      affinity: { nodeAffinity: {} },
      topologySpreadConstraints: [{ maxSkew: 1, topologyKey: 'zone', whenUnsatisfiable: 'DoNotSchedule' }],
      hostAliases: [{ ip: '10.0.0.1', hostnames: ['git.acme'] }],
      dnsPolicy: 'Default',
      dnsConfig: { options: [{ name: 'ndots', value: '2' }] },
      statefulSet: { priorityClassName: 'high' },
    });
    assert.deepEqual(p?.resources, { requests: { cpu: '0.5', memory: '1Gi' }, limits: { cpu: 2 } });
    assert.deepEqual(p?.nodeSelector, { pool: 'tf' });
    assert.equal(p?.dnsPolicy, 'Default');
    assert.equal(p?.priorityClassName, 'high');
    assert.deepEqual(unmapped({ dnsPolicy: 'None' }), one('dnsPolicy', 'None needs dnsConfig (the chart refuses it too)'));
  });

  it("the StatefulSet's securityContext without the Atlantis image's uid; its update strategy as the drain rollout's", () => {
    const r = convert({
      statefulSet: {
        securityContext: { fsGroup: 1000, runAsUser: 100, runAsGroup: 1000 },
        updateStrategy: { rollingUpdate: { maxUnavailable: 2 } },
      },
    });
    // Merged over the chart's default, as Helm does.
    assert.deepEqual(r.deployment.spec.podTemplate?.spec?.securityContext, {
      fsGroup: 1000,
      fsGroupChangePolicy: 'OnRootMismatch',
      runAsGroup: 1000,
    });
    assert.deepEqual(r.deployment.spec.updateStrategy, { maxUnavailable: 2 });
    assert.ok(r.notes.some((n) => n.value === 'statefulSet.securityContext.runAsUser'));
    assert.deepEqual(
      unmapped({ statefulSet: { updateStrategy: { type: 'OnDelete' } } }),
      one(
        'statefulSet.updateStrategy.type',
        'OnDelete: the controller replaces pods itself, each after its drain (spec.paused holds new drains)',
      ),
    );
    assert.deepEqual(
      unmapped({ statefulSet: { updateStrategy: { rollingUpdate: { maxUnavailable: '50%', partition: 1 } } } }).map((f) => f.value),
      ['statefulSet.updateStrategy.rollingUpdate.partition', 'statefulSet.updateStrategy.rollingUpdate.maxUnavailable'],
    );
  });

  it("labels and annotations: the pod's, the workload's (statefulSet), every object's (commonLabels, extraAnnotations)", () => {
    const r = convert({
      podTemplate: { labels: { team: 'tf', 'app.kubernetes.io/name': 'x' }, annotations: { a: 'b' } },
      statefulSet: { labels: { tier: 'ci' }, annotations: { s: 't' } },
      commonLabels: { org: 'acme' },
      extraAnnotations: { owner: 'platform' },
      service: { annotations: { lb: 'internal' } },
    });
    assert.deepEqual(r.deployment.spec.podTemplate?.metadata, { labels: { team: 'tf' }, annotations: { a: 'b' } });
    assert.deepEqual(r.deployment.metadata.labels, { org: 'acme', tier: 'ci' });
    assert.deepEqual(r.deployment.metadata.annotations, { s: 't', owner: 'platform' });
    assert.deepEqual(r.deployment.spec.service?.annotations, { lb: 'internal', owner: 'platform' });
    assert.deepEqual(r.deployment.spec.service?.labels, { org: 'acme' });
    assert.deepEqual(r.deployment.spec.serviceAccount, { annotations: { owner: 'platform' }, labels: { org: 'acme' } });
    assert.deepEqual(r.unmapped, one('podTemplate.labels.app.kubernetes.io/name', 'the operator selects its pods by this label'));
  });

  it('grace period, lifecycle and the probes', () => {
    assert.equal(convert({ terminationGracePeriodSeconds: 600 }).deployment.spec.terminationGracePeriodSeconds, 600);
    assert.deepEqual(
      unmapped({ terminationGracePeriodSeconds: 10 }),
      one(
        'terminationGracePeriodSeconds',
        "at least 30 here: the server's drain timeout and terraform's interrupt grace are cut from it (spec.terminationGracePeriodSeconds, default 120)",
      ),
    );
    assert.deepEqual(
      unmapped({ lifecycle: { preStop: { sleep: { seconds: 61 } } } }),
      one('lifecycle', 'a preStop sleep of 61 s leaves the server less than 10 s to drain within a grace period of 120 s'),
    );
    // 120 - 40 - 10 - 60 leaves the 10 s the CRD wants.
    assert.deepEqual(pod({ lifecycle: { preStop: { sleep: { seconds: 60 } } } })?.lifecycle, { preStop: { sleep: { seconds: 60 } } });
    assert.deepEqual(
      unmapped({ livenessProbe: { periodSeconds: 10 } }).map((f) => f.value),
      ['livenessProbe'],
    );
  });

  it("the ports: the server's is 4141; a Service that went elsewhere is reported", () => {
    assert.deepEqual(unmapped({ service: { targetPort: 8080 } }), []);
    assert.deepEqual(notes({ service: { targetPort: 8080 } }).includes('service.targetPort'), true);
    assert.deepEqual(
      unmapped({ containerPort: 4141, service: { targetPort: 4180 } }),
      one(
        'service.targetPort',
        "the chart's Service went to a port other than Atlantis's; the Service's http port goes to the server, and service.extraPorts to a sidecar",
      ),
    );
  });

  it('the ServiceAccount: the operator makes one per pod, or the pods run as an existing one', () => {
    assert.deepEqual(convert({ serviceAccount: { annotations: { 'eks.amazonaws.com/role-arn': 'arn' } } }).deployment.spec.serviceAccount, {
      annotations: { 'eks.amazonaws.com/role-arn': 'arn' },
    });
    assert.equal(pod({ serviceAccount: { create: false, name: 'atlantis-sa' } })?.serviceAccountName, 'atlantis-sa');
    assert.equal(pod({ serviceAccount: { create: false } })?.serviceAccountName, undefined);
  });

  it("extraVolumes and mounts; the operator's names and the data dir are reported", () => {
    const r = convert({
      extraVolumes: [
        { name: 'cache', emptyDir: {} },
        { name: 'data', emptyDir: {} },
      ],
      extraVolumeMounts: [
        { name: 'cache', mountPath: '/cache' },
        { name: 'data', mountPath: '/d' },
        { name: 'cache', mountPath: '/atlantis' },
      ],
    });
    assert.deepEqual(r.deployment.spec.podTemplate?.spec?.extraVolumes, [{ name: 'cache', emptyDir: {} }]);
    assert.deepEqual(r.deployment.spec.podTemplate?.spec?.extraVolumeMounts, [{ name: 'cache', mountPath: '/cache' }]);
    assert.deepEqual(r.unmapped, [
      {
        value: 'extraVolumes[1]',
        reason: "the name data is one of the operator's volumes (data, github-app-key, repo-config, shared-state-key)",
      },
      { value: 'extraVolumeMounts[1]', reason: 'its volume data is not carried over' },
      { value: 'extraVolumeMounts[2]', reason: '/atlantis is the data dir, which the operator mounts' },
    ]);
  });

  it("files from Secrets at the chart's paths: gitconfig, netrc, AWS, a CA bundle, Google keys", () => {
    const r = convert({
      gitconfigSecretName: 'gc',
      gitconfigReadOnly: false,
      netrc: 'fixture-netrc',
      aws: { credentials: 'fixture-aws', directory: '/aws' },
      customPem: 'ca',
      googleServiceAccountSecrets: [{ name: 'gcp', secretName: 'gcp-key' }],
    });
    const p = r.deployment.spec.podTemplate?.spec;
    assert.deepEqual(p?.extraVolumeMounts, [
      { name: 'gitconfig-volume', mountPath: '/home/atlantis/.gitconfig', subPath: 'gitconfig', readOnly: true },
      { name: 'netrc-volume', mountPath: '/home/atlantis/.netrc', subPath: 'netrc', readOnly: true },
      { name: 'aws-volume', mountPath: '/aws', readOnly: true },
      { name: 'additional-trust-certs', mountPath: '/etc/ssl/certs/ca-certificates.crt', subPath: 'ca-certificates.crt' },
      { name: 'gcp', mountPath: '/var/secrets/gcp', readOnly: true },
    ]);
    assert.deepEqual(
      p?.extraVolumes?.map((v) => v.secret?.secretName),
      ['gc', 'atlantis-netrc-file', 'atlantis-aws-files', 'ca', 'gcp-key'],
    );
    assert.deepEqual(r.deployment.spec.atlantis?.env, [
      { name: 'AWS_SHARED_CREDENTIALS_FILE', value: '/aws/credentials' },
      { name: 'AWS_CONFIG_FILE', value: '/aws/config' },
      { name: 'NODE_EXTRA_CA_CERTS', value: '/etc/ssl/certs/ca-certificates.crt' },
    ]);
    assert.deepEqual(
      r.secrets.map((s) => [s.name, s.create, s.chartSecret]),
      [
        ['gc', false, undefined],
        ['atlantis-netrc-file', true, 'atlantis-netrc'],
        ['atlantis-aws-files', true, 'atlantis-aws'],
        ['ca', false, undefined],
        ['gcp-key', false, undefined],
      ],
    );
    assert.ok(r.notes.some((n) => n.value === 'gitconfigReadOnly'));
    assert.deepEqual(
      unmapped({ tlsSecretName: 'tls' }),
      one('tlsSecretName', 'this server does not support --ssl-cert-file: TLS is not served; terminate it in front of the server'),
    );
  });

  it('containers: a read-only root gets a writable home and /tmp, as in the chart; an extra container named atlantis is reported', () => {
    const p = pod({ containerSecurityContext: { readOnlyRootFilesystem: true }, extraContainers: [{ name: 'atlantis', image: 'x' }] });
    assert.deepEqual(p?.containerSecurityContext, { readOnlyRootFilesystem: true });
    assert.deepEqual(p?.extraVolumeMounts, [
      { name: 'atlantis-home-dir', mountPath: '/home/atlantis' },
      { name: 'tmp-dir', mountPath: '/tmp' },
    ]);
    assert.deepEqual(
      unmapped({ extraContainers: [{ name: 'atlantis', image: 'x' }] }),
      one('extraContainers[0]', "the name atlantis is the server container's"),
    );
  });

  it('the data volume: its size and class; the PVC where Atlantis kept atlantis.db is said', () => {
    const r = convert({ volumeClaim: { dataStorage: '20Gi', storageClassName: 'fast' } });
    assert.deepEqual(r.deployment.spec.storage, { size: '20Gi', storageClassName: 'fast' });
    assert.match(
      r.notes.find((n) => n.value === 'atlantisDataDirectory')?.reason ?? '',
      /\/atlantis-data\/atlantis.db on the PVC atlantis-data:/,
    );
    const old = convert({ dataStorage: '8Gi', storageClassName: 'slow' });
    assert.deepEqual(old.deployment.spec.storage, { size: '8Gi', storageClassName: 'slow' });
    assert.match(old.notes.find((n) => n.value === 'atlantisDataDirectory')?.reason ?? '', /on the PVC atlantis-data-atlantis-0:/);
    assert.deepEqual(unmapped({ volumeClaim: { dataStorage: 'lots' } }), one('volumeClaim.dataStorage', 'not a quantity such as 5Gi'));
  });
});

describe('migrate helm-values: the network', () => {
  it('the Service', () => {
    const r = convert({
      service: {
        type: 'LoadBalancer',
        port: '443',
        nodePort: 30443,
        loadBalancerSourceRanges: ['10.0.0.0/8'],
        extraPorts: [{ name: 'proxy', port: 8080 }],
      },
    });
    assert.deepEqual(r.deployment.spec.service, {
      type: 'LoadBalancer',
      port: 443,
      nodePort: 30443,
      extraPorts: [{ name: 'proxy', port: 8080 }],
      loadBalancerSourceRanges: ['10.0.0.0/8'],
    });
    assert.deepEqual(
      unmapped({ service: { type: 'ExternalName' } }),
      one('service.type', 'spec.service.type is one of ClusterIP, NodePort, LoadBalancer'),
    );
    assert.deepEqual(
      unmapped({ service: { type: 'ClusterIP', nodePort: 30000 } }),
      one('service.nodePort', 'a node port needs service.type NodePort or LoadBalancer'),
    );
  });

  it('an Ingress to every path: the web pages only with basic auth, else only /events', () => {
    const base = {
      enabled: true,
      host: 'atlantis.acme.com',
      path: '/*',
      ingressClassName: 'nginx',
      annotations: { a: 'b' },
      tls: [{ secretName: 't', hosts: ['atlantis.acme.com'] }],
    };
    const open = convert({ ingress: base });
    assert.deepEqual(open.deployment.spec.ingress, {
      host: 'atlantis.acme.com',
      ingressClassName: 'nginx',
      tls: [{ secretName: 't', hosts: ['atlantis.acme.com'] }],
      annotations: { a: 'b' },
      exposeUI: false,
    });
    assert.deepEqual(
      open.unmapped,
      one(
        'ingress.path',
        "the chart sends every path (the web pages, job logs, /api) to Atlantis; without basic auth the operator's Ingress sends only /events (spec.ingress.exposeUI needs spec.atlantis.basicAuth)",
      ),
    );
    const closed = convert({ ingress: base, basicAuthSecretName: 'web' });
    assert.equal(closed.deployment.spec.ingress?.exposeUI, true);
    assert.deepEqual(closed.unmapped, []);
  });

  it('webhook_ingress: the one Ingress; hosts lists and other paths reported', () => {
    const r = convert({ webhook_ingress: { enabled: true, host: 'hooks.acme.com', path: '/events' } });
    assert.deepEqual(r.deployment.spec.ingress, { host: 'hooks.acme.com', exposeUI: false });
    assert.deepEqual(
      unmapped({
        ingress: {
          enabled: true,
          hosts: [
            { host: 'a.acme.com', paths: ['/'] },
            { host: 'b.acme.com', paths: ['/'] },
          ],
        },
      }),
      one('ingress.hosts', "several hosts, or another Service: the operator's Ingress has one host, to its own Service"),
    );
    assert.equal(
      convert({ ingress: { enabled: true, hosts: [{ host: 'a.acme.com', paths: ['/events'] }] } }).deployment.spec.ingress?.host,
      'a.acme.com',
    );
    assert.deepEqual(
      unmapped({ ingress: { enabled: true, host: 'a.acme.com', path: '/atlantis/*' } }),
      one('ingress.path', "the operator's Ingress routes /events, or every path with spec.ingress.exposeUI"),
    );
    assert.deepEqual(
      unmapped({ ingress: { enabled: true, host: 'A_B' } }),
      one('ingress.host', 'not a lowercase DNS name, which spec.ingress.host must be'),
    );
  });
});
