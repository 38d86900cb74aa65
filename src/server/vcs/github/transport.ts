// The GitHub REST transport under GitHubClient (client.ts): one request with the token, the
// retries and rate-limit waits described there, and Link-header pagination kept on the
// configured API. Built on node:http (src/net/http-request.ts).
import type { Logger } from '../../../log.js';
import { nullLogger } from '../../../log.js';
import { sleep } from '../../../async.js';
import { backoffDelay, equalJitter } from '../../../backoff.js';
import { RESPONSE_TOO_LARGE, httpRequest, type HttpResponse, type ResponseHeaders } from '../../../net/http-request.js';
import { type Redactor, processRedactor } from '../../secrets/redact.js';
import { GitHubApiError, type GitHubClientOptions, type RetryOptions } from './types.js';

export interface RequestOptions {
  body?: unknown;
  /** false: only retry when the request surely did not take effect. */
  idempotent: boolean;
  /** A bound on the answer's body (HttpRequest.maxBytes); past it the request fails, not retried. */
  maxBytes?: number;
}

export interface RawResponse {
  status: number;
  headers: ResponseHeaders;
  json: unknown;
}

/** The first error code in `e`, its causes or (an AggregateError) its errors. */
export function errorCode(e: unknown): string | undefined {
  const seen = new Set<unknown>();
  let cur: unknown = e;
  for (let depth = 0; depth < 5 && cur && !seen.has(cur); depth++) {
    seen.add(cur);
    const o = cur as { code?: unknown; cause?: unknown; errors?: unknown[] };
    if (typeof o.code === 'string') return o.code;
    if (Array.isArray(o.errors)) {
      const c = o.errors.map(errorCode).find((x) => x !== undefined);
      if (c) return c;
    }
    cur = o.cause;
  }
  return undefined;
}

function parseLinkNext(link: string | null): string | undefined {
  if (!link) return undefined;
  for (const part of link.split(',')) {
    const m = /<([^>]+)>\s*;\s*rel="?([^";]+)"?/.exec(part.trim());
    if (m && m[2] === 'next') return m[1];
  }
  return undefined;
}

export class GitHubTransport {
  readonly baseUrl: string;
  private readonly token: GitHubClientOptions['token'];
  private readonly authScheme: 'token' | 'Bearer';
  private readonly userAgent: string;
  protected readonly log: Logger;
  protected readonly retry: Required<RetryOptions>;
  private readonly timeoutMs: number;
  protected readonly sleep: (ms: number) => Promise<void>;
  protected readonly random: () => number;
  protected readonly redactor: Redactor;
  private readonly tokenRejected: ((token: string) => void) | undefined;

  constructor(opts: GitHubClientOptions) {
    this.baseUrl = (opts.baseUrl ?? 'https://api.github.com').replace(/\/+$/, '');
    this.token = opts.token;
    this.redactor = opts.redactor ?? processRedactor;
    if (typeof opts.token === 'string') this.redactor.remember(opts.token);
    this.authScheme = opts.authScheme ?? 'token';
    this.userAgent = opts.userAgent ?? 'atlantis-operator';
    this.log = opts.logger ?? nullLogger();
    this.retry = {
      maxAttempts: opts.retry?.maxAttempts ?? 5,
      baseDelayMs: opts.retry?.baseDelayMs ?? 500,
      maxDelayMs: opts.retry?.maxDelayMs ?? 30_000,
      maxRateLimitWaitMs: opts.retry?.maxRateLimitWaitMs ?? 120_000,
    };
    this.timeoutMs = opts.timeoutMs ?? 30_000;
    this.sleep = opts.sleep ?? sleep;
    this.random = opts.random ?? Math.random;
    this.tokenRejected = opts.tokenRejected;
  }

  private async currentToken(): Promise<string> {
    const t = typeof this.token === 'function' ? await this.token() : this.token;
    this.redactor.remember(t);
    return t;
  }

  protected backoff(attempt: number): number {
    // Jitter spreads concurrent retries out.
    return equalJitter(backoffDelay(attempt - 1, this.retry.baseDelayMs, this.retry.maxDelayMs), this.random);
  }

  /** How long a rate-limited response asks us to wait, or undefined if it is not one. */
  private rateLimitWait(status: number, headers: ResponseHeaders, json: unknown): number | undefined {
    const retryAfter = headers.get('retry-after');
    const remaining = headers.get('x-ratelimit-remaining');
    const reset = headers.get('x-ratelimit-reset');
    const msg = typeof json === 'object' && json !== null ? String((json as { message?: unknown }).message ?? '') : '';
    const limited = status === 429 || (status === 403 && (retryAfter !== null || remaining === '0' || /rate limit/i.test(msg)));
    if (!limited) return undefined;
    if (retryAfter !== null && /^\d+$/.test(retryAfter.trim())) return Number(retryAfter.trim()) * 1000;
    if (remaining === '0' && reset !== null && /^\d+$/.test(reset.trim())) {
      return Math.max(0, Number(reset.trim()) * 1000 - Date.now()) + 1000;
    }
    return -1; // limited, no hint: use backoff
  }

  /** One API call with the retries above; GitHubClient's methods and the App's own endpoints (app.ts) are built on it. */
  protected async request(method: string, pathOrUrl: string, opts: RequestOptions): Promise<RawResponse> {
    const url = pathOrUrl.startsWith('http') ? pathOrUrl : this.baseUrl + pathOrUrl;
    const logPath = pathOrUrl.startsWith('http') ? new URL(pathOrUrl).pathname : (pathOrUrl.split('?')[0] ?? pathOrUrl);
    let attempt = 0;
    let retriedWithNewToken = false;
    for (;;) {
      attempt++;
      const token = await this.currentToken();
      const headers: Record<string, string> = {
        accept: 'application/vnd.github+json',
        'x-github-api-version': '2022-11-28',
        'user-agent': this.userAgent,
        authorization: `${this.authScheme} ${token}`,
      };
      if (opts.body !== undefined) headers['content-type'] = 'application/json';
      let res: HttpResponse;
      try {
        res = await httpRequest(url, {
          method,
          headers,
          ...(opts.body === undefined ? {} : { body: JSON.stringify(opts.body) }),
          timeoutMs: this.timeoutMs,
          ...(opts.maxBytes === undefined ? {} : { maxBytes: opts.maxBytes }),
        });
      } catch (e) {
        const code = errorCode(e);
        // The same answer again would be as large: the caller learns so from the code.
        if (code === RESPONSE_TOO_LARGE) throw e;
        const surelyNotSent = code === 'ECONNREFUSED';
        const retryable = surelyNotSent || opts.idempotent;
        this.log.warn('GitHub request failed without response', {
          method,
          path: logPath,
          attempt,
          errorCode: code ?? 'unknown',
          willRetry: retryable && attempt < this.retry.maxAttempts,
        });
        if (!retryable || attempt >= this.retry.maxAttempts) {
          throw Object.assign(new GitHubApiError(method, logPath, 0, `request failed: ${code ?? (e as Error).name}`), {
            notSent: surelyNotSent,
          });
        }
        await this.sleep(this.backoff(attempt));
        continue;
      }
      const text = res.text;
      let json: unknown;
      if (text !== '') {
        try {
          json = JSON.parse(text);
        } catch {
          json = text;
        }
      }
      if (res.status < 400) {
        this.log.debug('GitHub request', { method, path: logPath, status: res.status, attempt });
        return { status: res.status, headers: res.headers, json };
      }
      if (res.status === 401 && this.tokenRejected && !retriedWithNewToken) {
        // Once per request: a second 401 means the new token is refused too.
        retriedWithNewToken = true;
        this.tokenRejected(token);
        this.log.info('GitHub refused the token; retrying with a new one', { method, path: logPath, attempt });
        attempt--;
        continue;
      }
      const rl = this.rateLimitWait(res.status, res.headers, json);
      let wait: number | undefined;
      if (rl !== undefined) {
        wait = rl >= 0 ? rl : this.backoff(attempt);
        if (wait > this.retry.maxRateLimitWaitMs) wait = undefined;
      } else if (res.status >= 500) {
        // 504 (and unknown 5xx) may come after the backend did the work.
        if (opts.idempotent || res.status <= 503) wait = this.backoff(attempt);
      }
      const o = (typeof json === 'object' && json !== null ? json : {}) as {
        message?: unknown;
        documentation_url?: unknown;
        errors?: unknown;
      };
      const message = typeof o.message === 'string' ? o.message : typeof json === 'string' ? json.slice(0, 200) : '';
      if (wait === undefined || attempt >= this.retry.maxAttempts) {
        this.log.warn('GitHub request refused', { method, path: logPath, status: res.status, attempt, githubMessage: message });
        throw new GitHubApiError(
          method,
          logPath,
          res.status,
          message,
          typeof o.documentation_url === 'string' ? o.documentation_url : undefined,
          o.errors,
        );
      }
      this.log.info('GitHub request will be retried', { method, path: logPath, status: res.status, attempt, waitMs: wait });
      await this.sleep(wait);
    }
  }

  protected async paginate<T>(firstPath: string, maxPages = 100): Promise<T[]> {
    const out: T[] = [];
    let next: string | undefined = firstPath;
    for (let page = 0; next !== undefined && page < maxPages; page++) {
      const r = await this.request('GET', next, { idempotent: true });
      if (!Array.isArray(r.json)) throw new GitHubApiError('GET', firstPath.split('?')[0] ?? firstPath, r.status, 'expected a JSON array');
      out.push(...(r.json as T[]));
      next = parseLinkNext(r.headers.get('link'));
      // Only follow links to the API we were configured with (never send the token elsewhere).
      if (next !== undefined && !next.startsWith(this.baseUrl + '/')) {
        const u = new URL(next);
        const prefix = new URL(this.baseUrl).pathname.replace(/\/+$/, '');
        const p = prefix !== '' && u.pathname.startsWith(prefix + '/') ? u.pathname.slice(prefix.length) : u.pathname;
        next = p + u.search;
      }
    }
    return out;
  }
}
