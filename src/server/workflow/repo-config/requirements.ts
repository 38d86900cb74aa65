// plan_requirements, apply_requirements, import_requirements and depends_on, decided as
// Atlantis v0.47 decides them (server/events/command_requirement_handler.go and the GitHub
// client's PullIsMergeable), with its refusal texts. Pure: the caller fetches the facts.
import type { ApplyRequirement } from './types.js';

export type RequirementCommand = 'plan' | 'apply' | 'import';

/** GitHub's answer on whether the merge button is usable, with Atlantis's reason when not. */
export interface MergeableStatus {
  mergeable: boolean;
  reason?: string;
}

/**
 * Atlantis's mapping of a GitHub pull request to "mergeable": not a draft, and
 * mergeable_state clean, unstable or has_hooks. `blocked` stays blocked unless
 * --gh-allow-mergeable-bypass-apply is set: then `minusApply` (what blocks it besides the
 * atlantis/apply status itself, see mergeableMinusApply) decides.
 */
export function mergeableStatus(pr: { draft: boolean; mergeableState: string }, bypass?: { minusApply: boolean }): MergeableStatus {
  if (pr.draft) return { mergeable: false, reason: 'PR is a draft' };
  const state = pr.mergeableState === '' ? '<unknown>' : pr.mergeableState;
  if (state === 'clean' || state === 'unstable' || state === 'has_hooks') return { mergeable: true };
  if (state === 'blocked' && bypass) {
    return bypass.minusApply
      ? { mergeable: true }
      : { mergeable: false, reason: 'PR is in state blocked, and cannot bypass mergeable requirements' };
  }
  return { mergeable: false, reason: `PR is in state ${state}` };
}

/** What GitHub's GraphQL says blocks a PR (branch protection, rulesets, the head's checks). */
export interface MergeabilityInfo {
  /** '' when GitHub gives none (no review rule, or reviews required through rulesets). */
  reviewDecision: string;
  /** Approvals a ruleset's pull_request rule asks for, and how many latest reviews approve. */
  requiredApprovals: number;
  approvals: number;
  requiredChecks: string[];
  /** Required workflows of active rulesets (not evaluated here: they always block). */
  requiredWorkflows: number;
  checkRuns: Array<{ name: string; conclusion: string; runNumber?: number }>;
  statusContexts: Array<{ context: string; state: string }>;
}

const PASSED_CONCLUSIONS = ['SUCCESS', 'SKIPPED', 'NEUTRAL'];

/**
 * Atlantis's IsMergeableMinusApply: mergeable but for the `<status name>/apply` checks. The
 * review decision must be APPROVED or empty, ruleset approvals met, and every other required
 * check passed: the check run of that name (the latest workflow run's when several), else the
 * commit status of that context.
 */
export function mergeableMinusApply(info: MergeabilityInfo, statusName = 'atlantis'): boolean {
  if (info.reviewDecision !== '' && info.reviewDecision !== 'APPROVED') return false;
  if (info.requiredApprovals > 0 && info.approvals < info.requiredApprovals) return false;
  for (const check of info.requiredChecks) {
    if (check.startsWith(`${statusName}/apply`)) continue;
    if (!checkPassed(check, info)) return false;
  }
  return info.requiredWorkflows === 0;
}

function checkPassed(name: string, info: MergeabilityInfo): boolean {
  const runs = info.checkRuns.filter((r) => r.name === name);
  const plain = runs.find((r) => r.runNumber === undefined);
  if (plain) return PASSED_CONCLUSIONS.includes(plain.conclusion);
  const latest = runs.sort((a, b) => (b.runNumber ?? 0) - (a.runNumber ?? 0))[0];
  if (latest) return PASSED_CONCLUSIONS.includes(latest.conclusion);
  const status = info.statusContexts.find((s) => s.context === name);
  return status?.state === 'SUCCESS';
}

/**
 * Atlantis's `approved`: some review of the PR is in state APPROVED, whatever came after it
 * from the same reviewer (GitHub turns a dismissed review's state into DISMISSED).
 */
export function approvedByReviews(reviews: ReadonlyArray<{ state: string }>): boolean {
  return reviews.some((r) => r.state === 'APPROVED');
}

/** What the requirements are checked against; only the ones a project requires are fetched. */
export interface RequirementFacts {
  approved?: boolean;
  mergeable?: MergeableStatus;
  diverged?: boolean;
}

/** Atlantis's refusal for the first unmet requirement, in the order the project lists them. */
export function requirementFailure(cmd: RequirementCommand, reqs: readonly ApplyRequirement[], f: RequirementFacts): string | undefined {
  for (const r of reqs) {
    if (r === 'approved' && f.approved !== true)
      return `Pull request must be approved according to the project's approval rules before running ${cmd}.`;
    if (r === 'mergeable' && f.mergeable?.mergeable !== true) {
      const reason = f.mergeable?.reason;
      return `Pull request must be mergeable before running ${cmd}${reason ? ` (${reason})` : ''}.`;
    }
    if (r === 'undiverged' && f.diverged === true) return `Default branch must be rebased onto pull request before running ${cmd}.`;
  }
  return undefined;
}

/** A project's state in this PR, as far as depends_on cares. */
export type ProjectState = 'planned' | 'planned_no_changes' | 'applied' | 'errored' | 'discarded';

/**
 * depends_on at apply: every named project this PR knows of must be applied or planned
 * without changes. A name the PR does not know passes (Atlantis fails it only for API calls).
 */
export function dependencyFailure(dependsOn: readonly string[], states: ReadonlyMap<string, ProjectState>): string | undefined {
  for (const name of dependsOn) {
    const s = states.get(name);
    if (s !== undefined && s !== 'applied' && s !== 'planned_no_changes')
      return `Can't apply your project unless you apply its dependencies: [${name}]`;
  }
  return undefined;
}

/**
 * The project states of each open PR, for depends_on. Kept in memory and reset when the PR's
 * head moves, as Atlantis resets its pull status on a new commit.
 */
export class PullProjectStates {
  private readonly byPull = new Map<string, { headSha: string; states: Map<string, ProjectState> }>();

  get(repo: string, pull: number, headSha: string): Map<string, ProjectState> {
    const k = `${repo}#${pull}`;
    let e = this.byPull.get(k);
    if (!e || e.headSha !== headSha) {
      e = { headSha, states: new Map() };
      this.byPull.set(k, e);
    }
    return e.states;
  }

  forget(repo: string, pull: number): void {
    this.byPull.delete(`${repo}#${pull}`);
  }
}
