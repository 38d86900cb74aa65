// One HTTP(S) request on node:http with keep-alive: the GitHub client's calls, the
// controller's /status probes and the Kubernetes API calls (k8s/client.ts, own agent per
// cluster). fetch (undici in Node.js 20) costs more CPU and garbage per request (a Request
// clone with a teed body stream, a WASM parser call per chunk, WHATWG streams): with hundreds
// of GitHub calls per webhook burst that work shares the server's event loop with /status,
// and a controller probing a hundred pods pays it per probe.
import http from 'node:http';
import { httpsModule } from './tls-modules.js';

export interface HttpRequest {
  method: string;
  headers: http.OutgoingHttpHeaders;
  body?: string;
  /** The whole exchange, connect to last byte; past it the request fails with ETIMEDOUT. */
  timeoutMs: number;
  /**
   * 'idle': timeoutMs bounds each silence of the socket instead (req.setTimeout), so an
   * answer that keeps coming (a large LIST) is not cut however long it takes.
   */
  timeoutKind?: 'exchange' | 'idle';
  /** Makes the error a timeout fails with, instead of the ETIMEDOUT one. */
  timeoutError?: () => Error;
  /** Instead of the shared keep-alive agent of the URL's scheme (e.g. one with a cluster's TLS context). */
  agent?: http.Agent;
  /** Aborting fails the request with the signal's reason (an AbortError by default). */
  signal?: AbortSignal;
  /** Called once the whole request has been handed to the OS (connected and written). */
  onSent?: () => void;
  /**
   * A bound on the response body: past it the request fails with RESPONSE_TOO_LARGE before
   * more is read (a file of a pull request read through the API is hostile input).
   */
  maxBytes?: number;
}

/** The error code of a response cut off past HttpRequest.maxBytes; sending again gives the same answer. */
export const RESPONSE_TOO_LARGE = 'ERESPONSETOOLARGE';

export interface HttpResponse {
  status: number;
  headers: ResponseHeaders;
  text: string;
}

/** What the caller reads of the response headers: one value by lower-case name, like fetch's Headers.get. */
export interface ResponseHeaders {
  get(name: string): string | null;
}

// Sockets are kept for the next request; Node closes them before the server's
// `Keep-Alive: timeout` runs out, so a reused socket is rarely one the server just closed.
type Transport = { request: typeof http.request; agent: http.Agent };
const transports: Record<string, Transport | undefined> = {
  'http:': { request: http.request, agent: new http.Agent({ keepAlive: true, maxSockets: 32 }) },
};

/** The transport of a URL scheme; https's is made with the first HTTPS request (tls-modules.ts). */
function transportFor(protocol: string): Transport | undefined {
  if (protocol === 'https:') {
    const https = httpsModule();
    transports[protocol] ??= { request: https.request, agent: new https.Agent({ keepAlive: true, maxSockets: 32 }) };
  }
  return transports[protocol];
}

const IDEMPOTENT = new Set(['GET', 'HEAD', 'OPTIONS', 'PUT', 'DELETE']);

export function httpRequest(url: string | URL, req: HttpRequest): Promise<HttpResponse> {
  return sendOnce(url, req).catch((e: unknown) => {
    // A kept-alive socket reset as it was reused: most likely the server had closed it idle, so
    // an idempotent request is sent once more on a new socket (Node's documented remedy). Not a
    // POST or PATCH: the server may have acted on it before the reset; their callers read back.
    if ((e as { staleSocket?: boolean }).staleSocket === true && IDEMPOTENT.has(req.method.toUpperCase())) return sendOnce(url, req);
    throw e;
  });
}

function sendOnce(url: string | URL, req: HttpRequest): Promise<HttpResponse> {
  const u = new URL(url);
  const transport = transportFor(u.protocol);
  if (!transport) return Promise.reject(new Error(`unsupported URL scheme in ${u.protocol}//${u.host}`));
  const headers: http.OutgoingHttpHeaders = { ...req.headers };
  const body = req.body === undefined ? undefined : Buffer.from(req.body);
  if (body) headers['content-length'] = String(body.length);
  return new Promise<HttpResponse>((resolve, reject) => {
    let answered = false;
    const r = transport.request(u, { method: req.method, headers, agent: req.agent ?? transport.agent, signal: req.signal }, (res) => {
      answered = true;
      const chunks: Buffer[] = [];
      let size = 0;
      res.on('data', (c: Buffer) => {
        if (tooLarge) return;
        size += c.length;
        if (req.maxBytes !== undefined && size > req.maxBytes) {
          // Failed at once, whether the rest is still coming or already read; the socket goes.
          tooLarge = Object.assign(new Error(`response larger than ${req.maxBytes} bytes`), { code: RESPONSE_TOO_LARGE });
          fail(tooLarge);
          res.destroy();
          return;
        }
        chunks.push(c);
      });
      res.on('end', () => {
        if (tooLarge) return;
        clearTimeout(timer);
        resolve({ status: res.statusCode ?? 0, headers: headersOf(res.headers), text: Buffer.concat(chunks).toString('utf8') });
      });
      res.on('error', fail);
      // A response cut short (aborted, socket destroyed) may close without an 'error'.
      res.on('close', () => {
        if (!res.complete) fail(Object.assign(new Error('response closed before its end'), { code: 'ECONNRESET' }));
      });
    });
    let timeout: Error | undefined;
    let tooLarge: Error | undefined;
    // After a timeout (or a cut-off answer) the request and the response may each report the destroyed socket.
    function fail(e: Error): void {
      clearTimeout(timer);
      reject(timeout ?? tooLarge ?? e);
    }
    const onTimeout = (): void => {
      timeout = req.timeoutError?.() ?? Object.assign(new Error(`no complete answer within ${req.timeoutMs} ms`), { code: 'ETIMEDOUT' });
      r.destroy(timeout);
    };
    const timer = req.timeoutKind === 'idle' ? undefined : setTimeout(onTimeout, req.timeoutMs);
    if (req.timeoutKind === 'idle') r.setTimeout(req.timeoutMs, onTimeout);
    r.on('error', (e: Error & { code?: string }) => {
      const stale = r.reusedSocket && !answered && timeout === undefined && (e.code === 'ECONNRESET' || e.code === 'EPIPE');
      fail(stale ? Object.assign(e, { staleSocket: true }) : e);
    });
    if (req.onSent) r.once('finish', req.onSent);
    r.end(body);
  });
}

function headersOf(h: http.IncomingHttpHeaders): ResponseHeaders {
  return {
    get(name: string): string | null {
      const v = h[name.toLowerCase()];
      return v === undefined ? null : Array.isArray(v) ? v.join(', ') : v;
    },
  };
}
