// Revision = a stable hash of the rendered pod template (everything but the per-ordinal
// parts). Any change a user makes that changes the pod, including podTemplate annotations
// (`kubectl rollout restart` style), is a new revision.
import { createHash } from 'node:crypto';

/**
 * JSON with object keys sorted and undefined members dropped, so key order never changes a
 * hash. Plain loops and one string, not entries/sort/map: every reconcile hashes the pod
 * template and each owned object and compares statuses with it, so this is on the
 * controller's hot path.
 */
export function canonicalJSON(value: unknown): string {
  if (value === null || typeof value !== 'object') return JSON.stringify(value) ?? 'null';
  if (value instanceof Date) return JSON.stringify(value.toISOString());
  if (Array.isArray(value)) {
    let out = '[';
    for (let i = 0; i < value.length; i++) {
      if (i > 0) out += ',';
      const v: unknown = value[i];
      out += v === undefined ? 'null' : canonicalJSON(v);
    }
    return out + ']';
  }
  const o = value as Record<string, unknown>;
  let out = '{';
  let first = true;
  // Default sort order = UTF-16 code units, as `<` compares strings.
  for (const k of Object.keys(o).sort()) {
    const v = o[k];
    if (v === undefined) continue;
    if (!first) out += ',';
    first = false;
    out += JSON.stringify(k) + ':' + canonicalJSON(v);
  }
  return out + '}';
}

/** 10 hex characters of SHA-256: a valid label value, and collisions are not a practical concern. */
export function hashRevision(template: unknown): string {
  return createHash('sha256').update(canonicalJSON(template)).digest('hex').slice(0, 10);
}
