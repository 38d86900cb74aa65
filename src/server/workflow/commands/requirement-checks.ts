// The I/O side of plan/apply/import requirements: asks GitHub (and git, for undiverged) only
// for what a project requires, then lets the pure rules of requirements.ts decide.
import type { GitHubClient } from '../../vcs/github/client.js';
import { getMergeabilityInfo } from '../../vcs/github/mergeability-query.js';
import type { ApplyRequirement, ProjectSpec } from '../repo-config/types.js';
import type { Logger } from '../../../log.js';
import type { ServerConfig } from '../../config.js';
import { type DivergedCheck, divergedCheck } from '../checkout/diverged-check.js';
import type { ServerSideRepoConfig } from '../repo-config/server-side.js';
import type { CheckoutRequest, WorkingCopies } from '../checkout/working-copy.js';
import {
  type RequirementCommand,
  type RequirementFacts,
  approvedByReviews,
  mergeableMinusApply,
  mergeableStatus,
  requirementFailure,
} from '../repo-config/requirements.js';

/** The pull request a requirement is checked for (its working copies included). */
export type RequirementTarget = Omit<CheckoutRequest, 'workspace'>;
/** The project a requirement is checked for. */
export type RequirementProject = Pick<ProjectSpec, 'dir' | 'workspace' | 'name'>;

/** Where the facts come from. */
export interface RequirementSources {
  github: GitHubClient;
  /** --gh-allow-mergeable-bypass-apply */
  bypassApply: boolean;
  /** Whether the base branch moved on in a way that touches the project (diverged-check.ts). */
  diverged: DivergedCheck;
}

/** The sources of a server: GitHub, and the working copies for undiverged. */
export function requirementSourcesFor(d: {
  github: GitHubClient;
  config: Pick<ServerConfig, 'ghAllowMergeableBypassApply' | 'ghHostname'>;
  copies: WorkingCopies;
  serverRepoConfig?: ServerSideRepoConfig | undefined;
  logger: Logger;
}): RequirementSources {
  return {
    github: d.github,
    bypassApply: d.config.ghAllowMergeableBypassApply,
    diverged: divergedCheck({ copies: d.copies, serverRepoConfig: d.serverRepoConfig, hostname: d.config.ghHostname, logger: d.logger }),
  };
}

export async function requirementRefusal(
  src: RequirementSources,
  target: RequirementTarget,
  cmd: RequirementCommand,
  reqs: readonly ApplyRequirement[],
  project: RequirementProject,
): Promise<string | undefined> {
  // A run of the API without a pull request (pull <= 0): nothing to ask, as Atlantis skips PR requirements then.
  if (reqs.length === 0 || target.pull <= 0) return undefined;
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
  if (reqs.includes('undiverged')) f.diverged = await src.diverged(target, cmd, project);
  return requirementFailure(cmd, reqs, f);
}
