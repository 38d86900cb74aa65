// The server's flags: Atlantis's flag names where Atlantis has the setting (so existing
// ATLANTIS_* env keeps working), plus ours, with their defaults. config.ts validates them.
import { homedir } from 'node:os';
import path from 'node:path';
import { unhonouredAtlantisFlagSpecs } from '../config/atlantis-flags.js';
import { MAX_DURATION_MS } from '../config/duration.js';
import type { FlagSpec } from '../config/flags.js';
import { SERVER_PORT } from '../contract/drain-protocol.js';
import { GITEA_FLAGS } from './vcs/gitea/flags.js';
import { GITLAB_FLAGS } from './vcs/gitlab/flags.js';
import { ACCEPTED_COMMAND_NAMES, DEFAULT_ALLOW_COMMANDS } from './workflow/comment-parser/commands.js';
import { DEFAULT_BLOCKED_EXTRA_ARGS } from './workflow/comment-parser/extra-args.js';

/** Atlantis's defaults: an empty --web-username/--web-password falls back to them too. */
export const DEFAULT_WEB_USERNAME = 'atlantis';
export const DEFAULT_WEB_PASSWORD = 'atlantis';
export const DEFAULT_JOB_LOG_RETENTION_MS = 7 * 24 * 3600_000;
export const DEFAULT_JOB_LOG_MAX_COUNT = 1000;

export const SERVER_FLAGS: FlagSpec[] = [
  {
    name: 'config',
    type: 'string',
    description:
      'Path to yaml config file where flag values can also be set (flags and ATLANTIS_* env win over it); its webhooks: list configures notifications',
  },
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
  {
    name: 'allowed-hosts',
    type: 'list',
    default: [],
    description:
      "Host names the web UI answers to besides --atlantis-url's, localhost and IP addresses (ours; against DNS rebinding; * turns the check off)",
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
    name: 'api-secret',
    type: 'string',
    description:
      'Secret used to validate requests made to /api/ (the X-Atlantis-Token header); without it the API is disabled. A secret: give it as env',
  },
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
  // Gitea (vcs/gitea/): chosen when --gitea-user is set.
  ...GITEA_FLAGS,
  // GitLab (vcs/gitlab/): chosen when --gitlab-user or --gitlab-token is set.
  ...GITLAB_FLAGS,
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
  // Comment layout (workflow/pr/messages.ts, vcs/comment-split.ts, workflow/pr/hide-comments.ts).
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
    name: 'discard-approval-on-plan',
    type: 'bool',
    default: false,
    description: 'Remove the approvals of a pull request on each comment plan (GitLab; the token must be allowed to reset approvals)',
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
    name: 'disable-global-apply-lock',
    type: 'bool',
    default: false,
    description: 'No global apply lock: the web page neither shows nor sets it, and applies never consult it',
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
    description:
      'Allow starting without --gh-webhook-secret, --gitlab-webhook-secret or --gitea-webhook-secret (webhooks are then not authenticated)',
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
    name: 'tf-download-key-file',
    type: 'string',
    description:
      "File of the ASCII-armored OpenPGP public key that signs --tf-download-url's SHA256SUMS, instead of HashiCorp's (ours; a mirror that signs with its own key)",
  },
  {
    name: 'tf-download-url',
    type: 'string',
    default: 'https://releases.hashicorp.com',
    description:
      'Base URL to download Terraform versions from (<url>/terraform/<v>/terraform_<v>_<os>_<arch>.zip and terraform_<v>_SHA256SUMS)',
  },
  {
    name: 'default-tf-distribution',
    type: 'string',
    default: 'terraform',
    description: 'Which TF distribution to use. Can be set to terraform or opentofu.',
  },
  { name: 'tf-distribution', type: 'string', description: '[Deprecated for --default-tf-distribution].' },
  {
    name: 'tofu-download-url',
    type: 'string',
    default: 'https://github.com/opentofu/opentofu/releases/download',
    description:
      'Base URL to download OpenTofu versions from (ours; <url>/v<v>/tofu_<v>_<os>_<arch>.tar.gz, tofu_<v>_SHA256SUMS and its .gpgsig); Atlantis asks OpenTofu only',
  },
  {
    name: 'tofu-download-key-file',
    type: 'string',
    description:
      "File of the ASCII-armored OpenPGP public key that signs --tofu-download-url's SHA256SUMS, instead of OpenTofu's (ours; a mirror that signs with its own key)",
  },
  {
    name: 'use-tf-plugin-cache',
    type: 'bool',
    default: true,
    description: 'Enable the use of the Terraform plugin cache (<data-dir>/plugin-cache; inits that could race on it run one at a time)',
  },
  {
    name: 'enable-policy-checks',
    type: 'bool',
    default: false,
    description:
      'Enable atlantis to run user defined policy checks.  This is explicitly disabled for TFE/TFC backends since plan files are inaccessible.',
  },
  {
    name: 'quiet-policy-checks',
    type: 'bool',
    default: false,
    description:
      "Exclude policy check comments from pull requests unless there's an actual error from conftest. This also excludes warnings.",
  },
  {
    name: 'conftest-download-url',
    type: 'string',
    default: 'https://github.com/open-policy-agent/conftest/releases/download',
    description:
      "Base URL to download conftest versions from (ours; <url>/v<v>/conftest_<v>_<OS>_<arch>.tar.gz, checked against checksums.txt); the policies' conftest_version or DEFAULT_CONFTEST_VERSION",
  },
  {
    name: 'vcs-status-name',
    type: 'string',
    default: 'atlantis',
    description: 'Name used to identify Atlantis when updating a pull request status (<name>/plan, <name>/apply, ...).',
  },
  {
    name: 'ignore-vcs-status-names',
    type: 'string',
    default: '',
    description:
      'Comma separated list of VCS status names from other atlantis services. When `gh-allow-mergeable-bypass-apply` is true, it will ignore status checks (e.g. `status1/plan`, `status1/apply`, `status2/plan`, `status2/apply`) from other Atlantis services when checking if the PR is mergeable.',
  },
  {
    name: 'silence-vcs-status-no-plans',
    type: 'bool',
    default: false,
    description: 'Silences VCS commit status when autoplan finds no projects to plan.',
  },
  {
    name: 'silence-vcs-status-no-projects',
    type: 'bool',
    default: false,
    description: 'Silences VCS commit status when for all commands when a project is not defined.',
  },
  {
    name: 'skip-clone-no-changes',
    type: 'bool',
    default: false,
    // Atlantis's --help text, as the other flags have theirs.
    description: 'Skips cloning the PR repo if there are no projects were changed in the PR.',
  },
  {
    name: 'silence-no-projects',
    type: 'bool',
    default: false,
    description:
      "Silences Atlantis from responding to PRs when it finds no projects; with an atlantis.yaml listing projects, a -d or -p naming none of them runs nothing here (another server's projects)",
  },
  {
    name: 'enable-regexp-cmd',
    type: 'bool',
    default: false,
    description:
      'Enable Atlantis to use regular expressions on plan/apply commands when "-p" flag is passed with it (allowed_regexp_prefixes of atlantis.yaml restrict a regex matching several projects).',
  },
  {
    name: 'write-git-creds',
    type: 'bool',
    default: false,
    description:
      'Give terraform init git credentials (--gh-user and the token, for --gh-hostname) so it can fetch private modules over HTTPS or SSH; the file exists only while an init runs',
  },
  {
    name: 'locking-db-type',
    type: 'string',
    default: 'boltdb',
    description:
      "The locking database type to use for storing plan and apply locks: 'boltdb' (the embedded store in --data-dir) or 'redis' (shared by several replicas)",
  },
  { name: 'redis-host', type: 'string', description: "The Redis Hostname for when using a Locking DB type of 'redis'." },
  { name: 'redis-port', type: 'int', default: 6379, description: "The Redis Port for when using a Locking DB type of 'redis'." },
  {
    name: 'redis-password',
    type: 'string',
    description: "The Redis Password for when using a Locking DB type of 'redis' (a secret: give it as env)",
  },
  { name: 'redis-username', type: 'string', description: "The Redis Username for when using a Locking DB type of 'redis'." },
  { name: 'redis-db', type: 'int', default: 0, description: "The Redis Database to use when using a Locking DB type of 'redis'." },
  {
    name: 'redis-tls-enabled',
    type: 'bool',
    default: false,
    description: 'Enable TLS on the connection to Redis with a min TLS version of 1.2',
  },
  {
    name: 'redis-insecure-skip-verify',
    type: 'bool',
    default: false,
    description:
      "Controls whether the Redis client verifies the Redis server's certificate chain and host name. If true, accepts any certificate presented by the server and any host name in that certificate.",
  },
  {
    name: 'redis-sentinel-addresses',
    type: 'list',
    description:
      "Redis Sentinel (ours): the sentinels to ask for the master's address (host:port, port 26379 by default); the data connection goes to the master they name, not to --redis-host/--redis-port, and follows a failover",
  },
  {
    name: 'redis-sentinel-master-name',
    type: 'string',
    description: 'The master group name the sentinels monitor (ours; required with --redis-sentinel-addresses)',
  },
  {
    name: 'redis-sentinel-username',
    type: 'string',
    description: 'The ACL user to log in to the sentinels with (ours); --redis-username is for the master',
  },
  {
    name: 'redis-sentinel-password',
    type: 'string',
    description: 'The password of the sentinels (ours; a secret: give it as env); --redis-password is for the master',
  },
  {
    name: 'replica-id',
    type: 'string',
    description:
      "This server's name among the replicas sharing one Redis (ours; default the host name, which is the pod name); a restarted replica with the same name recovers its own interrupted jobs",
  },
  {
    name: 'replica-url',
    type: 'string',
    description:
      "Where the other replicas sharing one Redis reach this one's /events (ours; default http://<bind-address>:<port>, or the host name when bound to all addresses); in Kubernetes, the pod IP",
  },
  {
    name: 'shared-state-key-file',
    type: 'string',
    description:
      'A file holding the key (at least 32 bytes, the same on every replica) the replicas sharing one Redis sign what they keep there with, so that what Redis hands back is checked before it is trusted (ours; required with --locking-db-type redis; read at start)',
  },
  {
    name: 'webhook-http-headers',
    type: 'string',
    description:
      'Additional headers added to each HTTP POST of the --config webhooks, as a JSON object: header name to a string or an array of strings (a secret: give it as env)',
  },
  // Atlantis flags this server does not honour: parsed (hidden) only to be refused or warned about.
  ...unhonouredAtlantisFlagSpecs(),
];
