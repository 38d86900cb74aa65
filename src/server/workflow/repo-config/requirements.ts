// plan_requirements, apply_requirements, import_requirements and depends_on, decided as
// Atlantis v0.47 decides them (server/events/command_requirement_handler.go), with its refusal
// texts. Pure: the caller fetches the facts (whether the pull request is approved and mergeable
// is the host's to judge, vcs/host.ts).
import type { MergeableStatus } from '../../vcs/host.js';
import type { ApplyRequirement } from './types.js';

export type RequirementCommand = 'plan' | 'apply' | 'import';

/** What the requirements are checked against; only the ones a project requires are fetched. */
export interface RequirementFacts {
  approved?: boolean;
  mergeable?: MergeableStatus;
  diverged?: boolean;
}

/**
 * Whether an apply may go on although the pull request is not mergeable, as Atlantis decides
 * it on a host that names the blocking statuses (GitLab): when every one is another project's
 * plan status (or the PR-wide plan status beside one). The project's own plan status, CI or
 * anything else still blocks. `ownPlanStatus`: the project's plan status context.
 */
export function mergeableIgnoringOtherProjectPlans(
  m: MergeableStatus | undefined,
  ownPlanStatus: string,
  statusName = 'atlantis',
): boolean {
  const blocking = m?.blockingStatuses ?? [];
  let otherProjectPlan = false;
  for (const name of blocking) {
    if (name === `${statusName}/plan`) continue;
    if (name === ownPlanStatus || !name.startsWith(`${statusName}/plan: `)) return false;
    otherProjectPlan = true;
  }
  return otherProjectPlan;
}

/**
 * Atlantis's refusal for the first unmet requirement, in the order the project lists them.
 * `own`: the project's plan status context and the server's status name (an apply may ignore
 * other projects' plan statuses).
 */
export function requirementFailure(
  cmd: RequirementCommand,
  reqs: readonly ApplyRequirement[],
  f: RequirementFacts,
  own?: { ownPlanStatus: string; statusName: string },
): string | undefined {
  for (const r of reqs) {
    if (r === 'approved' && f.approved !== true)
      return `Pull request must be approved according to the project's approval rules before running ${cmd}.`;
    if (
      r === 'mergeable' &&
      f.mergeable?.mergeable !== true &&
      !(cmd === 'apply' && own !== undefined && mergeableIgnoringOtherProjectPlans(f.mergeable, own.ownPlanStatus, own.statusName))
    ) {
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
