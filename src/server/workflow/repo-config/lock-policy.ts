// When a project's lock is taken, as Atlantis v0.47 decides it: `repo_locks: {mode: ...}`
// (on_plan, the default; on_apply; disabled) from the server-side repo config, overridden by
// the repo's atlantis.yaml (top level, then the project) where `allowed_overrides` lists
// `repo_locks`; the deprecated `repo_locking: false`; and --disable-repo-locking, which turns
// every lock off. Pure.
import { type Problems, isObj } from './problems.js';
import type { RepoConfig, RepoLocksMode } from './types.js';

export type { RepoLocksMode } from './types.js';
export const REPO_LOCKS_MODES: readonly RepoLocksMode[] = ['disabled', 'on_plan', 'on_apply'];
export const DEFAULT_REPO_LOCKS_MODE: RepoLocksMode = 'on_plan';

/** Parses a `repo_locks:` value; `{}` or no mode is the default mode, as in Atlantis. */
export function parseRepoLocks(v: unknown, where: string, p: Problems): RepoLocksMode | undefined {
  if (v === undefined || v === null) return undefined;
  if (!isObj(v)) {
    p.add(where, 'must be a map with a "mode" key');
    return undefined;
  }
  for (const k of Object.keys(v)) if (k !== 'mode') p.add(`${where}.${k}`, 'is not a known key');
  if (v.mode === undefined || v.mode === null) return DEFAULT_REPO_LOCKS_MODE;
  if (typeof v.mode !== 'string' || !REPO_LOCKS_MODES.includes(v.mode as RepoLocksMode)) {
    p.add(`${where}.mode`, `must be a valid value: one of ${REPO_LOCKS_MODES.join(', ')}`);
    return undefined;
  }
  return v.mode as RepoLocksMode;
}

/** Parses the deprecated `repo_locking:` boolean. */
export function parseRepoLocking(v: unknown, where: string, p: Problems): boolean | undefined {
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'boolean') {
    p.add(where, 'must be true or false');
    return undefined;
  }
  return v;
}

export interface LockSettings {
  repoLocks?: RepoLocksMode;
  repoLocking?: boolean;
}

/**
 * The mode for one project. `server`: the server-side settings for the repo (later rules
 * already applied); `repo`: atlantis.yaml's top level; `project`: its project entry.
 */
export function repoLocksModeFor(opts: {
  disableRepoLocking: boolean;
  server: LockSettings & { allowedOverrides: readonly string[] };
  repo?: { repoLocks?: RepoLocksMode };
  project?: LockSettings;
}): RepoLocksMode {
  if (opts.disableRepoLocking) return 'disabled';
  let mode = opts.server.repoLocks ?? DEFAULT_REPO_LOCKS_MODE;
  if (opts.server.repoLocking === false) mode = 'disabled';
  // Atlantis applies the overrides in the order allowed_overrides lists them.
  for (const key of opts.server.allowedOverrides) {
    if (key === 'repo_locking' && opts.project?.repoLocking !== undefined) {
      if (!opts.project.repoLocking) mode = 'disabled';
      else if (mode === 'disabled') mode = DEFAULT_REPO_LOCKS_MODE;
    }
    if (key === 'repo_locks') {
      if (opts.repo?.repoLocks !== undefined) mode = opts.repo.repoLocks;
      if (opts.project?.repoLocks !== undefined) mode = opts.project.repoLocks;
    }
  }
  return mode;
}

/**
 * Whether `command` takes the project lock in this mode, refusing when another PR holds it.
 * A plan takes it under on_plan. An apply takes it under on_plan and on_apply: under
 * on_apply that is where it is first taken (as Atlantis); under on_plan the PR normally
 * holds it already since its plan, and taking it again checks that it still does at the
 * moment terraform applies, so a plan made while the PR held no lock (an API run, a server
 * whose repo_locks said `disabled` then) cannot be applied over another PR's lock. Atlantis
 * v0.47 does not check under on_plan (a deliberate difference, docs/server.md). Disabled
 * modes, --disable-repo-locking among them, have no locks to check, as in Atlantis.
 */
export function commandLocks(mode: RepoLocksMode, command: 'plan' | 'apply'): boolean {
  if (mode === 'disabled') return false;
  return command === 'apply' || mode === 'on_plan';
}

/**
 * The mode of one selected project: its entry in atlantis.yaml is the named one, or the
 * unnamed one at its dir and workspace (a default project has none).
 */
export function projectLockMode(
  disableRepoLocking: boolean,
  server: LockSettings & { allowedOverrides: readonly string[] },
  config: RepoConfig | undefined,
  p: { name?: string; dir: string; workspace: string },
): RepoLocksMode {
  const project = config?.projects.find((x) =>
    p.name !== undefined ? x.name === p.name : !x.name && x.dir === p.dir && x.workspace === p.workspace,
  );
  return repoLocksModeFor({ disableRepoLocking, server, repo: config, project });
}
