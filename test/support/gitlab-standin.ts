// A local GitLab stand-in for tests: a real HTTP(S) server on a loopback address speaking the
// parts of GitLab's REST API v4 that Atlantis's GitLab client (and the server's) use, with
// GitLab's paths (projects by id or URL-encoded path), status codes, error bodies and
// pagination headers, recording every request; git smart-HTTP for clones of its projects
// (git's own http-backend, shared with the GitHub stand-in); and webhooks sent the way GitLab
// sends them (gitlab-standin-webhooks.ts). Like a self-managed GitLab it can live under a
// relative URL root (`https://host:port/gitlab`). Held to what a real Atlantis v0.47 did
// against it: test/fixtures/atlantis-v0.47-gitlab/, replayed by test/atlantis-gitlab-differential.test.ts.
import crypto from 'node:crypto';
import { readFileSync, rmSync } from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { type CertFiles, basicPassword, selfSignedCert, serveGit } from './github-standin-git.js';
import { answerCiRoute } from './gitlab-standin-ci.js';
import { rawFile } from './gitlab-standin-git.js';
import { currentUser, projectJson, userBasic } from './gitlab-standin-json.js';
import type { GlGroup, GlUser } from './gitlab-standin-model.js';
import { type Answer, answerMergeRequestRoute, notFound, paginate, unauthorized } from './gitlab-standin-mrs.js';
import { GlStore } from './gitlab-standin-store.js';

export interface GlRecordedCall {
  method: string;
  /** The path as sent (percent-encoding and any relative root kept, e.g. `/api/v4/projects/acme%2Finfra`), without the query. */
  path: string;
  query: Record<string, string>;
  headers: http.IncomingHttpHeaders;
  /** The JSON body parsed, a non-JSON body as text, undefined when empty. */
  body: unknown;
  status: number;
  /** What the stand-in answered (parsed JSON; raw bodies as text; undefined for git). */
  answer: unknown;
  /** Set when a fault was injected. */
  fault?: string;
}

/** A fault for the next matching call: an answer of that status, the connection cut before the call is handled (`drop`), or after it took effect (`drop-after-processing`, the answer lost). */
export type GlFault = { kind: 'status'; status: number; body?: unknown } | { kind: 'drop' } | { kind: 'drop-after-processing' };

interface PendingFault {
  fault: GlFault;
  remaining: number;
  match?: { method?: string; path?: RegExp };
}

export interface GitLabStandinOptions {
  /** The loopback address to listen on (default 127.0.0.1); port 0 either way. */
  host?: string;
  /** Serve HTTPS with a self-signed certificate for `host` (Atlantis needs it for a `host:port` hostname). */
  tls?: boolean;
  /** A relative URL root such as `/gitlab` (a self-managed GitLab under a path). */
  relativeRoot?: string;
  /** What GET /version reports (default 17.11.1-ee). */
  version?: string;
  /** The user of the API token (default atlantis-bot). */
  botUsername?: string;
  /** The token's user is a bot (a project/group access token): may reset approvals. */
  botIsBotUser?: boolean;
  token?: string;
}

export class GitLabStandin extends GlStore {
  readonly calls: GlRecordedCall[] = [];
  readonly token: string;
  readonly bot: GlUser;
  version: string;
  private readonly relativeRoot: string;
  private readonly faults: PendingFault[] = [];
  private server: http.Server | undefined;
  private host = '127.0.0.1';
  private port = 0;
  private tls: CertFiles | undefined;

  private constructor(o: GitLabStandinOptions) {
    super();
    this.token = o.token ?? `glpat-${crypto.randomBytes(10).toString('hex')}`;
    this.version = o.version ?? '17.11.1-ee';
    this.relativeRoot = (o.relativeRoot ?? '').replace(/\/+$/, '');
    // GitLab's first user is the administrator.
    this.addUser('root', { name: 'Administrator' });
    this.bot = this.addUser(o.botUsername ?? 'atlantis-bot', { bot: o.botIsBotUser ?? false });
  }

  static async start(o: GitLabStandinOptions = {}): Promise<GitLabStandin> {
    const s = new GitLabStandin(o);
    s.host = o.host ?? '127.0.0.1';
    if (o.tls) s.tls = selfSignedCert(s.host);
    const handler = (req: http.IncomingMessage, res: http.ServerResponse): void => void s.handle(req, res);
    const server = s.tls
      ? https.createServer({ cert: readFileSync(s.tls.certFile), key: readFileSync(s.tls.keyFile) }, handler)
      : http.createServer(handler);
    await new Promise<void>((resolve) => server.listen(0, s.host, resolve));
    s.server = server;
    s.port = (server.address() as AddressInfo).port;
    s.webUrl = s.url;
    return s;
  }

  /** GitLab's external URL: `http(s)://<host>:<port>[<relative root>]`. */
  get url(): string {
    return `${this.tls ? 'https' : 'http'}://${this.host}:${this.port}${this.relativeRoot}`;
  }

  /** What `--gitlab-hostname` takes: `host:port[/root]` (Atlantis assumes https). */
  get hostname(): string {
    return `${this.host}:${this.port}${this.relativeRoot}`;
  }

  get hostPort(): string {
    return `${this.host}:${this.port}`;
  }

  /** The certificate to trust in TLS mode (SSL_CERT_FILE, GIT_SSL_CAINFO, NODE_EXTRA_CA_CERTS). */
  get caFile(): string | undefined {
    return this.tls?.certFile;
  }

  /** `https://<host>:<port>[/root]/<path>.git`, GitLab's `http_url_to_repo`. */
  gitUrl(projectPath: string): string {
    return `${this.url}/${projectPath}.git`;
  }

  async close(): Promise<void> {
    const srv = this.server;
    if (!srv) return;
    this.server = undefined;
    srv.closeAllConnections();
    await new Promise<void>((resolve) => srv.close(() => resolve()));
    if (this.tls) rmSync(this.tls.dir, { recursive: true, force: true });
  }

  /** The next `count` requests matching `match` get `fault` instead of their answer. */
  failNext(count: number, fault: GlFault, match?: { method?: string; path?: RegExp }): void {
    this.faults.push({ fault, remaining: count, ...(match ? { match } : {}) });
  }

  /** API calls (not git) so far. */
  apiCalls(): GlRecordedCall[] {
    return this.calls.filter((c) => c.path.startsWith(`${this.relativeRoot}/api/`));
  }

  // ---- HTTP -----------------------------------------------------------------------

  private takeFault(method: string, path: string): GlFault | undefined {
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
    const rawUrl = req.url ?? '/';
    const q = rawUrl.indexOf('?');
    const fullPath = q < 0 ? rawUrl : rawUrl.slice(0, q);
    const search = q < 0 ? '' : rawUrl.slice(q + 1);
    const method = req.method ?? 'GET';
    const inRoot = this.relativeRoot === '' || fullPath === this.relativeRoot || fullPath.startsWith(`${this.relativeRoot}/`);
    const path = inRoot ? fullPath.slice(this.relativeRoot.length) || '/' : fullPath;
    if (inRoot && this.gitRequest(req, res, method, path, fullPath, search)) return;
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const raw = Buffer.concat(chunks).toString('utf8');
    let body: unknown;
    if (raw !== '') {
      try {
        body = JSON.parse(raw);
      } catch {
        body = raw;
      }
    }
    const query = Object.fromEntries(new URLSearchParams(search).entries());
    const call: GlRecordedCall = { method, path: fullPath, query, headers: req.headers, body, status: 0, answer: undefined };
    this.calls.push(call);
    const fault = this.takeFault(method, path);
    if (fault) call.fault = fault.kind;
    if (fault?.kind === 'drop') {
      call.status = -1;
      req.socket.destroy();
      return;
    }
    let answer: Answer;
    if (fault?.kind === 'drop-after-processing') {
      [call.status, call.answer] = this.route(method, path.slice('/api/v4'.length), query, body, req.headers);
      req.socket.destroy();
      return;
    }
    if (fault) answer = [fault.status, fault.body ?? { message: `${fault.status} Error` }];
    else if (!inRoot || !path.startsWith('/api/v4/')) answer = [404, { error: '404 Not Found' }];
    else answer = this.route(method, path.slice('/api/v4'.length), query, body, req.headers);
    const [status, payload, extra] = answer;
    call.status = status;
    call.answer = Buffer.isBuffer(payload) ? payload.toString('utf8') : payload;
    const headers: Record<string, string> = {
      'cache-control': 'max-age=0, private, must-revalidate',
      'x-request-id': crypto.randomBytes(13).toString('hex').toUpperCase(),
      'x-gitlab-meta': '{"correlation_id":"standin","version":"1"}',
      ...extra,
    };
    if (Buffer.isBuffer(payload)) {
      res.writeHead(status, { 'content-type': 'text/plain; charset=utf-8', ...headers }).end(payload);
      return;
    }
    if (status === 204 || payload === null) {
      res.writeHead(status, headers).end();
      return;
    }
    res.writeHead(status, { 'content-type': 'application/json', ...headers }).end(JSON.stringify(payload));
  }

  private me(headers: http.IncomingHttpHeaders): GlUser | undefined {
    const pat = headers['private-token'];
    const auth = headers.authorization;
    const ok = pat === this.token || auth === `Bearer ${this.token}`;
    return ok ? this.bot : undefined;
  }

  /** git smart-HTTP for `/<project path>.git/...`; false when `path` is not such a request. */
  private gitRequest(
    req: http.IncomingMessage,
    res: http.ServerResponse,
    method: string,
    path: string,
    fullPath: string,
    search: string,
  ): boolean {
    const m = /^\/(.+?)\.git(\/.*)$/.exec(path);
    if (!m) return false;
    const project = this.projectByIdOrPath(decodeURIComponent(m[1]!));
    if (!project?.bareDir) return false;
    const query = Object.fromEntries(new URLSearchParams(search).entries());
    const call: GlRecordedCall = { method, path: fullPath, query, headers: req.headers, body: undefined, status: 0, answer: undefined };
    this.calls.push(call);
    // Like GitLab for a private project: no or wrong credentials get a Basic challenge; any
    // user name goes with a personal access token as the password.
    if (basicPassword(req.headers.authorization) !== this.token) {
      call.status = 401;
      req.resume();
      res.writeHead(401, { 'www-authenticate': 'Basic realm="GitLab"', 'content-type': 'text/plain' }).end('HTTP Basic: Access denied.\n');
      return true;
    }
    call.status = 200;
    serveGit(req, res, project.bareDir, m[2]!, search);
    return true;
  }

  private route(method: string, apiPath: string, query: Record<string, string>, body: unknown, headers: http.IncomingHttpHeaders): Answer {
    const me = this.me(headers);
    if (!me) return unauthorized();
    const seg = apiPath.split('/').slice(1).map(decodeURIComponent);
    const params: Record<string, unknown> = {
      ...query,
      ...(typeof body === 'object' && body !== null ? (body as Record<string, unknown>) : {}),
    };
    const pageUrl = `${this.url}/api/v4${apiPath}`;
    if (method === 'GET' && apiPath === '/version')
      return [
        200,
        {
          version: this.version,
          revision: '6a1e3f0b2c4',
          kas: { enabled: false, externalUrl: null, externalK8sProxyUrl: null, version: null },
          enterprise: this.version.endsWith('-ee'),
        },
      ];
    if (method === 'GET' && apiPath === '/user') return [200, currentUser(this, me)];
    if (seg[0] === 'users' && method === 'GET') {
      if (seg.length === 1) {
        const name = typeof query.username === 'string' ? query.username : undefined;
        const users = [...this.users.values()].filter((u) => name === undefined || u.username.toLowerCase() === name.toLowerCase());
        const [items, h] = paginate(users, query, pageUrl);
        return [200, items.map((u) => userBasic(this, u)), h];
      }
      const u = seg.length === 2 && /^\d+$/.test(seg[1]!) ? this.users.get(Number(seg[1])) : undefined;
      return u ? [200, userBasic(this, u)] : notFound('User Not Found');
    }
    if (seg[0] === 'groups' && seg[1] !== undefined && method === 'GET') return this.groupRoute(seg.slice(1), query, pageUrl);
    if (seg[0] === 'projects' && seg[1] !== undefined) {
      const project = this.projectByIdOrPath(seg[1]);
      if (!project) return notFound('Project Not Found');
      const rest = seg.slice(2);
      if (rest.length === 0) return method === 'GET' ? [200, projectJson(this, project)] : [405, { message: '405 Method Not Allowed' }];
      const r = { store: this as GlStore, me, project, method, rest, params, query, pageUrl };
      if (rest[0] === 'merge_requests') {
        const a = answerMergeRequestRoute({ ...r, rest: rest.slice(1) });
        if (a) return a;
      }
      const ci = answerCiRoute(r);
      if (ci) return ci;
      if (method === 'GET' && rest[0] === 'repository' && rest[1] === 'files' && rest[3] === 'raw' && rest.length === 4) {
        const bytes = project.bareDir ? rawFile(project.bareDir, rest[2]!, query.ref || project.defaultBranch) : undefined;
        return bytes ? [200, bytes] : notFound('File Not Found');
      }
    }
    return [404, { error: '404 Not Found' }];
  }

  private memberJson(g: GlGroup, userId: number, level: number): Record<string, unknown> {
    return {
      ...userBasic(this, this.user(userId)),
      access_level: level,
      created_at: '2024-01-01T00:00:00.000Z',
      created_by: userBasic(this, this.user(1)),
      expires_at: null,
      group_saml_identity: null,
      membership_state: 'active',
      source_id: g.id,
    };
  }

  private groupRoute(seg: string[], query: Record<string, string>, pageUrl: string): Answer {
    const g = this.groupByIdOrPath(seg[0]!);
    if (!g) return notFound('Group Not Found');
    if (seg.length === 1)
      return [
        200,
        {
          id: g.id,
          name: g.name,
          path: g.name,
          full_path: g.path,
          full_name: g.path.split('/').join(' / '),
          web_url: `${this.url}/groups/${g.path}`,
          visibility: 'private',
          parent_id: null,
        },
      ];
    if (seg[1] !== 'members') return [404, { error: '404 Not Found' }];
    // members/all/:user_id counts membership inherited from parent groups; members/:user_id does not.
    const inherited = seg[2] === 'all';
    const rest = inherited ? seg.slice(3) : seg.slice(2);
    const chain = inherited ? [...this.groups.values()].filter((x) => g.path === x.path || g.path.startsWith(`${x.path}/`)) : [g];
    const members = new Map<number, number>();
    for (const x of chain) for (const [id, level] of x.members) members.set(id, Math.max(level, members.get(id) ?? 0));
    if (rest.length === 0) {
      const [items, h] = paginate([...members], query, pageUrl);
      return [200, items.map(([id, level]) => this.memberJson(g, id, level)), h];
    }
    const level = /^\d+$/.test(rest[0]!) ? members.get(Number(rest[0])) : undefined;
    return level === undefined || rest.length > 1 ? notFound() : [200, this.memberJson(g, Number(rest[0]), level)];
  }
}
