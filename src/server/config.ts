// The server's settings: Atlantis's flag names where Atlantis has the setting (so existing
// ATLANTIS_* env keeps working), plus our drain flags. Validation happens here, before any
// listener or file is opened, so a bad setting is one line naming the flag and exit code 2.
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import path from 'node:path';
import { judgeAtlantisFlags } from '../config/atlantis-flags.js';
import type { WebhookEntry } from '../config/config-file.js';
import { type FlagValues, UsageError } from '../config/flags.js';
import type { LogLevel } from '../log.js';
import { type StoreConfig, replicaIdFromFlags, replicaUrlFromFlags, storeConfigFromFlags } from './locks/store-config.js';
import { ACCEPTED_COMMAND_NAMES, type CommandName, resolveAllowCommands } from './workflow/comment-parser/commands.js';
import { automergeMethodProblem } from './workflow/automerge/automerge-config.js';
import { normaliseTfVersion } from './terraform/tf-versions.js';
import { type VcsConfig, vcsConfigFromFlags } from './vcs/host-config.js';
import { type TeamRule, TeamAllowlistError, parseTeamAllowlist } from './workflow/commands/team-allowlist.js';
import type { CheckoutStrategy } from './workflow/checkout/working-copy.js';
import { DEFAULT_WEB_PASSWORD, DEFAULT_WEB_USERNAME } from './server-flags.js';
import { type WebhookSettings, parseWebhookSettings } from './notifications/apply-webhooks.js';
import { type PolicySettings, policySettings } from './policy/policy-settings.js';
import { type TerraformSettings, terraformSettings } from './terraform/terraform-settings.js';

// The flag table lives in server-flags.ts; these names stay importable from here.
export {
  DEFAULT_JOB_LOG_MAX_COUNT,
  DEFAULT_JOB_LOG_RETENTION_MS,
  DEFAULT_WEB_PASSWORD,
  DEFAULT_WEB_USERNAME,
  SERVER_FLAGS,
} from './server-flags.js';

export interface ServerConfig {
  port: number;
  bindAddress: string;
  dataDir: string;
  atlantisUrl: string;
  /** --allowed-hosts: more names the web UI answers to (http/allowed-hosts.ts). */
  allowedHosts: string[];
  /** The code host and its settings (--gh-*, --gitlab-*): vcs/host-config.ts. */
  vcs: VcsConfig;
  /** --api-secret: the X-Atlantis-Token of /api/ requests; undefined: the API is disabled (as Atlantis). A secret. */
  apiSecret: string | undefined;
  repoAllowlist: string;
  repoConfigPath: string | undefined;
  /** --repo-config-json text; exclusive with repoConfigPath. */
  repoConfigJson: string | undefined;
  /** What comments may run (workflow/comment-parser/commands.ts), after --disable-apply. */
  allowCommands: CommandName[];
  blockedExtraArgs: string[];
  executableName: string;
  /** 0: no limit. */
  maxCommentsPerCommand: number;
  disableMarkdownFolding: boolean;
  enableDiffMarkdownFormat: boolean;
  hidePrevPlanComments: boolean;
  hideUnchangedPlanComments: boolean;
  /** --discard-approval-on-plan: a comment `plan` withdraws the pull request's approvals (the host's discardApprovals). */
  discardApprovalOnPlan: boolean;
  parallelPoolSize: number;
  /** --parallel-plan / --parallel-apply: the default when atlantis.yaml does not set parallel_plan / parallel_apply. */
  parallelPlan: boolean;
  parallelApply: boolean;
  disableAutoplan: boolean;
  /** --automerge: merge after every plan is applied (workflow/automerge/automerge.ts). */
  automerge: boolean;
  /** --automerge-method; '' = the first the repository allows. */
  automergeMethod: string;
  /** --disable-automerge-label; '' = none. */
  disableAutomergeLabel: string;
  disableApplyAll: boolean;
  /** --disable-global-apply-lock: the web page has no apply lock, applies never read it. */
  disableGlobalApplyLock: boolean;
  /** --disable-repo-locking: no project locks at all. */
  disableRepoLocking: boolean;
  /** --emoji-reaction: the reaction to a command comment; '' for none. */
  emojiReaction: string;
  failOnPreWorkflowHookError: boolean;
  /** The team allowlist (--gh-team-allowlist, GitLab's --gitlab-group-allowlist): which teams' users run which commands; empty: no team check. */
  teamAllowlist: TeamRule[];
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
  /** --tf-download-key-file's key (armored), read at start; undefined: HashiCorp's (terraform/tf-signature.ts). */
  tfDownloadKey?: string;
  writeGitCreds: boolean;
  /** --locking-db-type and --redis-*: where locks, plans and the journal live. */
  store: StoreConfig;
  /** --replica-id: this server's name among replicas sharing a store. */
  replicaId: string;
  /** --replica-url: where the other replicas reach this one. */
  replicaUrl: string;
  /** The --config file's webhooks and --webhook-http-headers (notifications/apply-webhooks.ts). */
  webhooks: WebhookSettings;
  /** --default-tf-distribution, --use-tf-plugin-cache, --tofu-download-* (terraform/terraform-settings.ts). */
  terraform: TerraformSettings;
  /** --enable-policy-checks, --quiet-policy-checks, --conftest-download-url, DEFAULT_CONFTEST_VERSION (policy/policy-settings.ts). */
  policy: PolicySettings;
  /** --vcs-status-name: the first part of every commit status context (`<name>/plan`). */
  vcsStatusName: string;
  /** --ignore-vcs-status-names: other servers' status names the mergeable bypass ignores. */
  ignoreVcsStatusNames: string[];
  silenceVcsStatusNoPlans: boolean;
  silenceVcsStatusNoProjects: boolean;
  /** --silence-no-projects: no comment when a command finds no project; -d/-p outside atlantis.yaml's projects run nothing. */
  silenceNoProjects: boolean;
  /** --enable-regexp-cmd: -p is a regular expression over project names. */
  enableRegexpCmd: boolean;
  /** --skip-clone-no-changes: a plan of the whole PR reads the repo config through the API first, and clones only when a project changed (checkout/skip-clone.ts). */
  skipCloneNoChanges: boolean;
}

const LOG_LEVELS: LogLevel[] = ['debug', 'info', 'warn', 'error'];

function str(values: FlagValues, name: string): string | undefined {
  const v = values[name];
  return typeof v === 'string' && v.length > 0 ? v : undefined;
}

/**
 * Turns parsed flag values into a validated config; throws UsageError naming the flag.
 * `webhooks`: the --config file's `webhooks:` list (config/config-file.ts); `env`: the
 * server's environment (DEFAULT_CONFTEST_VERSION).
 */
export function buildServerConfig(values: FlagValues, webhooks: WebhookEntry[] = [], env: NodeJS.ProcessEnv = process.env): ServerConfig {
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
  const host = vcsConfigFromFlags(values);
  if (str(values, 'repo-config') && str(values, 'repo-config-json'))
    throw new UsageError('cannot use --repo-config and --repo-config-json at the same time');
  const insecure = values['insecure-no-webhook-secret'] === true;

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
  let teamAllowlist: TeamRule[];
  try {
    teamAllowlist = parseTeamAllowlist(str(values, host.teamAllowlistFlag) ?? '', ACCEPTED_COMMAND_NAMES);
  } catch (e) {
    if (e instanceof TeamAllowlistError) throw new UsageError(`invalid value for --${host.teamAllowlistFlag}: ${e.message}`);
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

  let webhookSettings: WebhookSettings;
  try {
    webhookSettings = parseWebhookSettings(webhooks, str(values, 'webhook-http-headers'));
  } catch (e) {
    throw new UsageError(`initializing webhooks: ${(e as Error).message}`);
  }

  const terraform = terraformSettings(values);
  const policy = policySettings(values, env);

  const dataDir = path.resolve(values['data-dir'] as string);
  ensureWritableDir(dataDir);
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
    allowedHosts: (values['allowed-hosts'] as string[] | undefined) ?? [],
    vcs: host.vcs,
    apiSecret: str(values, 'api-secret'),
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
    discardApprovalOnPlan: values['discard-approval-on-plan'] === true,
    parallelPoolSize: pool,
    parallelPlan: values['parallel-plan'] === true,
    parallelApply: values['parallel-apply'] === true,
    disableAutoplan: values['disable-autoplan'] === true,
    automerge: values.automerge === true,
    automergeMethod,
    disableAutomergeLabel: (values['disable-automerge-label'] as string | undefined) ?? '',
    disableApplyAll: values['disable-apply-all'] === true,
    disableGlobalApplyLock: values['disable-global-apply-lock'] === true,
    disableRepoLocking: values['disable-repo-locking'] === true,
    emojiReaction: (values['emoji-reaction'] as string | undefined) ?? '',
    failOnPreWorkflowHookError: values['fail-on-pre-workflow-hook-error'] === true,
    teamAllowlist,
    flagWarnings: [...judged.warnings, ...commandWarnings, ...host.warnings, ...terraform.warnings],
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
    tfDownloadKey: readKeyFile(str(values, 'tf-download-key-file')),
    writeGitCreds: values['write-git-creds'] === true,
    store: storeConfigFromFlags(values),
    replicaId: replicaIdFromFlags(values),
    replicaUrl: replicaUrlFromFlags(values, values['bind-address'] as string, port),
    webhooks: webhookSettings,
    terraform,
    policy,
    vcsStatusName: str(values, 'vcs-status-name') ?? 'atlantis',
    ignoreVcsStatusNames: (str(values, 'ignore-vcs-status-names') ?? '')
      .split(',')
      .map((x) => x.trim())
      .filter((x) => x !== ''),
    silenceVcsStatusNoPlans: values['silence-vcs-status-no-plans'] === true,
    silenceVcsStatusNoProjects: values['silence-vcs-status-no-projects'] === true,
    silenceNoProjects: values['silence-no-projects'] === true,
    enableRegexpCmd: values['enable-regexp-cmd'] === true,
    skipCloneNoChanges: values['skip-clone-no-changes'] === true,
  };
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

/** --tf-download-key-file's text; a file that cannot be read or holds no armored public key stops the server at start. */
function readKeyFile(file: string | undefined): string | undefined {
  if (file === undefined) return undefined;
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (e) {
    throw new UsageError(`cannot read --tf-download-key-file ${file}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
  }
  if (!text.includes('-----BEGIN PGP PUBLIC KEY BLOCK-----'))
    throw new UsageError(`--tf-download-key-file ${file} holds no ASCII-armored OpenPGP public key (-----BEGIN PGP PUBLIC KEY BLOCK-----)`);
  return text;
}
