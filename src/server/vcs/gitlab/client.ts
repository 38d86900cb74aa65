// GitLab REST API v4 client for the server: the calls Atlantis v0.47's GitLab client makes,
// addressed and encoded as its Go library sends them (projects by URL-encoded path, dots as
// %2E; query keys in sorted order; JSON bodies in the library's field order), so that GitLab,
// its logs and the differential test see the same requests. Built on node:http
// (src/net/http-request.ts); the token goes only in the PRIVATE-TOKEN header and never in an
// error or a log line, and every text written to GitLab (notes, note edits, status
// descriptions) is scrubbed of the server's secrets first (secrets/redact.ts).
//
// Retries: capped exponential backoff with jitter on 5xx, 429 (after Retry-After) and on
// connection failures, never on other 4xx. A POST that creates something (a note, an award
// emoji) is retried only when it surely did not take effect: connection refused, 429, or
// 500/502/503; a reset connection, a timeout or a 504 may come after GitLab created it.
import type { Logger } from '../../../log.js';
import { nullLogger } from '../../../log.js';
import { sleep } from '../../../async.js';
import { backoffDelay, equalJitter } from '../../../backoff.js';
import { RESPONSE_TOO_LARGE, httpRequest, type HttpResponse, type ResponseHeaders } from '../../../net/http-request.js';
import type { FileContent } from '../host.js';
import { type Redactor, processRedactor } from '../../secrets/redact.js';
import type { GlCommit, GlCommitStatus, GlDiff, GlMergeRequest, GlNote, GlProject, GlUser } from './types.js';

/** An answer of GitLab other than 2xx, or no answer (status 0). */
export class GitLabApiError extends Error {
  constructor(
    readonly method: string,
    /** The URL as sent, without the query. */
    readonly url: string,
    readonly status: number,
    /** GitLab's error body as its Go library words it (`{message: 404 Not Found}`), or why there was no answer. */
    readonly gitlabMessage: string,
    /** True when the request surely never reached GitLab (connection refused). */
    readonly notSent = false,
  ) {
    super(gitlabErrorText(method, url, status, gitlabMessage));
    this.name = 'GitLabApiError';
  }
}

/**
 * An error as Atlantis's GitLab library words it: `PUT https://host/api/v4/projects/acme/infra/merge_requests/1/merge:
 * 405 {message: 405 Method Not Allowed}` (the path unescaped), the text Atlantis shows in its comments.
 */
export function gitlabErrorText(method: string, url: string, status: number, message: string): string {
  const u = new URL(url);
  let path = u.pathname;
  try {
    path = decodeURIComponent(u.pathname);
  } catch {
    // A path that is not valid percent-encoding is shown as sent.
  }
  const where = `${method} ${u.protocol}//${u.host}${path}`;
  if (status === 0) return `${where}: ${message}`;
  return message === '' ? `${where}: ${status}` : `${where}: ${status} ${message}`;
}

/** GitLab's error body as the Go library turns it into text: strings as they are, objects as sorted `{key: value}`. */
export function gitlabMessageOf(raw: unknown): string {
  if (typeof raw === 'string') return raw;
  if (Array.isArray(raw)) return `[${raw.map(gitlabMessageOf).join(', ')}]`;
  if (raw && typeof raw === 'object')
    return Object.entries(raw)
      .map(([k, v]) => `{${k}: ${gitlabMessageOf(v)}}`)
      .sort()
      .join(', ');
  return `failed to parse unexpected error type: ${typeof raw}`;
}

/** Go's url.PathEscape, then dots as %2E: how the library puts a project path or file path in a URL. */
export function gitlabPathEscape(s: string): string {
  let out = '';
  for (const b of Buffer.from(s, 'utf8')) {
    const c = String.fromCharCode(b);
    if (/[A-Za-z0-9\-_~$&+,:;=@]/.test(c)) out += c;
    else out += `%${b.toString(16).toUpperCase().padStart(2, '0')}`;
  }
  return out.replaceAll('.', '%2E');
}

/** A query string with its keys sorted, as Go's url.Values encodes it. */
export function goQuery(q: Record<string, string | number | undefined>): string {
  const keys = Object.keys(q)
    .filter((k) => q[k] !== undefined)
    .sort();
  if (keys.length === 0) return '';
  return `?${keys.map((k) => `${encodeURIComponent(k)}=${encodeURIComponent(String(q[k]))}`).join('&')}`;
}

export interface GitLabClientOptions {
  /** `https://host[:port][/path]/api/v4` */
  apiUrl: string;
  token: () => string;
  logger?: Logger;
  redactor?: Redactor;
  /** Per request, connect to last byte (default 30 s). */
  timeoutMs?: number;
  maxAttempts?: number;
  sleep?: (ms: number) => Promise<void>;
  random?: () => number;
}

interface Answer<T> {
  json: T;
  /** The body as it came (a raw file is not JSON, though its text may parse as JSON). */
  text: string;
  headers: ResponseHeaders;
  status: number;
}

type Kind = 'read' | 'write' | 'create';

function errorCode(e: unknown): string | undefined {
  let cur: unknown = e;
  for (let depth = 0; depth < 5 && cur; depth++) {
    const o = cur as { code?: unknown; cause?: unknown };
    if (typeof o.code === 'string') return o.code;
    cur = o.cause;
  }
  return undefined;
}

export class GitLabClient {
  readonly apiUrl: string;
  private readonly log: Logger;
  private readonly redactor: Redactor;
  private readonly timeoutMs: number;
  private readonly maxAttempts: number;
  private readonly sleep: (ms: number) => Promise<void>;
  private readonly random: () => number;

  constructor(private readonly o: GitLabClientOptions) {
    this.apiUrl = o.apiUrl.replace(/\/+$/, '');
    this.log = o.logger ?? nullLogger();
    this.redactor = o.redactor ?? processRedactor;
    this.timeoutMs = o.timeoutMs ?? 30_000;
    this.maxAttempts = o.maxAttempts ?? 5;
    this.sleep = o.sleep ?? sleep;
    this.random = o.random ?? Math.random;
  }

  /** Scrubs the server's secrets from a text about to be written to GitLab. */
  redact(text: string): string {
    return this.redactor.redact(text);
  }

  private retryWait(kind: Kind, res: HttpResponse | undefined, code: string | undefined, attempt: number): number | undefined {
    if (attempt >= this.maxAttempts) return undefined;
    const backoff = equalJitter(backoffDelay(attempt - 1, 500, 30_000), this.random);
    if (!res) return kind !== 'create' || code === 'ECONNREFUSED' ? backoff : undefined;
    if (res.status === 429) {
      const after = res.headers.get('retry-after');
      const ms = after !== null && /^\d+$/.test(after.trim()) ? Number(after.trim()) * 1000 : backoff;
      return ms <= 120_000 ? ms : undefined;
    }
    if (res.status >= 500 && res.status !== 501) return kind !== 'create' || res.status <= 503 ? backoff : undefined;
    return undefined;
  }

  /** One API call; `path` starts with `/` and is already encoded. Throws GitLabApiError for anything but 2xx. */
  async call<T>(method: string, path: string, o: { body?: unknown; kind?: Kind; maxBytes?: number } = {}): Promise<Answer<T>> {
    const kind = o.kind ?? (method === 'GET' || method === 'PUT' ? 'read' : 'create');
    const url = this.apiUrl + path;
    const noQuery = url.split('?')[0] ?? url;
    for (let attempt = 1; ; attempt++) {
      const token = this.o.token();
      this.redactor.remember(token);
      const headers: Record<string, string> = { accept: 'application/json', 'private-token': token, 'user-agent': 'atlantis-operator' };
      if (o.body !== undefined) headers['content-type'] = 'application/json';
      let res: HttpResponse | undefined;
      let code: string | undefined;
      try {
        res = await httpRequest(url, {
          method,
          headers,
          ...(o.body === undefined ? {} : { body: JSON.stringify(o.body) }),
          timeoutMs: this.timeoutMs,
          ...(o.maxBytes === undefined ? {} : { maxBytes: o.maxBytes }),
        });
      } catch (e) {
        code = errorCode(e) ?? (e as Error).name;
        // The same answer again would be as large: the caller learns so from the code.
        if (code === RESPONSE_TOO_LARGE) throw e;
      }
      if (res && res.status < 300) {
        let json: unknown;
        try {
          json = res.text === '' ? undefined : JSON.parse(res.text);
        } catch {
          json = res.text;
        }
        return { json: json as T, text: res.text, headers: res.headers, status: res.status };
      }
      const wait = this.retryWait(kind, res, code, attempt);
      const logPath = new URL(noQuery).pathname;
      if (wait === undefined) {
        if (!res) {
          this.log.warn('GitLab request failed without response', { method, path: logPath, attempt, errorCode: code ?? 'unknown' });
          throw new GitLabApiError(method, noQuery, 0, `request failed: ${code ?? 'unknown'}`, code === 'ECONNREFUSED');
        }
        let raw: unknown;
        let message: string;
        try {
          raw = JSON.parse(res.text);
          message = gitlabMessageOf(raw);
        } catch {
          message = res.text.trim() === '' ? '' : `failed to parse unknown error format: ${res.text.slice(0, 200)}`;
        }
        this.log.debug('GitLab request refused', { method, path: logPath, status: res.status, attempt });
        throw new GitLabApiError(method, noQuery, res.status, message);
      }
      this.log.info('GitLab request will be retried', { method, path: logPath, status: res?.status ?? 0, attempt, waitMs: wait });
      await this.sleep(wait);
    }
  }

  /** Every page of a list (GitLab's X-Next-Page), `query` holding the first page's parameters. */
  async pages<T>(path: string, query: Record<string, string | number | undefined>): Promise<T[]> {
    const out: T[] = [];
    let q = query;
    // Bounded: a GitLab that keeps naming a next page cannot keep the server busy for ever.
    for (let n = 0; n < 1000; n++) {
      const r = await this.call<T[]>('GET', `${path}${goQuery(q)}`);
      out.push(...(Array.isArray(r.json) ? r.json : []));
      const next = r.headers.get('x-next-page');
      if (!next || !/^\d+$/.test(next.trim()) || Number(next) === 0) return out;
      q = { ...q, page: Number(next.trim()) };
    }
    return out;
  }

  private static project(idOrPath: string | number): string {
    return typeof idOrPath === 'number' ? String(idOrPath) : gitlabPathEscape(idOrPath);
  }

  private static mrPath(project: string, iid: number): string {
    return `/projects/${GitLabClient.project(project)}/merge_requests/${iid}`;
  }

  async version(): Promise<string> {
    return (await this.call<{ version: string }>('GET', '/version')).json.version;
  }

  async currentUser(): Promise<GlUser> {
    return (await this.call<GlUser>('GET', '/user')).json;
  }

  async getProject(idOrPath: string | number): Promise<GlProject> {
    return (await this.call<GlProject>('GET', `/projects/${GitLabClient.project(idOrPath)}`)).json;
  }

  async getMergeRequest(project: string, iid: number): Promise<GlMergeRequest> {
    return (await this.call<GlMergeRequest>('GET', GitLabClient.mrPath(project, iid))).json;
  }

  async approvalsLeft(project: string, iid: number): Promise<number> {
    const r = await this.call<{ approvals_left?: number }>('GET', `${GitLabClient.mrPath(project, iid)}/approvals`);
    return r.json.approvals_left ?? 0;
  }

  async diffs(project: string, iid: number): Promise<GlDiff[]> {
    return this.pages<GlDiff>(`${GitLabClient.mrPath(project, iid)}/diffs`, { page: 1, per_page: 100 });
  }

  async notes(project: string, iid: number): Promise<GlNote[]> {
    return this.pages<GlNote>(`${GitLabClient.mrPath(project, iid)}/notes`, { order_by: 'created_at', sort: 'asc' });
  }

  /**
   * One note, neither lost nor doubled when its answer is: after no answer (a reset, a timeout)
   * or a 504, which may come after GitLab created it, the MR's notes are read back; ours among
   * those made since just before the attempt means done, else it is posted again.
   */
  async createNote(project: string, iid: number, body: string): Promise<GlNote> {
    const text = this.redact(body);
    const path = `${GitLabClient.mrPath(project, iid)}/notes`;
    for (let attempt = 1; ; attempt++) {
      // Our clock and GitLab's differ a little.
      const since = Date.now() - 5000;
      try {
        return (await this.call<GlNote>('POST', path, { body: { body: text } })).json;
      } catch (e) {
        if (!(e instanceof GitLabApiError) || e.notSent || (e.status !== 0 && e.status !== 504) || attempt >= this.maxAttempts) throw e;
        const landed = (await this.notes(project, iid))
          .filter((n) => n.body === text && n.created_at !== undefined && Date.parse(n.created_at) >= since)
          .at(-1);
        this.log.warn('GitLab note answer lost, read back', { path, attempt, status: e.status, found: landed !== undefined });
        if (landed) return landed;
        await this.sleep(equalJitter(backoffDelay(attempt - 1, 500, 30_000), this.random));
      }
    }
  }

  async updateNote(project: string, iid: number, noteId: number, body: string): Promise<void> {
    await this.call('PUT', `${GitLabClient.mrPath(project, iid)}/notes/${noteId}`, { body: { body: this.redact(body) } });
  }

  async awardEmojiOnNote(project: string, iid: number, noteId: number, name: string): Promise<void> {
    await this.call('POST', `${GitLabClient.mrPath(project, iid)}/notes/${noteId}/award_emoji`, { body: { name } });
  }

  async resetApprovals(project: string, iid: number): Promise<void> {
    await this.call('PUT', `${GitLabClient.mrPath(project, iid)}/reset_approvals`, { kind: 'write' });
  }

  async acceptMergeRequest(project: string, iid: number, o: { message: string; removeSourceBranch: boolean }): Promise<void> {
    await this.call('PUT', `${GitLabClient.mrPath(project, iid)}/merge`, {
      body: { merge_commit_message: o.message, should_remove_source_branch: o.removeSourceBranch },
      kind: 'write',
    });
  }

  /**
   * One file at `ref` as GitLab's raw file endpoint gives it (as Atlantis reads the repo config
   * for --skip-clone-no-changes); `none` for GitLab's 404 (no such file, or a directory).
   */
  async rawFile(project: string, ref: string, file: string, maxBytes: number): Promise<FileContent> {
    const path = `/projects/${GitLabClient.project(project)}/repository/files/${gitlabPathEscape(file)}/raw${goQuery({ ref })}`;
    try {
      const r = await this.call<unknown>('GET', path, { maxBytes });
      return { kind: 'file', text: r.text };
    } catch (e) {
      if (e instanceof GitLabApiError && e.status === 404) return { kind: 'none' };
      if (errorCode(e) === RESPONSE_TOO_LARGE) return { kind: 'too-large' };
      throw e;
    }
  }

  async getCommit(project: string, sha: string): Promise<GlCommit> {
    return (await this.call<GlCommit>('GET', `/projects/${GitLabClient.project(project)}/repository/commits/${gitlabPathEscape(sha)}`))
      .json;
  }

  async commitStatuses(projectId: number, sha: string): Promise<GlCommitStatus[]> {
    return this.pages<GlCommitStatus>(`/projects/${projectId}/repository/commits/${gitlabPathEscape(sha)}/statuses`, {
      page: 1,
      per_page: 100,
    });
  }

  /** POST /statuses/:sha with the body as given (its keys in the library's order); never retried here (statuses.ts retries). */
  async setCommitStatus(project: string, sha: string, body: Record<string, unknown>): Promise<void> {
    await this.call('POST', `/projects/${GitLabClient.project(project)}/statuses/${gitlabPathEscape(sha)}`, { body, kind: 'write' });
  }

  async usersByName(username: string): Promise<GlUser[]> {
    return (await this.call<GlUser[]>('GET', `/users${goQuery({ username })}`)).json;
  }

  /** A direct member of the group, or undefined when GitLab answers 404 or 403 (not a member, or a group it will not show). */
  async groupMember(group: string, userId: number): Promise<{ state?: string } | undefined> {
    try {
      return (await this.call<{ state?: string }>('GET', `/groups/${gitlabPathEscape(group)}/members/${userId}`)).json;
    } catch (e) {
      if (e instanceof GitLabApiError && (e.status === 404 || e.status === 403)) return undefined;
      throw e;
    }
  }
}
