// The I/O side of plan/apply/import requirements: asks GitHub (and git, for undiverged) only
// for what a project requires, then lets the pure rules of requirements.ts decide.
import type { GitHubClient } from '../vcs/github-client.js';
import type { ApplyRequirement } from './repo-config/types.js';
import { type RequirementCommand, type RequirementFacts, approvedByReviews, mergeableStatus, requirementFailure } from './requirements.js';

export async function requirementRefusal(
  github: GitHubClient,
  target: { repo: string; pull: number },
  cmd: RequirementCommand,
  reqs: readonly ApplyRequirement[],
  diverged: () => Promise<boolean>,
): Promise<string | undefined> {
  if (reqs.length === 0) return undefined;
  const f: RequirementFacts = {};
  if (reqs.includes('approved')) f.approved = approvedByReviews(await github.listReviews(target.repo, target.pull));
  if (reqs.includes('mergeable')) f.mergeable = mergeableStatus(await github.getPullForMergeable(target.repo, target.pull));
  if (reqs.includes('undiverged')) f.diverged = await diverged();
  return requirementFailure(cmd, reqs, f);
}

/**
 * undiverged, as Atlantis decides it: only a merge checkout can diverge from the base branch;
 * with the branch checkout (the only strategy here so far) a project never has.
 */
export async function notDiverged(): Promise<boolean> {
  return false;
}
