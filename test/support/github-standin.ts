// A local GitHub stand-in for tests: a real HTTP server on 127.0.0.1 speaking the REST
// endpoints the server's GitHub client uses, with GitHub's status codes and payload shapes,
// recording every call, with fault injection (5xx, rate limits, dropped connections). It
// also sends webhooks the way GitHub does (headers, HMAC signature) and builds payloads
// shaped like GitHub's.
import http from 'node:http';
import https from 'node:https';
import crypto from 'node:crypto';
import { readFileSync, rmSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { type StandinOrgs, type StandinProtection, answerGraphql, answerPullGraphql } from './github-standin-graphql.js';
import type { StandinApp } from './github-standin-app.js';
import { type MergeRepoState, answerMergeRoute } from './github-standin-merge.js';
import { type CertFiles, basicPassword, contentsAnswer, selfSignedCert, serveGit } from './github-standin-git.js';
import { answerPullRoute, paginate } from './github-standin-pulls.js';
import { DOCS_URL, type StandinPull, notFound } from './github-standin-model.js';

// Webhooks and event payloads live in github-standin-webhooks.ts; importable from here too.
export {
  type IssueCommentPayloadOptions,
  type PullRequestPayloadOptions,
  type RepoPayloadOptions,
  type SendWebhookOptions,
  type WebhookResponse,
  githubDelivery,
  issueCommentPayload,
  pullRequestPayload,
  sendWebhook,
} from './github-standin-webhooks.js';

export type { StandinProtection };
export { DOCS_URL, type StandinFile, type StandinPull, type StandinReview, notFound } from './github-standin-model.js';

export interface StandinComment {
  id: number;
  repo: string;
  pull: number;
  body: string;
  user: string;
  createdAt: string;
  updatedAt: string;
  /** Set by GraphQL's minimizeComment: GitHub's reason (`outdated`) and when. */
  minimized?: { reason: string; at: string };
}

export interface StandinStatus {
  repo: string;
  sha: string;
  state: string;
  context: string;
  description?: string;
  target_url?: string;
}

export interface StandinReaction {
  repo: string;
  commentId: number;
  content: string;
}

export interface RecordedCall {
  method: string;
  /** Path without the query string. */
  path: string;
  query: Record<string, string>;
  headers: http.IncomingHttpHeaders;
  body: unknown;
  status: number;
  /** Set when a fault was injected for this call. */
  fault?: string;
}

export type Fault =
  | { kind: 'status'; status: number }
  /** 403 with x-ratelimit-remaining: 0 and x-ratelimit-reset (primary rate limit). */
  | { kind: 'rate-limit'; resetInSeconds?: number; status?: 403 | 429 }
  /** 403/429 with Retry-After (secondary rate limit). */
  | { kind: 'secondary-rate-limit'; retryAfterSeconds: number; status?: 403 | 429 }
  /** Handle the request normally, then destroy the socket before answering. */
  | { kind: 'drop-after-processing' }
  /** Destroy the socket without handling the request. */
  | { kind: 'drop' };

interface PendingFault {
  fault: Fault;
  remaining: number;
  match?: { method?: string; path?: RegExp };
}

interface RepoState extends MergeRepoState {
  /** A bare repository served by git smart-HTTP at /<owner>/<name>.git and the contents API. */
  bareDir?: string;
}

function validationFailed(resource: string, field: string, message: string): [number, unknown] {
  return [422, { message: 'Validation Failed', errors: [{ resource, code: 'custom', field, message }], documentation_url: DOCS_URL }];
}

export class GitHubStandin {
  readonly calls: RecordedCall[] = [];
  readonly commentsById = new Map<number, StandinComment>();
  readonly statuses: StandinStatus[] = [];
  readonly reactions: StandinReaction[] = [];
  /** Organisations and their teams, for GraphQL (see github-standin-graphql.ts). */
  readonly orgs: StandinOrgs = new Map();
  token: string;
  botLogin: string;
  /** Set: the stand-in is also a GitHub App's API (JWTs, installation tokens; github-standin-app.ts). */
  app: StandinApp | undefined;
  /** Files per page when the client does not pass per_page (GitHub's default is 30). */
  private readonly repos = new Map<string, RepoState>();
  private readonly faults: PendingFault[] = [];
  private readonly holds: Array<{ match: { method?: string; path?: RegExp }; arrived: () => void; gate: Promise<void> }> = [];
  private nextId = 1000;
  private server: http.Server | undefined;
  private port = 0;
  private host = '127.0.0.1';
  private tls: CertFiles | undefined;

  private constructor(token: string, botLogin: string) {
    this.token = token;
    this.botLogin = botLogin;
  }

  /**
   * `host`: the loopback address to listen on (default 127.0.0.1), port 0 either way. `tls`:
   * serve HTTPS with a self-signed certificate for `host` (see `caFile`), as a GitHub
   * Enterprise client such as Atlantis needs.
   */
  static async start(opts: { token?: string; botLogin?: string; host?: string; tls?: boolean } = {}): Promise<GitHubStandin> {
    const s = new GitHubStandin(opts.token ?? 'test-token-' + crypto.randomBytes(6).toString('hex'), opts.botLogin ?? 'atlantis-bot');
    const handler = (req: http.IncomingMessage, res: http.ServerResponse): void => {
      void s.handle(req, res);
    };
    s.host = opts.host ?? '127.0.0.1';
    if (opts.tls) s.tls = selfSignedCert(s.host);
    const server = s.tls
      ? https.createServer({ cert: readFileSync(s.tls.certFile), key: readFileSync(s.tls.keyFile) }, handler)
      : http.createServer(handler);
    await new Promise<void>((resolve) => server.listen(0, s.host, resolve));
    s.server = server;
    s.port = (server.address() as AddressInfo).port;
    return s;
  }

  /** Base URL to give the client (plays the role of https://api.github.com). */
  get url(): string {
    return `${this.tls ? 'https' : 'http'}://${this.host}:${this.port}`;
  }

  /** `host:port`, what `--gh-hostname` takes. */
  get hostPort(): string {
    return `${this.host}:${this.port}`;
  }

  /** The certificate to trust in TLS mode (SSL_CERT_FILE, GIT_SSL_CAINFO, NODE_EXTRA_CA_CERTS). */
  get caFile(): string | undefined {
    return this.tls?.certFile;
  }

  /** Where a repo added with `bareDir` is cloned from: GitHub's `https://<host>/<owner>/<name>.git`. */
  gitUrl(fullName: string): string {
    return `${this.url}/${fullName}.git`;
  }

  async close(): Promise<void> {
    const srv = this.server;
    if (!srv) return;
    this.server = undefined;
    srv.closeAllConnections();
    await new Promise<void>((resolve) => srv.close(() => resolve()));
    if (this.tls) rmSync(this.tls.dir, { recursive: true, force: true });
  }

  // ---- state ----------------------------------------------------------------------

  /** `bareDir`: serve this bare repository over git smart-HTTP (and the contents API). */
  addRepo(
    fullName: string,
    opts: { cloneUrl?: string; defaultBranch?: string; bareDir?: string } & Partial<
      Pick<RepoState, 'allowMergeCommit' | 'allowRebaseMerge' | 'allowSquashMerge'>
    > = {},
  ): void {
    this.repos.set(fullName.toLowerCase(), {
      fullName,
      cloneUrl: opts.cloneUrl ?? `https://github.com/${fullName}.git`,
      defaultBranch: opts.defaultBranch ?? 'main',
      pulls: new Map(),
      allowMergeCommit: opts.allowMergeCommit ?? true,
      allowRebaseMerge: opts.allowRebaseMerge ?? true,
      allowSquashMerge: opts.allowSquashMerge ?? true,
      deletedBranches: [],
      merges: [],
      ...(opts.bareDir ? { bareDir: opts.bareDir } : {}),
    });
  }

  /** Merges and deleted branches of a repository (github-standin-merge.ts). */
  mergeState(fullName: string): RepoState | undefined {
    return this.repo(fullName);
  }

  addPull(fullName: string, p: Partial<StandinPull> & { number: number }): StandinPull {
    const repo = this.repo(fullName);
    if (!repo) throw new Error(`stand-in: unknown repo ${fullName}`);
    const pull: StandinPull = {
      headSha: crypto.randomBytes(20).toString('hex'),
      headRef: `feature-${p.number}`,
      baseRef: repo.defaultBranch,
      baseSha: crypto.randomBytes(20).toString('hex'),
      draft: false,
      merged: false,
      state: 'open',
      mergeable: true,
      mergeableState: 'clean',
      user: 'dev',
      title: `PR ${p.number}`,
      files: [],
      reviews: [],
      ...p,
    };
    repo.pulls.set(pull.number, pull);
    return pull;
  }

  /** Adds a team (slug) to an organisation, which then exists; `members` are logins. */
  addTeam(org: string, slug: string, members: string[]): void {
    const teams = this.orgs.get(org.toLowerCase()) ?? [];
    teams.push({ slug, name: slug, members: new Set(members.map((m) => m.toLowerCase())) });
    this.orgs.set(org.toLowerCase(), teams);
  }

  updatePull(fullName: string, number: number, patch: Partial<StandinPull>): void {
    const pull = this.repo(fullName)?.pulls.get(number);
    if (!pull) throw new Error(`stand-in: unknown pull ${fullName}#${number}`);
    Object.assign(pull, patch);
  }

  getPull(fullName: string, number: number): StandinPull | undefined {
    return this.repo(fullName)?.pulls.get(number);
  }

  /** A comment by someone (`user`) on a pull, as if posted on GitHub. */
  addComment(fullName: string, pull: number, body: string, user: string): StandinComment {
    const repo = this.repo(fullName);
    if (!repo?.pulls.has(pull)) throw new Error(`stand-in: unknown pull ${fullName}#${pull}`);
    const now = new Date().toISOString();
    const c: StandinComment = { id: this.nextId++, repo: repo.fullName, pull, body, user, createdAt: now, updatedAt: now };
    this.commentsById.set(c.id, c);
    return c;
  }

  /** Comments on a pull (or every comment of the repo), oldest first. */
  comments(fullName: string, pull?: number): StandinComment[] {
    return [...this.commentsById.values()]
      .filter((c) => c.repo.toLowerCase() === fullName.toLowerCase() && (pull === undefined || c.pull === pull))
      .sort((a, b) => a.id - b.id);
  }

  /** A commit status set by someone else (CI), as POST /statuses/{sha} records it. */
  setStatus(fullName: string, sha: string, s: { context: string; state: 'error' | 'failure' | 'pending' | 'success' }): void {
    this.statuses.push({ repo: this.repo(fullName)?.fullName ?? fullName, sha, ...s });
  }

  statusesFor(fullName: string, sha?: string): StandinStatus[] {
    return this.statuses.filter((s) => s.repo.toLowerCase() === fullName.toLowerCase() && (sha === undefined || s.sha === sha));
  }

  /** The next `count` matching calls get `fault` instead of (or on top of) their answer. */
  failNext(count: number, fault: Fault, match?: { method?: string; path?: RegExp }): void {
    const f: PendingFault = { fault, remaining: count };
    if (match) f.match = match;
    this.faults.push(f);
  }

  clearFaults(): void {
    this.faults.length = 0;
  }

  /**
   * The answer to the next request matching `match` (made when it arrives, as GitHub would)
   * is sent only once `release()` is called: a slow network at a chosen moment. `reached`
   * resolves when that request has arrived.
   */
  holdNext(match: { method?: string; path?: RegExp }): { reached: Promise<void>; release: () => void } {
    let reached!: () => void;
    let release!: () => void;
    const hold = {
      match,
      reached: new Promise<void>((r) => {
        reached = r;
      }),
      arrived: () => reached(),
      gate: new Promise<void>((r) => {
        release = r;
      }),
    };
    this.holds.push(hold);
    return { reached: hold.reached, release };
  }

  callsTo(method: string, pathPattern: RegExp): RecordedCall[] {
    return this.calls.filter((c) => c.method === method && pathPattern.test(c.path));
  }

  private repo(fullName: string): RepoState | undefined {
    return this.repos.get(fullName.toLowerCase());
  }

  // ---- HTTP -----------------------------------------------------------------------

  private takeFault(method: string, path: string): Fault | undefined {
    for (const f of this.faults) {
      if (f.remaining <= 0) continue;
      if (f.match?.method && f.match.method !== method) continue;
      if (f.match?.path && !f.match.path.test(path)) continue;
      f.remaining--;
      return f.fault;
    }
    return undefined;
  }

  private async handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    if (this.gitRequest(req, res)) return;
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const raw = Buffer.concat(chunks).toString('utf8');
    const u = new URL(req.url ?? '/', 'http://x');
    // GitHub Enterprise clients call /api/v3/...; accept both forms.
    const path = u.pathname.replace(/^\/api\/v3(?=\/)/, '');
    const method = req.method ?? 'GET';
    const query = Object.fromEntries(u.searchParams.entries());
    let body: unknown;
    if (raw !== '') {
      try {
        body = JSON.parse(raw);
      } catch {
        body = raw;
      }
    }
    const call: RecordedCall = { method, path, query, headers: req.headers, body, status: 0 };
    this.calls.push(call);

    const fault = this.takeFault(method, path);
    if (fault) call.fault = fault.kind;
    if (fault?.kind === 'drop') {
      call.status = -1;
      req.socket.destroy();
      return;
    }
    if (fault && fault.kind !== 'drop-after-processing') {
      const headers: Record<string, string> = { 'content-type': 'application/json; charset=utf-8' };
      let status = 500;
      let payload: unknown = { message: 'Server Error' };
      if (fault.kind === 'status') {
        status = fault.status;
        payload = status >= 500 ? { message: 'Server Error' } : { message: 'Error', documentation_url: DOCS_URL };
      } else if (fault.kind === 'rate-limit') {
        status = fault.status ?? 403;
        headers['x-ratelimit-limit'] = '5000';
        headers['x-ratelimit-remaining'] = '0';
        headers['x-ratelimit-used'] = '5000';
        headers['x-ratelimit-reset'] = String(Math.floor(Date.now() / 1000) + (fault.resetInSeconds ?? 1));
        payload = {
          message: 'API rate limit exceeded for user ID 1.',
          documentation_url: 'https://docs.github.com/rest/overview/rate-limits-for-the-rest-api',
        };
      } else {
        status = fault.status ?? 403;
        headers['retry-after'] = String(fault.retryAfterSeconds);
        payload = {
          message: 'You have exceeded a secondary rate limit. Please wait a few minutes before you try again.',
          documentation_url: DOCS_URL,
        };
      }
      call.status = status;
      res.writeHead(status, headers).end(JSON.stringify(payload));
      return;
    }

    const [status, payload, extraHeaders] = this.route(method, path, query, body, req.headers);
    call.status = status;
    const held = this.holds.findIndex((h) => (!h.match.method || h.match.method === method) && (!h.match.path || h.match.path.test(path)));
    if (held >= 0) {
      const [h] = this.holds.splice(held, 1);
      h!.arrived();
      await h!.gate;
    }
    if (fault?.kind === 'drop-after-processing') {
      req.socket.destroy();
      return;
    }
    const headers: Record<string, string> = {
      'content-type': 'application/json; charset=utf-8',
      'x-github-request-id': crypto.randomBytes(8).toString('hex'),
      'x-ratelimit-limit': '5000',
      'x-ratelimit-remaining': '4999',
      ...(extraHeaders ?? {}),
    };
    if (status === 204) {
      res.writeHead(204, headers).end();
      return;
    }
    res.writeHead(status, headers).end(JSON.stringify(payload));
  }

  private authorized(headers: http.IncomingHttpHeaders): boolean {
    const a = headers.authorization;
    return (
      a === `token ${this.token}` || a === `Bearer ${this.token}` || basicPassword(a) === this.token || this.app?.tokenState(a) === 'valid'
    );
  }

  /** Serves git smart-HTTP for a repo added with `bareDir`; false when `req` is not such a request. */
  private gitRequest(req: http.IncomingMessage, res: http.ServerResponse): boolean {
    const u = new URL(req.url ?? '/', 'http://x');
    const m = /^\/([^/]+)\/([^/]+)\.git(\/.*)$/.exec(u.pathname);
    const repo = m ? this.repo(`${m[1]}/${m[2]}`) : undefined;
    if (!m || !repo?.bareDir) return false;
    const call: RecordedCall = {
      method: req.method ?? 'GET',
      path: u.pathname,
      query: {},
      headers: req.headers,
      body: undefined,
      status: 0,
    };
    this.calls.push(call);
    // Like GitHub: no or wrong credentials get a Basic challenge, which git answers.
    if (basicPassword(req.headers.authorization) !== this.token) {
      call.status = 401;
      req.resume();
      res.writeHead(401, { 'www-authenticate': 'Basic realm="GitHub"', 'content-type': 'text/plain' }).end('Invalid username or token.\n');
      return true;
    }
    call.status = 200;
    serveGit(req, res, repo.bareDir, m[3]!, u.search.slice(1));
    return true;
  }

  private commentJson(c: StandinComment): unknown {
    return {
      id: c.id,
      node_id: `IC_${c.id}`,
      url: `${this.url}/repos/${c.repo}/issues/comments/${c.id}`,
      html_url: `https://github.com/${c.repo}/pull/${c.pull}#issuecomment-${c.id}`,
      issue_url: `${this.url}/repos/${c.repo}/issues/${c.pull}`,
      body: c.body,
      user: { login: c.user, id: 1, type: 'Bot' },
      created_at: c.createdAt,
      updated_at: c.updatedAt,
      author_association: 'NONE',
    };
  }

  private route(
    method: string,
    path: string,
    query: Record<string, string>,
    body: unknown,
    headers: http.IncomingHttpHeaders,
  ): [number, unknown, Record<string, string>?] {
    const appAnswer = this.app?.route(method, path, headers);
    if (appAnswer) return appAnswer;
    if (!this.authorized(headers)) return [401, { message: 'Bad credentials', documentation_url: DOCS_URL }];
    if ((path === '/graphql' || path === '/api/graphql') && method === 'POST') {
      const q = (body as { query?: unknown } | null)?.query;
      if (typeof q === 'string' && /pullRequest\s*\(/.test(q)) {
        return answerPullGraphql(body, (owner, name, number) => {
          const pull = this.repo(`${owner}/${name}`)?.pulls.get(number);
          if (!pull) return undefined;
          // GitHub's rollup has the head commit's latest status per context.
          const latest = new Map<string, string>();
          for (const s of this.statusesFor(`${owner}/${name}`, pull.headSha)) latest.set(s.context, s.state.toUpperCase());
          return { protection: pull.protection ?? {}, statuses: [...latest].map(([context, state]) => ({ context, state })) };
        });
      }
      return answerGraphql(body, this.orgs, {
        minimize: (nodeId, reason) => {
          const c = [...this.commentsById.values()].find((x) => `IC_${x.id}` === nodeId);
          if (!c) return false;
          c.minimized = { reason, at: new Date().toISOString() };
          return true;
        },
      });
    }
    const m = /^\/repos\/([^/]+)\/([^/]+)(\/.*)?$/.exec(path);
    if (!m) return notFound();
    const repo = this.repo(`${m[1]}/${m[2]}`);
    if (!repo) return notFound();
    const rest = m[3] ?? '';
    const b = (typeof body === 'object' && body !== null ? body : {}) as Record<string, unknown>;
    const routed = answerMergeRoute(repo, method, rest, b) ?? answerPullRoute(this.url, repo, method, rest, query, path);
    if (routed) return routed;
    const now = new Date().toISOString();
    // The routes below are anchored and tell each other apart, so at most one matches.
    const group = (re: RegExp): string | undefined => re.exec(rest)?.[1];
    const commentsOfPull = group(/^\/issues\/(\d+)\/comments$/);
    const commentId = group(/^\/issues\/comments\/(\d+)$/);
    const reactionsOf = group(/^\/issues\/comments\/(\d+)\/reactions$/);
    const statusSha = group(/^\/statuses\/([0-9a-fA-F]{7,64})$/);
    const contentsPath = group(/^\/contents\/(.+)$/);

    if (commentsOfPull !== undefined) {
      const pull = repo.pulls.get(Number(commentsOfPull));
      if (!pull) return notFound();
      if (method === 'GET') {
        // since: only comments updated at or after that time (ISO 8601), as GitHub filters.
        const since = query.since === undefined ? undefined : Date.parse(query.since);
        if (since !== undefined && Number.isNaN(since))
          return validationFailed('IssueComment', 'since', 'since is not a valid ISO 8601 timestamp');
        const all = this.comments(repo.fullName, pull.number).filter((c) => since === undefined || Date.parse(c.updatedAt) >= since);
        const [items, h] = paginate(all, query, `${this.url}${path}`);
        return [200, items.map((c) => this.commentJson(c)), h];
      }
      if (method !== 'POST') return notFound();
      if (typeof b.body !== 'string' || b.body === '') return validationFailed('IssueComment', 'body', 'body cannot be blank');
      if (b.body.length > 65536) return validationFailed('IssueComment', 'body', 'body is too long (maximum is 65536 characters)');
      const c: StandinComment = {
        id: this.nextId++,
        repo: repo.fullName,
        pull: pull.number,
        body: b.body,
        user: this.botLogin,
        createdAt: now,
        updatedAt: now,
      };
      this.commentsById.set(c.id, c);
      return [201, this.commentJson(c)];
    }
    if (commentId !== undefined) {
      const c = this.commentsById.get(Number(commentId));
      if (!c || c.repo.toLowerCase() !== repo.fullName.toLowerCase()) return notFound();
      if (method === 'GET') return [200, this.commentJson(c)];
      if (method !== 'PATCH') return notFound();
      if (typeof b.body !== 'string' || b.body === '') return validationFailed('IssueComment', 'body', 'body cannot be blank');
      if (b.body.length > 65536) return validationFailed('IssueComment', 'body', 'body is too long (maximum is 65536 characters)');
      c.body = b.body;
      c.updatedAt = now;
      return [200, this.commentJson(c)];
    }
    if (reactionsOf !== undefined && method === 'POST') {
      const id = Number(reactionsOf);
      const c = this.commentsById.get(id);
      // Reactions go on the user's comment, which the stand-in may not hold: accept any id
      // on a known repo, as tests create webhook comments without posting them first.
      const content = b.content;
      const valid = ['+1', '-1', 'laugh', 'confused', 'heart', 'hooray', 'rocket', 'eyes'];
      if (typeof content !== 'string' || !valid.includes(content))
        return validationFailed('Reaction', 'content', 'content is not included in the list');
      const existing = this.reactions.find((r) => r.commentId === id && r.content === content);
      const json = { id: id * 10, content, user: { login: this.botLogin }, created_at: now };
      if (existing) return [200, json];
      this.reactions.push({ repo: repo.fullName, commentId: id, content });
      void c;
      return [201, json];
    }
    if (statusSha !== undefined && method === 'POST') {
      const state = b.state;
      if (typeof state !== 'string' || !['error', 'failure', 'pending', 'success'].includes(state)) {
        return validationFailed('Status', 'state', 'state is not included in the list');
      }
      const st: StandinStatus = {
        repo: repo.fullName,
        sha: statusSha,
        state,
        context: typeof b.context === 'string' ? b.context : 'default',
      };
      if (typeof b.description === 'string') st.description = b.description;
      if (typeof b.target_url === 'string') st.target_url = b.target_url;
      this.statuses.push(st);
      return [
        201,
        {
          id: this.nextId++,
          state: st.state,
          context: st.context,
          description: st.description ?? null,
          target_url: st.target_url ?? null,
          created_at: now,
        },
      ];
    }
    if (contentsPath !== undefined && method === 'GET' && repo.bareDir) {
      return contentsAnswer(repo.bareDir, decodeURIComponent(contentsPath), query.ref, this.url, repo.fullName);
    }
    return notFound();
  }
}
