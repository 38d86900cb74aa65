// Rollouts on referenced content: the Secrets and ConfigMaps the pods read (env, envFrom,
// volumes, of every container) are part of the revision, so a change to them rolls the pods
// through the same drain rollout as a spec change.
//
// What stands for an object's content (docs/controller.md, SECURITY.md):
//   ConfigMap  a SHA-256 of its data and binaryData (the controller reads ConfigMaps);
//   Secret     its resourceVersion, read as metadata only (PartialObjectMetadata): the
//              controller never receives a Secret's data, so no value, nor a hash of one
//              that could be tried against guesses, reaches the object, its status, events
//              or logs. Any write to the Secret changes it, a label too; a write that changes
//              nothing does not.
//   missing    `absent` (the pod waits for it, or it is optional).
// The pod template carries one annotation, a hash of those tokens; the revision is the hash
// of the template, so it changes with them.
import { createHash } from 'node:crypto';
import type { V1Container, V1PodSpec } from '@kubernetes/client-node';
import { GROUP } from '../types.js';
import { canonicalJSON } from './revision.js';

export const ANNOTATION_REFERENCED_CONTENT = `${GROUP}/referenced-content`;

export interface ReferencedObjects {
  secrets: string[];
  configMaps: string[];
}

/** `secret/<name>` or `configmap/<name>` -> its token. */
export type ReferencedContent = Record<string, string>;

export const contentKey = (kind: 'secret' | 'configmap', name: string): string => `${kind}/${name}`;

/** Every Secret and ConfigMap a pod with this spec reads, by name, sorted (image pull secrets are not content). */
export function referencedObjects(spec: V1PodSpec): ReferencedObjects {
  const secrets = new Set<string>();
  const configMaps = new Set<string>();
  const add = (set: Set<string>, name: string | undefined) => {
    if (name) set.add(name);
  };
  const containers: V1Container[] = [...(spec.initContainers ?? []), ...spec.containers];
  for (const c of containers) {
    for (const e of c.env ?? []) {
      add(secrets, e.valueFrom?.secretKeyRef?.name);
      add(configMaps, e.valueFrom?.configMapKeyRef?.name);
    }
    for (const f of c.envFrom ?? []) {
      add(secrets, f.secretRef?.name);
      add(configMaps, f.configMapRef?.name);
    }
  }
  for (const v of spec.volumes ?? []) {
    add(secrets, v.secret?.secretName);
    add(configMaps, v.configMap?.name);
    for (const s of v.projected?.sources ?? []) {
      add(secrets, s.secret?.name);
      add(configMaps, s.configMap?.name);
    }
  }
  return { secrets: [...secrets].sort(), configMaps: [...configMaps].sort() };
}

/** The keys of `content` a pod with this spec needs. */
export function contentKeys(refs: ReferencedObjects): string[] {
  return [...refs.secrets.map((n) => contentKey('secret', n)), ...refs.configMaps.map((n) => contentKey('configmap', n))];
}

/** A ConfigMap's token: its data, not its metadata. */
export function configMapToken(cm: { data?: Record<string, string>; binaryData?: Record<string, string> } | undefined): string {
  if (!cm) return 'absent';
  return `sha256:${createHash('sha256')
    .update(canonicalJSON({ data: cm.data ?? {}, binaryData: cm.binaryData ?? {} }))
    .digest('hex')
    .slice(0, 16)}`;
}

/** A Secret's token, from its metadata only. */
export function secretToken(meta: { resourceVersion?: string } | undefined): string {
  if (!meta) return 'absent';
  return `rv:${meta.resourceVersion ?? ''}`;
}

/**
 * The annotation value for the tokens of `keys` (16 hex characters), or undefined when the
 * pods read no Secret or ConfigMap: then nothing is added and the revision is the template's
 * alone. Throws when a token is missing: a revision made without it would change later by
 * itself and roll every pod for nothing.
 */
export function contentAnnotation(keys: string[], content: ReferencedContent): string | undefined {
  if (keys.length === 0) return undefined;
  const tokens: Record<string, string> = {};
  for (const k of keys) {
    const t = content[k];
    if (t === undefined) throw new Error(`no content token for ${k}`);
    tokens[k] = t;
  }
  return createHash('sha256').update(canonicalJSON(tokens)).digest('hex').slice(0, 16);
}
