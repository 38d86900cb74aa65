// The git side of the `undiverged` requirement (the decision is undiverged.ts): with
// --checkout-strategy merge, the project's working copy fetches the base branch and lists the
// files of the base's commits it lacks; the repo config says which of them touch the project.
// As Atlantis, a failure to find out counts as diverged (it refuses rather than run on an
// unknown base), and with the branch strategy nothing ever diverges.
import type { Logger } from '../../../log.js';
import { type ProjectSpec, readRepoConfig } from './projects.js';
import type { ServerSideRepoConfig } from '../repo-config/server-side.js';
import type { RequirementCommand } from '../repo-config/requirements.js';
import { divergedForProject } from './undiverged.js';
import { type CheckoutRequest, type WorkingCopies, checkoutRequest } from './working-copy.js';

/** Whether the base branch moved on in a way that touches the project (the PR's working copies named by `target`). */
export type DivergedCheck = (
  target: Omit<CheckoutRequest, 'workspace'>,
  cmd: RequirementCommand,
  project: Pick<ProjectSpec, 'dir' | 'workspace' | 'name'>,
) => Promise<boolean>;

export interface DivergedCheckDeps {
  copies: WorkingCopies;
  serverRepoConfig?: ServerSideRepoConfig | undefined;
  /** --gh-hostname, for the repo's id in repos.yaml. */
  hostname: string;
  logger: Logger;
}

export function divergedCheck(d: DivergedCheckDeps): DivergedCheck {
  return async (target, cmd, project) => {
    const log = d.logger.child({ repo: target.repo, pull: target.pull, dir: project.dir, workspace: project.workspace });
    let files: string[] | undefined;
    try {
      files = await d.copies.divergedFiles(checkoutRequest(target, project.workspace), cmd === 'plan');
    } catch (e) {
      log.warn('Could not list the base branch changes for undiverged, counting the project as diverged', {
        error: (e as Error).message,
      });
      return true;
    }
    if (files === undefined || files.length === 0) return false;
    const dir = d.copies.dirFor(target.repo, target.pull, project.workspace);
    try {
      const config = readRepoConfig(dir, d.serverRepoConfig, `${d.hostname}/${target.repo}`, target.baseRef);
      return divergedForProject(config, project, files, dir);
    } catch (e) {
      // The config was read for this command already; if it cannot be now, any base change counts.
      log.warn('Could not read the repo config for undiverged, any base branch change counts', { error: (e as Error).message });
      return true;
    }
  };
}
