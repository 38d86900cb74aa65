// The pull request side of the GitHub stand-in, as GitHub answers it: a pull request
// (GET .../pulls/<n>), its reviews and its changed files, with GitHub's paging (Link headers).
import crypto from 'node:crypto';
import { type StandinPull, notFound } from './github-standin-model.js';
import { forkPayload, repoPayload } from './github-standin-webhooks.js';

type Answer = [number, unknown, Record<string, string>?];

/** What the pull routes need of a stand-in repository. */
export interface PullsRepoState {
  fullName: string;
  cloneUrl: string;
  pulls: Map<number, StandinPull>;
}

/**
 * The answer for a pull route, or undefined when `rest` (the path after /repos/o/r) is not one.
 * `apiUrl`: the stand-in's base URL, for the links in payloads; `path`: the request's path.
 */
export function answerPullRoute(
  apiUrl: string,
  repo: PullsRepoState,
  method: string,
  rest: string,
  query: Record<string, string>,
  path: string,
): Answer | undefined {
  const now = new Date().toISOString();
  const group = (re: RegExp): string | undefined => re.exec(rest)?.[1];
  const pullNumber = group(/^\/pulls\/(\d+)$/);
  const reviewsOf = group(/^\/pulls\/(\d+)\/reviews$/);
  const filesOf = group(/^\/pulls\/(\d+)\/files$/);
  if (pullNumber !== undefined && method === 'GET') {
    const pull = repo.pulls.get(Number(pullNumber));
    if (!pull) return notFound();
    return [200, pullJson(apiUrl, repo, pull)];
  }
  if (reviewsOf !== undefined && method === 'GET') {
    const pull = repo.pulls.get(Number(reviewsOf));
    if (!pull) return notFound();
    const all = pull.reviews.map((r, i) => ({ id: i + 1, user: { login: r.user }, state: r.state, submitted_at: now }));
    const [items, h] = paginate(all, query, `${apiUrl}${path}`);
    return [200, items, h];
  }
  if (filesOf !== undefined && method === 'GET') {
    const pull = repo.pulls.get(Number(filesOf));
    if (!pull) return notFound();
    const all = pull.files.map((f) => ({
      sha: crypto.createHash('sha1').update(f.filename).digest('hex'),
      filename: f.filename,
      status: f.status ?? 'modified',
      additions: 1,
      deletions: 0,
      changes: 1,
      ...(f.previous_filename ? { previous_filename: f.previous_filename } : {}),
    }));
    const [items, h] = paginate(all, query, `${apiUrl}${path}`);
    return [200, items, h];
  }
  return undefined;
}

function pullJson(apiUrl: string, repo: PullsRepoState, p: StandinPull): unknown {
  const repoJson = repoPayload({ repo: repo.fullName, cloneUrl: repo.cloneUrl });
  const headRepoJson = p.headRepo === undefined ? repoJson : p.headRepo === null ? null : forkPayload(p.headRepo, p.headCloneUrl);
  return {
    url: `${apiUrl}/repos/${repo.fullName}/pulls/${p.number}`,
    html_url: `https://github.com/${repo.fullName}/pull/${p.number}`,
    number: p.number,
    state: p.state,
    title: p.title,
    draft: p.draft,
    merged: p.merged,
    mergeable: p.mergeable,
    mergeable_state: p.mergeableState,
    user: { login: p.user },
    head: { label: `${(p.headRepo ?? repo.fullName).split('/')[0]}:${p.headRef}`, ref: p.headRef, sha: p.headSha, repo: headRepoJson },
    base: { label: `${repo.fullName.split('/')[0]}:${p.baseRef}`, ref: p.baseRef, sha: p.baseSha, repo: repoJson },
    changed_files: p.files.length,
  };
}

/** One page of `items` as GitHub pages a list (per_page, page), with its Link header. */
export function paginate<T>(items: T[], query: Record<string, string>, pageUrl: string): [T[], Record<string, string>] {
  const perPage = Math.min(100, Math.max(1, Number(query.per_page ?? '30') || 30));
  const page = Math.max(1, Number(query.page ?? '1') || 1);
  const last = Math.max(1, Math.ceil(items.length / perPage));
  const slice = items.slice((page - 1) * perPage, page * perPage);
  // Like GitHub, page links keep the other query parameters (e.g. since).
  const link = (n: number, rel: string): string => {
    const q = new URLSearchParams({ ...query, per_page: String(perPage), page: String(n) });
    return `<${pageUrl}?${q.toString()}>; rel="${rel}"`;
  };
  const links: string[] = [];
  if (page < last) links.push(link(page + 1, 'next'), link(last, 'last'));
  if (page > 1) links.push(link(1, 'first'), link(page - 1, 'prev'));
  return [slice, links.length > 0 ? { link: links.join(', ') } : {}];
}
