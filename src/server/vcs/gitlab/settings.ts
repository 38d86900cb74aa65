// The server's GitLab settings from the --gitlab-* flags, with Atlantis's rules: a user and a
// token, the webhook secret, the host (gitlab.com, or a self-managed `host[:port][/path]`,
// HTTPS assumed), the groups of the group allowlist and the commit-status retries.
import { type FlagValues, UsageError } from '../../../config/flags.js';

/** The server's GitLab settings (the --gitlab-* flags). */
export interface GitLabSettings {
  /** --gitlab-user */
  user: string;
  /** --gitlab-token */
  token: () => string;
  /** --gitlab-webhook-secret; undefined only with --insecure-no-webhook-secret. */
  webhookSecret: string | undefined;
  /** GitLab's address without a trailing slash: `https://gitlab.com`, `https://host:port/gitlab`. */
  webUrl: string;
  /** The REST API: `<webUrl>/api/v4`. */
  apiUrl: string;
  /** `host[:port]` of webUrl: a clone URL's host must be this one (as Atlantis checks it). */
  host: string;
  /** webUrl's path (`/gitlab`), or ''; clone URLs are under it. */
  basePath: string;
  /** The host name alone (no port): how --repo-allowlist names GitLab's repositories, as Atlantis. */
  hostname: string;
  /** The groups --gitlab-group-allowlist names, asked for membership in that order (Atlantis's ConfiguredGroups). */
  groups: string[];
  /** --gitlab-status-retry-enabled: look for the commit's pipeline five times (2 to 5 s apart) before a status, not twice. */
  statusRetryEnabled: boolean;
}

function str(values: FlagValues, name: string): string | undefined {
  const v = values[name];
  return typeof v === 'string' && v.length > 0 ? v : undefined;
}

/** Whether the flags choose GitLab: its user or its token is set. */
export function gitlabChosen(values: FlagValues): boolean {
  return str(values, 'gitlab-user') !== undefined || str(values, 'gitlab-token') !== undefined;
}

/**
 * --gitlab-hostname as Atlantis reads it: `https://` assumed without a scheme, a host, and an
 * optional path (a relative URL root). Throws UsageError naming the flag.
 */
export function parseGitlabHostname(raw: string): { webUrl: string; host: string; basePath: string; hostname: string } {
  const absolute = /^https?:\/\//.test(raw) ? raw : `https://${raw}`;
  let u: URL;
  try {
    u = new URL(absolute);
  } catch {
    throw new UsageError(`invalid value "${raw}" for --gitlab-hostname: not a host name or URL`);
  }
  if (u.host === '') throw new UsageError(`invalid value "${raw}" for --gitlab-hostname: it has no host`);
  if (u.username !== '' || u.password !== '' || u.search !== '' || u.hash !== '')
    throw new UsageError(`invalid value "${raw}" for --gitlab-hostname: a host and a path only (no credentials, query or fragment)`);
  const basePath = u.pathname.replace(/\/+$/, '');
  return { webUrl: `${u.protocol}//${u.host}${basePath}`, host: u.host, basePath, hostname: u.hostname };
}

/** The group names of --gitlab-group-allowlist's `group:command` entries, each once, sorted (the order Atlantis asks GitLab in). */
export function allowlistGroups(value: string): string[] {
  const groups = new Set<string>();
  for (const entry of value.split(',')) {
    const group = (entry.split(':')[0] ?? '').trim();
    // `*` is every group: nothing to ask GitLab about.
    if (group !== '' && group !== '*') groups.add(group);
  }
  return [...groups].sort();
}

/** Atlantis's start-up error when the GitLab credentials are incomplete. */
const GITLAB_CREDENTIALS_REQUIRED = '--gitlab-user and --gitlab-token must both be set';

/** The GitLab settings of the flags; throws UsageError naming the flag. */
export function gitlabSettingsFromFlags(values: FlagValues): GitLabSettings {
  const user = str(values, 'gitlab-user');
  const token = str(values, 'gitlab-token');
  if (!user || !token) throw new UsageError(GITLAB_CREDENTIALS_REQUIRED);
  const webhookSecret = str(values, 'gitlab-webhook-secret');
  if (!webhookSecret && values['insecure-no-webhook-secret'] !== true) {
    throw new UsageError('--gitlab-webhook-secret is required (or pass --insecure-no-webhook-secret to accept unauthenticated webhooks)');
  }
  const where = parseGitlabHostname(str(values, 'gitlab-hostname') ?? 'gitlab.com');
  return {
    user,
    token: () => token,
    webhookSecret,
    ...where,
    apiUrl: `${where.webUrl}/api/v4`,
    groups: allowlistGroups(str(values, 'gitlab-group-allowlist') ?? ''),
    statusRetryEnabled: values['gitlab-status-retry-enabled'] === true,
  };
}

/** The GitLab secrets, for the redactor: each by its flag (for the weak-secret warning). */
export function gitlabSecrets(g: GitLabSettings): { byFlag: Array<[string, string | undefined]>; more: string[] } {
  return {
    byFlag: [
      ['--gitlab-token', g.token()],
      ['--gitlab-webhook-secret', g.webhookSecret],
    ],
    more: [],
  };
}
