// The `undiverged` requirement's decision, as Atlantis v0.47 makes it with
// --checkout-strategy merge (events/undiverged_project_impact.go, working_dir.go): the base
// branch's commits that are not in the merge checkout yet ("diverged files": `git log
// <HEAD or HEAD^2 for plan>..origin/<base> --name-only`) make a project diverged only when
// they would select that project. Pure; the git side belongs to the working copies.
import { goClean } from '../go-compat/go-paths.js';
import { projectsForChangedFiles } from '../repo-config/project-selection.js';
import { DEFAULT_WHEN_MODIFIED, type ProjectSpec, type RepoConfig } from '../repo-config/types.js';
import { MatchBudget, changedPath, compilePatternList, listMatches } from '../repo-config/when-modified.js';

/** Pure: the git arguments that list the diverged files (after a `git fetch`). */
export function divergedFilesArgs(baseRef: string, fromPullHead: boolean): string[] {
  // For plan Atlantis starts from the PR head (the merge's second parent); the caller uses
  // HEAD when `git rev-parse --verify HEAD^2` fails, as Atlantis does.
  return ['log', `${fromPullHead ? 'HEAD^2' : 'HEAD'}..refs/remotes/origin/${baseRef}`, '--name-only', '--format='];
}

/**
 * Whether the diverged files touch the project: a configured project by its when_modified;
 * with no atlantis.yaml, the default project dirs of those files (Atlantis's autodiscovery);
 * a project not in an atlantis.yaml that has projects, by the default when_modified.
 */
export function divergedForProject(
  config: RepoConfig | undefined,
  p: Pick<ProjectSpec, 'dir' | 'workspace' | 'name'>,
  divergedFiles: readonly string[],
  repoDir?: string,
): boolean {
  const files = divergedFiles.map((f) => f.trim()).filter((f) => f !== '');
  if (files.length === 0) return false;
  if (!config) return projectsForChangedFiles(undefined, files, { repoDir }).some((d) => d.dir === p.dir);
  const configured = config.projects.find(
    (c) => c.dir === p.dir && c.workspace === p.workspace && (p.name === undefined || c.name === p.name),
  );
  const patterns = configured ? configured.autoplan.whenModified : [...DEFAULT_WHEN_MODIFIED];
  const list = compilePatternList(p.dir, patterns);
  // A pattern Atlantis cannot use makes it count the project as diverged.
  if ('problems' in list) return true;
  const budget = new MatchBudget();
  return files.some((f) => listMatches(list, changedPath(goClean(f)), budget));
}
