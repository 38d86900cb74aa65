// Which projects a command runs on: the glue between a PR's checkout, its atlantis.yaml,
// the server-side repo config, the changed files and the comment's -p/-d/-w. Pure apart
// from reading atlantis.yaml from the checkout.
import type { ParsedCommand } from '../comment-parser/index.js';
import { loadRepoConfig, parseRepoConfig } from '../repo-config/atlantis-yaml.js';
import { type DefaultsFromServer, projectsForChangedFiles, resolveCommentTarget } from '../repo-config/project-selection.js';
import { refusedKeysError } from '../repo-config/keys.js';
import { OVERRIDABLE_KEYS, type ServerSideRepoConfig, serverSettingsFor } from '../repo-config/server-side.js';
import { ATLANTIS_YAML, type ProjectSpec, type RepoConfig } from '../repo-config/types.js';

export type { ProjectSpec };

/** The server-side defaults (--repo-config) for one repo, e.g. `github.com/acme/infra`. */
export function defaultsFor(server: ServerSideRepoConfig | undefined, repoId: string): DefaultsFromServer {
  const s = serverSettingsFor(server, repoId);
  const workflows = server?.workflows ?? {};
  return {
    applyRequirements: s.applyRequirements,
    planRequirements: s.planRequirements,
    importRequirements: s.importRequirements,
    workflow: s.workflow ? workflows[s.workflow] : undefined,
    workflows,
    allowedOverrides: s.allowedOverrides,
    ...(s.policyCheck !== undefined ? { policyCheck: s.policyCheck } : {}),
    ...(s.customPolicyCheck !== undefined ? { customPolicyCheck: s.customPolicyCheck } : {}),
  };
}

/**
 * Reads the repo's atlantis.yaml (or the server-side repo_config_file) and refuses what the
 * server side does not allow, with Atlantis's texts: as in Atlantis, without a --repo-config
 * that says so a repo may not define its own workflows (their `run` steps are shell commands
 * on the server) nor set the keys of allowed_overrides. A key this server does not implement
 * and must not go on without (keys.ts) fails the command, naming it.
 */
export function readRepoConfig(
  checkoutDir: string,
  server: ServerSideRepoConfig | undefined,
  repoId: string,
  baseBranch?: string,
): RepoConfig | undefined {
  const settings = serverSettingsFor(server, repoId);
  const config = loadRepoConfig(checkoutDir, {
    baseBranch,
    file: settings.repoConfigFile,
  });
  return config && allowedRepoConfig(config, server, repoId);
}

/**
 * The repo config from its text (read through the host's API, --skip-clone-no-changes),
 * parsed and checked exactly as readRepoConfig checks one read from a checkout.
 */
export function repoConfigFromText(
  text: string,
  server: ServerSideRepoConfig | undefined,
  repoId: string,
  baseBranch?: string,
): RepoConfig {
  const file = serverSettingsFor(server, repoId).repoConfigFile ?? ATLANTIS_YAML;
  return allowedRepoConfig(parseRepoConfig(text, file, { baseBranch }), server, repoId);
}

/** The repo config's file name for this repo (atlantis.yaml, or the server-side repo_config_file). */
export function repoConfigFileName(server: ServerSideRepoConfig | undefined, repoId: string): string {
  return serverSettingsFor(server, repoId).repoConfigFile ?? ATLANTIS_YAML;
}

function allowedRepoConfig(config: RepoConfig, server: ServerSideRepoConfig | undefined, repoId: string): RepoConfig {
  const settings = serverSettingsFor(server, repoId);
  const problem = repoConfigViolation(config, settings, Object.keys(server?.workflows ?? {}));
  if (problem) throw new Error(problem);
  const refused = config.unsupported.filter((u) => u.kind === 'refused');
  if (refused.length > 0) throw new Error(refusedKeysError(settings.repoConfigFile ?? 'atlantis.yaml', refused));
  return config;
}

/** Pure: the first thing the repo config does that the server-side settings forbid (Atlantis's order and texts). */
export function repoConfigViolation(
  config: RepoConfig,
  s: { allowedOverrides: string[]; allowCustomWorkflows: boolean; allowedWorkflows?: string[] },
  serverWorkflows: readonly string[] = [],
): string | undefined {
  for (const p of config.projects) {
    for (const key of OVERRIDABLE_KEYS) {
      if (key === 'policy_check' || !p.keys.includes(key) || s.allowedOverrides.includes(key)) continue;
      return `repo config not allowed to set '${key}' key: server-side config needs 'allowed_overrides: [${key}]'`;
    }
  }
  if (Object.keys(config.workflows).length > 0 && !s.allowCustomWorkflows) {
    return "repo config not allowed to define custom workflows: server-side config needs 'allow_custom_workflows: true'";
  }
  for (const p of config.projects) {
    if (p.workflow && !config.workflows[p.workflow] && !serverWorkflows.includes(p.workflow) && p.workflow !== 'default')
      return `workflow ${JSON.stringify(p.workflow)} is not defined anywhere`;
  }
  for (const p of config.projects) {
    if (!p.workflow || !s.allowedWorkflows?.length) continue;
    if (s.allowCustomWorkflows && config.workflows[p.workflow]) break;
    if (!s.allowedWorkflows.includes(p.workflow)) return `workflow '${p.workflow}' is not allowed for this repo`;
  }
  return undefined;
}

/**
 * The projects of a command. Autoplan and a comment without -p/-d/-w: the projects the PR
 * modifies. With -p/-d/-w: exactly that target (an error when it names nothing valid).
 */
export function selectProjects(
  config: RepoConfig | undefined,
  checkoutDir: string,
  changedFiles: string[],
  c: ParsedCommand | undefined,
  defaults: DefaultsFromServer,
): ProjectSpec[] {
  if (c) {
    const t = resolveCommentTarget(config, { dir: c.dir, workspace: c.workspace, project: c.project }, defaults);
    if (t.kind === 'error') throw new Error(t.message);
    if (t.kind === 'projects') return t.projects;
  }
  return projectsForChangedFiles(config, changedFiles, { repoDir: checkoutDir, defaults });
}

/** The project spec of an existing plan (for apply), configured or default. */
export function projectForPlan(config: RepoConfig | undefined, dir: string, workspace: string, defaults: DefaultsFromServer): ProjectSpec {
  const t = resolveCommentTarget(config, { dir, workspace }, defaults);
  if (t.kind === 'projects' && t.projects[0]) return t.projects[0];
  throw new Error(`no project at dir ${dir} workspace ${workspace}`);
}
