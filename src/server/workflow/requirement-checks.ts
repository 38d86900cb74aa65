// The I/O side of plan/apply/import requirements: asks GitHub (and git, for undiverged) only
// for what a project requires, then lets the pure rules of requirements.ts decide.
import type { GitHubClient } from '../vcs/github-client.js';
import type { ApplyRequirement } from './repo-config/types.js';
import { type RequirementCommand, type RequirementFacts, mergeableStatus, requirementFailure } from './requirements.js';

export async function requirementRefusal(
  github: GitHubClient,
  target: { repo: string; pull: number },
  cmd: RequirementCommand,
  reqs: readonly ApplyRequirement[],
  diverged: () => Promise<boolean>,
): Promise<string | undefined> {
  if (reqs.length === 0) return undefined;
  const f: RequirementFacts = {};
  if (reqs.includes('approved')) f.approved = await github.isApproved(target.repo, target.pull);
  if (reqs.includes('mergeable')) f.mergeable = mergeableStatus(await github.getPullForMergeable(target.repo, target.pull));
  if (reqs.includes('undiverged')) f.diverged = await diverged();
  return requirementFailure(cmd, reqs, f);
}
