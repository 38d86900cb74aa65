// GitHub REST client for the server: comments (split like Atlantis over GitHub's 65,536
// character limit), reactions, commit statuses, pull request state, approvals, changed
// files. Built on GitHubTransport (transport.ts) with a configurable base URL
// (https://api.github.com, GitHub Enterprise's https://HOST/api/v3, or a test stand-in).
//
// Retries: capped exponential backoff with jitter on 5xx, on rate limits (429, or 403 with
// x-ratelimit-remaining: 0 or Retry-After; waits as told by Retry-After / x-ratelimit-reset)
// and on connection failures; never on other 4xx. Creating a comment is the one call that is
// not idempotent (a repeat makes a second comment), so it is retried only when the request
// surely did not take effect: connection refused, 429/403 rate limit, 500/502/503 (GitHub
// answered that it failed). A reset connection, a timeout or a 504 after the request was
// sent may have created the comment, so those are not retried for it: a missing comment is
// better than a duplicated one. Everything else (GET, PATCH of a comment, reactions, which
// GitHub dedupes, and statuses, where the latest per context wins) is idempotent and is
// retried on any of the above.
//
// The token is sent only in the Authorization header and never logged or put in errors.
// Every text we write to GitHub (comment bodies, status descriptions) is scrubbed of the
// server's secrets first (secrets/redact.ts): this is where it leaves the server.
import { RESPONSE_TOO_LARGE } from '../../../net/http-request.js';
import { MAX_COMMENT_LENGTH, MAX_COMMENTS_PER_COMMAND, separators, splitComment } from '../comment-split.js';
import type { FileContent } from '../host.js';
import { GitHubTransport, type RawResponse, errorCode } from './transport.js';

export { MAX_COMMENT_LENGTH, MAX_COMMENTS_PER_COMMAND, splitComment } from '../comment-split.js';

export * from './types.js';
export type { RawResponse, RequestOptions } from './transport.js';
import {
  type Approval,
  type CommitStatus,
  type CreatedComment,
  GitHubApiError,
  type GitHubClientOptions,
  type IssueComment,
  type PullInfo,
  type ReactionContent,
  type RepoMergeSettings,
} from './types.js';

export class GitHubClient extends GitHubTransport {
  private readonly maxCommentsPerCommand: number;

  constructor(opts: GitHubClientOptions) {
    super(opts);
    this.maxCommentsPerCommand = opts.maxCommentsPerCommand ?? MAX_COMMENTS_PER_COMMAND;
  }

  private repoPath(repo: string): string {
    const [owner, name] = repo.split('/');
    if (!owner || !name) throw new Error(`repo must be owner/name, got ${JSON.stringify(repo)}`);
    return `/repos/${encodeURIComponent(owner)}/${encodeURIComponent(name)}`;
  }

  /**
   * Posts a PR comment, split into several over 65,536 characters. `command` (plan, apply)
   * names the output in the continuation headers. Returns the created comments in order.
   */
  async createComment(repo: string, pull: number, body: string, opts: { command?: string } = {}): Promise<CreatedComment[]> {
    // Scrubbed before splitting: a secret cut in two by a split would match in neither part.
    const parts = splitComment(this.redactor.redact(body), {
      maxComments: this.maxCommentsPerCommand,
      ...(opts.command === undefined ? {} : { command: opts.command }),
    });
    const out: CreatedComment[] = [];
    for (const part of parts) out.push(await this.postComment(repo, pull, part));
    return out;
  }

  /**
   * One comment POST that is neither lost nor doubled when its answer is. A POST is not
   * idempotent, so after no answer (connection cut, timeout) or a 504, which may come after
   * GitHub created the comment, the PR's comments since just before the attempt are read
   * back: ours there means done, else the POST is sent again.
   */
  private async postComment(repo: string, pull: number, body: string): Promise<CreatedComment> {
    const path = `${this.repoPath(repo)}/issues/${pull}/comments`;
    const created = (j: { id: number; html_url?: string }): CreatedComment =>
      typeof j.html_url === 'string' ? { id: j.id, htmlUrl: j.html_url } : { id: j.id };
    for (let attempt = 1; ; attempt++) {
      // created_at has whole seconds, and our clock and GitHub's differ a little.
      const since = new Date(Date.now() - 5000).toISOString().replace(/\.\d{3}Z$/, 'Z');
      try {
        const r = await this.request('POST', path, { body: { body }, idempotent: false });
        return created(r.json as { id: number; html_url?: string });
      } catch (e) {
        if (!(e instanceof GitHubApiError) || e.notSent || (e.status !== 0 && e.status !== 504) || attempt >= this.retry.maxAttempts)
          throw e;
        const landed = (await this.paginate<{ id: number; body?: string; html_url?: string }>(`${path}?since=${since}&per_page=100`)).find(
          (c) => c.body === body,
        );
        this.log.warn('GitHub comment answer lost, read back', { path, attempt, status: e.status, found: landed !== undefined });
        if (landed) return created(landed);
        await this.sleep(this.backoff(attempt));
      }
    }
  }

  /** Replaces a comment's body (cut to the limit, keeping the end, if too long). */
  async updateComment(repo: string, commentId: number, body: string): Promise<void> {
    let b = this.redactor.redact(body);
    if (b.length > MAX_COMMENT_LENGTH) {
      const { truncationHeader } = separators().none;
      b = truncationHeader + b.slice(b.length - (MAX_COMMENT_LENGTH - truncationHeader.length));
    }
    await this.request('PATCH', `${this.repoPath(repo)}/issues/comments/${commentId}`, { body: { body: b }, idempotent: true });
  }

  async addReaction(repo: string, commentId: number, content: ReactionContent = 'eyes'): Promise<void> {
    await this.request('POST', `${this.repoPath(repo)}/issues/comments/${commentId}/reactions`, { body: { content }, idempotent: true });
  }

  async setCommitStatus(repo: string, sha: string, status: CommitStatus): Promise<void> {
    const body: Record<string, string> = { state: status.state, context: status.context };
    // GitHub refuses descriptions over 140 characters.
    if (status.description !== undefined) {
      const d = this.redactor.redact(status.description);
      body.description = d.length > 140 ? d.slice(0, 137) + '...' : d;
    }
    if (status.targetUrl !== undefined) body.target_url = status.targetUrl;
    await this.request('POST', `${this.repoPath(repo)}/statuses/${encodeURIComponent(sha)}`, { body, idempotent: true });
  }

  async getPull(repo: string, pull: number): Promise<PullInfo> {
    const r = await this.request('GET', `${this.repoPath(repo)}/pulls/${pull}`, { idempotent: true });
    const j = r.json as {
      number: number;
      state: string;
      draft?: boolean;
      merged?: boolean;
      mergeable?: boolean | null;
      mergeable_state?: string;
      head: { sha: string; ref: string; repo?: { clone_url?: string; full_name?: string } | null };
      base: { ref: string; repo?: { clone_url?: string; full_name?: string } | null };
      user?: { login?: string };
    };
    const info: PullInfo = {
      number: j.number,
      state: j.state,
      draft: j.draft === true,
      merged: j.merged === true,
      mergeable: j.mergeable ?? null,
      mergeableState: j.mergeable_state ?? 'unknown',
      headSha: j.head.sha,
      headRef: j.head.ref,
      baseRef: j.base.ref,
      headRepo: typeof j.head.repo?.full_name === 'string' ? j.head.repo.full_name : null,
      user: j.user?.login ?? '',
    };
    if (typeof j.base.repo?.full_name === 'string') info.baseRepo = j.base.repo.full_name;
    if (j.head.repo?.clone_url) info.headCloneUrl = j.head.repo.clone_url;
    if (j.base.repo?.clone_url) info.baseCloneUrl = j.base.repo.clone_url;
    return info;
  }

  /**
   * The `mergeable` apply requirement, as Atlantis maps it: the merge button is usable,
   * i.e. mergeable_state is clean, unstable or has_hooks. GitHub computes mergeability in
   * the background, so an unknown state is asked again a few times.
   */
  async isMergeable(repo: string, pull: number, opts: { attempts?: number; delayMs?: number } = {}): Promise<boolean> {
    return pullIsMergeable(await this.getPullForMergeable(repo, pull, opts));
  }

  /** The PR as GitHub sees it once it has computed mergeability (asked again a few times). */
  async getPullForMergeable(repo: string, pull: number, opts: { attempts?: number; delayMs?: number } = {}): Promise<PullInfo> {
    const attempts = opts.attempts ?? 3;
    let info = await this.getPull(repo, pull);
    for (let i = 1; i < attempts && (info.mergeable === null || info.mergeableState === 'unknown'); i++) {
      await this.sleep(opts.delayMs ?? 1000);
      info = await this.getPull(repo, pull);
    }
    return info;
  }

  /** Reviews API: approved when some reviewer's latest decisive review is APPROVED. */
  async getApproval(repo: string, pull: number): Promise<Approval> {
    const reviews = await this.paginate<{ user?: { login?: string } | null; state: string }>(
      `${this.repoPath(repo)}/pulls/${pull}/reviews?per_page=100`,
    );
    const latest = new Map<string, string>();
    for (const r of reviews) {
      const who = r.user?.login;
      if (!who) continue;
      // COMMENTED and PENDING reviews do not change a reviewer's decision.
      if (r.state === 'APPROVED' || r.state === 'CHANGES_REQUESTED' || r.state === 'DISMISSED') latest.set(who, r.state);
    }
    const approvedBy = [...latest.entries()]
      .filter(([, s]) => s === 'APPROVED')
      .map(([u]) => u)
      .sort();
    return { approved: approvedBy.length > 0, approvedBy };
  }

  /** Every review of the PR (user and state), in GitHub's order. */
  async listReviews(repo: string, pull: number): Promise<Array<{ user: string; state: string }>> {
    const reviews = await this.paginate<{ user?: { login?: string } | null; state: string }>(
      `${this.repoPath(repo)}/pulls/${pull}/reviews?per_page=100`,
    );
    return reviews.map((r) => ({ user: r.user?.login ?? '', state: r.state }));
  }

  async isApproved(repo: string, pull: number): Promise<boolean> {
    return (await this.getApproval(repo, pull)).approved;
  }

  /** Every changed file of the PR; renamed files also give their old path (as Atlantis). */
  async listChangedFiles(repo: string, pull: number): Promise<string[]> {
    const files = await this.paginate<{ filename: string; status?: string; previous_filename?: string }>(
      `${this.repoPath(repo)}/pulls/${pull}/files?per_page=100`,
    );
    const out: string[] = [];
    for (const f of files) {
      out.push(f.filename);
      if (f.status === 'renamed' && f.previous_filename) out.push(f.previous_filename);
    }
    return out;
  }

  /**
   * Slugs of the teams of `org` that `login` is a member of, through GraphQL as Atlantis
   * asks (organization.teams with userLogins). Needs read:org; any GraphQL error throws.
   */
  async listUserTeams(org: string, login: string, maxPages = 20): Promise<string[]> {
    const query =
      'query($org: String!, $logins: [String!], $after: String) { organization(login: $org) { teams(first: 100, after: $after, userLogins: $logins) { nodes { slug } pageInfo { hasNextPage endCursor } } } }';
    // api.github.com/graphql; GitHub Enterprise's /api/v3 has its GraphQL at /api/graphql.
    const url = /\/api\/v3$/.test(this.baseUrl) ? this.baseUrl.replace(/\/v3$/, '/graphql') : `${this.baseUrl}/graphql`;
    const slugs: string[] = [];
    let after: string | null = null;
    for (let page = 0; page < maxPages; page++) {
      const r = await this.request('POST', url, { body: { query, variables: { org, logins: [login], after } }, idempotent: true });
      type Teams = { nodes?: Array<{ slug?: unknown }>; pageInfo?: { hasNextPage?: unknown; endCursor?: unknown } };
      const j = (r.json ?? {}) as { data?: { organization?: { teams?: Teams } | null }; errors?: Array<{ message?: unknown }> };
      const teams = j.data?.organization?.teams;
      if (j.errors?.length || !teams)
        throw new GitHubApiError('POST', new URL(url).pathname, r.status, String(j.errors?.[0]?.message ?? 'no teams in the answer'));
      for (const n of teams.nodes ?? []) if (typeof n.slug === 'string') slugs.push(n.slug);
      if (teams.pageInfo?.hasNextPage !== true || typeof teams.pageInfo.endCursor !== 'string') return slugs;
      after = teams.pageInfo.endCursor;
    }
    return slugs;
  }

  /** Every conversation comment of the PR, oldest first. */
  async listComments(repo: string, pull: number): Promise<IssueComment[]> {
    const raw = await this.paginate<{ id: number; node_id?: string; user?: { login?: string } | null; body?: string | null }>(
      `${this.repoPath(repo)}/issues/${pull}/comments?per_page=100`,
    );
    return raw.map((c) => ({ id: c.id, nodeId: c.node_id ?? '', login: c.user?.login ?? null, body: c.body ?? '' }));
  }

  /**
   * Minimises (hides behind "Show comment") a comment through GraphQL's minimizeComment,
   * with the reason Atlantis gives (OUTDATED). Any GraphQL error throws.
   */
  async minimizeComment(nodeId: string, classifier: 'OUTDATED' = 'OUTDATED'): Promise<void> {
    const query =
      'mutation($input: MinimizeCommentInput!) { minimizeComment(input: $input) { minimizedComment { isMinimized minimizedReason viewerCanMinimize } } }';
    const r = await this.graphql(query, { input: { classifier, subjectId: nodeId } });
    type Answer = {
      data?: { minimizeComment?: { minimizedComment?: { isMinimized?: unknown } } | null };
      errors?: Array<{ message?: unknown }>;
    };
    const j = (r.json ?? {}) as Answer;
    if (j.errors?.length || j.data?.minimizeComment?.minimizedComment?.isMinimized !== true)
      throw new GitHubApiError('POST', r.path, r.status, String(j.errors?.[0]?.message ?? 'comment not minimized'));
  }

  /** POSTs one GraphQL query (GitHub Enterprise's is at /api/graphql); the answer as it came. */
  async graphql(query: string, variables: Record<string, unknown>): Promise<{ status: number; json: unknown; path: string }> {
    const url = /\/api\/v3$/.test(this.baseUrl) ? this.baseUrl.replace(/\/v3$/, '/graphql') : `${this.baseUrl}/graphql`;
    const r = await this.request('POST', url, { body: { query, variables }, idempotent: true });
    return { status: r.status, json: r.json, path: new URL(url).pathname };
  }

  /**
   * One file at `ref` through the contents API (GET /repos/<repo>/contents/<path>?ref=), as
   * Atlantis reads the repo config for --skip-clone-no-changes; at most `maxBytes` of it.
   * GitHub answers a directory with a list, a symlink with its target, and a file over 1 MB
   * without its content: none of these is read as the file.
   */
  async getFileContent(repo: string, ref: string, file: string, maxBytes: number): Promise<FileContent> {
    const p = `${this.repoPath(repo)}/contents/${file.split('/').map(encodeURIComponent).join('/')}?ref=${encodeURIComponent(ref)}`;
    let r: RawResponse;
    try {
      // base64 is 4/3 of the file, with a newline every 60 characters, plus the JSON around it.
      r = await this.request('GET', p, { idempotent: true, maxBytes: Math.ceil(maxBytes * 1.4) + 16_384 });
    } catch (e) {
      if (e instanceof GitHubApiError && e.status === 404) return { kind: 'none' };
      if (errorCode(e) === RESPONSE_TOO_LARGE) return { kind: 'too-large' };
      throw e;
    }
    const j = r.json as { type?: unknown; size?: unknown; encoding?: unknown; content?: unknown } | null;
    if (j === null || typeof j !== 'object' || Array.isArray(j) || j.type !== 'file') return { kind: 'none' };
    if (typeof j.size === 'number' && j.size > maxBytes) return { kind: 'too-large' };
    if (j.encoding !== 'base64' || typeof j.content !== 'string') {
      // Over 1 MB GitHub leaves the content out (encoding `none`).
      if (typeof j.size === 'number' && j.size > 0) return { kind: 'too-large' };
      throw new Error(`GitHub gave no content for ${file}`);
    }
    const bytes = Buffer.from(j.content.replace(/\n/g, ''), 'base64');
    if (bytes.length > maxBytes) return { kind: 'too-large' };
    return { kind: 'file', text: bytes.toString('utf8') };
  }

  /** The repository's clone URL (GET /repos/<repo>), as Atlantis's API asks for it. */
  async getCloneUrl(repo: string): Promise<string> {
    const r = await this.request('GET', this.repoPath(repo), { idempotent: true });
    const url = (r.json as { clone_url?: unknown } | null)?.clone_url;
    if (typeof url !== 'string' || url === '') throw new Error(`GitHub gave no clone URL for ${repo}`);
    return url;
  }

  // ---- automerge (workflow/automerge/automerge.ts) ----

  async getRepoMergeSettings(repo: string): Promise<RepoMergeSettings> {
    const r = await this.request('GET', this.repoPath(repo), { idempotent: true });
    const j = (r.json ?? {}) as { allow_merge_commit?: unknown; allow_rebase_merge?: unknown; allow_squash_merge?: unknown };
    return {
      allowMergeCommit: j.allow_merge_commit === true,
      allowRebaseMerge: j.allow_rebase_merge === true,
      allowSquashMerge: j.allow_squash_merge === true,
    };
  }

  /** PUT .../pulls/<n>/merge; GitHub's refusal (405 not mergeable, 409 head moved) throws. */
  async mergePull(repo: string, pull: number, method: string): Promise<{ merged: boolean; message: string; sha?: string }> {
    // A repeat after a lost answer finds the PR merged (405): not retried, the error is reported.
    const r = await this.request('PUT', `${this.repoPath(repo)}/pulls/${pull}/merge`, {
      body: { merge_method: method },
      idempotent: false,
    });
    const j = (r.json ?? {}) as { merged?: unknown; message?: unknown; sha?: unknown };
    const out: { merged: boolean; message: string; sha?: string } = {
      merged: j.merged === true,
      message: typeof j.message === 'string' ? j.message : '',
    };
    if (typeof j.sha === 'string') out.sha = j.sha;
    return out;
  }

  /** DELETE .../git/refs/heads/<branch>. */
  async deleteBranch(repo: string, branch: string): Promise<void> {
    const ref = branch.split('/').map(encodeURIComponent).join('/');
    await this.request('DELETE', `${this.repoPath(repo)}/git/refs/heads/${ref}`, { idempotent: true });
  }

  /** Names of the pull request's labels (GET .../issues/<n>/labels). */
  async listPullLabels(repo: string, pull: number): Promise<string[]> {
    const labels = await this.paginate<{ name?: unknown }>(`${this.repoPath(repo)}/issues/${pull}/labels?per_page=100`);
    return labels.map((l) => l.name).filter((n): n is string => typeof n === 'string');
  }
}

export function pullIsMergeable(info: Pick<PullInfo, 'mergeableState'>): boolean {
  return info.mergeableState === 'clean' || info.mergeableState === 'unstable' || info.mergeableState === 'has_hooks';
}
