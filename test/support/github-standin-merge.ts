// The merge side of the GitHub stand-in, as GitHub answers it: the repository's merge settings
// (GET /repos/o/r), merging a pull request (PUT .../pulls/<n>/merge: 405 when it is not
// mergeable or the method is not allowed, 409 when the head moved), deleting a branch (DELETE
// .../git/refs/heads/<branch>, 422 when there is none) and a pull request's labels.
import crypto from 'node:crypto';
import { DOCS_URL, type StandinPull } from './github-standin-model.js';

type Answer = [number, unknown, Record<string, string>?];

/** What the merge routes need of a stand-in repository. */
export interface MergeRepoState {
  fullName: string;
  cloneUrl: string;
  defaultBranch: string;
  pulls: Map<number, StandinPull>;
  /** GitHub's repository settings (all true by default, as for a new repository). */
  allowMergeCommit: boolean;
  allowRebaseMerge: boolean;
  allowSquashMerge: boolean;
  /** Branches deleted through the API, in order. */
  deletedBranches: string[];
  /** Merges done through the API, in order. */
  merges: Array<{ pull: number; method: string; sha: string }>;
}

const NOT_ALLOWED: Record<string, string> = {
  merge: 'Merge commits are not allowed on this repository.',
  rebase: 'Rebase merges are not allowed on this repository.',
  squash: 'Squash merges are not allowed on this repository.',
};

/** The answer for a merge route, or undefined when `rest` (the path after /repos/o/r) is not one. */
export function answerMergeRoute(repo: MergeRepoState, method: string, rest: string, body: Record<string, unknown>): Answer | undefined {
  if (rest === '' && method === 'GET') {
    const [owner, name] = repo.fullName.split('/');
    return [
      200,
      {
        id: 1296269,
        name,
        full_name: repo.fullName,
        owner: { login: owner },
        clone_url: repo.cloneUrl,
        default_branch: repo.defaultBranch,
        allow_merge_commit: repo.allowMergeCommit,
        allow_rebase_merge: repo.allowRebaseMerge,
        allow_squash_merge: repo.allowSquashMerge,
      },
    ];
  }
  const mergeOf = /^\/pulls\/(\d+)\/merge$/.exec(rest)?.[1];
  if (mergeOf !== undefined && method === 'PUT') {
    const pull = repo.pulls.get(Number(mergeOf));
    if (!pull) return [404, { message: 'Not Found', documentation_url: DOCS_URL }];
    const how = typeof body.merge_method === 'string' ? body.merge_method : 'merge';
    if (!(how in NOT_ALLOWED))
      return [422, { message: 'Validation Failed', errors: [{ resource: 'PullRequest', code: 'invalid', field: 'merge_method' }] }];
    const allowed = { merge: repo.allowMergeCommit, rebase: repo.allowRebaseMerge, squash: repo.allowSquashMerge }[how as 'merge'];
    if (!allowed) return [405, { message: NOT_ALLOWED[how], documentation_url: DOCS_URL }];
    if (typeof body.sha === 'string' && body.sha !== pull.headSha)
      return [409, { message: 'Head branch was modified. Review and try the merge again.', documentation_url: DOCS_URL }];
    if (pull.state !== 'open' || pull.merged || pull.mergeable !== true)
      return [405, { message: 'Pull Request is not mergeable', documentation_url: DOCS_URL }];
    const sha = crypto.randomBytes(20).toString('hex');
    pull.merged = true;
    pull.state = 'closed';
    repo.merges.push({ pull: pull.number, method: how, sha });
    return [200, { sha, merged: true, message: 'Pull Request successfully merged' }];
  }
  const branch = /^\/git\/refs\/heads\/(.+)$/.exec(rest)?.[1];
  if (branch !== undefined && method === 'DELETE') {
    const name = decodeURIComponent(branch);
    const exists = [...repo.pulls.values()].some((p) => p.headRef === name) && !repo.deletedBranches.includes(name);
    if (!exists) return [422, { message: 'Reference does not exist', documentation_url: DOCS_URL }];
    repo.deletedBranches.push(name);
    return [204, undefined];
  }
  const labelsOf = /^\/issues\/(\d+)\/labels$/.exec(rest)?.[1];
  if (labelsOf !== undefined && method === 'GET') {
    const pull = repo.pulls.get(Number(labelsOf));
    if (!pull) return [404, { message: 'Not Found', documentation_url: DOCS_URL }];
    return [200, (pull.labels ?? []).map((name, i) => ({ id: i + 1, name, color: 'ededed', default: false }))];
  }
  return undefined;
}
