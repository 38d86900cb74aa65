// The types both repo config files share (atlantis.yaml and the server-side repos.yaml) and
// what project selection hands to the runner, with Atlantis's defaults.
import type { Distribution } from '../../terraform/distribution.js';
import type { UnsupportedKey } from './keys.js';

/** When a project's lock is taken (`repo_locks: {mode: ...}`; lock-policy.ts decides). */
export type RepoLocksMode = 'disabled' | 'on_plan' | 'on_apply';

export const ATLANTIS_YAML = 'atlantis.yaml';
export const DEFAULT_WORKSPACE = 'default';
export const DEFAULT_WHEN_MODIFIED: readonly string[] = [
  '**/*.tf*',
  '**/*.tofu',
  '**/*.tofu.json',
  '**/terragrunt.hcl',
  '**/.terraform.lock.hcl',
];
/** Atlantis's --autoplan-file-list default, used when there is no atlantis.yaml. */
export const DEFAULT_AUTOPLAN_FILES: readonly string[] = [
  '**/*.tf',
  '**/*.tf.json',
  '**/*.tfvars',
  '**/*.tfvars.json',
  '**/*.tofu',
  '**/*.tofu.json',
  '**/terragrunt.hcl',
  '**/.terraform.lock.hcl',
];

export type ApplyRequirement = 'approved' | 'mergeable' | 'undiverged';
export const APPLY_REQUIREMENTS: readonly string[] = ['approved', 'mergeable', 'undiverged'];

export type BuiltinStepName = 'init' | 'plan' | 'apply' | 'show' | 'version' | 'import' | 'state_rm' | 'policy_check';
export const BUILTIN_STEPS: readonly string[] = ['init', 'plan', 'apply', 'show', 'version', 'import', 'state_rm', 'policy_check'];

export type Step =
  | { kind: BuiltinStepName; extraArgs: string[] }
  | { kind: 'run'; command: string; shell?: string; shellArgs?: string[]; output?: 'show' | 'hide' | 'strip_refreshing' }
  | { kind: 'env'; name: string; value?: string; command?: string; shell?: string; shellArgs?: string[] };

export interface Workflow {
  name: string;
  plan: Step[];
  apply: Step[];
  /** A custom `import` stage; unset: Atlantis's default (init, then import). */
  import?: Step[];
  /** A custom `state_rm` stage; unset: Atlantis's default (init, then state rm). */
  stateRm?: Step[];
  /** A custom `policy_check` stage; unset: Atlantis's default (show, then policy_check). */
  policyCheck?: Step[];
}

/** Atlantis's default policy_check stage. */
export const DEFAULT_POLICY_CHECK_STAGE: readonly Step[] = [
  { kind: 'show', extraArgs: [] },
  { kind: 'policy_check', extraArgs: [] },
];

export const DEFAULT_WORKFLOW: Workflow = {
  name: 'default',
  plan: [
    { kind: 'init', extraArgs: [] },
    { kind: 'plan', extraArgs: [] },
  ],
  apply: [{ kind: 'apply', extraArgs: [] }],
};

export interface ProjectConfig {
  name?: string;
  dir: string;
  workspace: string;
  autoplan: { enabled: boolean; whenModified: string[] };
  applyRequirements?: ApplyRequirement[];
  planRequirements?: ApplyRequirement[];
  importRequirements?: ApplyRequirement[];
  workflow?: string;
  terraformVersion?: string;
  /** `terraform_distribution`: terraform or opentofu; unset: --default-tf-distribution. */
  terraformDistribution?: Distribution;
  /** `policy_check` (effective only where allowed_overrides lists policy_check, as Atlantis). */
  policyCheck?: boolean;
  /** `custom_policy_check` (needs allowed_overrides: [custom_policy_check]). */
  customPolicyCheck?: boolean;
  /** `repo_locks.mode` of the project (effective only where allowed_overrides lists repo_locks). */
  repoLocks?: RepoLocksMode;
  /** Deprecated `repo_locking` (effective only where allowed_overrides lists repo_locking). */
  repoLocking?: boolean;
  /** execution_order_group (Atlantis's default 0). */
  executionOrderGroup?: number;
  /** depends_on: names of projects that must be applied first. */
  dependsOn?: string[];
  /** Overrides the top-level and server-side value (needs allowed_overrides, as Atlantis). */
  deleteSourceBranchOnMerge?: boolean;
  /** The keys the project sets (for the server-side allowed_overrides check). */
  keys: string[];
}

export interface RepoConfig {
  version: 2 | 3;
  /** undefined: not set, --automerge decides (as Atlantis). */
  automerge?: boolean;
  deleteSourceBranchOnMerge?: boolean;
  /** Undefined when atlantis.yaml does not say: --parallel-plan / --parallel-apply decide. */
  parallelPlan?: boolean;
  parallelApply?: boolean;
  abortOnExecutionOrderFail: boolean;
  projects: ProjectConfig[];
  workflows: Record<string, Workflow>;
  /** Top-level `repo_locks.mode`. */
  repoLocks?: RepoLocksMode;
  /** allowed_regexp_prefixes: with --enable-regexp-cmd, a -p regex matching several projects must start with one. */
  allowedRegexpPrefixes?: string[];
  /** Keys set to what this server does not implement (keys.ts). */
  unsupported: UnsupportedKey[];
}

/** A project to run: where, which workspace, which workflow, which apply requirements. */
export interface ProjectSpec {
  name?: string;
  dir: string;
  workspace: string;
  workflow: Workflow;
  applyRequirements: ApplyRequirement[];
  planRequirements: ApplyRequirement[];
  importRequirements: ApplyRequirement[];
  executionOrderGroup: number;
  dependsOn: string[];
  autoplanEnabled: boolean;
  /** True when it comes from atlantis.yaml, false for a default (config-less) project. */
  configured: boolean;
  terraformVersion?: string;
  /** Unset: --default-tf-distribution. */
  terraformDistribution?: Distribution;
  /** The project's policy_check setting (server side, or the project's where overridable); unset: on. */
  policyCheck?: boolean;
  /** custom_policy_check: the policy_check stage's run steps report per policy set instead of conftest. */
  customPolicyCheck?: boolean;
}

/**
 * A server-side `pre_workflow_hooks` / `post_workflow_hooks` entry (repos.yaml), as Atlantis
 * reads it: a command run through `shell shellArgs run` in the PR's checkout.
 */
export interface WorkflowHook {
  run: string;
  description?: string;
  /** Default `sh`. */
  shell?: string;
  /** One string, split on spaces as Atlantis does; default `-c`. */
  shellArgs?: string;
  /** Comma-separated command names the hook runs for; unset: every command. */
  commands?: string;
}

export class RepoConfigError extends Error {
  constructor(
    readonly file: string,
    readonly problems: string[],
  ) {
    super(`${file}: ${problems.join('; ')}`);
    this.name = 'RepoConfigError';
  }
}
