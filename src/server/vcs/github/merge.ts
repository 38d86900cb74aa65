// Automerge's merge as Atlantis v0.47's GitHub client does it (MergePull): the method (the one
// asked for, else the first the repository allows of merge, rebase, squash), the merge, and
// with delete_source_branch_on_merge the head branch deleted after it. Errors come back in
// Atlantis's words, for its `Automerging failed:` comment.
import type { Logger } from '../../../log.js';
import { MERGE_METHODS, type MergeMethod } from '../host.js';
import type { GitHubClient, RepoMergeSettings } from './client.js';
import { githubErrorText } from './error-text.js';

/**
 * Pure: the merge method to send, or Atlantis's error text. A requested method must be known
 * and allowed by the repository; without one, merge, else rebase, else squash (merge when the
 * repository says nothing, as Atlantis's go-github reads a missing setting as false).
 */
export function chooseMergeMethod(requested: string, repo: RepoMergeSettings): { method: MergeMethod } | { error: string } {
  const allowed: Record<MergeMethod, boolean> = {
    merge: repo.allowMergeCommit,
    rebase: repo.allowRebaseMerge,
    squash: repo.allowSquashMerge,
  };
  if (requested !== '') {
    if (!(MERGE_METHODS as readonly string[]).includes(requested))
      return { error: `merge method '${requested}' is unknown. Specify one of the valid values: '${MERGE_METHODS.join(', ')}'` };
    if (!allowed[requested as MergeMethod])
      return { error: `merge method '${requested}' is not allowed by the repository Pull Request settings` };
    return { method: requested as MergeMethod };
  }
  if (allowed.merge) return { method: 'merge' };
  if (allowed.rebase) return { method: 'rebase' };
  if (allowed.squash) return { method: 'squash' };
  return { method: 'merge' };
}

/** Merges; returns Atlantis's error text, or undefined once merged. */
export async function mergePull(
  gh: GitHubClient,
  log: Logger,
  repo: string,
  pull: number,
  o: { method: string; deleteSourceBranch: boolean },
): Promise<string | undefined> {
  let settings: RepoMergeSettings;
  try {
    settings = await gh.getRepoMergeSettings(repo);
  } catch (e) {
    return `fetching repo info: ${githubErrorText(e, gh.baseUrl)}`;
  }
  const chosen = chooseMergeMethod(o.method, settings);
  if ('error' in chosen) return chosen.error;
  try {
    const r = await gh.mergePull(repo, pull, chosen.method);
    if (!r.merged) return `could not merge pull request: ${r.message}`;
  } catch (e) {
    return `merging pull request: ${githubErrorText(e, gh.baseUrl)}`;
  }
  if (o.deleteSourceBranch) await deleteBranch(gh, log.child({ repo, pull }), repo, pull);
  return undefined;
}

async function deleteBranch(gh: GitHubClient, log: Logger, repo: string, pull: number): Promise<void> {
  try {
    // GitHub's view after the merge: the branch, and whether it is a fork's (not ours to delete).
    const pr = await gh.getPull(repo, pull);
    if (pr.headRepo?.toLowerCase() !== repo.toLowerCase()) {
      log.info('Not deleting the source branch: it is not in this repository', { branch: pr.headRef });
      return;
    }
    await gh.deleteBranch(repo, pr.headRef);
    log.info('Deleted the source branch after the merge', { branch: pr.headRef });
  } catch (e) {
    log.warn('Could not delete the source branch after the merge', { error: (e as Error).message });
  }
}
