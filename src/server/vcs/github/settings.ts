// The server's GitHub settings from the --gh-* flags, checked with Atlantis's rules and words:
// a token (--gh-user with --gh-token or --gh-token-file) or a GitHub App (--gh-app-id with
// --gh-app-key or --gh-app-key-file), the webhook secret, the host and its API.
import { readFileSync } from 'node:fs';
import { type FlagValues, UsageError } from '../../../config/flags.js';
import { type GitHubAppSettings, appKeySecretValues, parseAppPrivateKey } from './app.js';

/** The server's GitHub settings (the --gh-* flags). */
export interface GitHubSettings {
  /** --gh-user; '' when the server authenticates as a GitHub App (as Atlantis's GithubUser is then). */
  user: string;
  /** The current token; reads --gh-token-file on each call. With a GitHub App: '' (see app). */
  token: () => string;
  /** --gh-app-*: authenticate as this GitHub App (app.ts) instead of with a token. */
  app: GitHubAppSettings | undefined;
  /** --gh-webhook-secret; undefined only with --insecure-no-webhook-secret. */
  webhookSecret: string | undefined;
  /** --gh-hostname: github.com, or a GitHub Enterprise host. */
  hostname: string;
  /** The REST API's base URL (--gh-api-url, or the one derived from --gh-hostname), without a trailing slash. */
  apiUrl: string;
  /** --gh-allow-mergeable-bypass-apply: a `blocked` PR is mergeable when only atlantis/apply blocks it. */
  allowMergeableBypassApply: boolean;
}

function str(values: FlagValues, name: string): string | undefined {
  const v = values[name];
  return typeof v === 'string' && v.length > 0 ? v : undefined;
}

/** Atlantis's start-up error when no GitHub credentials are complete. */
const GITHUB_CREDENTIALS_REQUIRED =
  '--gh-user/--gh-token or --gh-user/--gh-token-file or --gh-app-id/--gh-app-key-file or --gh-app-id/--gh-app-key must be set';

/** The GitHub settings of the flags; throws UsageError naming the flag. `warnings`: one line each, for the start-up log. */
export function githubSettingsFromFlags(values: FlagValues): { github: GitHubSettings; warnings: string[] } {
  const user = str(values, 'gh-user');
  const token = str(values, 'gh-token');
  const tokenFile = str(values, 'gh-token-file');
  const credentials = githubCredentials(values, user, token, tokenFile);
  if (credentials.kind === 'token' && token && tokenFile) throw new UsageError('--gh-token and --gh-token-file are mutually exclusive');
  if (tokenFile) {
    try {
      readFileSync(tokenFile, 'utf8');
    } catch (e) {
      throw new UsageError(`--gh-token-file ${tokenFile} cannot be read: ${(e as NodeJS.ErrnoException).code ?? String(e)}`);
    }
  }
  const webhookSecret = str(values, 'gh-webhook-secret');
  if (!webhookSecret && values['insecure-no-webhook-secret'] !== true) {
    throw new UsageError('--gh-webhook-secret is required (or pass --insecure-no-webhook-secret to accept unauthenticated webhooks)');
  }
  const hostname = values['gh-hostname'] as string;
  const apiUrl = str(values, 'gh-api-url') ?? (hostname === 'github.com' ? 'https://api.github.com' : `https://${hostname}/api/v3`);
  try {
    new URL(apiUrl);
  } catch {
    throw new UsageError(`invalid value "${apiUrl}" for --gh-api-url: not a URL`);
  }
  return {
    github: {
      user: user ?? '',
      token: credentials.kind === 'app' ? () => '' : tokenFile ? () => readFileSync(tokenFile, 'utf8').trim() : () => token!,
      app: credentials.kind === 'app' ? credentials.app : undefined,
      webhookSecret,
      hostname,
      apiUrl: apiUrl.replace(/\/+$/, ''),
      allowMergeableBypassApply: values['gh-allow-mergeable-bypass-apply'] === true,
    },
    warnings: credentials.warnings,
  };
}

type GitHubCredentials = { kind: 'token'; warnings: string[] } | { kind: 'app'; app: GitHubAppSettings; warnings: string[] };

/**
 * Which GitHub credentials the server uses, with Atlantis's rules: --gh-user needs a token or
 * a token file; --gh-app-id needs exactly one of --gh-app-key and --gh-app-key-file; with
 * both a user and an App, the user's token is used (Atlantis does the same, silently; we say so).
 */
function githubCredentials(
  values: FlagValues,
  ghUser: string | undefined,
  token: string | undefined,
  tokenFile: string | undefined,
): GitHubCredentials {
  const appId = (values['gh-app-id'] as number | undefined) ?? 0;
  const key = str(values, 'gh-app-key');
  const keyFile = str(values, 'gh-app-key-file');
  if (ghUser && !token && !tokenFile) throw new UsageError(GITHUB_CREDENTIALS_REQUIRED);
  if (appId !== 0 && Boolean(key) === Boolean(keyFile)) throw new UsageError(GITHUB_CREDENTIALS_REQUIRED);
  if (!ghUser && appId === 0) throw new UsageError(GITHUB_CREDENTIALS_REQUIRED);
  if (appId < 0) throw new UsageError(`invalid value ${appId} for --gh-app-id: must be a positive integer`);
  const installationId = (values['gh-app-installation-id'] as number | undefined) ?? 0;
  if (installationId < 0) throw new UsageError(`invalid value ${installationId} for --gh-app-installation-id: must be a positive integer`);
  if (ghUser) {
    const warnings =
      appId !== 0
        ? ['--gh-app-id (ATLANTIS_GH_APP_ID) is set, but so is --gh-user: the token is used and the GitHub App is not (as Atlantis)']
        : [];
    return { kind: 'token', warnings };
  }
  let pem: string;
  if (keyFile) {
    try {
      pem = readFileSync(keyFile, 'utf8');
    } catch (e) {
      throw new UsageError(`--gh-app-key-file ${keyFile} cannot be read: ${(e as NodeJS.ErrnoException).code ?? String(e)}`);
    }
  } else pem = key!;
  try {
    parseAppPrivateKey(pem);
  } catch (e) {
    // Never the key itself: it is a secret.
    throw new UsageError(`invalid ${keyFile ? '--gh-app-key-file' : '--gh-app-key'}: ${(e as Error).message}`);
  }
  const app: GitHubAppSettings = { appId, privateKeyPem: pem };
  if (installationId !== 0) app.installationId = installationId;
  const slug = str(values, 'gh-app-slug');
  if (slug) app.slug = slug;
  return { kind: 'app', app, warnings: [] };
}

/** The GitHub secrets, for the redactor: each by its flag (for the weak-secret warning), then the App key's forms. */
export function githubSecrets(g: GitHubSettings): { byFlag: Array<[string, string | undefined]>; more: string[] } {
  let token: string | undefined;
  try {
    token = g.token();
  } catch {
    // --gh-token-file cannot be read now: nothing to scrub yet.
    token = undefined;
  }
  return {
    byFlag: [
      ['--gh-token', token],
      ['--gh-webhook-secret', g.webhookSecret],
    ],
    // A GitHub App's installation tokens are added as they are fetched (GitHubClient remembers them).
    more: g.app ? appKeySecretValues(g.app.privateKeyPem) : [],
  };
}
