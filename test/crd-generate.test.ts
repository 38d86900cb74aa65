// The CRD is generated (hack/crd/generate.ts, `make crds`) from hack/crd/*.ts and the OpenAPI
// of the Kubernetes release in hack/k8s/go.mod: the committed crds/ file and the chart's copy
// are exactly its output; the Kubernetes types in it are the release's own schemas, never
// `x-kubernetes-preserve-unknown-fields`; its size leaves room under the limits that apply
// to it (etcd's object size, and client-side apply's annotation).
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { before, test } from 'node:test';
import { parse } from 'yaml';
import { CRD_OUTPUTS, renderCrd, repoRoot } from '../hack/crd/generate.js';
import { KubernetesSchemas } from '../hack/crd/k8s-schemas.js';

let k8s: KubernetesSchemas;
let generated: string;
before(() => {
  k8s = KubernetesSchemas.load(repoRoot);
  generated = renderCrd(k8s);
});

test('crds/ and the chart hold exactly the generator output (run `make crds` after changing hack/crd/)', () => {
  for (const file of CRD_OUTPUTS)
    assert.ok(fs.readFileSync(file, 'utf8') === generated, `${file} differs from the generator's output: run make crds`);
});

test('the generator reads the Kubernetes release the project builds against', () => {
  const pinned = /k8s\.io\/kubernetes (v[0-9.]+)/.exec(fs.readFileSync(`${repoRoot}/hack/k8s/go.mod`, 'utf8'))?.[1];
  assert.equal(k8s.version, pinned);
  assert.match(generated, new RegExp(`OpenAPI of Kubernetes ${pinned!.replace(/\./g, '\\.')}`));
});

type Node = Record<string, unknown>;
const spec = (): Node => {
  const crd = parse(generated) as { spec: { versions: Array<{ schema: { openAPIV3Schema: Node } }> } };
  return (crd.spec.versions[0]!.schema.openAPIV3Schema.properties as Record<string, Node>).spec!;
};
const at = (n: Node, path: string): Node =>
  path.split('.').reduce((acc, k) => {
    const next = k === '[]' ? acc.items : (acc.properties as Record<string, Node> | undefined)?.[k];
    assert.ok(next, `no ${path} in the CRD (at ${k})`);
    return next as Node;
  }, n);

test('Kubernetes types carry their real schemas: no preserve-unknown-fields, $ref or patch markers anywhere', () => {
  const text = JSON.stringify(spec());
  for (const banned of ['x-kubernetes-preserve-unknown-fields', '$ref', 'x-kubernetes-patch-strategy', 'x-kubernetes-patch-merge-key'])
    assert.ok(!text.includes(banned), `${banned} in the spec schema`);
  const s = spec();
  // The real schema of each type, as the release has it (Kubernetes' own fields, not a copy of ours).
  const rows: Array<[string, string]> = [
    ['podTemplate.spec.resources', 'ResourceRequirements'],
    ['podTemplate.spec.affinity', 'Affinity'],
    ['podTemplate.spec.securityContext', 'PodSecurityContext'],
    ['podTemplate.spec.containerSecurityContext', 'SecurityContext'],
    ['podTemplate.spec.dnsConfig', 'PodDNSConfig'],
    ['podTemplate.spec.lifecycle', 'Lifecycle'],
    ['podTemplate.spec.extraVolumes.[]', 'Volume'],
    ['podTemplate.spec.extraVolumeMounts.[]', 'VolumeMount'],
    ['podTemplate.spec.initContainers.[]', 'Container'],
    ['podTemplate.spec.extraContainers.[]', 'Container'],
    ['podTemplate.spec.tolerations.[]', 'Toleration'],
    ['podTemplate.spec.topologySpreadConstraints.[]', 'TopologySpreadConstraint'],
    ['podTemplate.spec.hostAliases.[]', 'HostAlias'],
    ['podTemplate.spec.imagePullSecrets.[]', 'LocalObjectReference'],
    ['atlantis.envFrom.[]', 'EnvFromSource'],
  ];
  for (const [path, type] of rows) {
    const { 'x-kubernetes-validations': _rules, description: _d, ...got } = at(s, path);
    const want = k8s.core(type);
    assert.deepEqual(
      Object.keys(got.properties as Node).sort(),
      Object.keys(want.properties as Node).sort(),
      `${path}: the fields of ${type}`,
    );
    assert.deepEqual(
      { ...got, properties: undefined },
      { ...want, properties: undefined },
      `${path}: ${type}'s own required fields, list types and bounds`,
    );
  }
  // Quantities: int-or-string with the syntax's pattern (so `memory: 2GB` is refused).
  const memory = at(s, 'podTemplate.spec.resources.limits').additionalProperties as Node;
  assert.equal(memory['x-kubernetes-int-or-string'], true);
  assert.equal(typeof memory.pattern, 'string');
  // A list-map key that is not required keeps its default (the apiserver wants one or the other).
  const port = at(s, 'podTemplate.spec.extraContainers.[].ports.[]');
  assert.equal((port.properties as Record<string, Node>).protocol!.default, 'TCP');
});

test('size: far under etcd object limit, and small enough for client-side apply (kubectl apply without --server-side)', () => {
  const json = JSON.stringify(parse(generated));
  // etcd refuses objects over ~1.5 MiB; kubectl's last-applied-configuration annotation (the
  // object as JSON) must fit in the 256 KiB of all annotations. Both leave room to grow.
  assert.ok(generated.length < 512 * 1024, `YAML ${generated.length} bytes`);
  assert.ok(json.length < 160 * 1024, `JSON ${json.length} bytes`);
});
