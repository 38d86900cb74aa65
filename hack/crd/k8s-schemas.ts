// Kubernetes' own schemas, inlined as structural CRD schemas: read from the OpenAPI v3 of
// the Kubernetes release the project builds against (k8s.io/kubernetes pinned in
// hack/k8s/go.mod, api/openapi-spec/v3 in the Go module cache), never written by hand.
//
// What a CRD schema must be (structural, apiextensions.k8s.io/v1) and the OpenAPI is not:
//   - no $ref or allOf-of-a-$ref: every reference is inlined (core types are not recursive);
//   - Quantity and IntOrString: `x-kubernetes-int-or-string` with the anyOf pair, and for
//     Quantity the pattern of its syntax (as controller-gen writes it), so `memory: 2GB` is
//     refused at `kubectl apply` (a float such as `cpu: 0.5` must then be quoted or `500m`);
//   - no x-kubernetes-patch-* markers (strategic merge patch does not exist for custom
//     resources; the apiserver does not know them); list types, map keys and map types stay;
//   - defaults only where a list-map key needs one (a key must be required or defaulted,
//     e.g. a container port's protocol TCP); the others (`name: ""`) would let a missing
//     required name through as an empty one;
//   - an embedded ObjectMeta (an ephemeral volume's claim template) keeps only labels and
//     annotations, the parts of it a template may set;
//   - descriptions dropped: the field is documented by Kubernetes, and they would make the
//     CRD several times larger (the etcd object limit is about 1.5 MiB).
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

export type Schema = { [k: string]: unknown };

const CORE = 'io.k8s.api.core.v1.';
const NETWORKING = 'io.k8s.api.networking.v1.';
/** The OpenAPI documents read: core/v1 and networking.k8s.io/v1 (the Ingress's types). */
const DOCUMENTS = ['api__v1_openapi.json', 'apis__networking.k8s.io__v1_openapi.json'];
const QUANTITY = 'io.k8s.apimachinery.pkg.api.resource.Quantity';
const INT_OR_STRING = 'io.k8s.apimachinery.pkg.util.intstr.IntOrString';
const OBJECT_META = 'io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta';
const TIME = 'io.k8s.apimachinery.pkg.apis.meta.v1.Time';

/** controller-gen's pattern for resource.Quantity (the same syntax the apiserver parses). */
export const QUANTITY_PATTERN =
  '^(\\+|-)?(([0-9]+(\\.[0-9]*)?)|(\\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\\+|-)?(([0-9]+(\\.[0-9]*)?)|(\\.[0-9]+))))?$';

const DROPPED_KEYS = new Set(['description', 'x-kubernetes-patch-merge-key', 'x-kubernetes-patch-strategy', 'x-kubernetes-unions']);

/** The directory of k8s.io/kubernetes at the version hack/k8s/go.mod pins (downloaded into the module cache if missing). */
export function kubernetesModuleDir(repoRoot: string): { dir: string; version: string } {
  const out = execFileSync('go', ['mod', 'download', '-json', 'k8s.io/kubernetes'], {
    cwd: path.join(repoRoot, 'hack/k8s'),
    encoding: 'utf8',
    env: { ...process.env, GOFLAGS: '-mod=mod' },
  });
  const info = JSON.parse(out) as { Dir?: string; Version?: string; Error?: string };
  if (!info.Dir || !info.Version) throw new Error(`go mod download k8s.io/kubernetes: ${info.Error ?? out}`);
  return { dir: info.Dir, version: info.Version };
}

export class KubernetesSchemas {
  private readonly defs: Record<string, Schema>;

  constructor(
    openapiV3Documents: string[],
    readonly version: string,
  ) {
    this.defs = {};
    for (const json of openapiV3Documents) {
      const doc = JSON.parse(json) as { components: { schemas: Record<string, Schema> } };
      Object.assign(this.defs, doc.components.schemas);
    }
  }

  static load(repoRoot: string): KubernetesSchemas {
    const { dir, version } = kubernetesModuleDir(repoRoot);
    const docs = DOCUMENTS.map((f) => fs.readFileSync(path.join(dir, 'api/openapi-spec/v3', f), 'utf8'));
    return new KubernetesSchemas(docs, version);
  }

  /** The structural schema of a core/v1 type (`Container`) or of a field of one (`PodSpec.imagePullSecrets`). */
  core(name: string): Schema {
    return this.type(CORE, name);
  }

  /** The same for networking.k8s.io/v1 (`IngressTLS`). */
  networking(name: string): Schema {
    return this.type(NETWORKING, name);
  }

  private type(prefix: string, name: string): Schema {
    const [type, field] = name.split('.');
    const def = this.defs[prefix + type];
    if (!def) throw new Error(`no type ${prefix}${type} in the Kubernetes ${this.version} OpenAPI`);
    if (field === undefined) return this.inline(def, new Set([prefix + type]));
    const props = def.properties as Record<string, Schema> | undefined;
    const f = props?.[field];
    if (!f) throw new Error(`${prefix}${type} has no field ${field} in Kubernetes ${this.version}`);
    return this.inline(f, new Set([prefix + type]));
  }

  /** The names of a core/v1 type's fields (e.g. a Volume's sources, for a rule that wants one of them). */
  coreFields(type: string): string[] {
    const def = this.defs[CORE + type];
    if (!def) throw new Error(`no core/v1 type ${type}`);
    return Object.keys((def.properties ?? {}) as Record<string, Schema>).sort();
  }

  private resolve(ref: string): [string, Schema] {
    const name = ref.replace('#/components/schemas/', '');
    const def = this.defs[name];
    if (!def) throw new Error(`unresolved $ref ${ref}`);
    return [name, def];
  }

  private inline(node: Schema, seen: Set<string>): Schema {
    // A reference, bare or as `allOf: [{$ref}]` beside a description.
    const ref =
      typeof node.$ref === 'string'
        ? node.$ref
        : Array.isArray(node.allOf) && node.allOf.length === 1 && typeof (node.allOf[0] as Schema).$ref === 'string'
          ? ((node.allOf[0] as Schema).$ref as string)
          : undefined;
    if (ref !== undefined) {
      const [name, def] = this.resolve(ref);
      const special = specialType(name);
      if (special) return special;
      if (seen.has(name)) throw new Error(`recursive type ${name}: cannot be inlined`);
      const inner = this.inline(def, new Set([...seen, name]));
      // A default beside the reference (`resources: {default: {}}`) is dropped like others.
      return inner;
    }
    const out: Schema = {};
    const required = new Set((node.required as string[] | undefined) ?? []);
    for (const [k, v] of Object.entries(node)) {
      if (DROPPED_KEYS.has(k) || k === 'default') continue;
      if (k === 'properties') {
        const props: Record<string, Schema> = {};
        for (const [pk, pv] of Object.entries(v as Record<string, Schema>)) props[pk] = this.inline(pv, seen);
        out.properties = props;
      } else if (k === 'items' || k === 'additionalProperties') {
        out[k] = typeof v === 'object' && v !== null ? this.inline(v as Schema, seen) : v;
      } else out[k] = v;
    }
    // List-map keys must be required or defaulted: keep the OpenAPI default of a key that is not required.
    const keys = node['x-kubernetes-list-map-keys'] as string[] | undefined;
    if (keys && out.items) {
      const items = out.items as Schema;
      const itemDef = this.itemDefinition(node);
      const itemRequired = new Set((itemDef?.required as string[] | undefined) ?? []);
      const itemProps = (itemDef?.properties ?? {}) as Record<string, Schema>;
      const props = items.properties as Record<string, Schema>;
      for (const key of keys) {
        if (itemRequired.has(key)) continue;
        const d = itemProps[key]?.default;
        if (d === undefined) throw new Error(`list-map key ${key} is neither required nor defaulted`);
        props[key] = { ...props[key], default: d };
      }
    }
    if (required.size > 0) out.required = [...required].sort();
    return out;
  }

  private itemDefinition(listNode: Schema): Schema | undefined {
    const items = listNode.items as Schema | undefined;
    if (!items) return undefined;
    if (typeof items.$ref === 'string') return this.resolve(items.$ref)[1];
    return items;
  }
}

function specialType(name: string): Schema | undefined {
  if (name === QUANTITY)
    return { anyOf: [{ type: 'integer' }, { type: 'string' }], pattern: QUANTITY_PATTERN, 'x-kubernetes-int-or-string': true };
  if (name === INT_OR_STRING) return { anyOf: [{ type: 'integer' }, { type: 'string' }], 'x-kubernetes-int-or-string': true };
  if (name === OBJECT_META) {
    const stringMap = { type: 'object', additionalProperties: { type: 'string' } };
    return { type: 'object', properties: { labels: stringMap, annotations: stringMap } };
  }
  if (name === TIME) return { type: 'string', format: 'date-time' };
  return undefined;
}
