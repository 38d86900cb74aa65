// The server's settings: Atlantis's flag names where Atlantis has the setting (so existing
// ATLANTIS_* env keeps working), plus our drain flags. Validation happens here, before any
// listener or file is opened, so a bad setting is one line naming the flag and exit code 2.
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { homedir, hostname } from 'node:os';
import path from 'node:path';
import { judgeAtlantisFlags, unhonouredAtlantisFlagSpecs } from '../config/atlantis-flags.js';
import { MAX_DURATION_MS } from '../config/duration.js';
import { type FlagSpec, type FlagValues, UsageError } from '../config/flags.js';
import { SERVER_PORT } from '../contract/drain-protocol.js';
import type { LogLevel } from '../log.js';
import { ACCEPTED_COMMAND_NAMES, type CommandName, DEFAULT_ALLOW_COMMANDS, resolveAllowCommands } from './workflow/commands.js';
import { automergeMethodProblem } from './workflow/automerge.js';
import { DEFAULT_BLOCKED_EXTRA_ARGS } from './workflow/extra-args.js';
import { normaliseTfVersion } from './terraform/tf-versions.js';
import { type GitHubAppSettings, parseAppPrivateKey } from './vcs/github-app.js';
import { type TeamRule, TeamAllowlistError, parseTeamAllowlist } from './workflow/team-allowlist.js';
import type { CheckoutStrategy } from './workflow/working-copy.js';

/** Atlantis's defaults: an empty --web-username/--web-password falls back to them too. */
export const DEFAULT_WEB_USERNAME = 'atlantis';
export const DEFAULT_WEB_PASSWORD = 'atlantis';
export const DEFAULT_JOB_LOG_RETENTION_MS = 7 * 24 * 3600_000;
export const DEFAULT_JOB_LOG_MAX_COUNT = 1000;

export const SERVER_FLAGS: FlagSpec[] = [
  { name: 'port', type: 'int', default: SERVER_PORT, description: 'Port to bind to (0 picks a free port)' },
  {
    name: 'bind-address',
    type: 'string',
    default: '0.0.0.0',
    description: 'Address to bind to (ours; the local node sets it to the pod IP)',
  },
  {
    name: 'data-dir',
    type: 'string',
    default: path.join(homedir(), '.atlantis'),
    description: 'Path to directory to store Atlantis data: locks, plans, working copies, job logs',
  },
  {
    name: 'atlantis-url',
    type: 'string',
    description: 'URL that Atlantis can be reached at, used in PR comments and commit status links (default http://<hostname>:<port>)',
  },
  { name: 'gh-user', type: 'string', description: 'GitHub username of API user (required)' },
  { name: 'gh-token', type: 'string', description: 'GitHub token of API user (this or --gh-token-file is required)' },
  {
    name: 'gh-token-file',
    type: 'string',
    description: 'File containing the GitHub token; re-read on every use so a rotated Secret takes effect',
  },
  { name: 'gh-webhook-secret', type: 'string', description: 'Secret used to validate GitHub webhooks (X-Hub-Signature-256)' },
  {
    name: 'gh-app-id',
    type: 'int',
    default: 0,
    description:
      'GitHub App Id. If defined, initializes the GitHub client with app-based credentials (with --gh-app-key or --gh-app-key-file)',
  },
  { name: 'gh-app-key', type: 'string', description: "The GitHub App's private key (PEM); a secret: give it as env" },
  { name: 'gh-app-key-file', type: 'string', description: "A path to a file containing the GitHub App's private key (read at start)" },
  {
    name: 'gh-app-slug',
    type: 'string',
    description: "The GitHub App's slug (URL-friendly name); the server's own comments are then those of <slug>[bot]",
  },
  {
    name: 'gh-app-installation-id',
    type: 'int',
    default: 0,
    description: "GitHub App Installation Id; default: the App's only installation (an App installed more than once needs it)",
  },
  {
    name: 'gh-hostname',
    type: 'string',
    default: 'github.com',
    description: 'Hostname of your GitHub Enterprise installation; the API is https://<host>/api/v3',
  },
  { name: 'gh-api-url', type: 'string', description: 'GitHub REST API base URL (ours; overrides the one derived from --gh-hostname)' },
  {
    name: 'repo-allowlist',
    type: 'string',
    description: 'Comma separated list of repositories that Atlantis will operate on, e.g. github.com/acme/*, with ! to exclude (required)',
  },
  { name: 'repo-config', type: 'string', description: 'Path to a server-side repo config YAML file' },
  { name: 'repo-config-json', type: 'string', description: 'The server-side repo config as a JSON string, instead of --repo-config' },
  {
    name: 'allow-commands',
    type: 'list',
    default: [...DEFAULT_ALLOW_COMMANDS],
    description: `Comma separated list of allowed commands (${ACCEPTED_COMMAND_NAMES.join(', ')}, or all)`,
  },
  {
    name: 'blocked-extra-args',
    type: 'list',
    default: [...DEFAULT_BLOCKED_EXTRA_ARGS],
    description: 'Comma separated list of terraform flags that may not be passed after --',
  },
  { name: 'executable-name', type: 'string', default: 'atlantis', description: 'Comment command executable name' },
  // Comment layout (workflow/messages.ts, vcs/comment-split.ts, workflow/hide-comments.ts).
  {
    name: 'max-comments-per-command',
    type: 'int',
    default: 100,
    description: 'If non-zero, the maximum number of comments to split command output into before truncating.',
  },
  { name: 'disable-markdown-folding', type: 'bool', default: false, description: 'Toggle off folding in markdown output.' },
  {
    name: 'enable-diff-markdown-format',
    type: 'bool',
    default: false,
    description: 'Enable Atlantis to format Terraform plan output into a markdown-diff friendly format for color-coding purposes.',
  },
  {
    name: 'hide-prev-plan-comments',
    type: 'bool',
    default: false,
    description: 'Hide previous plan comments to reduce clutter in the PR (minimised as outdated through GraphQL).',
  },
  {
    name: 'hide-unchanged-plan-comments',
    type: 'bool',
    default: false,
    description: 'Remove no-changes plan comments from the pull request.',
  },
  { name: 'parallel-pool-size', type: 'int', default: 15, description: 'Max number of projects to run in parallel' },
  { name: 'parallel-plan', type: 'bool', default: false, description: 'Run plan operations in parallel.' },
  { name: 'parallel-apply', type: 'bool', default: false, description: 'Run apply operations in parallel.' },
  {
    name: 'gh-allow-mergeable-bypass-apply',
    type: 'bool',
    default: false,
    description: 'Feature flag to enable functionality to allow mergeable check to ignore apply required check',
  },
  { name: 'disable-autoplan', type: 'bool', default: false, description: 'Disable atlantis auto planning' },
  {
    name: 'automerge',
    type: 'bool',
    default: false,
    description: 'Automatically merge pull requests when all plans are successfully applied (atlantis.yaml automerge: wins when set)',
  },
  {
    name: 'automerge-method',
    type: 'string',
    default: '',
    description:
      "Default merge method when automerging, unless the comment's --auto-merge-method says: merge, rebase or squash (default: the first the repository allows)",
  },
  {
    name: 'disable-automerge-label',
    type: 'string',
    default: '',
    description: 'Pull request label that stops automerge when the pull request has it',
  },
  {
    name: 'fail-on-pre-workflow-hook-error',
    type: 'bool',
    default: false,
    description: 'Fail and do not run the requested Atlantis command if any of the pre workflow hooks error.',
  },
  {
    name: 'disable-apply-all',
    type: 'bool',
    default: false,
    description: 'Refuse "apply" without -p, -d or -w (apply all); a project, dir or workspace must be named',
  },
  {
    name: 'disable-repo-locking',
    type: 'bool',
    default: false,
    description: 'Disable atlantis locking repos: no project locks are taken, whatever repo_locks says',
  },
  {
    name: 'emoji-reaction',
    type: 'string',
    default: '',
    description: 'Emoji Reaction to use to react to comments (e.g. eyes); empty: no reaction, as Atlantis',
  },
  {
    name: 'disable-apply',
    type: 'bool',
    default: false,
    description: 'Refuse every apply command, as if apply were left out of --allow-commands (Atlantis before v0.27)',
  },
  {
    name: 'gh-team-allowlist',
    type: 'string',
    description:
      "Comma separated team:command pairs, e.g. dev:plan,ops:apply,devops:*; with it set, a user runs a command only as a member of a listed GitHub team (of the repo's organisation) allowed that command (needs read:org)",
  },
  { name: 'log-level', type: 'string', default: 'info', description: 'Log level: debug, info, warn or error' },
  {
    name: 'tf-binary',
    type: 'string',
    default: 'terraform',
    description: 'terraform (or tofu) executable to run, a name on PATH or a path',
  },
  {
    name: 'drain-timeout',
    type: 'duration',
    default: 0,
    maxMs: MAX_DURATION_MS,
    description: 'After a signal starts a drain, how long to wait for running operations before interrupting terraform (0 = wait forever)',
  },
  {
    name: 'terraform-interrupt-grace',
    type: 'duration',
    default: 60_000,
    maxMs: MAX_DURATION_MS,
    description: 'After interrupting terraform with SIGINT, how long to wait before SIGKILL',
  },
  {
    name: 'queue-during-drain',
    type: 'bool',
    default: false,
    description: 'Queue commands that arrive while draining, and run them first on the next start on this data dir',
  },
  {
    name: 'allow-fork-prs',
    type: 'bool',
    default: false,
    description: 'Allow Atlantis to run on pull requests from forks. A security issue for public repos.',
  },
  {
    name: 'silence-fork-pr-errors',
    type: 'bool',
    default: false,
    description: 'Silences the posting of fork pull requests not allowed error comments.',
  },
  {
    name: 'insecure-no-webhook-secret',
    type: 'bool',
    default: false,
    description: 'Allow starting without --gh-webhook-secret (webhooks are then not authenticated)',
  },
  {
    name: 'web-basic-auth',
    type: 'bool',
    default: false,
    description:
      'Require HTTP Basic authentication for the web page, job pages, job logs and /metrics (/events, /healthz, /readyz and /status stay open)',
  },
  { name: 'web-username', type: 'string', default: DEFAULT_WEB_USERNAME, description: 'Username for --web-basic-auth' },
  { name: 'web-password', type: 'string', default: DEFAULT_WEB_PASSWORD, description: 'Password for --web-basic-auth' },
  {
    name: 'job-log-retention',
    type: 'duration',
    default: DEFAULT_JOB_LOG_RETENTION_MS,
    description: 'Delete job logs older than this, at start and periodically (ours; 0 = keep regardless of age)',
  },
  {
    name: 'job-log-max-count',
    type: 'int',
    default: DEFAULT_JOB_LOG_MAX_COUNT,
    description: 'Keep at most this many job logs, the newest (ours; 0 = no limit)',
  },
  {
    name: 'checkout-strategy',
    type: 'string',
    default: 'branch',
    description:
      "How to check out pull requests: 'branch' (the PR's head branch) or 'merge' (the base branch with the PR merged in locally, as it will look after the merge)",
  },
  {
    name: 'checkout-depth',
    type: 'int',
    default: 0,
    description:
      'Used only with --checkout-strategy=merge: how many commits of the base and head branches to fetch (0 = all); the whole history is fetched when the merge base is further back',
  },
  {
    name: 'default-tf-version',
    type: 'string',
    description: 'Terraform version to default to (ex. v1.9.0); downloaded if not on disk. If not set, the version of --tf-binary',
  },
  {
    name: 'tf-download',
    type: 'bool',
    default: true,
    description:
      'Allow downloading the Terraform versions projects ask for (terraform_version, --default-tf-version) from --tf-download-url',
  },
  {
    name: 'tf-download-url',
    type: 'string',
    default: 'https://releases.hashicorp.com',
    description:
      'Base URL to download Terraform versions from (<url>/terraform/<v>/terraform_<v>_<os>_<arch>.zip and terraform_<v>_SHA256SUMS)',
  },
  {
    name: 'write-git-creds',
    type: 'bool',
    default: false,
    description:
      'Give terraform init git credentials (--gh-user and the token, for --gh-hostname) so it can fetch private modules over HTTPS or SSH; the file exists only while an init runs',
  },
  // Atlantis flags this server does not honour: parsed (hidden) only to be refused or warned about.
  ...unhonouredAtlantisFlagSpecs(),
];

export interface ServerConfig {
  port: number;
  bindAddress: string;
  dataDir: string;
  atlantisUrl: string;
  /** --gh-user; empty when the server authenticates as a GitHub App (as Atlantis's GithubUser is then). */
  ghUser: string;
  /** Returns the current token; reads --gh-token-file on each call. With a GitHub App: '' (see ghApp). */
  ghToken: () => string;
  /** --gh-app-*: authenticate as this GitHub App (vcs/github-app.ts) instead of with a token. */
  ghApp: GitHubAppSettings | undefined;
  ghWebhookSecret: string | undefined;
  ghHostname: string;
  ghApiUrl: string;
  repoAllowlist: string;
  repoConfigPath: string | undefined;
  /** --repo-config-json text; exclusive with repoConfigPath. */
  repoConfigJson: string | undefined;
  /** What comments may run (workflow/commands.ts), after --disable-apply. */
  allowCommands: CommandName[];
  blockedExtraArgs: string[];
  executableName: string;
  /** 0: no limit. */
  maxCommentsPerCommand: number;
  disableMarkdownFolding: boolean;
  enableDiffMarkdownFormat: boolean;
  hidePrevPlanComments: boolean;
  hideUnchangedPlanComments: boolean;
  parallelPoolSize: number;
  /** --parallel-plan / --parallel-apply: the default when atlantis.yaml does not set parallel_plan / parallel_apply. */
  parallelPlan: boolean;
  parallelApply: boolean;
  /** --gh-allow-mergeable-bypass-apply: a `blocked` PR is mergeable when only atlantis/apply blocks it. */
  ghAllowMergeableBypassApply: boolean;
  disableAutoplan: boolean;
  /** --automerge: merge after every plan is applied (workflow/automerge.ts). */
  automerge: boolean;
  /** --automerge-method; '' = the first the repository allows. */
  automergeMethod: string;
  /** --disable-automerge-label; '' = none. */
  disableAutomergeLabel: string;
  disableApplyAll: boolean;
  /** --disable-repo-locking: no project locks at all. */
  disableRepoLocking: boolean;
  /** --emoji-reaction: the reaction to a command comment; '' for none. */
  emojiReaction: string;
  failOnPreWorkflowHookError: boolean;
  /** --gh-team-allowlist rules; empty: no team check. */
  ghTeamAllowlist: TeamRule[];
  /** One line each: Atlantis flags that are set but ignored (cosmetic); the CLI logs them. */
  flagWarnings: string[];
  logLevel: LogLevel;
  tfBinary: string;
  drainTimeoutMs: number;
  terraformInterruptGraceMs: number;
  queueDuringDrain: boolean;
  insecureNoWebhookSecret: boolean;
  webBasicAuth: boolean;
  webUsername: string;
  /** A secret: the redactor must know it when webBasicAuth is on (see docs/server.md). */
  webPassword: string;
  /** 0 = no age limit. */
  jobLogRetentionMs: number;
  /** 0 = no count limit. */
  jobLogMaxCount: number;
  allowForkPrs: boolean;
  silenceForkPrErrors: boolean;
  checkoutStrategy: CheckoutStrategy;
  /** 0 = whole history. */
  checkoutDepth: number;
  /** --default-tf-version, normalised (1.9 -> 1.9.0); undefined: the version of tfBinary. */
  defaultTfVersion: string | undefined;
  tfDownload: boolean;
  tfDownloadUrl: string;
  writeGitCreds: boolean;
}

const LOG_LEVELS: LogLevel[] = ['debug', 'info', 'warn', 'error'];

function str(values: FlagValues, name: string): string | undefined {
  const v = values[name];
  return typeof v === 'string' && v.length > 0 ? v : undefined;
}

/** Turns parsed flag values into a validated config; throws UsageError naming the flag. */
export function buildServerConfig(values: FlagValues): ServerConfig {
  const judged = judgeAtlantisFlags(values);
  if (judged.refusals.length > 0) throw new UsageError(judged.refusals[0]!);
  const port = values.port as number;
  if (port < 0 || port > 65535) throw new UsageError(`invalid value ${port} for --port: must be between 0 and 65535`);
  const pool = values['parallel-pool-size'] as number;
  if (pool < 1) throw new UsageError(`invalid value ${pool} for --parallel-pool-size: must be at least 1`);
  const logLevel = values['log-level'] as string;
  if (!LOG_LEVELS.includes(logLevel as LogLevel))
    throw new UsageError(`invalid value "${logLevel}" for --log-level: must be one of ${LOG_LEVELS.join(', ')}`);

  const repoAllowlist = str(values, 'repo-allowlist');
  if (!repoAllowlist) throw new UsageError('--repo-allowlist must be set for security purposes (e.g. github.com/acme/*)');
  const ghUser = str(values, 'gh-user');
  const token = str(values, 'gh-token');
  const tokenFile = str(values, 'gh-token-file');
  const credentials = githubCredentials(values, ghUser, token, tokenFile);
  if (credentials.kind === 'token' && token && tokenFile) throw new UsageError('--gh-token and --gh-token-file are mutually exclusive');
  if (tokenFile) {
    try {
      readFileSync(tokenFile, 'utf8');
    } catch (e) {
      throw new UsageError(`--gh-token-file ${tokenFile} cannot be read: ${(e as NodeJS.ErrnoException).code ?? String(e)}`);
    }
  }
  if (str(values, 'repo-config') && str(values, 'repo-config-json'))
    throw new UsageError('cannot use --repo-config and --repo-config-json at the same time');
  const ghWebhookSecret = str(values, 'gh-webhook-secret');
  const insecure = values['insecure-no-webhook-secret'] === true;
  if (!ghWebhookSecret && !insecure) {
    throw new UsageError('--gh-webhook-secret is required (or pass --insecure-no-webhook-secret to accept unauthenticated webhooks)');
  }

  const commands = resolveAllowCommands(values['allow-commands'] as string[]);
  if (commands.unknown !== undefined)
    // Atlantis's words (cmd/server.go wrapping command.ParseCommandName's error).
    throw new UsageError(`invalid --allow-commands: unknown command name: ${commands.unknown}`);
  const commandWarnings = commands.ignored.map(
    (i) => `--allow-commands (ATLANTIS_ALLOW_COMMANDS) names ${i.name}, but this server ignores it: ${i.why}`,
  );
  // As Atlantis did when it still had the flag: apply leaves the allowed commands, so an
  // apply comment gets the "unknown command" answer.
  const expanded = values['disable-apply'] === true ? commands.allowed.filter((c) => c !== 'apply') : commands.allowed;
  let ghTeamAllowlist: TeamRule[];
  try {
    ghTeamAllowlist = parseTeamAllowlist(str(values, 'gh-team-allowlist') ?? '', ACCEPTED_COMMAND_NAMES);
  } catch (e) {
    if (e instanceof TeamAllowlistError) throw new UsageError(`invalid value for --gh-team-allowlist: ${e.message}`);
    throw e;
  }

  const maxComments = values['max-comments-per-command'] as number;
  if (maxComments < 0) throw new UsageError(`invalid value ${maxComments} for --max-comments-per-command: must be 0 (no limit) or more`);
  const automergeMethod = (values['automerge-method'] as string | undefined) ?? '';
  const methodProblem = automergeMethodProblem(automergeMethod);
  if (methodProblem) throw new UsageError(methodProblem);

  const jobLogMaxCount = values['job-log-max-count'] as number;
  if (jobLogMaxCount < 0) throw new UsageError(`invalid value ${jobLogMaxCount} for --job-log-max-count: must be 0 (no limit) or more`);

  const checkoutStrategy = values['checkout-strategy'] as string;
  if (checkoutStrategy !== 'branch' && checkoutStrategy !== 'merge')
    throw new UsageError(
      `invalid value "${checkoutStrategy}" for --checkout-strategy: invalid checkout strategy: not one of branch or merge`,
    );
  const rawTfVersion = str(values, 'default-tf-version');
  const defaultTfVersion = rawTfVersion === undefined ? undefined : normaliseTfVersion(rawTfVersion);
  if (defaultTfVersion === null)
    throw new UsageError(`invalid value "${rawTfVersion}" for --default-tf-version: Malformed version: ${rawTfVersion}`);
  const tfDownloadUrl = str(values, 'tf-download-url') ?? 'https://releases.hashicorp.com';
  if (!/^https?:\/\/[^/@]+(\/|$)/.test(tfDownloadUrl))
    throw new UsageError('invalid value for --tf-download-url: must be an http(s) URL without credentials');

  const dataDir = path.resolve(values['data-dir'] as string);
  ensureWritableDir(dataDir);
  const ghHostname = values['gh-hostname'] as string;
  const ghApiUrl = str(values, 'gh-api-url') ?? (ghHostname === 'github.com' ? 'https://api.github.com' : `https://${ghHostname}/api/v3`);
  try {
    new URL(ghApiUrl);
  } catch {
    throw new UsageError(`invalid value "${ghApiUrl}" for --gh-api-url: not a URL`);
  }
  const atlantisUrl = str(values, 'atlantis-url') ?? `http://${hostname()}:${port}`;
  try {
    new URL(atlantisUrl);
  } catch {
    throw new UsageError(`invalid value "${atlantisUrl}" for --atlantis-url: not a URL`);
  }

  return {
    port,
    bindAddress: values['bind-address'] as string,
    dataDir,
    atlantisUrl: atlantisUrl.replace(/\/+$/, ''),
    ghUser: ghUser ?? '',
    ghToken: credentials.kind === 'app' ? () => '' : tokenFile ? () => readFileSync(tokenFile, 'utf8').trim() : () => token!,
    ghApp: credentials.kind === 'app' ? credentials.app : undefined,
    ghWebhookSecret,
    ghHostname,
    ghApiUrl: ghApiUrl.replace(/\/+$/, ''),
    repoAllowlist,
    repoConfigPath: str(values, 'repo-config'),
    repoConfigJson: str(values, 'repo-config-json'),
    allowCommands: expanded,
    blockedExtraArgs: values['blocked-extra-args'] as string[],
    executableName: values['executable-name'] as string,
    maxCommentsPerCommand: maxComments,
    disableMarkdownFolding: values['disable-markdown-folding'] === true,
    enableDiffMarkdownFormat: values['enable-diff-markdown-format'] === true,
    hidePrevPlanComments: values['hide-prev-plan-comments'] === true,
    hideUnchangedPlanComments: values['hide-unchanged-plan-comments'] === true,
    parallelPoolSize: pool,
    parallelPlan: values['parallel-plan'] === true,
    parallelApply: values['parallel-apply'] === true,
    ghAllowMergeableBypassApply: values['gh-allow-mergeable-bypass-apply'] === true,
    disableAutoplan: values['disable-autoplan'] === true,
    automerge: values.automerge === true,
    automergeMethod,
    disableAutomergeLabel: (values['disable-automerge-label'] as string | undefined) ?? '',
    disableApplyAll: values['disable-apply-all'] === true,
    disableRepoLocking: values['disable-repo-locking'] === true,
    emojiReaction: (values['emoji-reaction'] as string | undefined) ?? '',
    failOnPreWorkflowHookError: values['fail-on-pre-workflow-hook-error'] === true,
    ghTeamAllowlist,
    flagWarnings: [...judged.warnings, ...commandWarnings, ...credentials.warnings],
    logLevel: logLevel as LogLevel,
    tfBinary: values['tf-binary'] as string,
    drainTimeoutMs: values['drain-timeout'] as number,
    terraformInterruptGraceMs: values['terraform-interrupt-grace'] as number,
    queueDuringDrain: values['queue-during-drain'] === true,
    insecureNoWebhookSecret: insecure,
    webBasicAuth: values['web-basic-auth'] === true,
    webUsername: str(values, 'web-username') ?? DEFAULT_WEB_USERNAME,
    webPassword: str(values, 'web-password') ?? DEFAULT_WEB_PASSWORD,
    jobLogRetentionMs: values['job-log-retention'] as number,
    jobLogMaxCount,
    allowForkPrs: values['allow-fork-prs'] === true,
    silenceForkPrErrors: values['silence-fork-pr-errors'] === true,
    checkoutStrategy,
    // As Atlantis: a depth of 0 or less fetches everything.
    checkoutDepth: Math.max(0, values['checkout-depth'] as number),
    defaultTfVersion,
    tfDownload: values['tf-download'] !== false,
    tfDownloadUrl: tfDownloadUrl.replace(/\/+$/, ''),
    writeGitCreds: values['write-git-creds'] === true,
  };
}

/** Atlantis's start-up error when no GitHub credentials are complete (its GitHub part: other hosts are refused here). */
const GITHUB_CREDENTIALS_REQUIRED =
  '--gh-user/--gh-token or --gh-user/--gh-token-file or --gh-app-id/--gh-app-key-file or --gh-app-id/--gh-app-key must be set';

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

function ensureWritableDir(dir: string): void {
  try {
    mkdirSync(dir, { recursive: true });
    // A real write, not access(2): root passes access checks even on read-only mounts.
    const probe = path.join(dir, `.write-probe-${process.pid}`);
    writeFileSync(probe, '');
    rmSync(probe);
  } catch (e) {
    throw new UsageError(`--data-dir ${dir} is not a writable directory: ${(e as NodeJS.ErrnoException).code ?? String(e)}`);
  }
}
