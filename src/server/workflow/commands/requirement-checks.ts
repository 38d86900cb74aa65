// The I/O side of plan/apply/import requirements: asks the host (and git, for undiverged) only
// for what a project requires, then lets the pure rules of requirements.ts decide.
import type { Logger } from '../../../log.js';
import { projectStatusContext } from '../../locks/pull-status.js';
import type { HostRequirementFacts, VcsHost } from '../../vcs/host.js';
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
  /** --vcs-status-name: how the server's own plan statuses are named (an apply may ignore other projects'). */
  statusName?: string | undefined;
}

/** The sources of a server: the host, and the working copies for undiverged. */
export function requirementSourcesFor(d: {
  host: VcsHost;
  copies: WorkingCopies;
  serverRepoConfig?: ServerSideRepoConfig | undefined;
  logger: Logger;
  config?: { vcsStatusName?: string };
}): RequirementSources {
  return {
    host: d.host,
    statusName: d.config?.vcsStatusName,
    diverged: divergedCheck({ copies: d.copies, serverRepoConfig: d.serverRepoConfig, hostname: d.host.hostname, logger: d.logger }),
  };
}

/**
 * On a host that reads approval and mergeability once per command (VcsHost.requirementFacts):
 * that read, made now, at the command's start and before its statuses. As Atlantis, a failed
 * read is logged and the command goes on with neither approved nor mergeable. Undefined
 * without the capability, or without a pull request.
 */
export async function readHostFacts(
  host: Pick<VcsHost, 'requirementFacts'>,
  target: { repo: string; pull: number },
  log: Logger,
): Promise<HostRequirementFacts | undefined> {
  if (!host.requirementFacts || target.pull <= 0) return undefined;
  try {
    return await host.requirementFacts(target.repo, target.pull);
  } catch (e) {
    log.warn('Unable to get the pull request status: continuing with mergeable and approved assumed false', {
      repo: target.repo,
      pull: target.pull,
      error: (e as Error).message,
    });
    return { approved: false, mergeable: { mergeable: false } };
  }
}

export async function requirementRefusal(
  src: RequirementSources,
  target: RequirementTarget & { hostFacts?: HostRequirementFacts | undefined },
  cmd: RequirementCommand,
  reqs: readonly ApplyRequirement[],
  project: RequirementProject,
): Promise<string | undefined> {
  // A run of the API without a pull request (pull <= 0): nothing to ask, as Atlantis skips PR requirements then.
  if (reqs.length === 0 || target.pull <= 0) return undefined;
  const f: RequirementFacts = {};
  const read = target.hostFacts;
  if (reqs.includes('approved')) f.approved = read ? read.approved : await src.host.approved(target.repo, target.pull);
  if (reqs.includes('mergeable')) f.mergeable = read ? read.mergeable : await src.host.mergeability(target.repo, target.pull);
  if (reqs.includes('undiverged')) f.diverged = await src.diverged(target, cmd, project);
  const key = { dir: project.dir, workspace: project.workspace, project: project.name ?? '' };
  const statusName = src.statusName ?? 'atlantis';
  return requirementFailure(cmd, reqs, f, { ownPlanStatus: projectStatusContext('plan', key, statusName), statusName });
}
