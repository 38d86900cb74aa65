// Gitea REST client (API v1) for the server: the calls Atlantis v0.47's Gitea client makes,
// with its page size (--gitea-page-size) and its bodies. Built on node:http
// (src/net/http-request.ts); `Authorization: token <token>`, as Gitea's Go SDK sends it.
//
// Retries: a few, with capped exponential backoff and jitter, on 5xx and on connection
// failures for the idempotent calls (reads, edits, statuses, reactions); a new comment and a
// merge only when the request surely never reached Gitea (connection refused): a missing
// comment is better than a doubled one. Never on other 4xx.
//
// The token is sent only in the Authorization header and never logged or put in errors.
// Every text written to Gitea (comment bodies, status descriptions) is scrubbed of the
// server's secrets first (secrets/redact.ts): this is where it leaves the server.
import http from 'node:http';
import { sleep } from '../../../async.js';
import { backoffDelay, equalJitter } from '../../../backoff.js';
import type { Logger } from '../../../log.js';
import { nullLogger } from '../../../log.js';
import { type HttpResponse, RESPONSE_TOO_LARGE, httpRequest } from '../../../net/http-request.js';
import type { FileContent } from '../host.js';
import { type Redactor, processRedactor } from '../../secrets/redact.js';

export class GiteaApiError extends Error {
  constructor(
    readonly method: string,
    readonly path: string,
    /** 0: no answer. */
    readonly status: number,
    /** Gitea's `message`, or the start of its answer. */
    readonly giteaMessage: string,
  ) {
    super(`Gitea API ${method} ${path}: ${status === 0 ? 'no response' : status} ${giteaMessage}`.trim());
    this.name = 'GiteaApiError';
  }
}

/** A pull request as the API answers it, with only what the server reads. */
export interface GiteaPull {
  number: number;
  state: string;
  merged: boolean;
  mergeable: boolean;
  author: string;
  headSha: string;
  headRef: string;
  baseRef: string;
  headRepo: { fullName: string; cloneUrl: string } | null;
  baseRepo: { fullName: string; cloneUrl: string } | null;
}

export interface GiteaComment {
  id: number;
  author: string | null;
  body: string;
}

export interface GiteaReview {
  state: string;
  dismissed: boolean;
}

export interface GiteaClientOptions {
  /** The Gitea's URL (--gitea-base-url), without /api/v1. */
  baseUrl: string;
  token: () => string;
  /** --gitea-page-size. */
  pageSize: number;
  logger?: Logger;
  /** Per attempt. */
  timeoutMs?: number;
  maxAttempts?: number;
  sleep?: (ms: number) => Promise<void>;
  redactor?: Redactor;
}

/** As Atlantis's client: at most this many pages of a list (its "emergency break"). */
const MAX_PAGES = 500;

type Json = Record<string, unknown>;

const asObj = (v: unknown): Json => (typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Json) : {});
const asStr = (v: unknown): string => (typeof v === 'string' ? v : '');

function repoOf(v: unknown): { fullName: string; cloneUrl: string } | null {
  const o = asObj(v);
  return typeof o.full_name === 'string' ? { fullName: o.full_name, cloneUrl: asStr(o.clone_url) } : null;
}

export class GiteaClient {
  readonly baseUrl: string;
  private readonly o: Required<Omit<GiteaClientOptions, 'logger' | 'redactor'>>;
  private readonly log: Logger;
  private readonly redactor: Redactor;

  constructor(o: GiteaClientOptions) {
    this.baseUrl = o.baseUrl.replace(/\/+$/, '');
    this.o = {
      baseUrl: this.baseUrl,
      token: o.token,
      pageSize: o.pageSize,
      timeoutMs: o.timeoutMs ?? 30_000,
      maxAttempts: o.maxAttempts ?? 4,
      sleep: o.sleep ?? sleep,
    };
    this.log = o.logger ?? nullLogger();
    this.redactor = o.redactor ?? processRedactor;
  }

  private async request(
    method: string,
    path: string,
    o: { body?: unknown; idempotent: boolean; maxBytes?: number },
  ): Promise<HttpResponse> {
    const url = `${this.baseUrl}/api/v1${path}`;
    const logPath = path.split('?')[0] ?? path;
    for (let attempt = 1; ; attempt++) {
      const token = this.o.token();
      this.redactor.remember(token);
      const headers: Record<string, string> = {
        accept: 'application/json',
        'user-agent': 'atlantis-operator',
        authorization: `token ${token}`,
      };
      if (o.body !== undefined) headers['content-type'] = 'application/json';
      let res: HttpResponse;
      try {
        res = await httpRequest(url, {
          method,
          headers,
          ...(o.body === undefined ? {} : { body: JSON.stringify(o.body) }),
          timeoutMs: this.o.timeoutMs,
          ...(o.maxBytes === undefined ? {} : { maxBytes: o.maxBytes }),
        });
      } catch (e) {
        const code = (e as NodeJS.ErrnoException).code;
        // The same answer again would be as large: the caller learns so from the code.
        if (code === RESPONSE_TOO_LARGE) throw e;
        const retry = (o.idempotent || code === 'ECONNREFUSED') && attempt < this.o.maxAttempts;
        this.log.warn('Gitea request failed without response', {
          method,
          path: logPath,
          attempt,
          errorCode: code ?? 'unknown',
          willRetry: retry,
        });
        if (!retry) throw new GiteaApiError(method, logPath, 0, `request failed: ${code ?? (e as Error).name}`);
        await this.o.sleep(equalJitter(backoffDelay(attempt - 1, 500, 8000), Math.random));
        continue;
      }
      if (res.status < 400) {
        this.log.debug('Gitea request', { method, path: logPath, status: res.status, attempt });
        return res;
      }
      if (res.status >= 500 && o.idempotent && attempt < this.o.maxAttempts) {
        this.log.info('Gitea request will be retried', { method, path: logPath, status: res.status, attempt });
        await this.o.sleep(equalJitter(backoffDelay(attempt - 1, 500, 8000), Math.random));
        continue;
      }
      let message = res.text.slice(0, 200);
      try {
        const m = asObj(JSON.parse(res.text)).message;
        if (typeof m === 'string') message = m;
      } catch {
        // not JSON: the start of the text
      }
      this.log.warn('Gitea request refused', { method, path: logPath, status: res.status, attempt, giteaMessage: message });
      throw new GiteaApiError(method, logPath, res.status, message);
    }
  }

  private async json(method: string, path: string, o: { body?: unknown; idempotent: boolean }): Promise<unknown> {
    const res = await this.request(method, path, o);
    return res.text === '' ? undefined : (JSON.parse(res.text) as unknown);
  }

  /** Every item of a list, page by page (`page`, `limit`), as Atlantis reads them: until Gitea's Link header has no next page. */
  private async pages(path: string): Promise<unknown[]> {
    const out: unknown[] = [];
    const sep = path.includes('?') ? '&' : '?';
    for (let page = 1; page <= MAX_PAGES; page++) {
      const res = await this.request('GET', `${path}${sep}page=${page}&limit=${this.o.pageSize}`, { idempotent: true });
      const items = res.text === '' ? [] : (JSON.parse(res.text) as unknown);
      if (Array.isArray(items)) out.push(...items);
      if (!/rel="next"/.test(res.headers.get('link') ?? '')) break;
    }
    return out;
  }

  private repoPath(repo: string): string {
    const [owner, name, ...rest] = repo.split('/');
    if (!owner || !name || rest.length > 0) throw new Error(`repo must be owner/name, got ${JSON.stringify(repo)}`);
    return `/repos/${encodeURIComponent(owner)}/${encodeURIComponent(name)}`;
  }

  async getPull(repo: string, pull: number): Promise<GiteaPull> {
    const j = asObj(await this.json('GET', `${this.repoPath(repo)}/pulls/${pull}`, { idempotent: true }));
    const head = asObj(j.head);
    const base = asObj(j.base);
    return {
      number: typeof j.number === 'number' ? j.number : pull,
      state: asStr(j.state),
      merged: j.merged === true,
      mergeable: j.mergeable === true,
      author: asStr(asObj(j.user).login),
      headSha: asStr(head.sha),
      headRef: asStr(head.ref),
      baseRef: asStr(base.ref),
      headRepo: repoOf(head.repo),
      baseRepo: repoOf(base.repo),
    };
  }

  /** The files a pull request changes (their new names, as Atlantis's Gitea client lists them). */
  async changedFiles(repo: string, pull: number): Promise<string[]> {
    return (await this.pages(`${this.repoPath(repo)}/pulls/${pull}/files`)).map((f) => asStr(asObj(f).filename));
  }

  /**
   * One file at `ref` through the contents API (GET /repos/<repo>/contents/<path>?ref=), as
   * Atlantis reads the repo config for --skip-clone-no-changes. Gitea's 404, a directory (a
   * list) and a symlink are `none` (Atlantis fails the command on the 404; see docs/gitea.md).
   */
  async fileContent(repo: string, ref: string, file: string, maxBytes: number): Promise<FileContent> {
    const p = `${this.repoPath(repo)}/contents/${file.split('/').map(encodeURIComponent).join('/')}?ref=${encodeURIComponent(ref)}`;
    let res: HttpResponse;
    try {
      res = await this.request('GET', p, { idempotent: true, maxBytes: Math.ceil(maxBytes * 1.4) + 16_384 });
    } catch (e) {
      if (e instanceof GiteaApiError && e.status === 404) return { kind: 'none' };
      if ((e as NodeJS.ErrnoException).code === RESPONSE_TOO_LARGE) return { kind: 'too-large' };
      throw e;
    }
    const j = JSON.parse(res.text) as { type?: unknown; size?: unknown; encoding?: unknown; content?: unknown } | null;
    if (j === null || typeof j !== 'object' || Array.isArray(j) || j.type !== 'file') return { kind: 'none' };
    if (typeof j.size === 'number' && j.size > maxBytes) return { kind: 'too-large' };
    if (typeof j.content !== 'string') throw new Error(`Gitea gave no content for ${file}`);
    const bytes = Buffer.from(j.content, 'base64');
    if (bytes.length > maxBytes) return { kind: 'too-large' };
    return { kind: 'file', text: bytes.toString('utf8') };
  }

  async getCloneUrl(repo: string): Promise<string> {
    return asStr(asObj(await this.json('GET', this.repoPath(repo), { idempotent: true })).clone_url);
  }

  /** Posts a comment, whole: Gitea has no length limit for one. Returns its id. */
  async createComment(repo: string, pull: number, body: string): Promise<number> {
    const j = await this.json('POST', `${this.repoPath(repo)}/issues/${pull}/comments`, {
      body: { body: this.redactor.redact(body) },
      idempotent: false,
    });
    return Number(asObj(j).id);
  }

  async editComment(repo: string, commentId: number, body: string): Promise<void> {
    await this.request('PATCH', `${this.repoPath(repo)}/issues/comments/${commentId}`, {
      body: { body: this.redactor.redact(body) },
      idempotent: true,
    });
  }

  /** Every comment of the pull request, oldest first. */
  async listComments(repo: string, pull: number): Promise<GiteaComment[]> {
    return (await this.pages(`${this.repoPath(repo)}/issues/${pull}/comments`)).map((c) => {
      const o = asObj(c);
      const login = asObj(o.user).login;
      return { id: Number(o.id), author: typeof login === 'string' ? login : null, body: asStr(o.body) };
    });
  }

  async addReaction(repo: string, commentId: number, content: string): Promise<void> {
    await this.request('POST', `${this.repoPath(repo)}/issues/comments/${commentId}/reactions`, { body: { content }, idempotent: true });
  }

  async setStatus(repo: string, sha: string, s: { state: string; context: string; description: string; targetUrl: string }): Promise<void> {
    await this.request('POST', `${this.repoPath(repo)}/statuses/${encodeURIComponent(sha)}`, {
      body: { state: s.state, target_url: s.targetUrl, description: this.redactor.redact(s.description), context: s.context },
      idempotent: true,
    });
  }

  async listReviews(repo: string, pull: number): Promise<GiteaReview[]> {
    return (await this.pages(`${this.repoPath(repo)}/pulls/${pull}/reviews`)).map((r) => {
      const o = asObj(r);
      return { state: asStr(o.state), dismissed: o.dismissed === true };
    });
  }

  async listLabels(repo: string, pull: number): Promise<string[]> {
    return (await this.pages(`${this.repoPath(repo)}/issues/${pull}/labels`)).map((l) => asStr(asObj(l).name));
  }

  /**
   * POST .../merge with Atlantis's body. Gitea answers 200 once merged; any other answer is
   * returned as Go's status line (`405 Method Not Allowed`), the words of Atlantis's error.
   */
  async merge(
    repo: string,
    pull: number,
    o: { style: string; headSha: string; deleteBranch: boolean },
  ): Promise<{ merged: true } | { merged: false; status: string }> {
    const path = `${this.repoPath(repo)}/pulls/${pull}/merge`;
    const body = {
      Do: o.style,
      MergeTitleField: 'Atlantis merge',
      MergeMessageField: 'Automatic merge by Atlantis',
      delete_branch_after_merge: o.deleteBranch,
      force_merge: false,
      head_commit_id: o.headSha,
      merge_when_checks_succeed: false,
    };
    try {
      const res = await this.request('POST', path, { body, idempotent: false });
      return res.status === 200
        ? { merged: true }
        : { merged: false, status: `${res.status} ${http.STATUS_CODES[res.status] ?? ''}`.trim() };
    } catch (e) {
      if (e instanceof GiteaApiError && e.status >= 400)
        return { merged: false, status: `${e.status} ${http.STATUS_CODES[e.status] ?? ''}`.trim() };
      throw e;
    }
  }
}
