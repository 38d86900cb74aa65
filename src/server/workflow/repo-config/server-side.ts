// The server-side repo config (--repo-config, --repo-config-json; Atlantis's "server side
// repo config", repos.yaml): per-repo rules the operator sets, and the settings that apply
// to one repo. Trusted input, still validated so a typo fails at start.
import { Problems, checkKeys, isObj, parseApplyRequirements, parseWorkflows, strList, readYaml } from './schema.js';
import { type ApplyRequirement, RepoConfigError, type Workflow, type WorkflowHook } from './types.js';

export interface ServerRepoRule {
  /** Exact `host/owner/name`, or a regex written as `/.../`. */
  id: string;
  applyRequirements?: ApplyRequirement[];
  workflow?: string;
  allowedOverrides: string[];
  allowCustomWorkflows: boolean;
  /** `/regex/` the PR's base branch must match for the rule to apply (Atlantis's `branch`). */
  branch?: string;
  preWorkflowHooks: WorkflowHook[];
  postWorkflowHooks: WorkflowHook[];
}

const HOOK_KEYS = ['run', 'description', 'shell', 'shellArgs', 'commands'] as const;

/** A hook list: maps of strings, `run` required (Atlantis would run an empty command). */
function parseHooks(v: unknown, where: string, p: Problems): WorkflowHook[] {
  if (v === undefined || v === null) return [];
  if (!Array.isArray(v)) {
    p.add(where, 'must be a list of hooks');
    return [];
  }
  const out: WorkflowHook[] = [];
  v.forEach((h, i) => {
    const wh = `${where}[${i}]`;
    if (!isObj(h)) {
      p.add(wh, 'must be a map with run');
      return;
    }
    let ok = true;
    for (const [k, val] of Object.entries(h)) {
      if (!(HOOK_KEYS as readonly string[]).includes(k)) {
        p.add(wh, `unknown key ${JSON.stringify(k)}; a hook has ${HOOK_KEYS.join(', ')}`);
        ok = false;
      } else if (typeof val !== 'string') {
        p.add(`${wh}.${k}`, 'must be a string');
        ok = false;
      }
    }
    if (typeof h.run !== 'string' || h.run.trim() === '') {
      if (h.run === undefined) p.add(`${wh}.run`, 'is required');
      ok = false;
    }
    if (!ok) return;
    const hook: WorkflowHook = { run: h.run as string };
    for (const k of ['description', 'shell', 'shellArgs', 'commands'] as const) if (typeof h[k] === 'string') hook[k] = h[k];
    out.push(hook);
  });
  return out;
}

/** Atlantis's check of a `/regex/` branch value, with its texts. */
function checkBranch(v: unknown, where: string, p: Problems): string | undefined {
  if (v === undefined || v === null || v === '') return undefined;
  if (typeof v !== 'string') {
    p.add(where, 'must be a string');
    return undefined;
  }
  if (!v.startsWith('/') || !v.endsWith('/') || v.length < 2) {
    p.add(where, "regex must begin and end with a slash '/'");
    return undefined;
  }
  try {
    new RegExp(v.slice(1, -1));
  } catch (e) {
    p.add(where, `parsing: ${v}: ${(e as Error).message}`);
    return undefined;
  }
  return v;
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
        'branch',
        'apply_requirements',
        'workflow',
        'allowed_overrides',
        'allow_custom_workflows',
        'pre_workflow_hooks',
        'post_workflow_hooks',
      ],
      [
        'plan_requirements',
        'import_requirements',
        'allowed_workflows',
        'delete_source_branch_on_merge',
        'repo_locking',
        'repo_locks',
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
      preWorkflowHooks: parseHooks(r.pre_workflow_hooks, `${where}.pre_workflow_hooks`, p),
      postWorkflowHooks: parseHooks(r.post_workflow_hooks, `${where}.post_workflow_hooks`, p),
    };
    const branch = checkBranch(r.branch, `${where}.branch`, p);
    if (branch) rule.branch = branch;
    const ar = parseApplyRequirements(r.apply_requirements, `${where}.apply_requirements`, p);
    if (ar) rule.applyRequirements = ar;
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

/** Atlantis's IDMatches: an exact id, or an unanchored `/regex/`. */
export function ruleMatches(rule: ServerRepoRule, repoId: string): boolean {
  if (rule.id.startsWith('/') && rule.id.endsWith('/') && rule.id.length > 1) return new RegExp(rule.id.slice(1, -1)).test(repoId);
  return rule.id === repoId;
}

/** Atlantis's BranchMatches: no `branch` matches every base branch. */
export function branchMatches(rule: ServerRepoRule, baseBranch: string): boolean {
  return rule.branch === undefined || new RegExp(rule.branch.slice(1, -1)).test(baseBranch);
}

/** The last rule matching the repo, as Atlantis's MatchingRepo. */
function lastMatching(server: ServerSideRepoConfig | undefined, repoId: string): ServerRepoRule | undefined {
  return server?.repos.findLast((r) => ruleMatches(r, repoId));
}

/**
 * Whether commands run for a PR into `baseBranch`: Atlantis ignores (with a log line only)
 * every command and autoplan when the repo's last matching rule has a `branch` that the
 * base branch does not match.
 */
export function baseBranchAllowed(server: ServerSideRepoConfig | undefined, repoId: string, baseBranch: string): boolean {
  const rule = lastMatching(server, repoId);
  return rule === undefined || branchMatches(rule, baseBranch);
}

/** The server-side settings that apply to `host/owner/name` (later rules win, as Atlantis). */
export function serverSettingsFor(
  server: ServerSideRepoConfig | undefined,
  repoId: string,
): { applyRequirements: ApplyRequirement[]; workflow?: string; allowedOverrides: string[]; allowCustomWorkflows: boolean } {
  const out: { applyRequirements: ApplyRequirement[]; workflow?: string; allowedOverrides: string[]; allowCustomWorkflows: boolean } = {
    applyRequirements: [],
    allowedOverrides: [],
    allowCustomWorkflows: false,
  };
  for (const r of server?.repos ?? []) {
    if (!ruleMatches(r, repoId)) continue;
    if (r.applyRequirements) out.applyRequirements = r.applyRequirements;
    if (r.workflow) out.workflow = r.workflow;
    out.allowedOverrides = r.allowedOverrides;
    out.allowCustomWorkflows = r.allowCustomWorkflows;
  }
  return out;
}
