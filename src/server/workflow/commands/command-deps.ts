// What the command runner and the command modules (plan, apply, the others, project-job.ts)
// are built with: the server's parts they use.
import type { Logger } from '../../../log.js';
import type { ApplyWebhooks } from '../../notifications/apply-webhooks.js';
import type { ServerConfig } from '../../config.js';
import type { ProjectLeases } from '../../locks/project-lease.js';
import type { StateStore } from '../../locks/state-store.js';
import type { ServerMetrics } from '../../metrics.js';
import type { VcsHost } from '../../vcs/host.js';
import type { WorkflowHooks } from './hooks.js';
import type { JobRegistry } from '../jobs/jobs.js';
import type { ProjectRunner } from '../jobs/project-runner.js';
import type { ServerSideRepoConfig } from '../repo-config/server-side.js';
import type { WorkingCopies } from '../checkout/working-copy.js';

export interface CommandRunnerDeps {
  config: ServerConfig;
  store: StateStore;
  /** One job at a time runs terraform in a project, cluster-wide (project-lease.ts). */
  leases: ProjectLeases;
  /** The code host (vcs/host.ts). */
  host: VcsHost;
  copies: WorkingCopies;
  jobs: JobRegistry;
  projectRunner: ProjectRunner;
  metrics: ServerMetrics;
  logger: Logger;
  jobLogPath: (jobId: string) => string;
  /** Parsed --repo-config, if any. */
  serverRepoConfig?: ServerSideRepoConfig;
  /** Server-side pre/post workflow hooks. */
  hooks?: WorkflowHooks;
  /** The --config file's webhooks, told of every project apply (notifications/apply-webhooks.ts). */
  applyWebhooks?: ApplyWebhooks;
}
