// A replica's heartbeat record in Redis (registry.ts), sealed with the shared state key: the
// others send it webhooks at its URL, so a record anyone could write would let them redirect
// signed webhooks. Pure. Also the one rule for a replica URL: `scheme://host:port` only.
import type { SharedStateKey } from '../locks/shared-state-key.js';
import type { ReplicaInfo } from './affinity.js';

/** A heartbeat: the replica as the others see it, and the instance (one per process start) that wrote it. */
export interface ReplicaRecord extends ReplicaInfo {
  /** Random per process start: tells two live processes under one id apart, and a restart from a rival. */
  instance: string;
}

const RECORD = 'replica/v1';
const parts = (r: ReplicaRecord) => [r.id, r.url, r.draining, r.heartbeatAt, r.instance];

/**
 * `http://host:port` or `https://host:port` and nothing else: no path (not even `/`), query,
 * fragment or user info; a host name, an IPv4 address or a bracketed IPv6 address; a port
 * from 1 to 65535. Undefined when it is one, else why not.
 */
export function replicaUrlProblem(url: string): string | undefined {
  const m = /^https?:\/\/(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+):(\d{1,5})$/.exec(url);
  if (!m) return 'must be http(s)://host:port, without a path, query, fragment or credentials';
  const port = Number(m[1]);
  if (port < 1 || port > 65535) return 'its port must be between 1 and 65535';
  return undefined;
}

export function sealReplica(key: SharedStateKey, r: ReplicaRecord): string {
  const { id, url, draining, heartbeatAt, instance } = r;
  return JSON.stringify({ id, url, draining, heartbeatAt, instance, mac: key.mac(RECORD, parts(r)) });
}

export type OpenedReplica = { ok: true; record: ReplicaRecord } | { ok: false; problem: string };

/** The record kept for replica `id`, checked: its seal, its id, its URL. */
export function openReplica(key: SharedStateKey, id: string, raw: string): OpenedReplica {
  let v: Partial<Record<keyof ReplicaRecord | 'mac', unknown>>;
  try {
    v = JSON.parse(raw) as typeof v;
  } catch {
    return { ok: false, problem: 'it is not valid JSON' };
  }
  if (
    typeof v !== 'object' ||
    v === null ||
    typeof v.id !== 'string' ||
    typeof v.url !== 'string' ||
    typeof v.draining !== 'boolean' ||
    typeof v.heartbeatAt !== 'number' ||
    typeof v.instance !== 'string'
  )
    return { ok: false, problem: 'it does not have the fields of a replica record' };
  const r: ReplicaRecord = { id: v.id, url: v.url, draining: v.draining, heartbeatAt: v.heartbeatAt, instance: v.instance };
  if (r.id !== id) return { ok: false, problem: `it is kept under replica id ${id} but names ${r.id}` };
  if (!key.verify(RECORD, parts(r), v.mac))
    return {
      ok: false,
      problem:
        v.mac === undefined
          ? 'it has no authentication code (written without the shared state key)'
          : 'its authentication code does not match (written or changed by someone without the shared state key)',
    };
  const bad = replicaUrlProblem(r.url);
  if (bad) return { ok: false, problem: `its URL ${JSON.stringify(r.url)} ${bad}` };
  return { ok: true, record: r };
}

/** The ReplicaInfo of a record (what routing uses). */
export const infoOf = (r: ReplicaRecord): ReplicaInfo => ({ id: r.id, url: r.url, draining: r.draining, heartbeatAt: r.heartbeatAt });
