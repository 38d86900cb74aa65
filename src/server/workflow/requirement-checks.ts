// The I/O side of plan/apply/import requirements: asks GitHub (and git, for undiverged) only
// for what a project requires, then lets the pure rules of requirements.ts decide.
import type { GitHubClient } from '../vcs/github-client.js';
import { getMergeabilityInfo } from '../vcs/github-mergeability.js';
import type { ApplyRequirement } from './repo-config/types.js';
import {
  type RequirementCommand,
  type RequirementFacts,
  approvedByReviews,
  mergeableMinusApply,
  mergeableStatus,
  requirementFailure,
} from './requirements.js';

/** Where the facts come from. */
export interface RequirementSources {
  github: GitHubClient;
  /** --gh-allow-mergeable-bypass-apply */
  bypassApply: boolean;
  diverged: () => Promise<boolean>;
}

export async function requirementRefusal(
  src: RequirementSources,
  target: { repo: string; pull: number },
  cmd: RequirementCommand,
  reqs: readonly ApplyRequirement[],
): Promise<string | undefined> {
  if (reqs.length === 0) return undefined;
  const { github } = src;
  const f: RequirementFacts = {};
  if (reqs.includes('approved')) f.approved = approvedByReviews(await github.listReviews(target.repo, target.pull));
  if (reqs.includes('mergeable')) {
    const pr = await github.getPullForMergeable(target.repo, target.pull);
    // Only a blocked PR is asked again, without the atlantis/apply check (as Atlantis).
    const bypass =
      src.bypassApply && !pr.draft && pr.mergeableState === 'blocked'
        ? { minusApply: mergeableMinusApply(await getMergeabilityInfo(github, target.repo, target.pull)) }
        : undefined;
    f.mergeable = mergeableStatus(pr, bypass);
  }
  if (reqs.includes('undiverged')) f.diverged = await src.diverged();
  return requirementFailure(cmd, reqs, f);
}

/**
 * undiverged, as Atlantis decides it: only a merge checkout can diverge from the base branch;
 * with the branch checkout (the only strategy here so far) a project never has.
 */
export async function notDiverged(): Promise<boolean> {
  return false;
}
