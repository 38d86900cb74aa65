// Which code host the server talks to, and its settings, from the flags: the host's part of
// ServerConfig, as locks/store-config.ts is the store's. Today GitHub; a new host adds a member
// to VcsConfig and its flags here (Atlantis's flags of the hosts not served are refused at start,
// config/atlantis-flags.ts). The host itself is opened in open-host.ts.
import type { FlagValues } from '../../config/flags.js';
import { type GitHubSettings, githubSecrets, githubSettingsFromFlags } from './github/settings.js';

export type VcsConfig = { kind: 'github'; github: GitHubSettings };

/** The host the flags name, with its settings; throws UsageError naming the flag. `warnings`: one line each. */
export function vcsConfigFromFlags(values: FlagValues): { vcs: VcsConfig; warnings: string[] } {
  const { github, warnings } = githubSettingsFromFlags(values);
  return { vcs: { kind: 'github', github }, warnings };
}

/**
 * The host's secrets (its token, webhook secret, keys), for the redactor and the child
 * environment: each by its flag (for the start-up warning about weak secrets), then the rest.
 */
export function vcsSecrets(vcs: VcsConfig): { byFlag: Array<[string, string | undefined]>; more: string[] } {
  return githubSecrets(vcs.github);
}
