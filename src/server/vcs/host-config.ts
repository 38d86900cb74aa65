// Which code host the server talks to, and its settings, from the flags: the host's part of
// ServerConfig, as locks/store-config.ts is the store's. GitHub, or GitLab when its user or
// token is set; a new host adds a member to VcsConfig and its flags here (Atlantis's flags of
// the hosts not served are refused at start, config/atlantis-flags.ts). The host itself is
// opened in open-host.ts.
import type { FlagValues } from '../../config/flags.js';
import { UsageError } from '../../config/flags.js';
import { type GitHubSettings, githubSecrets, githubSettingsFromFlags } from './github/settings.js';
import { type GitLabSettings, gitlabChosen, gitlabSecrets, gitlabSettingsFromFlags } from './gitlab/settings.js';

export type VcsConfig = { kind: 'github'; github: GitHubSettings } | { kind: 'gitlab'; gitlab: GitLabSettings };

/** The flag holding each host's team (group) allowlist, in --gh-team-allowlist's format. */
const TEAM_ALLOWLIST_FLAG = { github: 'gh-team-allowlist', gitlab: 'gitlab-group-allowlist' } as const;

function isSet(values: FlagValues, name: string): boolean {
  const v = values[name];
  return (typeof v === 'string' && v !== '') || (typeof v === 'number' && v !== 0);
}

/**
 * The host the flags name, with its settings; throws UsageError naming the flag. `warnings`:
 * one line each. `teamAllowlistFlag`: the flag of its team (group) allowlist.
 */
export function vcsConfigFromFlags(values: FlagValues): { vcs: VcsConfig; warnings: string[]; teamAllowlistFlag: string } {
  if (gitlabChosen(values)) {
    // Atlantis can serve several hosts at once; this server serves one.
    const github = ['gh-user', 'gh-token', 'gh-token-file', 'gh-app-id'].find((f) => isSet(values, f));
    if (github)
      throw new UsageError(`--gitlab-user/--gitlab-token and --${github} are both set: this server talks to one code host; unset one`);
    if (isSet(values, 'gh-team-allowlist'))
      throw new UsageError('--gh-team-allowlist is set, but the code host is GitLab: give the groups with --gitlab-group-allowlist');
    return {
      vcs: { kind: 'gitlab', gitlab: gitlabSettingsFromFlags(values) },
      warnings: [],
      teamAllowlistFlag: TEAM_ALLOWLIST_FLAG.gitlab,
    };
  }
  if (isSet(values, 'gitlab-group-allowlist'))
    throw new UsageError('--gitlab-group-allowlist is set, but the code host is not GitLab (--gitlab-user and --gitlab-token are not set)');
  // Not yet on GitHub here: GitHub's reviews are not dismissed.
  if (values['discard-approval-on-plan'] === true)
    throw new UsageError(
      '--discard-approval-on-plan (ATLANTIS_DISCARD_APPROVAL_ON_PLAN) is set, but this server does not support it on GitHub (GitLab only): unset it',
    );
  const { github, warnings } = githubSettingsFromFlags(values);
  return { vcs: { kind: 'github', github }, warnings, teamAllowlistFlag: TEAM_ALLOWLIST_FLAG.github };
}

/**
 * The host's secrets (its token, webhook secret, keys), for the redactor and the child
 * environment: each by its flag (for the start-up warning about weak secrets), then the rest.
 */
export function vcsSecrets(vcs: VcsConfig): { byFlag: Array<[string, string | undefined]>; more: string[] } {
  switch (vcs.kind) {
    case 'github':
      return githubSecrets(vcs.github);
    case 'gitlab':
      return gitlabSecrets(vcs.gitlab);
  }
}
