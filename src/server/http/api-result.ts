// What the API answers, as the JSON Go's encoding/json writes for Atlantis v0.47's types:
// command.Result (with its ProjectResults) for /api/plan and /api/apply, ListLocksResult for
// /api/locks, `{"error": ...}` for a refusal. Field order, names and zero values as Go emits
// them: an `error` field holds the error value's exported fields, so most errors are `{}`
// (their text is not in the answer, as in Atlantis) and a missing dir is `{"RepoRelDir":...}`
// (its DirNotExistErr); nil pointers and slices are null. Pure.
import { lockId } from '../locks/lock-id.js';
import type { LockRecord } from '../locks/state-store.js';
import type { ProjectResultView } from '../workflow/pr/messages.js';

/** command.Name, an int in Go: Apply is 0, Plan 1. */
const COMMAND_NUMBER = { apply: 0, plan: 1 } as const;

export interface GoPlanSuccess {
  TerraformOutput: string;
  LockURL: string;
  RePlanCmd: string;
  ApplyCmd: string;
  MergedAgain: boolean;
}

export interface GoProjectResult {
  /** The error value's exported fields (`{}` for most), else null. */
  Error: Record<string, string> | null;
  Failure: string;
  PlanSuccess: GoPlanSuccess | null;
  PolicyCheckResults: null;
  ApplySuccess: string;
  VersionSuccess: string;
  ImportSuccess: null;
  StateRmSuccess: null;
  Command: number;
  SubCommand: string;
  RepoRelDir: string;
  Workspace: string;
  ProjectName: string;
  SilencePRComments: null;
}

export interface GoCommandResult {
  Error: null;
  Failure: string;
  ProjectResults: GoProjectResult[];
  PlansDeleted: boolean;
}

/** A project's run as the workflow reports it (workflow/commands/project-runs.ts). */
export interface ApiProjectRun {
  view: ProjectResultView;
  /** The dir is not in the checkout (Atlantis's DirNotExistErr). */
  dirMissing?: true;
}

/** One project's result, as Atlantis's ProjectResult for a plan or an apply. */
export function projectResult(command: 'plan' | 'apply', run: ApiProjectRun): GoProjectResult {
  const v = run.view;
  const o = v.outcome;
  let planSuccess: GoPlanSuccess | null = null;
  let applySuccess = '';
  if (o.type === 'success' && command === 'plan')
    planSuccess = {
      TerraformOutput: o.output,
      LockURL: o.lockUrl ?? '',
      RePlanCmd: o.replanCmd ?? '',
      ApplyCmd: o.applyCmd ?? '',
      MergedAgain: o.mergedAgain === true,
    };
  if (o.type === 'success' && command === 'apply') applySuccess = o.output;
  return {
    // terraform's failure and an interrupted run are errors (their text is on the job page).
    Error: o.type === 'error' || o.type === 'interrupted' ? (run.dirMissing ? { RepoRelDir: v.dir } : {}) : null,
    Failure: o.type === 'failure' ? o.reason : '',
    PlanSuccess: planSuccess,
    PolicyCheckResults: null,
    ApplySuccess: applySuccess,
    VersionSuccess: '',
    ImportSuccess: null,
    StateRmSuccess: null,
    Command: COMMAND_NUMBER[command],
    SubCommand: '',
    RepoRelDir: v.dir,
    Workspace: v.workspace,
    ProjectName: v.projectName ?? '',
    SilencePRComments: null,
  };
}

export function commandResult(command: 'plan' | 'apply', runs: readonly ApiProjectRun[]): GoCommandResult {
  return { Error: null, Failure: '', ProjectResults: runs.map((r) => projectResult(command, r)), PlansDeleted: false };
}

/** Atlantis's Result.HasErrors: a project without its success value failed (the answer is then 500). */
export function resultHasErrors(r: GoCommandResult): boolean {
  return r.ProjectResults.some((p) => p.PlanSuccess === null && p.ApplySuccess === '');
}

/** Atlantis's LockDetail: PullID is an int marshalled as a string (`json:",string"`). */
export interface GoLockDetail {
  Name: string;
  ProjectName: string;
  ProjectRepo: string;
  ProjectRepoPath: string;
  PullID: string;
  PullURL: string;
  User: string;
  Workspace: string;
  Time: string;
}

/** ListLocksResult; `Locks` is null when there are none (a nil slice), as Go writes it. */
export function listLocksResult(
  locks: readonly LockRecord[],
  pullUrl: (repo: string, pull: number) => string,
): { Locks: GoLockDetail[] | null } {
  if (locks.length === 0) return { Locks: null };
  return {
    Locks: locks.map((l) => ({
      Name: lockId(l.repo, l.dir, l.workspace, l.project),
      ProjectName: l.project ?? '',
      ProjectRepo: l.repo,
      ProjectRepoPath: l.dir,
      PullID: String(l.pull),
      // A run of the API without a pull request has none.
      PullURL: l.pull > 0 ? pullUrl(l.repo, l.pull) : '',
      User: l.user,
      Workspace: l.workspace,
      Time: goTime(l.time),
    })),
  };
}

/** time.Time as Go marshals it (RFC 3339 with nanoseconds, trailing zeros dropped). */
export function goTime(iso: string): string {
  const t = new Date(iso);
  if (Number.isNaN(t.getTime())) return iso;
  return t.toISOString().replace(/\.?0+Z$/, 'Z');
}

/** The body of a refusal, as Atlantis's apiReportLegacyError writes it. */
export function apiError(message: string): { error: string } {
  return { error: message };
}

/**
 * JSON text as Go's json.Encoder writes it: HTML characters and the JavaScript line
 * separators escaped (its default), and a newline at the end. Those characters only occur
 * inside strings, so replacing them in the whole text is exact.
 */
export function goJson(value: unknown): string {
  return `${JSON.stringify(value).replace(/[<>&\u2028\u2029]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`)}\n`;
}
