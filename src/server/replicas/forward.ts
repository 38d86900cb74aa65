// Forwarding a webhook to the replica that owns its PR (affinity.ts decides who): a POST of
// the exact bytes the code host sent, with the host's webhook headers, to `<owner url>/events`.
// The owner authenticates it itself (GitHub: the signature, over the same bytes, with the same
// secret), so forwarding grants nothing a direct delivery would not. X-Atlantis-Forwarded-By marks it: the owner handles a forwarded
// webhook locally whatever its own list says (route()'s loop guard), so two replicas whose
// lists disagree for a moment never bounce it between them. It never rejects: a failure is an
// outcome, and afterForwardFailure (affinity.ts) says what follows.
//
// Its own request code on node:http, not net/http-request.ts: that one sends a string body,
// and the signature is over bytes that need not be valid UTF-8.
import http, { type IncomingHttpHeaders } from 'node:http';
import type { ForwardOutcome } from './affinity.js';
import { FORWARD_ANSWER_HEADER, FORWARD_AUTH_HEADER } from './forward-auth.js';
import { httpsModule } from '../../net/tls-modules.js';

export const FORWARDED_BY_HEADER = 'x-atlantis-forwarded-by';
export const DEFAULT_FORWARD_TIMEOUT_MS = 10_000;
/** The owner's answer is a short text; more than this is not an answer of ours. */
const MAX_ANSWER_BYTES = 64 * 1024;

export interface ForwardedWebhook {
  /** The host's webhook headers as received, by lower-case name (vcs/host.ts; GitHub's X-GitHub-Event, -Delivery, X-Hub-Signature-256). */
  headers: Readonly<Record<string, string | undefined>>;
  /** Content-Type as received (GitHub sends application/json or application/x-www-form-urlencoded). */
  contentType?: string;
  rawBody: Buffer;
}

export interface ForwardOptions {
  /** This replica's id, sent in X-Atlantis-Forwarded-By. */
  selfId: string;
  /** X-Atlantis-Forward-Auth (forward-auth.ts), when the replicas share a key. */
  auth?: string;
  /** The whole exchange, connect to last byte. */
  timeoutMs?: number;
  signal?: AbortSignal;
  /** Instead of the module's keep-alive agent (tests). */
  agent?: http.Agent;
}

// Sockets between replicas are kept: a burst of webhooks for one owner reuses them.
const agents: Record<string, http.Agent | undefined> = {
  'http:': new http.Agent({ keepAlive: true, maxSockets: 16 }),
};
function agentFor(protocol: string): http.Agent | undefined {
  if (protocol === 'https:') agents[protocol] ??= new (httpsModule().Agent)({ keepAlive: true, maxSockets: 16 });
  return agents[protocol];
}

/** The X-Atlantis-Forwarded-By of a request: the id of the replica that forwarded it, when one did. */
export function forwardedBy(headers: IncomingHttpHeaders): string | undefined {
  const v = headers[FORWARDED_BY_HEADER];
  const s = Array.isArray(v) ? v[0] : v;
  return s === undefined || s === '' ? undefined : s;
}

/** The headers of a forward, by their lower-case names; exported for the tests. */
export function forwardHeaders(w: ForwardedWebhook, selfId: string, auth?: string): http.OutgoingHttpHeaders {
  const h: http.OutgoingHttpHeaders = {
    'content-type': w.contentType ?? 'application/json',
    'content-length': String(w.rawBody.length),
    [FORWARDED_BY_HEADER]: selfId,
  };
  if (auth !== undefined) h[FORWARD_AUTH_HEADER] = auth;
  // Only what was received: an absent header is not invented. Ours above cannot be overwritten.
  for (const [name, value] of Object.entries(w.headers)) if (value !== undefined && !(name in h)) h[name] = value;
  return h;
}

function classify(e: Error & { code?: string }, timedOut: boolean): ForwardOutcome {
  const message = e.message;
  if (timedOut) return { ok: false, failure: 'timeout', message };
  if (e.code === 'ECONNREFUSED') return { ok: false, failure: 'refused', message };
  if (e.code === 'ECONNRESET' || e.code === 'EPIPE') return { ok: false, failure: 'reset', message };
  return { ok: false, failure: 'error', message };
}

/** POSTs the webhook to `<ownerUrl>/events`; resolves with the owner's status and body, or why there was none. */
export function forwardWebhook(ownerUrl: string, w: ForwardedWebhook, opts: ForwardOptions): Promise<ForwardOutcome> {
  let u: URL;
  try {
    u = new URL(`${ownerUrl.replace(/\/+$/, '')}/events`);
  } catch (e) {
    return Promise.resolve({ ok: false, failure: 'error', message: (e as Error).message });
  }
  const agent = opts.agent ?? agentFor(u.protocol);
  if (!agent) return Promise.resolve({ ok: false, failure: 'error', message: `unsupported URL scheme in ${u.protocol}//${u.host}` });
  const request = u.protocol === 'https:' ? httpsModule().request : http.request;
  const timeoutMs = opts.timeoutMs ?? DEFAULT_FORWARD_TIMEOUT_MS;

  return new Promise<ForwardOutcome>((resolve) => {
    let settled = false;
    let timedOut = false;
    const done = (o: ForwardOutcome): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve(o);
    };
    const req = request(u, { method: 'POST', headers: forwardHeaders(w, opts.selfId, opts.auth), agent, signal: opts.signal }, (res) => {
      const chunks: Buffer[] = [];
      let bytes = 0;
      res.on('data', (c: Buffer) => {
        bytes += c.length;
        if (bytes > MAX_ANSWER_BYTES) {
          req.destroy();
          done({ ok: false, failure: 'error', message: `answer longer than ${MAX_ANSWER_BYTES} bytes` });
          return;
        }
        chunks.push(c);
      });
      res.on('end', () => {
        const proof = res.headers[FORWARD_ANSWER_HEADER];
        done({
          ok: true,
          status: res.statusCode ?? 0,
          body: Buffer.concat(chunks).toString('utf8'),
          ...(typeof proof === 'string' ? { proof } : {}),
        });
      });
      res.on('error', (e: Error) => done(classify(e, timedOut)));
      // An answer cut short may close without an 'error'.
      res.on('close', () => {
        if (!res.complete)
          done(timedOut ? classify(new Error('no answer in time'), true) : { ok: false, failure: 'reset', message: 'answer cut short' });
      });
    });
    const timer = setTimeout(() => {
      timedOut = true;
      req.destroy(Object.assign(new Error(`no complete answer within ${timeoutMs} ms`), { code: 'ETIMEDOUT' }));
    }, timeoutMs);
    req.on('error', (e: Error) => done(classify(e, timedOut)));
    req.end(w.rawBody);
  });
}
