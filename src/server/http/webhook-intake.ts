// Receiving POST /events bodies, with bounds that hold before anyone is authenticated.
//
// Why: anyone who can reach /events can send a body; only the host's authentication (GitHub:
// the HMAC over the whole body) says it is the host's. A body inflated (Content-Encoding: gzip)
// before that check, or bodies held without a bound on how many, would let a few small
// unsigned, unfinished uploads take gigabytes of the server's memory. GitHub sends webhooks
// uncompressed, with a Content-Length and an X-Hub-Signature-256 header, and gives up on a
// delivery after 10 s; Atlantis (Go net/http) never inflates a request body. So:
// - refused from the headers alone, before a byte of the body is read: a Content-Encoding
//   (415), a Content-Length over 25 MiB (413), and, when a secret is set, headers that cannot
//   authenticate (the host says which and how: GitHub's missing or malformed signature, 401);
// - a body not received within 10 s is dropped (408);
// - bodies held at once are bounded in bytes (64 MiB) and in number (256): a body that would
//   go over makes room by dropping the oldest unfinished ones (503), so that a sender that
//   opens many slow bodies delays the host's deliveries by little, and memory stays bounded.
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import type { WebhookAnswer } from '../vcs/host.js';

export const MAX_WEBHOOK_BYTES = 25 * 1024 * 1024;

export interface IntakeLimits {
  /** Bytes of webhook bodies held at once: being received, or received and not yet answered. */
  maxHeldBytes: number;
  /** Bodies being received at once. */
  maxReceiving: number;
  /** A body must be complete this long after its headers came. */
  bodyTimeoutMs: number;
}

export const DEFAULT_INTAKE_LIMITS: IntakeLimits = { maxHeldBytes: 64 * 1024 * 1024, maxReceiving: 256, bodyTimeoutMs: 10_000 };

export type Admission = { ok: true } | { ok: false; status: number; text: string };

/**
 * The code host's refusal of a request from its headers alone (vcs/host.ts refuseBeforeBody):
 * with a webhook secret set, a request whose headers cannot authenticate (GitHub: no
 * well-formed X-Hub-Signature-256) can only be refused, and its body would be read for nothing.
 */
export type HeaderRefusal = (headers: IncomingHttpHeaders) => WebhookAnswer | undefined;

/** Whether to read a webhook's body at all, from its headers. Pure. */
export function admitWebhook(headers: IncomingHttpHeaders, refuse: HeaderRefusal | undefined): Admission {
  const encoding = headers['content-encoding'];
  if (encoding !== undefined && encoding.trim().toLowerCase() !== 'identity') {
    return { ok: false, status: 415, text: 'Content-Encoding is not supported: webhooks are sent uncompressed' };
  }
  const length = headers['content-length'];
  if (length !== undefined && (!/^\d+$/.test(length) || Number(length) > MAX_WEBHOOK_BYTES)) {
    return { ok: false, status: 413, text: `Request body is larger than ${MAX_WEBHOOK_BYTES} bytes` };
  }
  const refused = refuse?.(headers);
  if (refused) return { ok: false, status: refused.status, text: refused.body };
  return { ok: true };
}

/** One body being received. */
interface Receiving {
  bytes: number;
  /** Answers `status` and drops the body and its connection. */
  drop: (status: number, text: string) => void;
}

export interface IntakeEvents {
  /** The whole body; its bytes count as held until the returned promise settles. */
  onBody: (req: IncomingMessage, body: Buffer, res: ServerResponse) => Promise<void>;
  /** A request answered here, without its handler (refused, dropped, or broken off: 400). */
  onRefused: (req: IncomingMessage, status: number) => void;
}

export class WebhookIntake {
  /** Bodies being received, oldest first (a Map keeps insertion order). */
  private readonly receiving = new Map<object, Receiving>();
  private heldBytes = 0;

  constructor(
    /** The host's refusal from the headers (a webhook secret is set); undefined: every body is read. */
    private readonly headerRefusal: HeaderRefusal | undefined,
    private readonly events: IntakeEvents,
    private readonly limits: IntakeLimits = DEFAULT_INTAKE_LIMITS,
  ) {}

  /** Bytes held now (for tests and metrics). */
  get held(): { bytes: number; receiving: number } {
    return { bytes: this.heldBytes, receiving: this.receiving.size };
  }

  receive(req: IncomingMessage, res: ServerResponse): void {
    // A client that goes away mid-body ends in 'error' as well as 'close'; 'close' does the
    // accounting, and an 'error' without a listener would end the process.
    req.on('error', () => undefined);
    const admission = admitWebhook(req.headers, this.headerRefusal);
    if (!admission.ok) {
      this.refuse(req, res, admission.status, admission.text);
      return;
    }
    if (this.receiving.size >= this.limits.maxReceiving) this.dropOldest(undefined);

    const key = {};
    const chunks: Buffer[] = [];
    let done = false;
    const entry: Receiving = {
      bytes: 0,
      drop: (status, text) => {
        if (done) return;
        finish();
        chunks.length = 0;
        this.refuse(req, res, status, text);
      },
    };
    const finish = (): void => {
      done = true;
      clearTimeout(timer);
      this.receiving.delete(key);
      this.heldBytes -= entry.bytes;
    };
    const timer = setTimeout(
      () => entry.drop(408, `Request body not received within ${this.limits.bodyTimeoutMs / 1000} s`),
      this.limits.bodyTimeoutMs,
    );
    this.receiving.set(key, entry);

    req.on('data', (c: Buffer) => {
      if (done) return;
      if (entry.bytes + c.length > MAX_WEBHOOK_BYTES) return entry.drop(413, `Request body is larger than ${MAX_WEBHOOK_BYTES} bytes`);
      while (this.heldBytes + c.length > this.limits.maxHeldBytes && this.dropOldest(key)) {
        /* made room */
      }
      if (this.heldBytes + c.length > this.limits.maxHeldBytes) return entry.drop(503, 'Too many webhook bodies at once, try again later');
      entry.bytes += c.length;
      this.heldBytes += c.length;
      chunks.push(c);
    });
    req.on('end', () => {
      if (done) return;
      const bytes = entry.bytes;
      // Still held until answered, but no longer one to drop: it is complete.
      done = true;
      clearTimeout(timer);
      this.receiving.delete(key);
      const body = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks);
      chunks.length = 0;
      // onBody answers its own errors; a rejection here must not end the process either.
      void this.events
        .onBody(req, body, res)
        .catch(() => undefined)
        .finally(() => {
          this.heldBytes -= bytes;
        });
    });
    // A connection that broke mid-body: nobody to answer.
    req.on('close', () => {
      if (done) return;
      finish();
      chunks.length = 0;
      this.events.onRefused(req, 400);
    });
  }

  /** Drops the oldest body being received other than `except`; false when there is none. */
  private dropOldest(except: object | undefined): boolean {
    for (const [key, r] of this.receiving) {
      if (key === except) continue;
      r.drop(503, 'Too many webhook bodies at once, try again later');
      return true;
    }
    return false;
  }

  private refuse(req: IncomingMessage, res: ServerResponse, status: number, text: string): void {
    this.events.onRefused(req, status);
    if (res.headersSent) return;
    const body = `${text}\n`;
    const headers: Record<string, string | number> = {
      'content-type': 'text/plain; charset=utf-8',
      'content-length': Buffer.byteLength(body),
      connection: 'close',
    };
    if (status === 503) headers['retry-after'] = '1';
    lingerAfterAnswer(req);
    res.writeHead(status, headers);
    res.end(body);
  }
}

/** How long an answered request's unwanted body is read and thrown away before the socket goes. */
const LINGER_MS = 2000;

/**
 * Closes the connection of a request answered before its body ended. Node's server destroys a
 * `Connection: close` socket as soon as the answer is written; while the client still sends,
 * that resets the connection, and a reset can discard the answer before the client reads it.
 * So only our side is ended (the client reads the answer, then sees the end), the rest of the
 * body is read and dropped, and the socket is destroyed when the client stops or after a
 * bounded time (a lingering close, as HTTP servers do). Must run before the answer is sent.
 */
function lingerAfterAnswer(req: IncomingMessage): void {
  const socket = req.socket;
  if (req.complete || socket.destroyed) return;
  socket.destroySoon = () => socket.end();
  req.resume();
  const timer = setTimeout(() => socket.destroy(), LINGER_MS);
  timer.unref();
  socket.once('close', () => clearTimeout(timer));
}
