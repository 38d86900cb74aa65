// Which code host the server talks to, and its settings, from the flags: the host's part of
// ServerConfig, as locks/store-config.ts is the store's. GitHub or Gitea; a new host adds a member
// to VcsConfig and its flags here (Atlantis's flags of the hosts not served are refused at start,
// config/atlantis-flags.ts). The host itself is opened in open-host.ts.
import { type FlagValues, UsageError } from '../../config/flags.js';
import { type GiteaSettings, giteaFlagsGiven, giteaSecrets, giteaSettingsFromFlags } from './gitea/settings.js';
import { type GitHubSettings, githubSecrets, githubSettingsFromFlags } from './github/settings.js';

export type VcsConfig = { kind: 'github'; github: GitHubSettings } | { kind: 'gitea'; gitea: GiteaSettings };

/** Whether a GitHub user or App is named (a server talks to one host). */
function githubFlagsGiven(values: FlagValues): boolean {
  const given = (n: string): boolean => typeof values[n] === 'string' && values[n] !== '';
  return given('gh-user') || given('gh-token') || given('gh-token-file') || ((values['gh-app-id'] as number | undefined) ?? 0) !== 0;
}

/** The host the flags name, with its settings; throws UsageError naming the flag. `warnings`: one line each. */
export function vcsConfigFromFlags(values: FlagValues): { vcs: VcsConfig; warnings: string[] } {
  if (giteaFlagsGiven(values)) {
    // Atlantis serves several hosts from one process; this server serves one.
    if (githubFlagsGiven(values))
      throw new UsageError('--gitea-user and --gh-user (or a GitHub App) are both set: a server talks to one code host');
    const { gitea, warnings } = giteaSettingsFromFlags(values);
    return { vcs: { kind: 'gitea', gitea }, warnings };
  }
  const { github, warnings } = githubSettingsFromFlags(values);
  return { vcs: { kind: 'github', github }, warnings };
}

/**
 * The host's secrets (its token, webhook secret, keys), for the redactor and the child
 * environment: each by its flag (for the start-up warning about weak secrets), then the rest.
 */
export function vcsSecrets(vcs: VcsConfig): { byFlag: Array<[string, string | undefined]>; more: string[] } {
  if (vcs.kind === 'gitea') return giteaSecrets(vcs.gitea);
  return githubSecrets(vcs.github);
}
