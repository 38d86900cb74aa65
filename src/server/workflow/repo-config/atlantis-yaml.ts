// The repo's own atlantis.yaml (version 3): parsed and validated with every problem named by
// its place. The repo is the pull request's: hostile input, bounded before use.
import fs from 'node:fs';
import path from 'node:path';
import { MAX_WHEN_MODIFIED_PATTERN_LENGTH, MAX_WHEN_MODIFIED_PATTERNS, compilePatternList } from './when-modified.js';
import { cleanedRepoDir, isValidWorkspace } from '../go-compat/repo-dir.js';
import { linearRegExp } from '../go-compat/linear-regexp.js';
import { shellSplit } from '../go-compat/shell-split.js';
import { isDistribution } from '../../terraform/distribution.js';
import { parseRepoLocking, parseRepoLocks } from './lock-policy.js';
import { REPO_PROJECT_KEYS, REPO_TOP_KEYS, judgeKeys } from './keys.js';
import { Problems, checkKeys, checkShapes, isObj, parseApplyRequirements, parseWorkflows, strList, readYaml } from './schema.js';
import {
  ATLANTIS_YAML,
  DEFAULT_WHEN_MODIFIED,
  DEFAULT_WORKSPACE,
  type ProjectConfig,
  type RepoConfig,
  RepoConfigError,
  type Workflow,
} from './types.js';

export interface RepoConfigOptions {
  /** The PR's base branch: projects whose `branch` regex it does not match are left out. */
  baseBranch?: string;
}

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

/**
 * Atlantis's check of a project's `branch`: a `/regex/`. Both it and the base branch it is
 * matched against come from the PR's side, so it runs in linear time as in Go (linear-regexp.ts).
 */
function branchRegex(v: unknown, where: string, p: Problems): RegExp | undefined {
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'string' || !v.startsWith('/') || !v.endsWith('/') || v.length < 2) {
    p.add(where, "regex must begin and end with a slash '/'");
    return undefined;
  }
  const re = linearRegExp(v.slice(1, -1));
  if (re) return re;
  let why = 'backreferences and lookaround are not supported';
  try {
    new RegExp(v.slice(1, -1));
  } catch (e) {
    why = (e as Error).message;
  }
  p.add(where, `parsing: ${v}: ${why}`);
  return undefined;
}

/** Version 2 configs: Atlantis re-joins each run command from its shell words (quotes dropped). */
function legacyShellParsing(workflows: Record<string, Workflow>, p: Problems): void {
  for (const w of Object.values(workflows)) {
    for (const step of [...w.plan, ...w.apply]) {
      if (step.kind !== 'run') continue;
      try {
        step.command = shellSplit(step.command).join(' ');
      } catch (e) {
        p.add('workflows', `unable to parse ${JSON.stringify(step.command)}: ${(e as Error).message}`);
      }
    }
  }
}

/**
 * Parses `atlantis.yaml`. Throws RepoConfigError listing every problem found, each with
 * its place (`projects[1].dir: is required`).
 */
export function parseRepoConfig(text: string, file = ATLANTIS_YAML, opts: RepoConfigOptions = {}): RepoConfig {
  const p = new Problems();
  const root: unknown = readYaml(text, file);
  if (!isObj(root)) throw new RepoConfigError(file, ['must be a YAML map with at least "version: 3"']);
  const unsupported = judgeKeys(root, REPO_TOP_KEYS, '', p);
  checkShapes(root, '', p);
  if (root.version === undefined || root.version === null)
    p.add(
      'version',
      "is required. If you've just upgraded Atlantis you need to rewrite your atlantis.yaml for version 3. See www.runatlantis.io/docs/upgrading-atlantis-yaml.html",
    );
  else if (root.version !== 2 && root.version !== 3) p.add('version', 'only versions 2 and 3 are supported');
  const optBool = (k: string): boolean | undefined => optionalBool(root[k], k, p);
  const workflows = parseWorkflows(root.workflows, 'workflows', p, unsupported);
  if (root.version === 2) legacyShellParsing(workflows, p);
  const projects: ProjectConfig[] = [];
  if (root.projects !== undefined && root.projects !== null && !Array.isArray(root.projects)) p.add('projects', 'must be a list');
  const rawProjects = Array.isArray(root.projects) ? (root.projects as unknown[]) : [];
  rawProjects.forEach((rp, i) => {
    const where = `projects[${i}]`;
    if (!isObj(rp)) {
      p.add(where, 'must be a map');
      return;
    }
    const projectUnsupported = judgeKeys(rp, REPO_PROJECT_KEYS, where, p);
    checkShapes(rp, where, p);
    const dist = rp.terraform_distribution;
    if (dist !== undefined && dist !== null && dist !== 'terraform' && dist !== 'opentofu')
      p.add(
        `${where}.terraform_distribution`,
        `'${String(dist)}' is not a valid terraform_distribution, only 'terraform' and 'opentofu' are supported`,
      );
    const branch = branchRegex(rp.branch, `${where}.branch`, p);
    let dir: string | undefined;
    if (typeof rp.dir !== 'string' || rp.dir.trim() === '') p.add(`${where}.dir`, 'is required');
    else if (/[*?[]/.test(rp.dir)) {
      // Atlantis expands these into one project per matching dir; a literal dir would plan nothing.
      projectUnsupported.push({ key: `${where}.dir`, kind: 'refused', why: 'glob patterns in dir are not implemented' });
    } else {
      dir = cleanedRepoDir(rp.dir, 'refused');
      if (dir === undefined)
        p.add(`${where}.dir`, `${JSON.stringify(rp.dir)} must be a relative path inside the repo (no leading / and no ..)`);
    }
    // Without a usable dir the project is reported and left out of the cross-project checks.
    if (dir === undefined) {
      unsupported.push(...projectUnsupported);
      return;
    }
    // As Atlantis: a project whose branch regex the PR's base branch does not match is left out.
    if (branch && opts.baseBranch !== undefined && !branch.test(opts.baseBranch)) return;
    unsupported.push(...projectUnsupported);
    let workspace = DEFAULT_WORKSPACE;
    if (rp.workspace !== undefined && rp.workspace !== null) {
      if (typeof rp.workspace !== 'string' || rp.workspace === '' || !isValidWorkspace(rp.workspace)) {
        p.add(`${where}.workspace`, `${JSON.stringify(rp.workspace)} is not a valid workspace name`);
      } else workspace = rp.workspace;
    }
    const proj: ProjectConfig = {
      dir,
      workspace,
      autoplan: { enabled: true, whenModified: [...DEFAULT_WHEN_MODIFIED] },
      keys: Object.keys(rp).filter((k) => rp[k] !== null),
    };
    if (rp.name !== undefined && rp.name !== null) {
      if (typeof rp.name !== 'string' || rp.name === '') p.add(`${where}.name`, 'must be a non-empty string');
      else if (/[\s/]/.test(rp.name) || rp.name.includes('..'))
        p.add(`${where}.name`, `${JSON.stringify(rp.name)} may not contain spaces, / or ..`);
      else proj.name = rp.name;
    }
    if (rp.autoplan !== undefined && rp.autoplan !== null) {
      if (!isObj(rp.autoplan)) p.add(`${where}.autoplan`, 'must be a map');
      else {
        checkKeys(rp.autoplan, ['enabled', 'when_modified'], `${where}.autoplan`, p);
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
    const pr = parseApplyRequirements(rp.plan_requirements, `${where}.plan_requirements`, p, 'plan');
    if (pr) proj.planRequirements = pr;
    const ir = parseApplyRequirements(rp.import_requirements, `${where}.import_requirements`, p, 'import');
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
    else if (rp.terraform_version !== undefined && rp.terraform_version !== null) p.add(`${where}.terraform_version`, 'must be a string');
    const repoLocks = parseRepoLocks(rp.repo_locks, `${where}.repo_locks`, p);
    if (repoLocks) proj.repoLocks = repoLocks;
    const repoLocking = parseRepoLocking(rp.repo_locking, `${where}.repo_locking`, p);
    if (repoLocking !== undefined) proj.repoLocking = repoLocking;
    const dsb = optionalBool(rp.delete_source_branch_on_merge, `${where}.delete_source_branch_on_merge`, p);
    if (dsb !== undefined) proj.deleteSourceBranchOnMerge = dsb;
    // A bad value was reported above, in Atlantis's words.
    if (isDistribution(rp.terraform_distribution)) proj.terraformDistribution = rp.terraform_distribution;
    const pc = optionalBool(rp.policy_check, `${where}.policy_check`, p);
    if (pc !== undefined) proj.policyCheck = pc;
    const cpc = optionalBool(rp.custom_policy_check, `${where}.custom_policy_check`, p);
    if (cpc !== undefined) proj.customPolicyCheck = cpc;
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
  const repoLocks = parseRepoLocks(root.repo_locks, 'repo_locks', p);
  // Read before the throw below so a bad value is reported with the rest. Unset and false
  // differ: unset leaves the server flags (--automerge, --parallel-plan, ...) in charge.
  const top = {
    automerge: optBool('automerge'),
    deleteSourceBranchOnMerge: optBool('delete_source_branch_on_merge'),
    parallelPlan: optBool('parallel_plan'),
    parallelApply: optBool('parallel_apply'),
  };
  const abortOnExecutionOrderFail = optBool('abort_on_execution_order_fail') ?? false;
  const allowedRegexpPrefixes = strList(root.allowed_regexp_prefixes, 'allowed_regexp_prefixes', p);
  if (p.list.length > 0) throw new RepoConfigError(file, p.list);
  return {
    ...(repoLocks ? { repoLocks } : {}),
    version: root.version as 2 | 3,
    ...(Object.fromEntries(Object.entries(top).filter(([, v]) => v !== undefined)) as Partial<typeof top>),
    abortOnExecutionOrderFail,
    ...(allowedRegexpPrefixes && allowedRegexpPrefixes.length > 0 ? { allowedRegexpPrefixes } : {}),
    projects,
    workflows,
    unsupported,
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

/**
 * Reads the repo config file (`atlantis.yaml`, or the server-side `repo_config_file`);
 * undefined when the repo has none. An `atlantis.yml` is refused, as Atlantis refuses it.
 */
export function loadRepoConfig(repoDir: string, opts: RepoConfigOptions & { file?: string } = {}): RepoConfig | undefined {
  if (fs.existsSync(path.join(repoDir, 'atlantis.yml')))
    throw new Error('found "atlantis.yml" as config file; rename using the .yaml extension');
  const name = opts.file ?? ATLANTIS_YAML;
  let text: string;
  try {
    text = fs.readFileSync(path.join(repoDir, name), 'utf8');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw e;
  }
  return parseRepoConfig(text, name, opts);
}
