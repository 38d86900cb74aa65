// The repo's own atlantis.yaml (version 3): parsed and validated with every problem named by
// its place. The repo is the pull request's: hostile input, bounded before use.
import fs from 'node:fs';
import path from 'node:path';
import { MAX_WHEN_MODIFIED_PATTERN_LENGTH, MAX_WHEN_MODIFIED_PATTERNS, compilePatternList } from '../when-modified.js';
import { cleanedRepoDir, isValidWorkspace } from '../repo-dir.js';
import { parseRepoLocking, parseRepoLocks } from '../lock-policy.js';
import { Problems, checkKeys, isObj, parseApplyRequirements, parseWorkflows, strList, readYaml } from './schema.js';
import { ATLANTIS_YAML, DEFAULT_WHEN_MODIFIED, DEFAULT_WORKSPACE, type ProjectConfig, type RepoConfig, RepoConfigError } from './types.js';

/**
 * Bounds and compiles a project's when_modified (hostile input: each pattern runs against
 * every changed path), reporting each refused pattern with its index.
 */
function whenModifiedOk(dir: string, wm: string[], where: string, p: Problems): boolean {
  if (wm.length > MAX_WHEN_MODIFIED_PATTERNS) {
    p.add(where, `at most ${MAX_WHEN_MODIFIED_PATTERNS} patterns are allowed, got ${wm.length}`);
    return false;
  }
  const long = wm.findIndex((w) => w.length > MAX_WHEN_MODIFIED_PATTERN_LENGTH);
  if (long >= 0) {
    p.add(
      `${where}[${long}]`,
      `a pattern may be at most ${MAX_WHEN_MODIFIED_PATTERN_LENGTH} characters long, got ${(wm[long] as string).length}`,
    );
    return false;
  }
  const list = compilePatternList(dir, wm);
  if ('problems' in list) for (const q of list.problems) p.add(`${where}[${q.index}]`, q.message);
  return !('problems' in list);
}

const PROJECT_KEYS = [
  'name',
  'dir',
  'workspace',
  'autoplan',
  'apply_requirements',
  'plan_requirements',
  'import_requirements',
  'workflow',
  'terraform_version',
  'execution_order_group',
  'depends_on',
  'repo_locks',
  'repo_locking',
  'delete_source_branch_on_merge',
];
const PROJECT_IGNORED = ['branch', 'custom_policy_check', 'silence_pr_comments', 'terraform_distribution', 'policy_check'];
const TOP_KEYS = [
  'version',
  'projects',
  'workflows',
  'automerge',
  'parallel_plan',
  'parallel_apply',
  'abort_on_execution_order_fail',
  'repo_locks',
  'delete_source_branch_on_merge',
];
const TOP_IGNORED = ['allowed_regexp_prefixes', 'autodiscover', 'parallel_policy_check', 'policies'];

/**
 * Parses `atlantis.yaml`. Throws RepoConfigError listing every problem found, each with
 * its place (`projects[1].dir: is required`).
 */
export function parseRepoConfig(text: string, file = ATLANTIS_YAML, opts: { serverWorkflows?: readonly string[] } = {}): RepoConfig {
  const p = new Problems();
  const warnings: string[] = [];
  const root: unknown = readYaml(text, file);
  if (!isObj(root)) throw new RepoConfigError(file, ['must be a YAML map with at least "version: 3"']);
  checkKeys(root, TOP_KEYS, TOP_IGNORED, '', p, warnings);
  if (root.version === undefined) p.add('version', 'is required; only version 3 is supported');
  else if (root.version !== 3) p.add('version', `only version 3 is supported, got ${JSON.stringify(root.version)}`);
  const optBool = (k: string): boolean | undefined => {
    const v = root[k];
    if (v === undefined || v === null) return undefined;
    if (typeof v !== 'boolean') p.add(k, 'must be true or false');
    return v === true;
  };
  const bool = (k: string): boolean => optBool(k) ?? false;
  const workflows = parseWorkflows(root.workflows, 'workflows', p, warnings);
  const projects: ProjectConfig[] = [];
  if (root.projects !== undefined && root.projects !== null && !Array.isArray(root.projects)) p.add('projects', 'must be a list');
  const rawProjects = Array.isArray(root.projects) ? (root.projects as unknown[]) : [];
  rawProjects.forEach((rp, i) => {
    const where = `projects[${i}]`;
    if (!isObj(rp)) {
      p.add(where, 'must be a map');
      return;
    }
    checkKeys(rp, PROJECT_KEYS, PROJECT_IGNORED, where, p, warnings);
    let dir: string | undefined;
    if (typeof rp.dir !== 'string' || rp.dir.trim() === '') p.add(`${where}.dir`, 'is required');
    else {
      dir = cleanedRepoDir(rp.dir, 'refused');
      if (dir === undefined)
        p.add(`${where}.dir`, `${JSON.stringify(rp.dir)} must be a relative path inside the repo (no leading / and no ..)`);
    }
    // Without a usable dir the project is reported and left out of the cross-project checks.
    if (dir === undefined) return;
    let workspace = DEFAULT_WORKSPACE;
    if (rp.workspace !== undefined && rp.workspace !== null) {
      if (typeof rp.workspace !== 'string' || rp.workspace === '' || !isValidWorkspace(rp.workspace)) {
        p.add(`${where}.workspace`, `${JSON.stringify(rp.workspace)} is not a valid workspace name`);
      } else workspace = rp.workspace;
    }
    const proj: ProjectConfig = { dir, workspace, autoplan: { enabled: true, whenModified: [...DEFAULT_WHEN_MODIFIED] } };
    if (rp.name !== undefined && rp.name !== null) {
      if (typeof rp.name !== 'string' || rp.name === '') p.add(`${where}.name`, 'must be a non-empty string');
      else if (/[\s/]/.test(rp.name) || rp.name.includes('..'))
        p.add(`${where}.name`, `${JSON.stringify(rp.name)} may not contain spaces, / or ..`);
      else proj.name = rp.name;
    }
    if (rp.autoplan !== undefined && rp.autoplan !== null) {
      if (!isObj(rp.autoplan)) p.add(`${where}.autoplan`, 'must be a map');
      else {
        checkKeys(rp.autoplan, ['enabled', 'when_modified'], [], `${where}.autoplan`, p, warnings);
        if (rp.autoplan.enabled !== undefined) {
          if (typeof rp.autoplan.enabled !== 'boolean') p.add(`${where}.autoplan.enabled`, 'must be true or false');
          else proj.autoplan.enabled = rp.autoplan.enabled;
        }
        const wm = strList(rp.autoplan.when_modified, `${where}.autoplan.when_modified`, p);
        if (wm && whenModifiedOk(dir, wm, `${where}.autoplan.when_modified`, p)) proj.autoplan.whenModified = wm;
      }
    }
    const ar = parseApplyRequirements(rp.apply_requirements, `${where}.apply_requirements`, p);
    if (ar) proj.applyRequirements = ar;
    const pr = parseApplyRequirements(rp.plan_requirements, `${where}.plan_requirements`, p, 'plan_requirement');
    if (pr) proj.planRequirements = pr;
    const ir = parseApplyRequirements(rp.import_requirements, `${where}.import_requirements`, p, 'import_requirement');
    if (ir) proj.importRequirements = ir;
    if (rp.execution_order_group !== undefined && rp.execution_order_group !== null) {
      const g = rp.execution_order_group;
      if (typeof g !== 'number' || !Number.isSafeInteger(g)) p.add(`${where}.execution_order_group`, 'must be an integer');
      else proj.executionOrderGroup = g;
    }
    const deps = strList(rp.depends_on, `${where}.depends_on`, p);
    if (deps) proj.dependsOn = deps;
    if (rp.workflow !== undefined && rp.workflow !== null) {
      if (typeof rp.workflow !== 'string') p.add(`${where}.workflow`, 'must be a string');
      else proj.workflow = rp.workflow;
    }
    if (typeof rp.terraform_version === 'string') proj.terraformVersion = rp.terraform_version;
    // `terraform_version: 1.5` is a YAML number; Atlantis reads the scalar as a string.
    else if (typeof rp.terraform_version === 'number') proj.terraformVersion = String(rp.terraform_version);
    const repoLocks = parseRepoLocks(rp.repo_locks, `${where}.repo_locks`, p);
    if (repoLocks) proj.repoLocks = repoLocks;
    const repoLocking = parseRepoLocking(rp.repo_locking, `${where}.repo_locking`, p);
    if (repoLocking !== undefined) proj.repoLocking = repoLocking;
    const dsb = optionalBool(rp.delete_source_branch_on_merge, `${where}.delete_source_branch_on_merge`, p);
    if (dsb !== undefined) proj.deleteSourceBranchOnMerge = dsb;
    projects.push(proj);
  });
  // Same checks as Atlantis: unique names; same dir+workspace only when every one is named.
  const names = new Map<string, number>();
  for (const pr of projects) if (pr.name) names.set(pr.name, (names.get(pr.name) ?? 0) + 1);
  for (const [n, c] of names)
    if (c > 1) p.add('projects', `found two or more projects with name ${JSON.stringify(n)}; project names must be unique`);
  const byKey = new Map<string, ProjectConfig[]>();
  for (const pr of projects) {
    const k = `${pr.dir}\u0000${pr.workspace}`;
    byKey.set(k, [...(byKey.get(k) ?? []), pr]);
  }
  for (const list of byKey.values()) {
    if (list.length > 1 && list.some((x) => !x.name)) {
      const f = list[0] as ProjectConfig;
      p.add(
        'projects',
        `there are two or more projects with dir: ${JSON.stringify(f.dir)} workspace: ${JSON.stringify(f.workspace)} that are not all named; they must have a 'name' key so they can be targeted for apply's separately`,
      );
    }
  }
  for (const [i, pr] of projects.entries()) {
    if (pr.workflow && pr.workflow !== 'default' && !workflows[pr.workflow] && !opts.serverWorkflows?.includes(pr.workflow)) {
      p.add(`projects[${i}].workflow`, `workflow ${JSON.stringify(pr.workflow)} is not defined in workflows`);
    }
  }
  const repoLocks = parseRepoLocks(root.repo_locks, 'repo_locks', p);
  // Read before the throw below so a bad value is reported with the rest.
  const top = {
    parallelPlan: optBool('parallel_plan'),
    parallelApply: optBool('parallel_apply'),
    abortOnExecutionOrderFail: bool('abort_on_execution_order_fail'),
  };
  // Unset and false differ: unset leaves --automerge (and the server side) in charge, as Atlantis.
  const automerge = optionalBool(root.automerge, 'automerge', p);
  const deleteSourceBranchOnMerge = optionalBool(root.delete_source_branch_on_merge, 'delete_source_branch_on_merge', p);
  if (p.list.length > 0) throw new RepoConfigError(file, p.list);
  return {
    ...(repoLocks ? { repoLocks } : {}),
    version: 3,
    ...top,
    ...(automerge === undefined ? {} : { automerge }),
    ...(deleteSourceBranchOnMerge === undefined ? {} : { deleteSourceBranchOnMerge }),
    projects,
    workflows,
    warnings,
  };
}

function optionalBool(v: unknown, where: string, p: Problems): boolean | undefined {
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'boolean') {
    p.add(where, 'must be true or false');
    return undefined;
  }
  return v;
}

/** Reads `<repoDir>/atlantis.yaml` (or .yml); undefined when the repo has none. */
export function loadRepoConfig(repoDir: string, opts: { serverWorkflows?: readonly string[] } = {}): RepoConfig | undefined {
  for (const name of ['atlantis.yaml', 'atlantis.yml']) {
    const f = path.join(repoDir, name);
    let text: string;
    try {
      text = fs.readFileSync(f, 'utf8');
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') continue;
      throw e;
    }
    return parseRepoConfig(text, name, opts);
  }
  return undefined;
}
