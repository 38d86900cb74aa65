// The SQLite store's rows and their mapping to the records the rest of the server uses.
import type { AcceptedCommand, JobRecord, JobResult, LockRecord, PlanRecord, QueuedCommand } from './state-store.js';

export interface LockRow {
  repo: string;
  dir: string;
  workspace: string;
  pull: number;
  user: string;
  project: string | null;
  time: string;
}

export interface PlanRow {
  repo: string;
  pull: number;
  dir: string;
  workspace: string;
  project: string | null;
  plan_path: string;
  head_sha: string;
  plan_sha256: string | null;
  created_at: string;
}

export interface JobRow {
  id: string;
  command: string;
  repo: string;
  pull: number;
  project: string | null;
  dir: string | null;
  workspace: string | null;
  started_at: string;
  finished_at: string | null;
  result: string | null;
  summary: string | null;
}

export const toLock = (r: LockRow): LockRecord => {
  const l: LockRecord = { repo: r.repo, dir: r.dir, workspace: r.workspace, pull: r.pull, user: r.user, time: r.time };
  if (r.project !== null) l.project = r.project;
  return l;
};

export const toPlan = (r: PlanRow): PlanRecord => {
  const p: PlanRecord = {
    repo: r.repo,
    pull: r.pull,
    dir: r.dir,
    workspace: r.workspace,
    planPath: r.plan_path,
    headSha: r.head_sha,
    createdAt: r.created_at,
  };
  if (r.project !== null) p.project = r.project;
  if (r.plan_sha256 !== null) p.planSha256 = r.plan_sha256;
  return p;
};

export const toJob = (r: JobRow): JobRecord => {
  const j: JobRecord = { id: r.id, command: r.command, repo: r.repo, pull: r.pull, startedAt: r.started_at };
  if (r.project !== null) j.project = r.project;
  if (r.dir !== null) j.dir = r.dir;
  if (r.workspace !== null) j.workspace = r.workspace;
  if (r.finished_at !== null) j.finishedAt = r.finished_at;
  if (r.result !== null) j.result = r.result as JobResult;
  if (r.summary !== null) j.summary = r.summary;
  return j;
};

export interface QueueRow {
  id: number;
  repo: string;
  pull: number;
  payload: string;
  enqueued_at: string;
}

export const toQueued = (r: QueueRow): QueuedCommand => ({
  id: r.id,
  repo: r.repo,
  pull: r.pull,
  payload: JSON.parse(r.payload) as unknown,
  enqueuedAt: r.enqueued_at,
});

export interface CommandRow {
  id: string;
  repo: string;
  pull: number;
  payload: string;
  accepted_at: string;
  started_at: string | null;
}

export const toAccepted = (r: CommandRow): AcceptedCommand => ({
  id: r.id,
  repo: r.repo,
  pull: r.pull,
  payload: JSON.parse(r.payload) as unknown,
  acceptedAt: r.accepted_at,
  ...(r.started_at !== null ? { startedAt: r.started_at } : {}),
});
