// The server-side repo config (--repo-config, --repo-config-json; Atlantis's "server side
// repo config", repos.yaml): per-repo rules the operator sets, and the settings that apply
// to one repo. Trusted input, still validated so a typo fails at start.
import path from 'node:path';
import { type PolicySets, parsePolicySets } from '../../policy/policy-sets.js';
import { type LockSettings, parseRepoLocking, parseRepoLocks } from './lock-policy.js';
import { SERVER_REPO_KEYS, SERVER_TOP_KEYS, judgeKeys } from './keys.js';
import { Problems, checkShapes, isObj, parseApplyRequirements, parseWorkflows, strList, readYaml } from './schema.js';
import { type ApplyRequirement, RepoConfigError, type Workflow, type WorkflowHook } from './types.js';

export interface ServerRepoRule extends LockSettings {
  /** Exact `host/owner/name`, or a regex written as `/.../`. */
  id: string;
  applyRequirements?: ApplyRequirement[];
  planRequirements?: ApplyRequirement[];
  importRequirements?: ApplyRequirement[];
  deleteSourceBranchOnMerge?: boolean;
  workflow?: string;
  allowedOverrides: string[];
  allowCustomWorkflows: boolean;
  /** `/regex/` the PR's base branch must match for the rule to apply (Atlantis's `branch`). */
  branch?: string;
  /** The workflows a repo's projects may choose (Atlantis's allowed_workflows). */
  allowedWorkflows?: string[];
  /** The repo config file's path in the repo instead of atlantis.yaml. */
  repoConfigFile?: string;
  /** The keys the rule sets (a later rule overrides an earlier one only for these). */
  setKeys: string[];
  preWorkflowHooks: WorkflowHook[];
  postWorkflowHooks: WorkflowHook[];
  /** Whether projects of the repo have their policies checked (with --enable-policy-checks). */
  policyCheck?: boolean;
  /** The policy_check stage's run steps report per policy set instead of conftest (Atlantis's custom_policy_check). */
  customPolicyCheck?: boolean;
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
  /** The `policies:` block (policy/policy-sets.ts). */
  policies?: PolicySets;
}

/** The keys a repo's atlantis.yaml may be allowed to set (Atlantis's list and text). */
export const OVERRIDABLE_KEYS = [
  'plan_requirements',
  'apply_requirements',
  'import_requirements',
  'workflow',
  'delete_source_branch_on_merge',
  'repo_locking',
  'repo_locks',
  'policy_check',
  'custom_policy_check',
  'silence_pr_comments',
];

function overridesProblem(o: string): string {
  const quoted = OVERRIDABLE_KEYS.map((k) => JSON.stringify(k));
  return `${JSON.stringify(o)} is not a valid override, only ${quoted.slice(0, -1).join(', ')}, and ${quoted.at(-1)} are supported`;
}

/** Atlantis's checks of repo_config_file: a path inside the repo. */
function repoConfigFileProblem(f: string): string | undefined {
  if (f.startsWith('/')) return "must not starts with a slash '/'";
  if (f.includes('../') || f.includes('..\\')) return "must not contains parent directory path like '../'";
  // Ours: the name is joined to the checkout; `..` alone or a trailing `/..` would leave it too.
  if (f.split('/').includes('..') || f.includes('\0')) return "must not contains parent directory path like '../'";
  return undefined;
}

/**
 * Parses repos.yaml (or --repo-config-json). Throws RepoConfigError listing every problem:
 * unknown keys, bad values, and keys set to what this server does not implement (keys.ts),
 * so the server does not start without them.
 */
export function parseServerSideRepoConfig(
  text: string,
  file = 'repos.yaml',
  configDir = path.dirname(path.resolve(file)),
): ServerSideRepoConfig {
  const p = new Problems();
  const root: unknown = readYaml(text, file) ?? {};
  if (!isObj(root)) throw new RepoConfigError(file, ['must be a YAML map']);
  const unsupported = judgeKeys(root, SERVER_TOP_KEYS, '', p);
  const workflows = parseWorkflows(root.workflows, 'workflows', p, unsupported);
  const repos: ServerRepoRule[] = [];
  if (root.repos !== undefined && root.repos !== null && !Array.isArray(root.repos)) p.add('repos', 'must be a list');
  (Array.isArray(root.repos) ? (root.repos as unknown[]) : []).forEach((r, i) => {
    const where = `repos[${i}]`;
    if (!isObj(r)) {
      p.add(where, 'must be a map');
      return;
    }
    unsupported.push(...judgeKeys(r, SERVER_REPO_KEYS, where, p));
    checkShapes(r, where, p);
    if (typeof r.id !== 'string' || r.id === '') {
      p.add(`${where}.id`, 'is required');
      return;
    }
    if (r.id.startsWith('/') && r.id.endsWith('/') && r.id.length > 1) {
      try {
        new RegExp(r.id.slice(1, -1));
      } catch (e) {
        p.add(`${where}.id`, `parsing: ${r.id}: ${(e as Error).message}`);
      }
    }
    const rule: ServerRepoRule = {
      id: r.id,
      setKeys: Object.keys(r).filter((k) => r[k] !== null),
      allowedOverrides: strList(r.allowed_overrides, `${where}.allowed_overrides`, p) ?? [],
      allowCustomWorkflows: r.allow_custom_workflows === true,
      preWorkflowHooks: parseHooks(r.pre_workflow_hooks, `${where}.pre_workflow_hooks`, p),
      postWorkflowHooks: parseHooks(r.post_workflow_hooks, `${where}.post_workflow_hooks`, p),
    };
    for (const o of rule.allowedOverrides) if (!OVERRIDABLE_KEYS.includes(o)) p.add(`${where}.allowed_overrides`, overridesProblem(o));
    if (r.allow_custom_workflows !== undefined && r.allow_custom_workflows !== null && typeof r.allow_custom_workflows !== 'boolean')
      p.add(`${where}.allow_custom_workflows`, 'must be true or false');
    const branch = checkBranch(r.branch, `${where}.branch`, p);
    if (branch) rule.branch = branch;
    const ar = parseApplyRequirements(r.apply_requirements, `${where}.apply_requirements`, p);
    if (ar) rule.applyRequirements = ar;
    const pr = parseApplyRequirements(r.plan_requirements, `${where}.plan_requirements`, p, 'plan');
    if (pr) rule.planRequirements = pr;
    const ir = parseApplyRequirements(r.import_requirements, `${where}.import_requirements`, p, 'import');
    if (ir) rule.importRequirements = ir;
    const repoLocks = parseRepoLocks(r.repo_locks, `${where}.repo_locks`, p);
    if (repoLocks) rule.repoLocks = repoLocks;
    const repoLocking = parseRepoLocking(r.repo_locking, `${where}.repo_locking`, p);
    if (repoLocking !== undefined) rule.repoLocking = repoLocking;
    if (r.delete_source_branch_on_merge !== undefined && r.delete_source_branch_on_merge !== null) {
      if (typeof r.delete_source_branch_on_merge !== 'boolean') p.add(`${where}.delete_source_branch_on_merge`, 'must be true or false');
      else rule.deleteSourceBranchOnMerge = r.delete_source_branch_on_merge;
    }
    if (r.repo_config_file !== undefined && r.repo_config_file !== null && r.repo_config_file !== '') {
      const problem = typeof r.repo_config_file === 'string' ? repoConfigFileProblem(r.repo_config_file) : 'must be a string';
      if (problem) p.add(`${where}.repo_config_file`, problem);
      else rule.repoConfigFile = r.repo_config_file as string;
    }
    const defined = (name: string) => name === 'default' || workflows[name] !== undefined;
    if (r.workflow !== undefined && r.workflow !== null) {
      if (typeof r.workflow !== 'string') p.add(`${where}.workflow`, 'must be a string');
      else {
        rule.workflow = r.workflow;
        if (!defined(r.workflow)) p.add(`${where}.workflow`, `workflow ${JSON.stringify(r.workflow)} is not defined`);
      }
    }
    for (const [key, field] of [
      ['policy_check', 'policyCheck'],
      ['custom_policy_check', 'customPolicyCheck'],
    ] as const) {
      const v = r[key];
      if (v === undefined || v === null) continue;
      if (typeof v !== 'boolean') p.add(`${where}.${key}`, 'must be true or false');
      else rule[field] = v;
    }
    const allowed = strList(r.allowed_workflows, `${where}.allowed_workflows`, p);
    if (allowed) {
      rule.allowedWorkflows = allowed;
      for (const w of allowed) if (!defined(w)) p.add(`${where}.allowed_workflows`, `workflow ${JSON.stringify(w)} is not defined`);
    }
    repos.push(rule);
  });
  const policies = parsePolicySets(root.policies, configDir);
  for (const x of policies.problems) p.add(x.where, x.problem);
  for (const u of unsupported) p.add(u.key, `is not supported by this server: ${u.why}`);
  if (p.list.length > 0) throw new RepoConfigError(file, p.list);
  return { repos, workflows, ...(policies.sets ? { policies: policies.sets } : {}) };
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

export interface ServerSettings {
  applyRequirements: ApplyRequirement[];
  planRequirements: ApplyRequirement[];
  importRequirements: ApplyRequirement[];
  /** Later matching rules that set it win; unset: Atlantis's default, false. */
  deleteSourceBranchOnMerge?: boolean;
  workflow?: string;
  allowedOverrides: string[];
  allowCustomWorkflows: boolean;
  /** Unset: any workflow. */
  allowedWorkflows?: string[];
  /** The repo config file's name (default atlantis.yaml). */
  repoConfigFile?: string;
  policyCheck?: boolean;
  customPolicyCheck?: boolean;
}

/**
 * The server-side settings that apply to `host/owner/name`: of the matching rules, the last
 * one that sets a key wins, as Atlantis; repo_config_file comes from the last matching rule.
 */
export function serverSettingsFor(server: ServerSideRepoConfig | undefined, repoId: string): ServerSettings {
  const out: ServerSettings = {
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
    if (r.deleteSourceBranchOnMerge !== undefined) out.deleteSourceBranchOnMerge = r.deleteSourceBranchOnMerge;
    if (r.workflow) out.workflow = r.workflow;
    if (r.setKeys.includes('allowed_overrides')) out.allowedOverrides = r.allowedOverrides;
    if (r.setKeys.includes('allow_custom_workflows')) out.allowCustomWorkflows = r.allowCustomWorkflows;
    if (r.allowedWorkflows) out.allowedWorkflows = r.allowedWorkflows;
    if (r.policyCheck !== undefined) out.policyCheck = r.policyCheck;
    if (r.customPolicyCheck !== undefined) out.customPolicyCheck = r.customPolicyCheck;
  }
  const file = lastMatching(server, repoId)?.repoConfigFile;
  if (file) out.repoConfigFile = file;
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
