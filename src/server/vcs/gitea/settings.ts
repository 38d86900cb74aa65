// The server's Gitea settings from the --gitea-* flags, checked with Atlantis's rules and words
// where it has them: a user with its token, the base URL (http or https), the page size, and
// the webhook secret (required here, as --gh-webhook-secret is, unless
// --insecure-no-webhook-secret; Atlantis takes a Gitea without one silently).
import { type FlagValues, UsageError } from '../../../config/flags.js';

/** The server's Gitea settings (the --gitea-* flags). */
export interface GiteaSettings {
  /** --gitea-user: the account the token is of; its comments are the server's. */
  user: string;
  token: () => string;
  /** --gitea-webhook-secret; undefined only with --insecure-no-webhook-secret. */
  webhookSecret: string | undefined;
  /** --gitea-base-url without a trailing slash, e.g. https://gitea.example.com or http://10.0.0.5:3000/gitea. */
  baseUrl: string;
  /** --gitea-page-size: items per page of a list. */
  pageSize: number;
}

function str(values: FlagValues, name: string): string | undefined {
  const v = values[name];
  return typeof v === 'string' && v.length > 0 ? v : undefined;
}

/** Whether any flag says the server is for Gitea (its user or token). */
export function giteaFlagsGiven(values: FlagValues): boolean {
  return str(values, 'gitea-user') !== undefined || str(values, 'gitea-token') !== undefined;
}

/** The Gitea settings of the flags; throws UsageError naming the flag. */
export function giteaSettingsFromFlags(values: FlagValues): { gitea: GiteaSettings; warnings: string[] } {
  const user = str(values, 'gitea-user');
  const token = str(values, 'gitea-token');
  // Atlantis's rule: a user needs its token and a token its user.
  if (!user || !token) throw new UsageError('--gitea-user/--gitea-token must be set together');
  const baseUrl = (values['gitea-base-url'] as string | undefined) ?? 'https://gitea.com';
  let parsed: URL;
  try {
    parsed = new URL(baseUrl);
  } catch {
    throw new UsageError(`error parsing --gitea-base-url flag value "${baseUrl}": not a URL`);
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:')
    throw new UsageError(`--gitea-base-url must have http:// or https://, got "${baseUrl}"`);
  if (parsed.username || parsed.password || parsed.search || parsed.hash)
    throw new UsageError('--gitea-base-url must be the plain URL of the Gitea, without credentials, a query or a fragment');
  const pageSize = (values['gitea-page-size'] as number | undefined) ?? 30;
  if (!Number.isInteger(pageSize) || pageSize < 1)
    throw new UsageError(`invalid value ${pageSize} for --gitea-page-size: must be at least 1`);
  const webhookSecret = str(values, 'gitea-webhook-secret');
  if (!webhookSecret && values['insecure-no-webhook-secret'] !== true) {
    throw new UsageError('--gitea-webhook-secret is required (or pass --insecure-no-webhook-secret to accept unauthenticated webhooks)');
  }
  // Atlantis's Gitea client cannot read teams: with a team allowlist every command fails there.
  if (str(values, 'gh-team-allowlist'))
    throw new UsageError(
      '--gh-team-allowlist is set, but Gitea teams are not read (Atlantis v0.47 cannot read them either, and runs no command with it): unset it',
    );
  const warnings: string[] = [];
  for (const [flag, v] of [
    ['--gitea-token', token],
    ['--gitea-webhook-secret', webhookSecret],
  ] as const)
    if (v?.includes('\n')) warnings.push(`${flag} contains a newline which is usually unintentional`);
  return {
    gitea: { user, token: () => token, webhookSecret, baseUrl: baseUrl.replace(/\/+$/, ''), pageSize },
    warnings,
  };
}

/** The Gitea secrets, for the redactor: each by its flag (for the weak-secret warning). */
export function giteaSecrets(g: GiteaSettings): { byFlag: Array<[string, string | undefined]>; more: string[] } {
  return {
    byFlag: [
      ['--gitea-token', g.token()],
      ['--gitea-webhook-secret', g.webhookSecret],
    ],
    more: [],
  };
}
