// Which code host the server talks to, and its settings, from the flags: the host's part of
// ServerConfig, as locks/store-config.ts is the store's. GitHub, GitLab when its user or token
// is set, or Gitea when its flags are; a new host adds a member to VcsConfig and its flags here
// (Atlantis's flags of the hosts not served are refused at start, config/atlantis-flags.ts).
// The host itself is opened in open-host.ts.
import { type FlagValues, UsageError } from '../../config/flags.js';
import { type GiteaSettings, giteaFlagsGiven, giteaSecrets, giteaSettingsFromFlags } from './gitea/settings.js';
import { type GitHubSettings, githubSecrets, githubSettingsFromFlags } from './github/settings.js';
import { type GitLabSettings, gitlabChosen, gitlabSecrets, gitlabSettingsFromFlags } from './gitlab/settings.js';

export type VcsConfig =
  | { kind: 'github'; github: GitHubSettings }
  | { kind: 'gitlab'; gitlab: GitLabSettings }
  | { kind: 'gitea'; gitea: GiteaSettings };

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
  // Atlantis can serve several hosts at once; this server serves one.
  const githubFlag = ['gh-user', 'gh-token', 'gh-token-file', 'gh-app-id'].find((f) => isSet(values, f));
  if (gitlabChosen(values)) {
    if (githubFlag)
      throw new UsageError(`--gitlab-user/--gitlab-token and --${githubFlag} are both set: this server talks to one code host; unset one`);
    if (giteaFlagsGiven(values))
      throw new UsageError('--gitlab-user/--gitlab-token and --gitea-user are both set: this server talks to one code host; unset one');
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
  // Not yet on GitHub or Gitea here: their reviews are not dismissed.
  if (values['discard-approval-on-plan'] === true)
    throw new UsageError(
      '--discard-approval-on-plan (ATLANTIS_DISCARD_APPROVAL_ON_PLAN) is set, but this server does not support it on GitHub or Gitea (GitLab only): unset it',
    );
  if (giteaFlagsGiven(values)) {
    if (githubFlag) throw new UsageError('--gitea-user and --gh-user (or a GitHub App) are both set: a server talks to one code host');
    const { gitea, warnings } = giteaSettingsFromFlags(values);
    return { vcs: { kind: 'gitea', gitea }, warnings, teamAllowlistFlag: TEAM_ALLOWLIST_FLAG.github };
  }
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
    case 'gitea':
      return giteaSecrets(vcs.gitea);
  }
}
