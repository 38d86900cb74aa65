// Small builders for the CRD's own fields (hack/crd/*.ts): each returns a plain OpenAPI
// object, so the source reads like the schema it writes.
import type { Schema } from './k8s-schemas.js';

export type { Schema };

export interface Rule {
  rule: string;
  message?: string;
  messageExpression?: string;
  fieldPath?: string;
  reason?: string;
}

export const rules = (...r: Rule[]): Schema => ({ 'x-kubernetes-validations': r });

export const desc = (description: string | undefined): Schema => (description ? { description } : {});

export const str = (description?: string, extra: Schema = {}): Schema => ({ type: 'string', ...desc(description), ...extra });
export const bool = (description?: string, extra: Schema = {}): Schema => ({ type: 'boolean', ...desc(description), ...extra });
export const int32 = (description?: string, extra: Schema = {}): Schema => ({
  type: 'integer',
  format: 'int32',
  ...desc(description),
  ...extra,
});
export const int64 = (description?: string, extra: Schema = {}): Schema => ({
  type: 'integer',
  format: 'int64',
  ...desc(description),
  ...extra,
});

export const obj = (properties: Record<string, Schema>, extra: Schema = {}): Schema => {
  const { description, ...rest } = extra;
  return { type: 'object', ...(description ? { description } : {}), ...rest, properties };
};

/** A map of strings; `maxProperties` bounds the cost of a CEL rule over its keys. */
export const stringMap = (description?: string, extra: Schema = {}): Schema => ({
  type: 'object',
  ...desc(description),
  ...extra,
  additionalProperties: { type: 'string' },
});

/** A key of a Secret or ConfigMap in the object's namespace: `{name, key}`, both non-empty. */
export function keyRef(path: string, description: string, opts: { keyDefault?: string } = {}): Schema {
  return {
    type: 'object',
    description,
    required: opts.keyDefault === undefined ? ['name', 'key'] : ['name'],
    properties: {
      name: { type: 'string', maxLength: 253 },
      key: { type: 'string', maxLength: 253, ...(opts.keyDefault !== undefined ? { default: opts.keyDefault } : {}) },
    },
    'x-kubernetes-validations': [
      { rule: 'size(self.name) > 0 && size(self.key) > 0', message: `${path} needs a non-empty name and key` },
      { rule: "self.key.matches('^[-._a-zA-Z0-9]*$')", message: `${path}.key may contain only letters, digits, '-', '_' and '.'` },
    ],
  };
}

export const secretKeyRef = (path: string, description: string): Schema => keyRef(path, description);

/** Labels a user may add to an object the operator labels: never the keys it selects by. */
export function userLabels(path: string, description?: string): Schema {
  return stringMap(description, {
    // Bounds the cost of the CEL rule below.
    maxProperties: 128,
    'x-kubernetes-validations': [
      {
        rule: "self.all(k, !(k in ['app.kubernetes.io/name', 'app.kubernetes.io/instance', 'app.kubernetes.io/managed-by']) && !k.startsWith('atlantis-operator.dev/'))",
        message: `${path} must not set app.kubernetes.io/name, instance, managed-by or atlantis-operator.dev/* labels: the operator selects pods by them`,
      },
    ],
  });
}

/** Annotations a user may add: never the operator's own (atlantis-operator.dev/*). */
export function userAnnotations(path: string, what: string, description?: string): Schema {
  return stringMap(description, {
    maxProperties: 128,
    'x-kubernetes-validations': [
      {
        rule: "self.all(k, !k.startsWith('atlantis-operator.dev/'))",
        message: `${path} must not set atlantis-operator.dev/* annotations${what}`,
      },
    ],
  });
}

/** A list of a Kubernetes type, bounded (the apiserver's cost estimate of any rule under it depends on the bound). */
export const listOf = (items: Schema, maxItems: number, description?: string, extra: Schema = {}): Schema => {
  const { 'x-kubernetes-list-type': lt, 'x-kubernetes-list-map-keys': lk, ...rest } = extra;
  return {
    type: 'array',
    ...desc(description),
    maxItems,
    ...(lt ? { 'x-kubernetes-list-type': lt } : {}),
    ...(lk ? { 'x-kubernetes-list-map-keys': lk } : {}),
    ...rest,
    items,
  };
};

/** `schema` with a description and more keys in front of its own (a Kubernetes type used as a field). */
export const described = (schema: Schema, description: string, extra: Schema = {}): Schema => ({ description, ...extra, ...schema });

/** The item schema of a Kubernetes list field with its list markers (`x-kubernetes-list-*`) moved to `extra`. */
export function listMarkers(list: Schema): Schema {
  const out: Schema = {};
  for (const k of ['x-kubernetes-list-type', 'x-kubernetes-list-map-keys']) if (list[k] !== undefined) out[k] = list[k];
  return out;
}
