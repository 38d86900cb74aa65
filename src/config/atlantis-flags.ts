// Every flag of Atlantis v0.47's `atlantis server` and what this server does with it, as data.
// An Atlantis user's env (ATLANTIS_<FLAG>) or command line must never be dropped silently:
// - honoured: implemented (a SERVER_FLAGS entry of the same name, table-tested);
// - refused: set to a value other than what this server does anyway, the server refuses to
//   start with one line naming the flag (exit 2), because running without it could weaken
//   security or change what runs;
// - cosmetic-warn: only presentation or speed; the server starts and logs one warning line.
// Values are never echoed (many of these flags are secrets). Env names that are not Atlantis
// flags (a Service link's ATLANTIS_SERVICE_HOST, ATLANTIS_PORT_4141_TCP, ...) stay ignored.
import type { FlagSpec, FlagValue, FlagValues } from './flags.js';
import { envNameFor } from './flags.js';

export type AtlantisFlagSupport = 'honoured' | 'refused' | 'cosmetic-warn';

export interface AtlantisFlag {
  support: AtlantisFlagSupport;
  type?: 'string' | 'int' | 'bool';
  /** Values that change nothing here (default: Atlantis's default). Unset is always fine. */
  accepts?: ReadonlyArray<string | number | boolean>;
  /** Why it is refused or ignored; goes in the error or warning line. */
  why?: string;
}

const H: AtlantisFlag = { support: 'honoured' };
const refused = (
  type: 'string' | 'int' | 'bool',
  accepts: string | number | boolean | Array<string | number | boolean>,
  why: string,
): AtlantisFlag => ({ support: 'refused', type, accepts: Array.isArray(accepts) ? accepts : [accepts], why });
const warn = (
  type: 'string' | 'int' | 'bool',
  accepts: string | number | boolean | Array<string | number | boolean>,
  why: string,
): AtlantisFlag => ({ support: 'cosmetic-warn', type, accepts: Array.isArray(accepts) ? accepts : [accepts], why });

const NOT_GITHUB = 'only GitHub, GitLab and Gitea are supported';
const NO_REDIS_CLUSTER = 'Redis Cluster is not supported: give one Redis with --redis-host';
const NOT_YET = 'not implemented yet';
const ATLANTIS_AUTOPLAN_FILES =
  '**/*.tf,**/*.tf.json,**/*.tfvars,**/*.tfvars.json,**/*.tofu,**/*.tofu.json,**/terragrunt.hcl,**/.terraform.lock.hcl';

/** Keyed by flag name; the env name is ATLANTIS_ + upper snake case of it. */
export const ATLANTIS_FLAGS: Readonly<Record<string, AtlantisFlag>> = {
  'allow-commands': H,
  'allow-draft-prs': refused('bool', false, 'draft pull requests are never autoplanned here'),
  'allow-fork-prs': H,
  'api-secret': H,
  'atlantis-url': H,
  'autodiscover-mode': refused('string', 'auto', 'projects are always discovered as in mode auto'),
  automerge: H,
  'automerge-method': H,
  'autoplan-file-list': refused('string', ATLANTIS_AUTOPLAN_FILES, 'only the default file list is supported'),
  'autoplan-modules': refused('bool', false, 'module dependency autoplan is not implemented'),
  'autoplan-modules-from-projects': refused('string', '', 'module dependency autoplan is not implemented'),
  'azuredevops-hostname': refused('string', 'dev.azure.com', NOT_GITHUB),
  'azuredevops-token': refused('string', '', NOT_GITHUB),
  'azuredevops-user': refused('string', '', NOT_GITHUB),
  'azuredevops-webhook-password': refused('string', '', NOT_GITHUB),
  'azuredevops-webhook-user': refused('string', '', NOT_GITHUB),
  'bitbucket-api-user': refused('string', '', NOT_GITHUB),
  'bitbucket-base-url': refused('string', 'https://api.bitbucket.org', NOT_GITHUB),
  'bitbucket-token': refused('string', '', NOT_GITHUB),
  'bitbucket-user': refused('string', '', NOT_GITHUB),
  'bitbucket-webhook-secret': refused('string', '', NOT_GITHUB),
  'blocked-extra-args': H,
  'checkout-depth': H,
  'checkout-strategy': H,
  config: H,
  'data-dir': H,
  'default-tf-distribution': H,
  'default-tf-version': H,
  'disable-apply-all': H,
  'disable-automerge-label': H,
  'disable-autoplan': H,
  'disable-autoplan-label': refused('string', '', NOT_YET),
  'disable-global-apply-lock': H,
  'disable-markdown-folding': H,
  'disable-repo-locking': H,
  'disable-unlock-label': refused('string', '', NOT_YET),
  'discard-approval-on-plan': H,
  'emoji-reaction': H,
  'enable-diff-markdown-format': H,
  'enable-drift-detection': refused('bool', false, 'drift detection is not implemented (the /api endpoints serve plan and apply only)'),
  'enable-drift-remediation': refused('bool', false, 'drift detection is not implemented (the /api endpoints serve plan and apply only)'),
  'enable-external-stores': refused('bool', false, NOT_YET),
  'enable-policy-checks': H,
  'enable-profiling-api': warn('bool', false, 'no profiling routes are served'),
  'enable-regexp-cmd': H,
  'executable-name': H,
  'fail-on-pre-workflow-hook-error': H,
  'gh-allow-mergeable-bypass-apply': H,
  'gh-app-id': H,
  'gh-app-installation-id': H,
  'gh-app-key': H,
  'gh-app-key-file': H,
  'gh-app-slug': H,
  'gh-hostname': H,
  'gh-org': refused(
    'string',
    '',
    "it is for Atlantis's App-creation web flow (/github-app/setup), which is not served; an App authenticates with --gh-app-id and its key",
  ),
  'gh-team-allowlist': H,
  'gh-token': H,
  'gh-token-file': H,
  'gh-user': H,
  'gh-webhook-secret': H,
  'gitea-base-url': H,
  'gitea-page-size': H,
  'gitea-token': H,
  'gitea-user': H,
  'gitea-webhook-secret': H,
  'gitlab-group-allowlist': H,
  'gitlab-hostname': H,
  'gitlab-status-retry-enabled': H,
  'gitlab-token': H,
  'gitlab-user': H,
  'gitlab-webhook-secret': H,
  'hide-prev-plan-comments': H,
  'hide-unchanged-plan-comments': H,
  'ignore-vcs-status-names': H,
  'include-git-untracked-files': refused('bool', false, NOT_YET),
  language: warn('string', 'en', 'comments are in English'),
  'language-config-file': warn('string', '', 'comments are in English'),
  'locking-db-type': H,
  'log-level': H,
  'markdown-template-overrides-dir': warn('string', '~/.markdown_templates', 'comment templates are built in'),
  'max-comments-per-command': H,
  'parallel-apply': H,
  'parallel-plan': H,
  'parallel-pool-size': H,
  'pending-apply-status': warn('bool', false, 'Atlantis supports it on GitLab only'),
  port: H,
  'quiet-policy-checks': H,
  'redis-cluster-addresses': refused('string', '', NO_REDIS_CLUSTER),
  'redis-db': H,
  'redis-host': H,
  'redis-insecure-skip-verify': H,
  'redis-password': H,
  'redis-port': H,
  'redis-tls-enabled': H,
  'redis-username': H,
  'repo-allowlist': H,
  'repo-config': H,
  'repo-config-json': H,
  'restrict-file-list': refused('bool', false, NOT_YET),
  'share-plan-dir': refused('string', '', 'plan files live in --data-dir'),
  'silence-allowlist-errors': warn('bool', false, 'the server never comments on repositories outside --repo-allowlist'),
  'silence-fork-pr-errors': H,
  'silence-no-projects': H,
  'silence-vcs-status-no-plans': H,
  'silence-vcs-status-no-projects': H,
  'skip-clone-no-changes': H,
  'slack-token': refused('string', '', 'Slack notifications are not implemented (webhooks of kind http are)'),
  'ssl-cert-file': refused('string', '', 'TLS is not served; terminate it in front of the server'),
  'ssl-key-file': refused('string', '', 'TLS is not served; terminate it in front of the server'),
  'stats-namespace': warn('string', 'atlantis', 'metrics are served on /metrics with fixed names'),
  'tf-distribution': H,
  'tf-download': H,
  'tf-download-url': H,
  'tfe-hostname': refused('string', 'app.terraform.io', 'Terraform Cloud credentials are not written'),
  'tfe-local-execution-mode': refused('bool', false, 'Terraform Cloud credentials are not written'),
  'tfe-token': refused('string', '', 'Terraform Cloud credentials are not written'),
  'use-tf-plugin-cache': H,
  'var-file-allowlist': refused('string', '', NOT_YET),
  'vcs-status-name': H,
  'web-basic-auth': H,
  'web-password': H,
  'web-username': H,
  'webhook-http-headers': H,
  'websocket-check-origin': refused('bool', false, NOT_YET),
  'write-git-creds': H,
};

/** Hidden parser entries for the flags that are not honoured, so env and argv reach judgeAtlantisFlags. */
export function unhonouredAtlantisFlagSpecs(): FlagSpec[] {
  return Object.entries(ATLANTIS_FLAGS)
    .filter(([, f]) => f.support !== 'honoured')
    .map(([name, f]) => ({ name, type: f.type ?? 'string', hidden: true, description: `Atlantis flag, ${f.support}: ${f.why ?? ''}` }));
}

export interface FlagJudgement {
  /** One line each, naming the flag and its env name. */
  refusals: string[];
  warnings: string[];
}

function changesNothing(f: AtlantisFlag, v: FlagValue): boolean {
  return v === undefined || (f.accepts ?? []).some((a) => a === v);
}

/** Pure: which Atlantis flags given in `values` (parsed with the hidden specs) are refused or ignored. */
export function judgeAtlantisFlags(values: FlagValues): FlagJudgement {
  const out: FlagJudgement = { refusals: [], warnings: [] };
  for (const [name, f] of Object.entries(ATLANTIS_FLAGS)) {
    if (f.support === 'honoured' || changesNothing(f, values[name])) continue;
    const who = `--${name} (${envNameFor(name)})`;
    if (f.support === 'refused') out.refusals.push(`${who} is set, but this server does not support it: ${f.why}; unset it`);
    else out.warnings.push(`${who} is set, but this server ignores it: ${f.why}`);
  }
  return out;
}
