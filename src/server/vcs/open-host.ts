// The one place a code host is chosen and opened (as locks/open-store.ts is for the store):
// the workflow gets a VcsHost and never asks which.
import type { Logger } from '../../log.js';
import type { AtlantisMetrics } from '../atlantis-metrics.js';
import { giteaHost } from './gitea/host.js';
import { githubHost } from './github/host.js';
import { gitlabHost } from './gitlab/host.js';
import type { VcsConfig } from './host-config.js';
import type { VcsHost } from './host.js';

export interface OpenHostOptions {
  logger: Logger;
  /** Atlantis's own metrics, where Atlantis has them for the host (its GitHub client's calls and webhooks). */
  metrics?: AtlantisMetrics;
  /** --max-comments-per-command (0: no limit). */
  maxCommentsPerCommand: number;
  /** --vcs-status-name and --ignore-vcs-status-names (the mergeable bypass's checks). */
  statusName?: string;
  ignoreStatusNames?: readonly string[];
  /** The teams the server-side config names as policy-set owners (GitLab asks about them as groups). */
  policyOwnerTeams?: readonly string[];
}

export function openVcsHost(vcs: VcsConfig, o: OpenHostOptions): VcsHost {
  switch (vcs.kind) {
    case 'github':
      return githubHost(vcs.github, o);
    case 'gitea':
      return giteaHost(vcs.gitea, o);
    case 'gitlab':
      return gitlabHost(vcs.gitlab, o);
  }
}
