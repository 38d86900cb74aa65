// Which projects a pull request's changed files touch (autoplan, plain `atlantis plan`), and
// which projects a comment's -d/-w/-p names. Pure; the only file-system read is the optional
// check that a default project's dir still holds terraform (Atlantis skips dirs a PR deleted).
import fs from 'node:fs';
import path from 'node:path';
import { goClean } from '../go-compat/go-paths.js';
import { globMatch, isDirGlob } from '../go-compat/dir-glob.js';
import { linearRegExp } from '../go-compat/linear-regexp.js';
import { cleanedRepoDir } from '../go-compat/repo-dir.js';
import { type CompiledPatternList, MatchBudget, changedPath, compilePatternList, listMatches } from './when-modified.js';
import {
  ATLANTIS_YAML,
  type ApplyRequirement,
  DEFAULT_AUTOPLAN_FILES,
  DEFAULT_WORKFLOW,
  DEFAULT_WORKSPACE,
  type ProjectConfig,
  type ProjectSpec,
  type RepoConfig,
  type Workflow,
} from './types.js';

function specFromConfig(
  cfg: RepoConfig,
  p: ProjectConfig,
  defaults?: DefaultsFromServer,
  serverWorkflows?: Record<string, Workflow>,
): ProjectSpec {
  let workflow = defaults?.workflow ?? DEFAULT_WORKFLOW;
  if (p.workflow)
    workflow = cfg.workflows[p.workflow] ?? serverWorkflows?.[p.workflow] ?? (p.workflow === 'default' ? DEFAULT_WORKFLOW : workflow);
  const spec: ProjectSpec = {
    dir: p.dir,
    workspace: p.workspace,
    workflow,
    applyRequirements: p.applyRequirements ?? defaults?.applyRequirements ?? [],
    planRequirements: p.planRequirements ?? defaults?.planRequirements ?? [],
    importRequirements: p.importRequirements ?? defaults?.importRequirements ?? [],
    executionOrderGroup: p.executionOrderGroup ?? 0,
    dependsOn: p.dependsOn ?? [],
    autoplanEnabled: p.autoplan.enabled,
    configured: true,
  };
  if (p.name) spec.name = p.name;
  if (p.terraformVersion) spec.terraformVersion = p.terraformVersion;
  if (p.terraformDistribution) spec.terraformDistribution = p.terraformDistribution;
  // As Atlantis's MergeProjectCfg: the project's policy_check counts where it may override it.
  const policyCheck =
    p.policyCheck !== undefined && defaults?.allowedOverrides?.includes('policy_check') ? p.policyCheck : defaults?.policyCheck;
  if (policyCheck !== undefined) spec.policyCheck = policyCheck;
  const custom =
    p.customPolicyCheck !== undefined && defaults?.allowedOverrides?.includes('custom_policy_check')
      ? p.customPolicyCheck
      : defaults?.customPolicyCheck;
  if (custom !== undefined) spec.customPolicyCheck = custom;
  return spec;
}

/** Settings from the server side (--repo-config) for projects that do not set their own. */
export interface DefaultsFromServer {
  applyRequirements?: ApplyRequirement[];
  planRequirements?: ApplyRequirement[];
  importRequirements?: ApplyRequirement[];
  workflow?: Workflow;
  /** Server-side workflows a project's `workflow:` may name. */
  workflows?: Record<string, Workflow>;
  /** The repo's policy_check and custom_policy_check (server side); unset: on, and off. */
  policyCheck?: boolean;
  customPolicyCheck?: boolean;
  /** allowed_overrides: which of a project's keys count. */
  allowedOverrides?: string[];
  /** --silence-no-projects: a -d/-p that names none of atlantis.yaml's projects selects nothing (no error, no default project). */
  silenceNoProjects?: boolean;
  /** --enable-regexp-cmd: -p is a regular expression matched against whole project names. */
  enableRegexpCmd?: boolean;
}

function defaultSpec(dir: string, workspace: string, d?: DefaultsFromServer): ProjectSpec {
  return {
    dir,
    workspace,
    workflow: d?.workflow ?? DEFAULT_WORKFLOW,
    applyRequirements: d?.applyRequirements ?? [],
    planRequirements: d?.planRequirements ?? [],
    importRequirements: d?.importRequirements ?? [],
    executionOrderGroup: 0,
    dependsOn: [],
    autoplanEnabled: true,
    configured: false,
    ...(d?.policyCheck !== undefined ? { policyCheck: d.policyCheck } : {}),
    ...(d?.customPolicyCheck !== undefined ? { customPolicyCheck: d.customPolicyCheck } : {}),
  };
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
export function projectsForChangedFiles(
  config: RepoConfig | undefined,
  changedFiles: string[],
  opts: {
    repoDir?: string;
    defaults?: DefaultsFromServer;
    budget?: MatchBudget;
    /** Projects with autoplan disabled count too (as Atlantis's when_modified check before a skipped clone). */
    autoplanDisabledToo?: boolean;
  } = {},
): ProjectSpec[] {
  const files = changedFiles.map(goClean).filter((f) => f !== '' && !f.startsWith('../'));
  // One budget for the whole decision: many files x many projects x long paths stays bounded.
  const budget = opts.budget ?? new MatchBudget();
  const paths = files.map(changedPath);
  if (config) {
    const out: ProjectSpec[] = [];
    for (const p of config.projects) {
      if (!p.autoplan.enabled && !opts.autoplanDisabledToo) continue;
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
export function resolveCommentTarget(
  config: RepoConfig | undefined,
  target: { dir?: string; workspace?: string; project?: string },
  defaults?: DefaultsFromServer,
): TargetResolution {
  if (target.project !== undefined) {
    if (!config)
      return { kind: 'error', message: 'cannot specify a project name unless an atlantis.yaml file exists to configure projects' };
    const found = defaults?.enableRegexpCmd
      ? projectsByRegex(config, target.project)
      : config.projects.filter((x) => x.name === target.project).slice(0, 1);
    if (found.length === 0) {
      // As Atlantis: another server's project, silently.
      if (defaults?.silenceNoProjects && config.projects.length > 0) return { kind: 'projects', projects: [] };
      return { kind: 'error', message: `no project with name '${target.project}' is defined in '${ATLANTIS_YAML}'` };
    }
    return { kind: 'projects', projects: found.map((p) => specFromConfig(config, p, defaults, defaults?.workflows)) };
  }
  if (target.dir === undefined && target.workspace === undefined) return { kind: 'all' };
  if (target.dir !== undefined && isDirGlob(target.dir))
    return globTarget(config, target.dir, target.workspace ?? DEFAULT_WORKSPACE, defaults);
  const dir = target.dir === undefined ? '.' : cleanedRepoDir(target.dir, 'from-root');
  if (dir === undefined)
    return { kind: 'error', message: `using a relative path ${JSON.stringify(target.dir)} with -d/--dir is not allowed` };
  const workspace = target.workspace ?? DEFAULT_WORKSPACE;
  if (config) {
    const matches = config.projects.filter((p) => p.dir === dir && p.workspace === workspace);
    if (matches.length > 1) {
      return {
        kind: 'error',
        message: `must specify project name: more than one project defined in ${ATLANTIS_YAML} matched dir: ${JSON.stringify(dir)} workspace: ${JSON.stringify(workspace)}`,
      };
    }
    if (matches.length === 1)
      return { kind: 'projects', projects: [specFromConfig(config, matches[0] as ProjectConfig, defaults, defaults?.workflows)] };
    // As Atlantis: with --silence-no-projects, a dir that is none of atlantis.yaml's projects is another server's.
    if (defaults?.silenceNoProjects && config.projects.length > 0) return { kind: 'projects', projects: [] };
  }
  return { kind: 'projects', projects: [defaultSpec(dir, workspace, defaults)] };
}

/**
 * Atlantis's FindProjectsByName: the named projects that `^<pattern>$` matches (as Go reads it:
 * `^a|b$` is `^a` or `b$`), in linear time (PR input, go-compat/linear-regexp.ts); a match of
 * several is allowed only when the expression starts with one of allowed_regexp_prefixes (when
 * set). A regex that does not compile matches nothing.
 */
export function projectsByRegex(config: RepoConfig, pattern: string): ProjectConfig[] {
  const re = linearRegExp(`^${pattern}$`);
  if (!re) return [];
  const found = config.projects.filter((p) => p.name !== undefined && re.test(p.name));
  const prefixes = config.allowedRegexpPrefixes ?? [];
  if (found.length > 1 && prefixes.length > 0 && !prefixes.some((x) => pattern.startsWith(x))) return [];
  return found;
}

/**
 * A glob -d (`plan -d modules/*`), as Atlantis: every project of atlantis.yaml whose dir the
 * pattern matches, in that workspace. When none does (or there is no atlantis.yaml), Atlantis
 * takes the pattern itself as the dir, which then does not exist; so does this.
 */
function globTarget(config: RepoConfig | undefined, pattern: string, workspace: string, defaults?: DefaultsFromServer): TargetResolution {
  const matches = (config?.projects ?? []).filter((p) => p.workspace === workspace && globMatch(pattern, p.dir));
  if (config && matches.length > 0) {
    return { kind: 'projects', projects: matches.map((p) => specFromConfig(config, p, defaults, defaults?.workflows)) };
  }
  if (defaults?.silenceNoProjects && config && config.projects.length > 0) return { kind: 'projects', projects: [] };
  return { kind: 'projects', projects: [defaultSpec(pattern, workspace, defaults)] };
}
