// Repo configuration: parsing and validating `atlantis.yaml` (version 3) and the server-side
// repo config (`--repo-config`), deciding which projects a PR's changed files touch, and
// resolving a comment's -d/-w/-p to projects. Pure; the only file-system access is the
// optional existence check of default projects (Atlantis skips dirs a PR deleted).
import fs from 'node:fs';
import path from 'node:path';
import YAML from 'yaml';
import { MAX_WHEN_MODIFIED_PATTERN_LENGTH, MAX_WHEN_MODIFIED_PATTERNS, MatchBudget, type CompiledPatternList, changedPath, compilePatternList, listMatches } from './when-modified.js';
import { goClean } from './go-paths.js';
import { cleanedRepoDir } from './repo-dir.js';

export const ATLANTIS_YAML = 'atlantis.yaml';
export const DEFAULT_WORKSPACE = 'default';
export const DEFAULT_WHEN_MODIFIED: readonly string[] = ['**/*.tf*', '**/*.tofu', '**/*.tofu.json', '**/terragrunt.hcl', '**/.terraform.lock.hcl'];
/** Atlantis's --autoplan-file-list default, used when there is no atlantis.yaml. */
export const DEFAULT_AUTOPLAN_FILES: readonly string[] = ['**/*.tf', '**/*.tf.json', '**/*.tfvars', '**/*.tfvars.json', '**/*.tofu', '**/*.tofu.json', '**/terragrunt.hcl', '**/.terraform.lock.hcl'];

export type ApplyRequirement = 'approved' | 'mergeable' | 'undiverged';
const APPLY_REQUIREMENTS: readonly string[] = ['approved', 'mergeable', 'undiverged'];

export type BuiltinStepName = 'init' | 'plan' | 'apply' | 'show' | 'version' | 'import' | 'state_rm';
const BUILTIN_STEPS: readonly string[] = ['init', 'plan', 'apply', 'show', 'version', 'import', 'state_rm'];

export type Step =
  | { kind: BuiltinStepName; extraArgs: string[] }
  | { kind: 'run'; command: string; shell?: string; shellArgs?: string[]; output?: 'show' | 'hide' | 'strip_refreshing' }
  | { kind: 'env'; name: string; value?: string; command?: string };

export interface Workflow {
  name: string;
  plan: Step[];
  apply: Step[];
}

export const DEFAULT_WORKFLOW: Workflow = {
  name: 'default',
  plan: [{ kind: 'init', extraArgs: [] }, { kind: 'plan', extraArgs: [] }],
  apply: [{ kind: 'apply', extraArgs: [] }],
};

export interface ProjectConfig {
  name?: string;
  dir: string;
  workspace: string;
  autoplan: { enabled: boolean; whenModified: string[] };
  applyRequirements?: ApplyRequirement[];
  workflow?: string;
  terraformVersion?: string;
}

export interface RepoConfig {
  version: 3;
  automerge: boolean;
  parallelPlan: boolean;
  parallelApply: boolean;
  projects: ProjectConfig[];
  workflows: Record<string, Workflow>;
  /** Keys that Atlantis knows but this server ignores. */
  warnings: string[];
}

/** A project to run: where, which workspace, which workflow, which apply requirements. */
export interface ProjectSpec {
  name?: string;
  dir: string;
  workspace: string;
  workflow: Workflow;
  applyRequirements: ApplyRequirement[];
  autoplanEnabled: boolean;
  /** True when it comes from atlantis.yaml, false for a default (config-less) project. */
  configured: boolean;
  terraformVersion?: string;
}

export class RepoConfigError extends Error {
  constructor(readonly file: string, readonly problems: string[]) {
    super(`${file}: ${problems.join('; ')}`);
    this.name = 'RepoConfigError';
  }
}

// ---- validation helpers -------------------------------------------------------------

type Obj = Record<string, unknown>;

class Problems {
  readonly list: string[] = [];
  add(where: string, msg: string): void {
    this.list.push(where ? `${where}: ${msg}` : msg);
  }
}

function isObj(v: unknown): v is Obj {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function checkKeys(o: Obj, known: readonly string[], ignored: readonly string[], where: string, p: Problems, warnings: string[]): void {
  for (const k of Object.keys(o)) {
    if (known.includes(k)) continue;
    if (ignored.includes(k)) {
      warnings.push(`${where ? where + '.' : ''}${k} is not supported by this server and is ignored`);
      continue;
    }
    p.add(where, `unknown key ${JSON.stringify(k)}`);
  }
}

function strList(v: unknown, where: string, p: Problems): string[] | undefined {
  if (v === undefined || v === null) return undefined;
  if (!Array.isArray(v) || !v.every((x) => typeof x === 'string')) {
    p.add(where, 'must be a list of strings');
    return undefined;
  }
  return v as string[];
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
    p.add(`${where}[${long}]`, `a pattern may be at most ${MAX_WHEN_MODIFIED_PATTERN_LENGTH} characters long, got ${(wm[long] as string).length}`);
    return false;
  }
  const list = compilePatternList(dir, wm);
  if ('problems' in list) for (const q of list.problems) p.add(`${where}[${q.index}]`, q.message);
  return !('problems' in list);
}

function parseStep(v: unknown, where: string, p: Problems): Step | undefined {
  if (typeof v === 'string') {
    if (BUILTIN_STEPS.includes(v)) return { kind: v as BuiltinStepName, extraArgs: [] };
    if (v === 'run' || v === 'env') p.add(where, `step ${JSON.stringify(v)} needs a value`);
    else p.add(where, `unknown step ${JSON.stringify(v)}; valid steps: ${[...BUILTIN_STEPS, 'run', 'env'].join(', ')}`);
    return undefined;
  }
  if (!isObj(v) || Object.keys(v).length !== 1) {
    p.add(where, 'a step is a step name, or a map with exactly one key');
    return undefined;
  }
  const [name, body] = Object.entries(v)[0] as [string, unknown];
  if (BUILTIN_STEPS.includes(name)) {
    if (body === null || body === undefined) return { kind: name as BuiltinStepName, extraArgs: [] };
    if (!isObj(body)) {
      p.add(`${where}.${name}`, 'must be a map with extra_args');
      return undefined;
    }
    for (const k of Object.keys(body)) if (k !== 'extra_args') p.add(`${where}.${name}`, `unknown key ${JSON.stringify(k)}`);
    return { kind: name as BuiltinStepName, extraArgs: strList(body.extra_args, `${where}.${name}.extra_args`, p) ?? [] };
  }
  if (name === 'run') {
    if (typeof body === 'string') {
      if (body.trim() === '') p.add(`${where}.run`, 'cannot be empty');
      return { kind: 'run', command: body };
    }
    if (isObj(body)) {
      const step: Step = { kind: 'run', command: '' };
      if (typeof body.command !== 'string' || body.command.trim() === '') p.add(`${where}.run.command`, 'is required');
      else step.command = body.command;
      if (body.shell !== undefined) {
        if (typeof body.shell === 'string') step.shell = body.shell;
        else p.add(`${where}.run.shell`, 'must be a string');
      }
      if (body.shellArgs !== undefined) {
        const sa = typeof body.shellArgs === 'string' ? [body.shellArgs] : strList(body.shellArgs, `${where}.run.shellArgs`, p);
        if (sa) step.shellArgs = sa;
      }
      if (body.output !== undefined) {
        if (body.output === 'show' || body.output === 'hide' || body.output === 'strip_refreshing') step.output = body.output;
        else p.add(`${where}.run.output`, 'must be show, hide or strip_refreshing');
      }
      for (const k of Object.keys(body)) if (!['command', 'shell', 'shellArgs', 'output'].includes(k)) p.add(`${where}.run`, `unknown key ${JSON.stringify(k)}`);
      return step;
    }
    p.add(`${where}.run`, 'must be a command string or a map with command');
    return undefined;
  }
  if (name === 'env') {
    if (!isObj(body) || typeof body.name !== 'string' || body.name === '') {
      p.add(`${where}.env`, 'needs a name');
      return undefined;
    }
    const hasValue = typeof body.value === 'string';
    const hasCommand = typeof body.command === 'string';
    if (hasValue === hasCommand) p.add(`${where}.env`, 'needs exactly one of value or command');
    const step: Step = { kind: 'env', name: body.name };
    if (hasValue) step.value = body.value as string;
    if (hasCommand) step.command = body.command as string;
    return step;
  }
  p.add(where, `unknown step ${JSON.stringify(name)}; valid steps: ${[...BUILTIN_STEPS, 'run', 'env'].join(', ')}`);
  return undefined;
}

function parseStage(v: unknown, where: string, p: Problems, fallback: Step[]): Step[] {
  if (v === undefined || v === null) return fallback;
  if (!isObj(v)) {
    p.add(where, 'must be a map with steps');
    return fallback;
  }
  for (const k of Object.keys(v)) if (k !== 'steps') p.add(where, `unknown key ${JSON.stringify(k)}`);
  if (v.steps === undefined || v.steps === null) return [];
  if (!Array.isArray(v.steps)) {
    p.add(`${where}.steps`, 'must be a list');
    return fallback;
  }
  const steps: Step[] = [];
  v.steps.forEach((s, i) => {
    const st = parseStep(s, `${where}.steps[${i}]`, p);
    if (st) steps.push(st);
  });
  return steps;
}

export function parseWorkflows(v: unknown, where: string, p: Problems, warnings: string[]): Record<string, Workflow> {
  const out: Record<string, Workflow> = {};
  if (v === undefined || v === null) return out;
  if (!isObj(v)) {
    p.add(where, 'must be a map of workflow name to workflow');
    return out;
  }
  for (const [name, w] of Object.entries(v)) {
    const wh = `${where}.${name}`;
    if (w === null || w === undefined) {
      out[name] = { ...DEFAULT_WORKFLOW, name };
      continue;
    }
    if (!isObj(w)) {
      p.add(wh, 'must be a map with plan and apply');
      continue;
    }
    checkKeys(w, ['plan', 'apply'], ['policy_check', 'import', 'state_rm'], wh, p, warnings);
    out[name] = { name, plan: parseStage(w.plan, `${wh}.plan`, p, DEFAULT_WORKFLOW.plan), apply: parseStage(w.apply, `${wh}.apply`, p, DEFAULT_WORKFLOW.apply) };
  }
  return out;
}

function parseApplyRequirements(v: unknown, where: string, p: Problems): ApplyRequirement[] | undefined {
  const list = strList(v, where, p);
  if (!list) return undefined;
  for (const r of list) {
    if (!APPLY_REQUIREMENTS.includes(r)) p.add(where, `${JSON.stringify(r)} is not a valid apply_requirement, only "approved", "mergeable" and "undiverged" are supported`);
  }
  return list.filter((r) => APPLY_REQUIREMENTS.includes(r)) as ApplyRequirement[];
}

const PROJECT_KEYS = ['name', 'dir', 'workspace', 'autoplan', 'apply_requirements', 'workflow', 'terraform_version'];
const PROJECT_IGNORED = ['branch', 'execution_order_group', 'delete_source_branch_on_merge', 'repo_locking', 'repo_locks', 'custom_policy_check', 'plan_requirements', 'import_requirements', 'silence_pr_comments', 'depends_on', 'terraform_distribution', 'policy_check'];
const TOP_KEYS = ['version', 'projects', 'workflows', 'automerge', 'parallel_plan', 'parallel_apply'];
const TOP_IGNORED = ['allowed_regexp_prefixes', 'abort_on_execution_order_fail', 'delete_source_branch_on_merge', 'autodiscover', 'parallel_policy_check', 'repo_locks', 'policies'];

/**
 * Parses `atlantis.yaml`. Throws RepoConfigError listing every problem found, each with
 * its place (`projects[1].dir: is required`).
 */
export function parseRepoConfig(text: string, file = ATLANTIS_YAML, opts: { serverWorkflows?: readonly string[] } = {}): RepoConfig {
  const p = new Problems();
  const warnings: string[] = [];
  const doc = YAML.parseDocument(text, { uniqueKeys: true });
  if (doc.errors.length > 0) throw new RepoConfigError(file, doc.errors.map((e) => `YAML: ${e.message.split('\n')[0]}`));
  const root: unknown = doc.toJS();
  if (!isObj(root)) throw new RepoConfigError(file, ['must be a YAML map with at least "version: 3"']);
  checkKeys(root, TOP_KEYS, TOP_IGNORED, '', p, warnings);
  if (root.version === undefined) p.add('version', 'is required; only version 3 is supported');
  else if (root.version !== 3) p.add('version', `only version 3 is supported, got ${JSON.stringify(root.version)}`);
  const bool = (k: string): boolean => {
    const v = root[k];
    if (v === undefined || v === null) return false;
    if (typeof v !== 'boolean') p.add(k, 'must be true or false');
    return v === true;
  };
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
      if (dir === undefined) p.add(`${where}.dir`, `${JSON.stringify(rp.dir)} must be a relative path inside the repo (no leading / and no ..)`);
    }
    // Without a usable dir the project is reported and left out of the cross-project checks.
    if (dir === undefined) return;
    let workspace = DEFAULT_WORKSPACE;
    if (rp.workspace !== undefined && rp.workspace !== null) {
      if (typeof rp.workspace !== 'string' || rp.workspace === '' || !/^[A-Za-z0-9\-_.~$&+:=@]+$/.test(rp.workspace) || rp.workspace.includes('..')) {
        p.add(`${where}.workspace`, `${JSON.stringify(rp.workspace)} is not a valid workspace name`);
      } else workspace = rp.workspace;
    }
    const proj: ProjectConfig = { dir, workspace, autoplan: { enabled: true, whenModified: [...DEFAULT_WHEN_MODIFIED] } };
    if (rp.name !== undefined && rp.name !== null) {
      if (typeof rp.name !== 'string' || rp.name === '') p.add(`${where}.name`, 'must be a non-empty string');
      else if (/[\s/]/.test(rp.name) || rp.name.includes('..')) p.add(`${where}.name`, `${JSON.stringify(rp.name)} may not contain spaces, / or ..`);
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
    if (rp.workflow !== undefined && rp.workflow !== null) {
      if (typeof rp.workflow !== 'string') p.add(`${where}.workflow`, 'must be a string');
      else proj.workflow = rp.workflow;
    }
    if (typeof rp.terraform_version === 'string') proj.terraformVersion = rp.terraform_version;
    projects.push(proj);
  });
  // Same checks as Atlantis: unique names; same dir+workspace only when every one is named.
  const names = new Map<string, number>();
  for (const pr of projects) if (pr.name) names.set(pr.name, (names.get(pr.name) ?? 0) + 1);
  for (const [n, c] of names) if (c > 1) p.add('projects', `found two or more projects with name ${JSON.stringify(n)}; project names must be unique`);
  const byKey = new Map<string, ProjectConfig[]>();
  for (const pr of projects) {
    const k = `${pr.dir}\u0000${pr.workspace}`;
    byKey.set(k, [...(byKey.get(k) ?? []), pr]);
  }
  for (const list of byKey.values()) {
    if (list.length > 1 && list.some((x) => !x.name)) {
      const f = list[0] as ProjectConfig;
      p.add('projects', `there are two or more projects with dir: ${JSON.stringify(f.dir)} workspace: ${JSON.stringify(f.workspace)} that are not all named; they must have a 'name' key so they can be targeted for apply's separately`);
    }
  }
  for (const [i, pr] of projects.entries()) {
    if (pr.workflow && pr.workflow !== 'default' && !workflows[pr.workflow] && !opts.serverWorkflows?.includes(pr.workflow)) {
      p.add(`projects[${i}].workflow`, `workflow ${JSON.stringify(pr.workflow)} is not defined in workflows`);
    }
  }
  if (p.list.length > 0) throw new RepoConfigError(file, p.list);
  return { version: 3, automerge: bool('automerge'), parallelPlan: bool('parallel_plan'), parallelApply: bool('parallel_apply'), projects, workflows, warnings };
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

// ---- server-side repo config (--repo-config) -------------------------------------------

export interface ServerRepoRule {
  /** Exact `host/owner/name`, or a regex written as `/.../`. */
  id: string;
  applyRequirements?: ApplyRequirement[];
  workflow?: string;
  allowedOverrides: string[];
  allowCustomWorkflows: boolean;
}

export interface ServerConfig {
  repos: ServerRepoRule[];
  workflows: Record<string, Workflow>;
  warnings: string[];
}

export function parseServerConfig(text: string, file = 'repos.yaml'): ServerConfig {
  const p = new Problems();
  const warnings: string[] = [];
  const doc = YAML.parseDocument(text, { uniqueKeys: true });
  if (doc.errors.length > 0) throw new RepoConfigError(file, doc.errors.map((e) => `YAML: ${e.message.split('\n')[0]}`));
  const root: unknown = doc.toJS() ?? {};
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
    checkKeys(r, ['id', 'apply_requirements', 'workflow', 'allowed_overrides', 'allow_custom_workflows'], ['branch', 'plan_requirements', 'import_requirements', 'allowed_workflows', 'pre_workflow_hooks', 'post_workflow_hooks', 'delete_source_branch_on_merge', 'repo_locking', 'repo_locks', 'policy_check', 'custom_policy_check', 'autodiscover', 'silence_pr_comments', 'repo_config_file'], where, p, warnings);
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
    const rule: ServerRepoRule = { id: r.id, allowedOverrides: strList(r.allowed_overrides, `${where}.allowed_overrides`, p) ?? [], allowCustomWorkflows: r.allow_custom_workflows === true };
    const ar = parseApplyRequirements(r.apply_requirements, `${where}.apply_requirements`, p);
    if (ar) rule.applyRequirements = ar;
    if (typeof r.workflow === 'string') {
      rule.workflow = r.workflow;
      if (r.workflow !== 'default' && !workflows[r.workflow]) p.add(`${where}.workflow`, `workflow ${JSON.stringify(r.workflow)} is not defined in workflows`);
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

/** The server-side settings that apply to `host/owner/name` (later rules win, as Atlantis). */
export function serverSettingsFor(server: ServerConfig | undefined, repoId: string): { applyRequirements: ApplyRequirement[]; workflow?: string; allowedOverrides: string[]; allowCustomWorkflows: boolean } {
  const out: { applyRequirements: ApplyRequirement[]; workflow?: string; allowedOverrides: string[]; allowCustomWorkflows: boolean } = { applyRequirements: [], allowedOverrides: [], allowCustomWorkflows: false };
  for (const r of server?.repos ?? []) {
    if (!ruleMatches(r, repoId)) continue;
    if (r.applyRequirements) out.applyRequirements = r.applyRequirements;
    if (r.workflow) out.workflow = r.workflow;
    out.allowedOverrides = r.allowedOverrides;
    out.allowCustomWorkflows = r.allowCustomWorkflows;
  }
  return out;
}

// ---- project selection -----------------------------------------------------------------

function specFromConfig(cfg: RepoConfig, p: ProjectConfig, defaults?: DefaultsFromServer, serverWorkflows?: Record<string, Workflow>): ProjectSpec {
  let workflow = defaults?.workflow ?? DEFAULT_WORKFLOW;
  if (p.workflow) workflow = cfg.workflows[p.workflow] ?? serverWorkflows?.[p.workflow] ?? (p.workflow === 'default' ? DEFAULT_WORKFLOW : workflow);
  const spec: ProjectSpec = {
    dir: p.dir,
    workspace: p.workspace,
    workflow,
    applyRequirements: p.applyRequirements ?? defaults?.applyRequirements ?? [],
    autoplanEnabled: p.autoplan.enabled,
    configured: true,
  };
  if (p.name) spec.name = p.name;
  if (p.terraformVersion) spec.terraformVersion = p.terraformVersion;
  return spec;
}

/** Settings from the server side (--repo-config) for projects that do not set their own. */
export interface DefaultsFromServer {
  applyRequirements?: ApplyRequirement[];
  workflow?: Workflow;
  /** Server-side workflows a project's `workflow:` may name. */
  workflows?: Record<string, Workflow>;
}

function defaultSpec(dir: string, workspace: string, d?: DefaultsFromServer): ProjectSpec {
  return { dir, workspace, workflow: d?.workflow ?? DEFAULT_WORKFLOW, applyRequirements: d?.applyRequirements ?? [], autoplanEnabled: true, configured: false };
}

/** Atlantis's project dir for a changed file when there is no config (env/ and modules/ rules). */
function defaultProjectDir(file: string): string {
  const dir = path.posix.dirname(file);
  if (path.posix.basename(dir) === 'env') return path.posix.dirname(dir);
  const segs = dir === '.' ? [] : dir.split('/');
  const m = segs.indexOf('modules');
  if (m >= 0) return m === 0 ? '.' : segs.slice(0, m).join('/');
  return dir;
}

function dirHasTf(repoDir: string, dir: string): boolean {
  try {
    return fs.readdirSync(path.join(repoDir, dir)).some((f) => f.endsWith('.tf') || f.endsWith('.tf.json'));
  } catch {
    return false;
  }
}

/**
 * The projects a PR's changed files touch, for autoplan (and plain `atlantis plan`).
 * With a config: projects with autoplan enabled whose when_modified (relative to the project
 * dir) matches a changed file. Without: every dir holding a changed terraform file, workspace
 * `default`; with `repoDir`, dirs the PR deleted or that hold no .tf file are skipped, and a
 * change under `modules/` plans the dir above it only if that dir has .tf files (as Atlantis).
 */
export function projectsForChangedFiles(config: RepoConfig | undefined, changedFiles: string[], opts: { repoDir?: string; defaults?: DefaultsFromServer; budget?: MatchBudget } = {}): ProjectSpec[] {
  const files = changedFiles.map(goClean).filter((f) => f !== '' && !f.startsWith('../'));
  // One budget for the whole decision: many files x many projects x long paths stays bounded.
  const budget = opts.budget ?? new MatchBudget();
  const paths = files.map(changedPath);
  if (config) {
    const out: ProjectSpec[] = [];
    for (const p of config.projects) {
      if (!p.autoplan.enabled) continue;
      const list = mustCompile(p.dir, p.autoplan.whenModified);
      if (paths.some((f) => listMatches(list, f, budget))) out.push(specFromConfig(config, p, opts.defaults, opts.defaults?.workflows));
    }
    return out;
  }
  const autoplanFiles = mustCompile('.', DEFAULT_AUTOPLAN_FILES);
  const dirs = new Set<string>();
  for (const [i, f] of files.entries()) {
    if (!listMatches(autoplanFiles, paths[i] as ReturnType<typeof changedPath>, budget)) continue;
    const dir = defaultProjectDir(f);
    // With the checkout, skip dirs the PR deleted and module changes whose parent has no
    // terraform of its own; without it we cannot tell, so keep them.
    if (opts.repoDir !== undefined && !dirHasTf(opts.repoDir, dir)) continue;
    dirs.add(dir);
  }
  return [...dirs].sort().map((d) => defaultSpec(d, DEFAULT_WORKSPACE, opts.defaults));
}

function mustCompile(dir: string, patterns: readonly string[]): CompiledPatternList {
  const list = compilePatternList(dir, patterns);
  // parseRepoConfig refused these already; reaching this is a bug, not user input.
  if ('problems' in list) throw new Error(`when_modified: ${list.problems.map((q) => q.message).join('; ')}`);
  return list;
}

export type TargetResolution = { kind: 'all' } | { kind: 'projects'; projects: ProjectSpec[] } | { kind: 'error'; message: string };

/**
 * Resolves a comment's -p / -d / -w to projects, as Atlantis does:
 * no flags → `all` (the caller uses projectsForChangedFiles, or the PR's plans for apply);
 * `-p name` → that configured project; `-d`/`-w` → the configured projects at that dir and
 * workspace (dir defaults to `.`, workspace to `default`), or a default project there when
 * none is configured.
 */
export function resolveCommentTarget(config: RepoConfig | undefined, target: { dir?: string; workspace?: string; project?: string }, defaults?: DefaultsFromServer): TargetResolution {
  if (target.project !== undefined) {
    if (!config) return { kind: 'error', message: 'cannot specify a project name unless an atlantis.yaml file exists to configure projects' };
    const p = config.projects.find((x) => x.name === target.project);
    if (!p) return { kind: 'error', message: `no project with name ${JSON.stringify(target.project)} is defined in ${ATLANTIS_YAML}` };
    return { kind: 'projects', projects: [specFromConfig(config, p, defaults, defaults?.workflows)] };
  }
  if (target.dir === undefined && target.workspace === undefined) return { kind: 'all' };
  const dir = target.dir === undefined ? '.' : cleanedRepoDir(target.dir, 'from-root');
  if (dir === undefined) return { kind: 'error', message: `using a relative path ${JSON.stringify(target.dir)} with -d/--dir is not allowed` };
  const workspace = target.workspace ?? DEFAULT_WORKSPACE;
  if (config) {
    const matches = config.projects.filter((p) => p.dir === dir && p.workspace === workspace);
    if (matches.length > 1) {
      return { kind: 'error', message: `must specify project name: more than one project defined in ${ATLANTIS_YAML} matched dir: ${JSON.stringify(dir)} workspace: ${JSON.stringify(workspace)}` };
    }
    if (matches.length === 1) return { kind: 'projects', projects: [specFromConfig(config, matches[0] as ProjectConfig, defaults, defaults?.workflows)] };
  }
  return { kind: 'projects', projects: [defaultSpec(dir, workspace, defaults)] };
}
