// --skip-clone-no-changes, as Atlantis v0.47 decides it: before a plan of the whole pull
// request (autoplan, `plan` without -d/-p/-w, and import and state without them), the repo
// config is read from the PR's head commit through the host's API; when it configures
// projects and none of them is modified, nothing is cloned and the command finds no project.
// Anything else clones as before. The decision is pure; the reads are in project-job.ts.
import { projectsForChangedFiles } from '../repo-config/project-selection.js';
import type { RepoConfig } from '../repo-config/types.js';

/**
 * How much of a repo config the API read takes (1 MiB, GitHub's own limit for a file's
 * content): a larger one is read from a clone, as without the flag.
 */
export const MAX_REMOTE_REPO_CONFIG_BYTES = 1024 * 1024;

/** What the API read gave: the parsed config, no plain file there, or one over the bound. */
export type RemoteRepoConfig = { kind: 'config'; config: RepoConfig } | { kind: 'none' } | { kind: 'too-large' };

/** Whether to clone, and why when so. */
export type CloneDecision = { clone: false } | { clone: true; why: string };

/**
 * Whether the clone can be skipped: only when the repo config lists projects (without any,
 * projects are discovered from the checkout) and no changed file matches the when_modified
 * of any of them, autoplan enabled or not (as Atlantis checks it). `file` names the config
 * in the reason.
 */
export function cloneDecision(remote: RemoteRepoConfig, changedFiles: string[], file: string): CloneDecision {
  if (remote.kind === 'none') return { clone: true, why: `no ${file} at the head commit` };
  if (remote.kind === 'too-large') return { clone: true, why: `${file} is larger than ${MAX_REMOTE_REPO_CONFIG_BYTES} bytes` };
  if (remote.config.projects.length === 0) return { clone: true, why: `${file} defines no projects: they are discovered in the clone` };
  const modified = projectsForChangedFiles(remote.config, changedFiles, { autoplanDisabledToo: true });
  if (modified.length > 0) return { clone: true, why: `${modified.length} project(s) modified` };
  return { clone: false };
}
