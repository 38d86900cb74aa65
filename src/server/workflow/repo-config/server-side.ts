// The server-side repo config (--repo-config, --repo-config-json; Atlantis's "server side
// repo config", repos.yaml): per-repo rules the operator sets, and the settings that apply
// to one repo. Trusted input, still validated so a typo fails at start.
import { Problems, checkKeys, isObj, parseApplyRequirements, parseWorkflows, strList, readYaml } from './schema.js';
import { type LockSettings, parseRepoLocking, parseRepoLocks } from '../lock-policy.js';
import { type ApplyRequirement, RepoConfigError, type Workflow } from './types.js';

export interface ServerRepoRule extends LockSettings {
  /** Exact `host/owner/name`, or a regex written as `/.../`. */
  id: string;
  applyRequirements?: ApplyRequirement[];
  planRequirements?: ApplyRequirement[];
  importRequirements?: ApplyRequirement[];
  workflow?: string;
  allowedOverrides: string[];
  allowCustomWorkflows: boolean;
  deleteSourceBranchOnMerge?: boolean;
}

/** The settings of one repo from the server side (later matching rules win). */
export interface ServerRepoSettings {
  applyRequirements: ApplyRequirement[];
  planRequirements: ApplyRequirement[];
  importRequirements: ApplyRequirement[];
  workflow?: string;
  allowedOverrides: string[];
  allowCustomWorkflows: boolean;
  /** Later matching rules that set it win; unset: Atlantis's default, false. */
  deleteSourceBranchOnMerge?: boolean;
}

export interface ServerSideRepoConfig {
  repos: ServerRepoRule[];
  workflows: Record<string, Workflow>;
  warnings: string[];
}

export function parseServerSideRepoConfig(text: string, file = 'repos.yaml'): ServerSideRepoConfig {
  const p = new Problems();
  const warnings: string[] = [];
  const root: unknown = readYaml(text, file) ?? {};
  if (!isObj(root)) throw new RepoConfigError(file, ['must be a YAML map']);
  checkKeys(root, ['repos', 'workflows'], ['policies', 'metrics', 'team_authz'], '', p, warnings);
  const workflows = parseWorkflows(root.workflows, 'workflows', p, warnings);
  const repos: ServerRepoRule[] = [];
  if (root.repos !== undefined && !Array.isArray(root.repos)) p.add('repos', 'must be a list');
  (Array.isArray(root.repos) ? (root.repos as unknown[]) : []).forEach((r, i) => {
    const where = `repos[${i}]`;
    if (!isObj(r)) {
      p.add(where, 'must be a map');
      return;
    }
    checkKeys(
      r,
      [
        'id',
        'apply_requirements',
        'plan_requirements',
        'import_requirements',
        'workflow',
        'allowed_overrides',
        'allow_custom_workflows',
        'repo_locks',
        'repo_locking',
        'delete_source_branch_on_merge',
      ],
      [
        'branch',
        'allowed_workflows',
        'pre_workflow_hooks',
        'post_workflow_hooks',
        'policy_check',
        'custom_policy_check',
        'autodiscover',
        'silence_pr_comments',
        'repo_config_file',
      ],
      where,
      p,
      warnings,
    );
    if (typeof r.id !== 'string' || r.id === '') {
      p.add(`${where}.id`, 'is required');
      return;
    }
    if (r.id.startsWith('/') && r.id.endsWith('/') && r.id.length > 1) {
      try {
        new RegExp(r.id.slice(1, -1));
      } catch (e) {
        p.add(`${where}.id`, `invalid regex: ${(e as Error).message}`);
      }
    }
    const rule: ServerRepoRule = {
      id: r.id,
      allowedOverrides: strList(r.allowed_overrides, `${where}.allowed_overrides`, p) ?? [],
      allowCustomWorkflows: r.allow_custom_workflows === true,
    };
    const ar = parseApplyRequirements(r.apply_requirements, `${where}.apply_requirements`, p);
    if (ar) rule.applyRequirements = ar;
    const repoLocks = parseRepoLocks(r.repo_locks, `${where}.repo_locks`, p);
    if (repoLocks) rule.repoLocks = repoLocks;
    const repoLocking = parseRepoLocking(r.repo_locking, `${where}.repo_locking`, p);
    if (repoLocking !== undefined) rule.repoLocking = repoLocking;
    const pr = parseApplyRequirements(r.plan_requirements, `${where}.plan_requirements`, p, 'plan_requirement');
    if (pr) rule.planRequirements = pr;
    const ir = parseApplyRequirements(r.import_requirements, `${where}.import_requirements`, p, 'import_requirement');
    if (ir) rule.importRequirements = ir;
    if (r.delete_source_branch_on_merge !== undefined && r.delete_source_branch_on_merge !== null) {
      if (typeof r.delete_source_branch_on_merge !== 'boolean') p.add(`${where}.delete_source_branch_on_merge`, 'must be true or false');
      else rule.deleteSourceBranchOnMerge = r.delete_source_branch_on_merge;
    }
    if (typeof r.workflow === 'string') {
      rule.workflow = r.workflow;
      if (r.workflow !== 'default' && !workflows[r.workflow])
        p.add(`${where}.workflow`, `workflow ${JSON.stringify(r.workflow)} is not defined in workflows`);
    }
    repos.push(rule);
  });
  if (p.list.length > 0) throw new RepoConfigError(file, p.list);
  return { repos, workflows, warnings };
}

function ruleMatches(rule: ServerRepoRule, repoId: string): boolean {
  if (rule.id.startsWith('/') && rule.id.endsWith('/') && rule.id.length > 1) return new RegExp(rule.id.slice(1, -1)).test(repoId);
  return rule.id === repoId;
}

export interface ServerRepoSettings {
  applyRequirements: ApplyRequirement[];
  workflow?: string;
  allowedOverrides: string[];
  allowCustomWorkflows: boolean;
  /** Later matching rules that set it win; unset: Atlantis's default, false. */
  deleteSourceBranchOnMerge?: boolean;
}

/** The server-side settings that apply to `host/owner/name` (later rules win, as Atlantis). */
export function serverSettingsFor(server: ServerSideRepoConfig | undefined, repoId: string): ServerRepoSettings {
  const out: ServerRepoSettings = {
    applyRequirements: [],
    planRequirements: [],
    importRequirements: [],
    allowedOverrides: [],
    allowCustomWorkflows: false,
  };
  for (const r of server?.repos ?? []) {
    if (!ruleMatches(r, repoId)) continue;
    if (r.applyRequirements) out.applyRequirements = r.applyRequirements;
    if (r.planRequirements) out.planRequirements = r.planRequirements;
    if (r.importRequirements) out.importRequirements = r.importRequirements;
    if (r.workflow) out.workflow = r.workflow;
    out.allowedOverrides = r.allowedOverrides;
    out.allowCustomWorkflows = r.allowCustomWorkflows;
    if (r.deleteSourceBranchOnMerge !== undefined) out.deleteSourceBranchOnMerge = r.deleteSourceBranchOnMerge;
  }
  return out;
}

/** The server-side lock settings for `host/owner/name` (later rules win, as Atlantis). */
export function serverLockSettingsFor(
  server: ServerSideRepoConfig | undefined,
  repoId: string,
): LockSettings & { allowedOverrides: string[] } {
  const out: LockSettings & { allowedOverrides: string[] } = { allowedOverrides: serverSettingsFor(server, repoId).allowedOverrides };
  for (const r of server?.repos ?? []) {
    if (!ruleMatches(r, repoId)) continue;
    if (r.repoLocks !== undefined) out.repoLocks = r.repoLocks;
    if (r.repoLocking !== undefined) out.repoLocking = r.repoLocking;
  }
  return out;
}
