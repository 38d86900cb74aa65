// Revision = a stable hash of the rendered pod template (everything but the per-ordinal
// parts). Any change a user makes that changes the pod, including podTemplate annotations
// (`kubectl rollout restart` style), is a new revision.
import { createHash } from 'node:crypto';

/** JSON with object keys sorted and undefined members dropped, so key order never changes a hash. */
export function canonicalJSON(value: unknown): string {
  if (value === null || typeof value !== 'object') return JSON.stringify(value) ?? 'null';
  if (value instanceof Date) return JSON.stringify(value.toISOString());
  if (Array.isArray(value)) return `[${value.map((v) => (v === undefined ? 'null' : canonicalJSON(v))).join(',')}]`;
  const entries = Object.entries(value as Record<string, unknown>)
    .filter(([, v]) => v !== undefined)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJSON(v)}`).join(',')}}`;
}

/** 10 hex characters of SHA-256: a valid label value, and collisions are not a practical concern. */
export function hashRevision(template: unknown): string {
  return createHash('sha256').update(canonicalJSON(template)).digest('hex').slice(0, 10);
}
