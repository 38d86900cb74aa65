// The I/O side of plan/apply/import requirements: asks the host (and git, for undiverged) only
// for what a project requires, then lets the pure rules of requirements.ts decide.
import type { Logger } from '../../../log.js';
import type { VcsHost } from '../../vcs/host.js';
import { type DivergedCheck, divergedCheck } from '../checkout/diverged-check.js';
import type { CheckoutRequest, WorkingCopies } from '../checkout/working-copy.js';
import { type RequirementCommand, type RequirementFacts, requirementFailure } from '../repo-config/requirements.js';
import type { ServerSideRepoConfig } from '../repo-config/server-side.js';
import type { ApplyRequirement, ProjectSpec } from '../repo-config/types.js';

/** The pull request a requirement is checked for (its working copies included). */
export type RequirementTarget = Omit<CheckoutRequest, 'workspace'>;
/** The project a requirement is checked for. */
export type RequirementProject = Pick<ProjectSpec, 'dir' | 'workspace' | 'name'>;

/** Where the facts come from. */
export interface RequirementSources {
  /** Whether the pull request is approved and mergeable, as Atlantis judges it on the host. */
  host: Pick<VcsHost, 'approved' | 'mergeability'>;
  /** Whether the base branch moved on in a way that touches the project (diverged-check.ts). */
  diverged: DivergedCheck;
}

/** The sources of a server: the host, and the working copies for undiverged. */
export function requirementSourcesFor(d: {
  host: VcsHost;
  copies: WorkingCopies;
  serverRepoConfig?: ServerSideRepoConfig | undefined;
  logger: Logger;
}): RequirementSources {
  return {
    host: d.host,
    diverged: divergedCheck({ copies: d.copies, serverRepoConfig: d.serverRepoConfig, hostname: d.host.hostname, logger: d.logger }),
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
  const f: RequirementFacts = {};
  if (reqs.includes('approved')) f.approved = await src.host.approved(target.repo, target.pull);
  if (reqs.includes('mergeable')) f.mergeable = await src.host.mergeability(target.repo, target.pull);
  if (reqs.includes('undiverged')) f.diverged = await src.diverged(target, cmd, project);
  return requirementFailure(cmd, reqs, f);
}
