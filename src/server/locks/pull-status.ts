// A pull request's plan status, as Atlantis keeps it: for the PR's head commit, one record
// per project saying where it is in the plan/apply cycle. The PR-wide commit statuses
// (`atlantis/plan`, `atlantis/apply`) and the checks before a generic `apply` are pure
// functions of it, with Atlantis v0.47's rules and texts. No I/O here.
import { createHash } from 'node:crypto';
import type { PolicySetStatus } from '../policy/policy-results.js';

/** Atlantis's ProjectPlanStatus names (they appear in its error texts). */
export type ProjectPlanStatus =
  | 'plan_errored'
  | 'planned'
  | 'planned_no_changes'
  | 'apply_errored'
  | 'applied'
  | 'plan_discarded'
  | 'policy_check_errored'
  | 'policy_check_passed';

export interface ProjectKey {
  dir: string;
  workspace: string;
  /** '' for a project without a name, as Atlantis stores it. */
  project: string;
}

export interface ProjectStatusRecord extends ProjectKey {
  status: ProjectPlanStatus;
  /** Each policy set's last result and approvals (policy checks on); absent before any check. */
  policyStatus?: PolicySetStatus[];
}

export interface PullStatus {
  /** The head commit the records are for; a newer head starts a fresh status. */
  headSha: string;
  projects: ProjectStatusRecord[];
}

/** What one project's command ended with, enough to derive its status. */
export interface ProjectOutcome extends ProjectKey {
  command: 'plan' | 'apply' | 'import' | 'state' | 'policy_check' | 'approve_policies';
  ok: boolean;
  /** plan only: the plan has no changes. */
  noChanges?: boolean;
  /** policy_check and approve_policies: the sets' results and approvals. */
  policyStatus?: PolicySetStatus[];
}

export const sameProject = (a: ProjectKey, b: ProjectKey): boolean =>
  a.dir === b.dir && a.workspace === b.workspace && a.project === b.project;

/** A project's status after a command, as Atlantis's ProjectResult.PlanStatus(). */
export function statusAfter(o: ProjectOutcome): ProjectPlanStatus {
  switch (o.command) {
    case 'plan':
      if (!o.ok) return 'plan_errored';
      return o.noChanges ? 'planned_no_changes' : 'planned';
    case 'apply':
      return o.ok ? 'applied' : 'apply_errored';
    case 'policy_check':
    case 'approve_policies':
      return o.ok ? 'policy_check_passed' : 'policy_check_errored';
    default:
      // import and state rm change the state: the plan is stale.
      return o.ok ? 'plan_discarded' : 'plan_errored';
  }
}

const record = (o: ProjectOutcome): ProjectStatusRecord => ({
  dir: o.dir,
  workspace: o.workspace,
  project: o.project,
  status: statusAfter(o),
  ...(o.policyStatus && o.policyStatus.length > 0 ? { policyStatus: o.policyStatus } : {}),
});

/**
 * The status after a command's results, as Atlantis's UpdatePullWithResults: for another
 * head (or none yet) the results replace everything; for the same head they are merged,
 * so `apply -d dir1` leaves dir2's record as it was. Policy statuses: a fresh head keeps a
 * project's earlier ones until its policy check writes new ones; on the same head a result
 * replaces the sets it names and keeps the others.
 */
export function mergePullStatus(current: PullStatus | undefined, headSha: string, outcomes: ProjectOutcome[]): PullStatus {
  const fresh = current === undefined || current.headSha !== headSha;
  if (fresh) {
    const projects = outcomes.map(record);
    for (const p of projects) {
      const old = current?.projects.find((c) => sameProject(c, p));
      if (old?.policyStatus && old.policyStatus.length > 0) p.policyStatus = old.policyStatus;
    }
    return { headSha, projects };
  }
  const projects = current.projects.map((p) => ({ ...p }));
  for (const o of outcomes) {
    const existing = projects.find((p) => sameProject(p, o));
    if (!existing) {
      projects.push(record(o));
      continue;
    }
    existing.status = statusAfter(o);
    const incoming = o.policyStatus ?? [];
    if (existing.policyStatus && existing.policyStatus.length > 0)
      existing.policyStatus = existing.policyStatus.map((old) => incoming.find((n) => n.policySetName === old.policySetName) ?? old);
    else if (incoming.length > 0) existing.policyStatus = incoming;
  }
  return { headSha, projects };
}

export type CombinedState = 'pending' | 'success' | 'failure';

export interface CombinedStatus {
  state: CombinedState;
  description: string;
}

export interface ProjectCounts {
  success: number;
  total: number;
  errored: number;
  noChanges: number;
}

const count = (ps: PullStatus, s: ProjectPlanStatus): number => ps.projects.filter((p) => p.status === s).length;

/** "Plan", "Apply", "Policy_check": Atlantis's title case of a command name. */
const title = (cmd: string): string => cmd.charAt(0).toUpperCase() + cmd.slice(1);

/** Atlantis's UpdateCombined description, a state without counts ("Plan in progress..."). */
export function combinedDescription(cmd: 'plan' | 'apply' | 'policy_check', state: CombinedState): string {
  const words = state === 'pending' ? 'in progress...' : state === 'failure' ? 'failed.' : 'succeeded.';
  return `${title(cmd)} ${words}`;
}

/** Atlantis's UpdateCombinedCount description for a state and counts. */
export function countsDescription(cmd: 'plan' | 'apply' | 'policy_check', state: CombinedState, c: ProjectCounts): string {
  if (cmd === 'apply') {
    const applied = c.success - c.noChanges;
    if (state === 'failure') return `${c.errored}/${c.total} projects failed to apply.`;
    if (state === 'pending') {
      return c.noChanges > 0
        ? `${applied}/${c.total} projects applied (${c.noChanges} up to date).`
        : `${applied}/${c.total} projects applied.`;
    }
    if (c.noChanges > 0 && c.noChanges === c.total) return `${c.noChanges}/${c.total} projects up to date.`;
    if (c.noChanges > 0 && c.success > c.noChanges)
      return `${applied}/${c.total} projects applied successfully (${c.noChanges} up to date).`;
    return `${c.success}/${c.total} projects applied successfully.`;
  }
  if (cmd === 'plan') {
    if (state === 'failure') return `${c.total - c.success}/${c.total} projects failed to plan.`;
    if (state === 'pending') return `${c.success}/${c.total} projects planned.`;
    return `${c.success}/${c.total} projects planned successfully.`;
  }
  if (state === 'failure') return `${c.errored}/${c.total} projects failed policy checks.`;
  if (state === 'pending') return `${c.success}/${c.total} projects had policies checked.`;
  return `${c.success}/${c.total} projects had policies checked successfully.`;
}

/** `atlantis/policy_check` from the PR's records: passed projects over all, failed ones named. */
export function policyCheckCombinedStatus(ps: PullStatus): CombinedStatus {
  const success = count(ps, 'policy_check_passed');
  const errored = count(ps, 'policy_check_errored');
  const state: CombinedState = errored > 0 ? 'failure' : 'success';
  return { state, description: countsDescription('policy_check', state, { success, total: ps.projects.length, errored, noChanges: 0 }) };
}

/** `atlantis/plan` after a plan: anything but a plan error counts as planned. */
export function planCombinedStatus(ps: PullStatus): CombinedStatus {
  const errored = count(ps, 'plan_errored');
  const total = ps.projects.length;
  const counts = { success: total - errored, total, errored, noChanges: 0 };
  const state: CombinedState = errored > 0 ? 'failure' : 'success';
  return { state, description: countsDescription('plan', state, counts) };
}

/**
 * `atlantis/apply` from the PR's records. After an apply, unapplied plans make it pending
 * ("1/2 projects applied."); after a plan (`after: 'plan'`) Atlantis leaves a GitHub status
 * as it was in that case, so this returns undefined. A no-change plan counts as applied.
 */
export function applyCombinedStatus(ps: PullStatus, after: 'plan' | 'apply'): CombinedStatus | undefined {
  const noChanges = count(ps, 'planned_no_changes');
  const success = count(ps, 'applied') + noChanges;
  const errored = count(ps, 'apply_errored');
  const total = ps.projects.length;
  let state: CombinedState = 'success';
  if (errored > 0) state = 'failure';
  else if (success < total) {
    if (after === 'plan') return undefined;
    state = 'pending';
  }
  return { state, description: countsDescription('apply', state, { success, total, errored, noChanges }) };
}

/** The success statuses Atlantis sets when a PR has no projects (some branch protections need them). */
export function noProjectStatuses(): { context: 'plan' | 'policy_check' | 'apply'; status: CombinedStatus }[] {
  const zero = { success: 0, total: 0, errored: 0, noChanges: 0 };
  return (['plan', 'policy_check', 'apply'] as const).map((context) => ({
    context,
    status: { state: 'success', description: countsDescription(context, 'success', zero) },
  }));
}

const MAX_CONTEXT = 255;

/**
 * A status context within GitHub's 255 characters, as Atlantis shortens it: the start, then
 * `-` and 12 hex digits of its sha256, so long contexts sharing a prefix stay distinct.
 */
export function truncateContext(s: string): string {
  const chars = Array.from(s);
  if (chars.length <= MAX_CONTEXT) return s;
  const suffix = `-${createHash('sha256').update(s, 'utf8').digest('hex').slice(0, 12)}`;
  return chars.slice(0, MAX_CONTEXT - suffix.length).join('') + suffix;
}

/** `atlantis/plan: alpha` for a named project, `atlantis/plan: dir1/default` otherwise. */
export function projectStatusContext(cmd: 'plan' | 'apply', p: ProjectKey, statusName = 'atlantis'): string {
  return truncateContext(`${statusName}/${cmd}: ${p.project !== '' ? p.project : `${p.dir}/${p.workspace}`}`);
}

const short = (sha: string): string => (sha.length > 7 ? sha.slice(0, 7) : sha);
const q = (s: string): string => JSON.stringify(s);
const where = (p: ProjectKey): string => `dir ${q(p.dir)} workspace ${q(p.workspace)} project ${q(p.project)}`;

/**
 * Why `apply` without -p/-d/-w may not run, as Atlantis words it, or undefined. `plans`
 * are the saved plans found for the PR; `status` its recorded plan status; `headSha` the
 * PR's head now. (Atlantis writes `atlantis plan` here whatever the executable's name.)
 */
export function genericApplyProblem(status: PullStatus | undefined, plans: ProjectKey[], headSha: string): string | undefined {
  if (plans.length > 0) {
    if (!status) return 'no recorded plan status found; run `atlantis plan` before apply';
    if (status.headSha !== headSha)
      return `plans are from commit ${short(status.headSha)} but current head is ${short(headSha)}; run \`atlantis plan\` before apply`;
    for (const plan of plans) {
      const rec = status.projects.find((p) => sameProject(p, plan));
      if (!rec) return `plan file found for ${where(plan)} but no matching plan status exists; run \`atlantis plan\``;
      // A failed policy check still builds the apply, which its requirement then refuses (as Atlantis).
      if (!['planned', 'apply_errored', 'planned_no_changes', 'policy_check_passed', 'policy_check_errored'].includes(rec.status))
        return `plan for ${where(plan)} has status ${q(rec.status)} and cannot be applied; run \`atlantis plan\``;
    }
  } else {
    if (!status) return 'no current plan status found; run `atlantis plan` before apply';
    if (status.headSha !== headSha)
      return `recorded plan status is from commit ${short(status.headSha)} but current head is ${short(headSha)}; run \`atlantis plan\` before apply`;
  }
  for (const rec of status.projects) {
    if (plans.some((p) => sameProject(p, rec))) continue;
    if (['planned', 'apply_errored', 'policy_check_passed', 'policy_check_errored'].includes(rec.status))
      return `plan file is missing for ${where(rec)} with status ${q(rec.status)}; run \`atlantis plan\``;
    if (rec.status === 'plan_errored')
      return `plan for ${where(rec)} errored and cannot be applied without a plan file; run \`atlantis plan\``;
  }
  return undefined;
}

/** Atlantis's apply-step error for a project with no saved plan (`apply -d dir` before a plan). */
export function noPlanFoundError(dir: string, workspace: string): string {
  return `no plan found at path ${q(dir)} and workspace ${q(workspace)}–did you run plan?`;
}

const RE_PLAN_CHANGES = /Plan: (?:(\d+) to import, )?(\d+) to add, (\d+) to change, (\d+) to destroy(?:, (\d+) to forget)?\./g;
const RE_NO_CHANGES = /No changes\. (Infrastructure is up-to-date|Your infrastructure matches the configuration)\./;

/**
 * A plan's one-line summary, as Atlantis's DiffSummary (the success description of a
 * project's plan status): the `Plan:` counts, summed over several `Plan:` lines, or the
 * "No changes." sentence.
 */
export function planDiffSummary(output: string): string {
  const matches = [...output.matchAll(RE_PLAN_CHANGES)];
  if (matches.length === 0) return RE_NO_CHANGES.exec(output)?.[0] ?? '';
  const n = (s: string | undefined): number => (s ? Number(s) : 0);
  let [imp, add, change, destroy, forget] = [0, 0, 0, 0, 0];
  for (const m of matches) {
    imp += n(m[1]);
    add += n(m[2]);
    change += n(m[3]);
    destroy += n(m[4]);
    forget += n(m[5]);
  }
  const counts = `${add} to add, ${change} to change, ${destroy} to destroy`;
  return `Plan: ${imp > 0 ? `${imp} to import, ` : ''}${counts}${forget > 0 ? `, ${forget} to forget` : ''}.`;
}

/** Atlantis's PlanSuccess.NoChanges: no `Plan:` line and the "No changes." sentence. */
export function planHasNoChanges(output: string): boolean {
  return !/Plan: (?:\d+ to import, )?\d+ to add, \d+ to change, \d+ to destroy/.test(output) && RE_NO_CHANGES.test(output);
}
