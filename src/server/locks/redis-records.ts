// The records the Redis store keeps that decide what runs, sealed with the shared state key
// (shared-state-key.ts) when written and opened (parsed, shape-checked, code checked) when read.
// Pure. A record's code covers where it is kept too (the pull request, project, replica and
// id its key and field name), so a valid record copied elsewhere fails its check.
//
// - a plan: what an apply runs (its file's sha256, the head it was made from, the project);
// - an accepted command: what a restart or a takeover runs (the work item, its PR, its user);
// - a queued command: what runs after a drain;
// - a job: what a restart reports as interrupted, and on which PR;
// - a PR's status: with policy checks, which sets passed and who approved them.
import type { MacPart, SharedStateKey } from './shared-state-key.js';
import type { PullStatus } from './pull-status.js';
import type { AcceptedCommand, JobRecord, JobStart, PlanRecord, QueuedCommand } from './state-store.js';

export type Opened<T> = { ok: true; value: T } | { ok: false; problem: string };

/** Why a record failed: said to logs and (for a plan) to the PR. */
export const NOT_JSON = 'it is not valid JSON';
export const MALFORMED = 'it does not have the fields of such a record';
export const NO_CODE = 'it has no authentication code (written without the shared state key)';
export const BAD_CODE = 'its authentication code does not match (written or changed by someone without the shared state key, or moved)';

function parseObject(raw: string): Opened<Record<string, unknown>> {
  let v: unknown;
  try {
    v = JSON.parse(raw);
  } catch {
    return { ok: false, problem: NOT_JSON };
  }
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return { ok: false, problem: MALFORMED };
  return { ok: true, value: v as Record<string, unknown> };
}

const isStr = (v: unknown): v is string => typeof v === 'string';
const isOptStr = (v: unknown): v is string | undefined => v === undefined || typeof v === 'string';
const isInt = (v: unknown): v is number => typeof v === 'number' && Number.isSafeInteger(v);

function checked<T>(key: SharedStateKey, kind: string, parts: MacPart[], mac: unknown, value: T): Opened<T> {
  if (mac === undefined) return { ok: false, problem: NO_CODE };
  return key.verify(kind, parts, mac) ? { ok: true, value } : { ok: false, problem: BAD_CODE };
}

// ---- plans ---------------------------------------------------------------------------

/** Where a plan record is kept: the pull request of its key and the dir and workspace of its field. */
export interface PlanPlace {
  repo: string;
  pull: number;
  dir: string;
  workspace: string;
}

/** A plan as kept in Redis: no planPath (each replica has its own), the bytes' hash and size, who made it. */
export interface StoredPlan extends Omit<PlanRecord, 'planPath' | 'unverified'> {
  fileSha256?: string;
  fileSize?: number;
  /** The replica that ran the plan: its own plan file is never replaced from Redis. */
  madeBy: string;
}

const PLAN = 'plan/v1';
const planParts = (at: PlanPlace, r: StoredPlan): MacPart[] => [
  at.repo,
  at.pull,
  at.dir,
  at.workspace,
  r.project ?? null,
  r.headSha,
  r.planSha256 ?? null,
  r.fileSha256 ?? null,
  r.fileSize ?? null,
  r.createdAt,
  r.madeBy,
];

export function sealPlan(key: SharedStateKey, r: StoredPlan): string {
  return JSON.stringify({ ...r, mac: key.mac(PLAN, planParts(r, r)) });
}

/** The record kept at `at`, checked; its place fields are always `at`'s (never what the record says). */
export function openPlan(key: SharedStateKey, at: PlanPlace, raw: string): Opened<StoredPlan> {
  const o = parseObject(raw);
  if (!o.ok) return o;
  const v = o.value;
  if (
    !isStr(v.headSha) ||
    !isStr(v.createdAt) ||
    !isStr(v.madeBy) ||
    !isOptStr(v.project) ||
    !isOptStr(v.planSha256) ||
    !isOptStr(v.fileSha256) ||
    !(v.fileSize === undefined || isInt(v.fileSize))
  )
    return { ok: false, problem: MALFORMED };
  if (v.repo !== at.repo || v.pull !== at.pull || v.dir !== at.dir || v.workspace !== at.workspace) return { ok: false, problem: BAD_CODE };
  const r: StoredPlan = {
    repo: at.repo,
    pull: at.pull,
    dir: at.dir,
    workspace: at.workspace,
    headSha: v.headSha,
    createdAt: v.createdAt,
    madeBy: v.madeBy,
  };
  if (v.project !== undefined) r.project = v.project;
  if (v.planSha256 !== undefined) r.planSha256 = v.planSha256;
  if (v.fileSha256 !== undefined) r.fileSha256 = v.fileSha256;
  if (v.fileSize !== undefined) r.fileSize = v.fileSize;
  return checked(key, PLAN, planParts(at, r), v.mac, r);
}

// ---- accepted commands ----------------------------------------------------------------

const COMMAND = 'command/v1';
const commandParts = (replicaId: string, c: AcceptedCommand): MacPart[] => [
  replicaId,
  c.id,
  c.repo,
  c.pull,
  JSON.stringify(c.payload ?? null),
  c.acceptedAt,
];

/** An accepted command of `replicaId`'s journal (without startedAt, which is kept beside it). */
export function sealCommand(key: SharedStateKey, replicaId: string, c: Omit<AcceptedCommand, 'startedAt'>): string {
  return JSON.stringify({ ...c, mac: key.mac(COMMAND, commandParts(replicaId, c)) });
}

/** The entry `id` of `replicaId`'s journal, checked, with its order (`seq`, which the store's script adds). */
export function openCommand(key: SharedStateKey, replicaId: string, id: string, raw: string): Opened<AcceptedCommand & { seq: number }> {
  const o = parseObject(raw);
  if (!o.ok) return o;
  const v = o.value;
  if (v.id !== id || !isStr(v.repo) || !isInt(v.pull) || !isStr(v.acceptedAt) || !isInt(v.seq) || !('payload' in v))
    return { ok: false, problem: MALFORMED };
  const c = { id, repo: v.repo, pull: v.pull, payload: v.payload, acceptedAt: v.acceptedAt };
  return checked(key, COMMAND, commandParts(replicaId, c), v.mac, { ...c, seq: v.seq });
}

// ---- queued commands -----------------------------------------------------------------

const QUEUED = 'queued/v1';
const queuedParts = (q: Omit<QueuedCommand, 'id'>): MacPart[] => [q.repo, q.pull, JSON.stringify(q.payload ?? null), q.enqueuedAt];

/** A queued command without its id (the store's script prepends it). */
export function sealQueued(key: SharedStateKey, q: Omit<QueuedCommand, 'id'>): string {
  return JSON.stringify({ ...q, mac: key.mac(QUEUED, queuedParts(q)) });
}

export function openQueued(key: SharedStateKey, raw: string): Opened<QueuedCommand> {
  const o = parseObject(raw);
  if (!o.ok) return o;
  const v = o.value;
  if (!isInt(v.id) || !isStr(v.repo) || !isInt(v.pull) || !isStr(v.enqueuedAt) || !('payload' in v))
    return { ok: false, problem: MALFORMED };
  const q = { repo: v.repo, pull: v.pull, payload: v.payload, enqueuedAt: v.enqueuedAt };
  return checked(key, QUEUED, queuedParts(q), v.mac, { id: v.id, ...q });
}

// ---- jobs ----------------------------------------------------------------------------

const JOB = 'job/v1';
/** A job's start as kept: the JobStart, its time, the replica that runs it. */
export interface StoredJob extends JobStart {
  startedAt: string;
  replicaId: string;
}
const jobParts = (id: string, j: StoredJob): MacPart[] => [
  id,
  j.command,
  j.repo,
  j.pull,
  j.project ?? null,
  j.dir ?? null,
  j.workspace ?? null,
  j.startedAt,
  j.replicaId,
];

export function sealJob(key: SharedStateKey, j: StoredJob): string {
  return JSON.stringify({ ...j, mac: key.mac(JOB, jobParts(j.id, j)) });
}

/** The job record of field `id`, checked. */
export function openJob(key: SharedStateKey, id: string, raw: string): Opened<StoredJob> {
  const o = parseObject(raw);
  if (!o.ok) return o;
  const v = o.value;
  if (
    v.id !== id ||
    !isStr(v.command) ||
    !isStr(v.repo) ||
    !isInt(v.pull) ||
    !isStr(v.startedAt) ||
    !isStr(v.replicaId) ||
    !isOptStr(v.project) ||
    !isOptStr(v.dir) ||
    !isOptStr(v.workspace)
  )
    return { ok: false, problem: MALFORMED };
  const j: StoredJob = { id, command: v.command, repo: v.repo, pull: v.pull, startedAt: v.startedAt, replicaId: v.replicaId };
  if (v.project !== undefined) j.project = v.project;
  if (v.dir !== undefined) j.dir = v.dir;
  if (v.workspace !== undefined) j.workspace = v.workspace;
  return checked(key, JOB, jobParts(id, j), v.mac, j);
}

/** A job's end as kept (not sealed: it decides nothing that runs), or undefined when it is not one. */
export function openJobEnd(raw: string | null): Pick<JobRecord, 'finishedAt' | 'result' | 'summary'> | undefined {
  if (raw === null) return undefined;
  const o = parseObject(raw);
  if (!o.ok || !isStr(o.value.finishedAt) || !isStr(o.value.result) || !isOptStr(o.value.summary)) return undefined;
  const { finishedAt, result, summary } = o.value;
  return { finishedAt, result: result as JobRecord['result'], ...(summary !== undefined ? { summary } : {}) };
}

// ---- pull statuses ----------------------------------------------------------------------

const PULL_STATUS = 'pull-status/v1';

/**
 * A PR's status sealed as a whole: with policy checks it carries which policy sets passed and
 * who approved them, which decides whether an apply may run. The code covers the PR it is kept
 * under and the status's exact JSON.
 */
export function sealPullStatus(key: SharedStateKey, repo: string, pull: number, ps: PullStatus): string {
  const json = JSON.stringify(ps);
  return `${json.slice(0, -1)},"mac":${JSON.stringify(key.mac(PULL_STATUS, [repo, pull, json]))}}`;
}

export function openPullStatus(key: SharedStateKey, repo: string, pull: number, raw: string): Opened<PullStatus> {
  const o = parseObject(raw);
  if (!o.ok) return o;
  const { mac, ...rest } = o.value;
  if (!isStr(rest.headSha) || !Array.isArray(rest.projects)) return { ok: false, problem: MALFORMED };
  const ps = rest as unknown as PullStatus;
  return checked(key, PULL_STATUS, [repo, pull, JSON.stringify(ps)], mac, ps);
}
