// Small, dependency-light access to the Kubernetes API, given a KubeClientConfig
// (kubeconfig.ts: the API server, TLS material and credentials).
//
//   kubeRequest(kc, method, path, body?)   one API call, parsed JSON + HTTP status, never throws on 4xx/5xx
//   kubeRequestOk(...)                     the same, but throws KubeApiError unless 2xx
//   (resources.ts: ResourceClient, the typed get/list/create/patch/apply/delete on top of these)
//   openKubeStream(kc, path, onLine)       a streaming GET (watch), one callback per line
//   configureKubeClient(kc, {qps, burst, onResponse})  optional client-side rate limit, metrics hook
//
// Requests go through net/http-request.ts (the one request layer of the project) with a
// keep-alive agent per configuration, built from the TLS material that applyToHTTPSOptions()
// yields; auth headers are re-read per request so rotating tokens keep working. Watches
// share that setup but keep their own streaming request (openKubeStream).
import http from 'node:http';
import type https from 'node:https';
import { setTimeout as delay } from 'node:timers/promises';
import type { KubeClientConfig } from './kubeconfig.js';
import { httpRequest, type HttpResponse, type ResponseHeaders } from '../net/http-request.js';
import { httpsModule, tlsModule } from '../net/tls-modules.js';

export type HttpMethod = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';

/** Content types the API server accepts for PATCH. */
export const MERGE_PATCH = 'application/merge-patch+json';
export const STRATEGIC_MERGE_PATCH = 'application/strategic-merge-patch+json';
export const JSON_PATCH = 'application/json-patch+json';
export const APPLY_PATCH = 'application/apply-patch+yaml';

export interface KubeResponse<T = unknown> {
  status: number;
  /** Parsed JSON body; the raw text when the body is not JSON; undefined when empty. */
  body: T;
  headers: ResponseHeaders;
}

/** A Kubernetes `Status` object as returned with 4xx/5xx answers. */
export interface KubeStatus {
  kind?: string;
  status?: string;
  message?: string;
  reason?: string;
  code?: number;
  details?: { name?: string; kind?: string; causes?: Array<{ reason?: string; message?: string; field?: string }> };
}

/** A non-2xx answer from the API server, with its Status message (e.g. 409 Conflict, 422 Invalid). */
export class KubeApiError extends Error {
  readonly status: number;
  readonly reason: string | undefined;
  readonly body: unknown;
  constructor(method: string, path: string, status: number, body: unknown) {
    const st = (typeof body === 'object' && body !== null ? body : {}) as KubeStatus;
    const detail = st.message ?? (typeof body === 'string' ? body.slice(0, 500) : '');
    super(`${method} ${path}: ${status}${st.reason ? ` ${st.reason}` : ''}${detail ? `: ${detail}` : ''}`);
    this.name = 'KubeApiError';
    this.status = status;
    this.reason = st.reason;
    this.body = body;
  }
}

export interface RequestOptions {
  /** Content type of the body; JSON by default, or one of the *_PATCH constants for PATCH. */
  contentType?: string;
  /** Query parameters, added to `path` (undefined values skipped). */
  query?: Record<string, string | number | boolean | undefined>;
  /** Abort the request after this long (default 30 s). */
  timeoutMs?: number;
  /** Ends the request (and any wait before a retry) with an AbortError. */
  signal?: AbortSignal;
  /** Overrides DEFAULT_RETRY for this request. */
  retry?: RetryPolicy;
  /** Accept header (default application/json), e.g. PARTIAL_OBJECT_METADATA. */
  accept?: string;
}

/** Asks for an object's metadata only: the API server leaves out everything else (a Secret's data too). */
export const PARTIAL_OBJECT_METADATA = 'application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1';

/**
 * How a 429 (Too Many Requests) with a Retry-After is retried. The API server's Priority and
 * Fairness answers so before it runs the request, so a retry is safe for every method. A 429
 * without Retry-After is returned as it is (client-go does the same).
 */
export interface RetryPolicy {
  /** Retries after the first answer. */
  maxRetries: number;
  /** Total time spent waiting between tries; a Retry-After beyond it returns the 429 instead. */
  maxWaitMs: number;
}

export const DEFAULT_RETRY: RetryPolicy = { maxRetries: 5, maxWaitMs: 30_000 };

/** True for a 2xx status: the one success check of this client. */
export function isSuccess(status: number): boolean {
  return status >= 200 && status <= 299;
}

/**
 * The wait a Retry-After header asks for, in ms: delta-seconds or an HTTP date (RFC 9110);
 * undefined when absent or unreadable. Negative waits (a date in the past) are 0.
 */
export function retryAfterMs(header: string | string[] | undefined, now: number): number | undefined {
  const v = (Array.isArray(header) ? header[0] : header)?.trim();
  if (!v) return undefined;
  if (/^\d+$/.test(v)) return Number(v) * 1000;
  // An HTTP date names its day ("Tue, 01 Dec 2026 10:00:05 GMT"); Date.parse alone takes "-1".
  const at = /^[A-Za-z]{3}, /.test(v) ? Date.parse(v) : NaN;
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}

/** The wait before the next try after a 429, or undefined (give up and return the 429). */
export function nextRetryWaitMs(
  policy: RetryPolicy,
  retriesDone: number,
  waitedMs: number,
  retryAfter: number | undefined,
): number | undefined {
  if (retryAfter === undefined || retriesDone >= policy.maxRetries) return undefined;
  return waitedMs + retryAfter > policy.maxWaitMs ? undefined : retryAfter;
}

export interface KubeClientOptions {
  /**
   * Client-side rate limit (token bucket) for plain requests; 0 or unset = none. Off by
   * default, as in current controller-runtime: the API server's Priority and Fairness is the
   * limit that matters, and it answers 429 with Retry-After when a client is too fast.
   */
  qps?: number;
  burst?: number;
  /** Called once per request (watches: method WATCH, when the response starts). */
  onResponse?(r: { method: HttpMethod | 'WATCH'; status: number; seconds: number }): void;
}

const clientOptions = new WeakMap<KubeClientConfig, { opts: KubeClientOptions; bucket?: TokenBucket }>();

/** Applies `opts` to every later request made with `kc`. */
export function configureKubeClient(kc: KubeClientConfig, opts: KubeClientOptions): void {
  const limited = (opts.qps ?? 0) > 0;
  clientOptions.set(kc, {
    opts,
    bucket: limited ? new TokenBucket(opts.qps!, Math.max(1, opts.burst ?? Math.ceil(opts.qps!))) : undefined,
  });
}

/** client-go's token bucket: `burst` requests at once, then `qps` per second; waiters in order. */
export class TokenBucket {
  private tokens: number;
  private last: number;
  private tail: Promise<void> = Promise.resolve();

  constructor(
    private readonly qps: number,
    private readonly burst: number,
    private readonly clock: { now(): number; sleep(ms: number): Promise<void> } = {
      now: Date.now,
      sleep: (ms) => new Promise((r) => setTimeout(r, ms)),
    },
  ) {
    this.tokens = burst;
    this.last = clock.now();
  }

  /** Resolves when the caller may send one request. */
  take(): Promise<void> {
    const turn = this.tail.then(async () => {
      this.refill();
      if (this.tokens < 1) {
        await this.clock.sleep(Math.ceil(((1 - this.tokens) / this.qps) * 1000));
        this.refill();
      }
      this.tokens -= 1;
    });
    this.tail = turn;
    return turn;
  }

  private refill(): void {
    const now = this.clock.now();
    this.tokens = Math.min(this.burst, this.tokens + ((now - this.last) / 1000) * this.qps);
    this.last = now;
  }
}

interface Conn {
  server: URL;
  agent: http.Agent;
  base: https.RequestOptions;
}
const conns = new WeakMap<KubeClientConfig, Conn>();

async function connFor(kc: KubeClientConfig): Promise<{ conn: Conn; headers: http.OutgoingHttpHeaders }> {
  const opts: https.RequestOptions = {};
  try {
    await kc.applyToHTTPSOptions(opts);
  } catch (e) {
    // client-node's exec plugin failure is an Error without a message.
    throw new Error(`cannot get credentials from the kubeconfig: ${(e as Error).message || 'its credential plugin failed'}`, { cause: e });
  }
  const headers: http.OutgoingHttpHeaders = { ...(opts.headers as http.OutgoingHttpHeaders | undefined) };
  if (opts.auth) headers.authorization = `Basic ${Buffer.from(opts.auth).toString('base64')}`;
  let conn = conns.get(kc);
  if (!conn) {
    const cluster = kc.getCurrentCluster();
    if (!cluster) throw new Error('No current cluster in the kubeconfig');
    const server = new URL(cluster.server);
    // One secure context for every connection: given only the PEM options, each new TLS
    // connection (watches are one each) parses the CA and the client key again.
    const secureContext =
      server.protocol === 'https:'
        ? tlsModule().createSecureContext({ ca: opts.ca, cert: opts.cert, key: opts.key, pfx: opts.pfx, passphrase: opts.passphrase })
        : undefined;
    const agentOptions: https.AgentOptions = { keepAlive: true, secureContext, servername: opts.servername };
    if (cluster.skipTLSVerify) agentOptions.rejectUnauthorized = false;
    const agent = server.protocol === 'http:' ? new http.Agent({ keepAlive: true }) : new (httpsModule().Agent)(agentOptions);
    conn = { server, agent, base: {} };
    conns.set(kc, conn);
  }
  return { conn, headers };
}

function buildPath(conn: Conn, path: string, query?: RequestOptions['query']): URL {
  const prefix = conn.server.pathname.replace(/\/$/, '');
  const url = new URL(conn.server.origin + prefix + path);
  for (const [k, v] of Object.entries(query ?? {})) if (v !== undefined) url.searchParams.set(k, String(v));
  return url;
}

/**
 * One API call. Returns the HTTP status and the parsed body; does not throw on 4xx/5xx
 * (only on network errors, timeouts and an aborted signal). A 429 is sent again as
 * `opts.retry` allows (bounded in count and time) when the server says when (Retry-After).
 *
 *   await kubeRequest(kc, 'PATCH', `/api/v1/namespaces/${ns}/pods/${name}`,
 *     { metadata: { annotations: { a: 'b' } } }, { contentType: MERGE_PATCH });
 */
export async function kubeRequest<T = unknown>(
  kc: KubeClientConfig,
  method: HttpMethod,
  path: string,
  body?: unknown,
  opts: RequestOptions = {},
): Promise<KubeResponse<T>> {
  const policy = opts.retry ?? DEFAULT_RETRY;
  let waited = 0;
  for (let retries = 0; ; retries++) {
    const res = await requestOnce<T>(kc, method, path, body, opts);
    if (res.status !== 429) return res;
    const wait = nextRetryWaitMs(policy, retries, waited, retryAfterMs(res.headers.get('retry-after') ?? undefined, Date.now()));
    if (wait === undefined) return res;
    await delay(wait, undefined, { signal: opts.signal });
    waited += wait;
  }
}

async function requestOnce<T>(
  kc: KubeClientConfig,
  method: HttpMethod,
  path: string,
  body: unknown,
  opts: RequestOptions,
): Promise<KubeResponse<T>> {
  opts.signal?.throwIfAborted();
  const client = clientOptions.get(kc);
  await client?.bucket?.take();
  const { conn, headers } = await connFor(kc);
  const url = buildPath(conn, path, opts.query);
  const started = process.hrtime.bigint();
  const observe = (status: number) =>
    client?.opts.onResponse?.({ method, status, seconds: Number(process.hrtime.bigint() - started) / 1e9 });
  let payload: string | undefined;
  if (body !== undefined) {
    payload = typeof body === 'string' ? body : JSON.stringify(body);
    headers['content-type'] = opts.contentType ?? (method === 'PATCH' ? MERGE_PATCH : 'application/json');
  }
  headers.accept = opts.accept ?? 'application/json';
  let res: HttpResponse;
  try {
    res = await httpRequest(url, {
      method,
      headers,
      body: payload,
      agent: conn.agent,
      timeoutMs: opts.timeoutMs ?? 30_000,
      timeoutKind: 'idle',
      timeoutError: () => new Error(`${method} ${path}: timed out`),
      signal: opts.signal,
    });
  } catch (e) {
    observe(0); // no answer: counted with code "<error>"
    throw e;
  }
  let parsed: unknown;
  if (res.text.length > 0) {
    try {
      parsed = JSON.parse(res.text);
    } catch {
      parsed = res.text;
    }
  }
  observe(res.status);
  return { status: res.status, body: parsed as T, headers: res.headers };
}

/** Like kubeRequest, but throws KubeApiError unless the status is 2xx; returns the body. */
export async function kubeRequestOk<T = unknown>(
  kc: KubeClientConfig,
  method: HttpMethod,
  path: string,
  body?: unknown,
  opts: RequestOptions = {},
): Promise<T> {
  const res = await kubeRequest<T>(kc, method, path, body, opts);
  if (!isSuccess(res.status)) throw new KubeApiError(method, path, res.status, res.body);
  return res.body;
}

export interface KubeStream {
  /** Ends the stream; `onClose` is not called after abort(). */
  abort(): void;
}

export interface StreamHandlers {
  /** Called once the server answered; status !== 200 means the body is an error (read via onLine/onClose). */
  onResponse?(status: number): void;
  /** Each non-empty line of the body. */
  onLine(line: string): void;
  /** The stream ended (cleanly or not). Called at most once. */
  onClose(err: Error | undefined): void;
}

/**
 * A streaming GET (used for watches): calls `onLine` for each line of the body and `onClose`
 * exactly once when the connection ends or fails (unless aborted).
 */
export async function openKubeStream(
  kc: KubeClientConfig,
  path: string,
  query: RequestOptions['query'],
  handlers: StreamHandlers,
): Promise<KubeStream> {
  const client = clientOptions.get(kc);
  const { conn, headers } = await connFor(kc);
  const url = buildPath(conn, path, query);
  headers.accept = 'application/json';
  const mod = url.protocol === 'http:' ? http : httpsModule();
  const started = process.hrtime.bigint();
  let done = false;
  let aborted = false;
  let answered = false;
  const finish = (err: Error | undefined) => {
    if (done) return;
    done = true;
    if (!aborted) handlers.onClose(err);
  };
  // A dedicated (non-pooled) agent: a watch holds its socket for minutes, and destroying
  // it on abort must not affect other requests.
  const req = mod.request(url, { method: 'GET', headers, agent: streamAgent(conn) }, (res) => {
    answered = true;
    client?.opts.onResponse?.({ method: 'WATCH', status: res.statusCode ?? 0, seconds: Number(process.hrtime.bigint() - started) / 1e9 });
    handlers.onResponse?.(res.statusCode ?? 0);
    let buf = '';
    res.setEncoding('utf8');
    res.on('data', (chunk: string) => {
      if (aborted) return;
      buf += chunk;
      for (let nl = buf.indexOf('\n'); nl >= 0; nl = buf.indexOf('\n')) {
        const line = buf.slice(0, nl).trim();
        buf = buf.slice(nl + 1);
        if (line) handlers.onLine(line);
        if (aborted) return;
      }
    });
    res.on('end', () => {
      const rest = buf.trim();
      if (rest && !aborted) handlers.onLine(rest);
      finish(undefined);
    });
    res.on('error', (e) => finish(e));
    res.on('close', () => finish(res.complete ? undefined : new Error('Watch connection closed')));
  });
  req.on('error', (e) => {
    if (!done && !aborted && !answered)
      client?.opts.onResponse?.({ method: 'WATCH', status: 0, seconds: Number(process.hrtime.bigint() - started) / 1e9 });
    finish(e);
  });
  req.end();
  return {
    abort() {
      aborted = true;
      req.destroy();
    },
  };
}

const streamAgents = new WeakMap<Conn, http.Agent>();
function streamAgent(conn: Conn): http.Agent {
  let a = streamAgents.get(conn);
  if (!a) {
    const o = (conn.agent as https.Agent).options ?? {};
    a = conn.server.protocol === 'http:' ? new http.Agent({ keepAlive: false }) : new (httpsModule().Agent)({ ...o, keepAlive: false });
    streamAgents.set(conn, a);
  }
  return a;
}

/** Builds the collection path of a resource, e.g. apiPath('v1', 'pods', 'ns') or apiPath('apps/v1', 'deployments'). */
export function apiPath(apiVersion: string, plural: string, namespace?: string, name?: string, subresource?: string): string {
  const root = apiVersion.includes('/') ? `/apis/${apiVersion}` : `/api/${apiVersion}`;
  let p = namespace ? `${root}/namespaces/${encodeURIComponent(namespace)}/${plural}` : `${root}/${plural}`;
  if (name) p += `/${encodeURIComponent(name)}`;
  if (subresource) p += `/${subresource}`;
  return p;
}
