// The server's HTTP surface (SPEC section 3). Handlers here only read state; /status in
// particular does no I/O so it answers at once while terraform runs.
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import { readiness } from './readiness.js';
import express, { type NextFunction, type Request, type Response } from 'express';
import type { Logger } from '../../log.js';
import { VERSION } from '../../version.js';
import {
  LIVENESS_PATH,
  READINESS_PATH,
  STATUS_PATH,
  type StatusBody,
  type StatusOperation,
  WAIT_DRAINED_PARAM,
  parseWaitDrained,
} from '../../contract/drain-protocol.js';
import type { DrainState } from '../drain/drain-state.js';
import type { Operation, OperationTracker } from '../drain/operation-tracker.js';
import type { ServerMetrics } from '../metrics.js';
import type { VcsWebhooks, WebhookRequest } from '../vcs/host.js';
import { processRedactor } from '../secrets/redact.js';
import type { TurnQueue } from './turn-queue.js';
import { FORWARDED_BY_HEADER } from '../replicas/forward.js';
import { FORWARD_AUTH_HEADER } from '../replicas/forward-auth.js';
import { UNAUTHORIZED_BODY, WWW_AUTHENTICATE, type WebAuthConfig, decideWebAuth } from './web-auth.js';
import { type AllowedHosts, decideHost, hostChecked, unknownHostMessage } from './allowed-hosts.js';
import { type HeaderRefusal, MAX_WEBHOOK_BYTES, WebhookIntake } from './webhook-intake.js';

export { MAX_WEBHOOK_BYTES };

/** What the HTTP surface reads of the host's webhooks (vcs/host.ts): their headers, before any body. */
export type WebhookHeaders = Pick<VcsWebhooks, 'headerNames' | 'eventName' | 'deliveryId' | 'eventLabel' | 'refuseBeforeBody'>;

/** The host's refusal of a request from its headers alone (with a webhook secret), for the intake; undefined: none. */
export function headerRefusalOf(hooks: WebhookHeaders | undefined): HeaderRefusal | undefined {
  const refuse = hooks?.refuseBeforeBody?.bind(hooks);
  return refuse && ((h) => refuse(hostHeaders(h, hooks?.headerNames ?? [])));
}

/** The host's headers of a request (by VcsWebhooks.headerNames, in that order), a repeated one as node joins it. */
export function hostHeaders(h: IncomingHttpHeaders, names: readonly string[]): Record<string, string | undefined> {
  const out: Record<string, string | undefined> = {};
  for (const n of names) {
    const v = h[n];
    out[n] = typeof v === 'string' ? v : undefined;
  }
  return out;
}

export interface WebhookResponse {
  status: number;
  body: string;
  /** More response headers (the answer's proof to a forwarding replica). */
  headers?: Record<string, string>;
}

export interface AppDeps {
  tracker: OperationTracker;
  drainState: () => DrainState;
  metrics: ServerMetrics;
  logger: Logger;
  /** Whether the lock store answers; /readyz fails when it does not. */
  storeHealthy: () => Promise<boolean>;
  /** --queue-during-drain: a draining server stays ready (readiness.ts). */
  queueDuringDrain?: boolean;
  /** POST /events; absent until the workflow is wired. */
  onWebhook?: (req: WebhookRequest) => Promise<WebhookResponse>;
  /** Where webhook handlers wait for their turn (see turn-queue.ts); the server awaits it on close. */
  webhookQueue: TurnQueue;
  /**
   * The code host's webhook headers (vcs/host.ts): which are kept with the body, the event and
   * delivery they name, the metrics label, and, with a webhook secret, the refusal of a request
   * whose headers cannot authenticate before its body is read (see webhook-intake.ts). Absent
   * until the workflow is wired: no header is kept, every event is `unknown`.
   */
  webhooks?: WebhookHeaders;
  /** Extra routes (web UI) mounted last. */
  extraRoutes?: (app: express.Express) => void;
  /** --web-basic-auth: the credentials every path but the open ones needs (web-auth.ts); undefined when off. */
  webAuth?: WebAuthConfig;
  /** The names the web UI answers to (allowed-hosts.ts); undefined: no check. */
  allowedHosts?: AllowedHosts;
}

/**
 * Webhook handlers started per event-loop turn, at most this many milliseconds' worth (see
 * turn-queue.ts): a few handlers, so that a burst is taken in quickly, and /status waits a
 * few milliseconds at most behind them.
 */
export const WEBHOOK_TURN_BUDGET_MS = 3;
/** Held `/status?wait_drained` requests at most; one per controller watching is the norm. */
export const MAX_HELD_STATUS_REQUESTS = 256;

export function buildStatus(tracker: OperationTracker, drain: DrainState): StatusBody {
  return { ...statusHead(tracker, drain), operations: tracker.operations().map(operationStatus) };
}

/**
 * buildStatus as JSON text, each operation's part taken from `parts` (by operation id) when
 * it is there. With hundreds of commands queued, turning every operation into JSON again on
 * each change would be most of the cost of a /status answer, and an operation's part never
 * changes. Returns the parts of the current operations, for the next call.
 */
export function serializeStatus(
  tracker: OperationTracker,
  drain: DrainState,
  parts: ReadonlyMap<string, string>,
): { json: string; parts: Map<string, string> } {
  const next = new Map<string, string>();
  for (const o of tracker.operations()) next.set(o.id, parts.get(o.id) ?? JSON.stringify(operationStatus(o)));
  // The head's closing brace makes way for the operations, the last field as in buildStatus.
  const json = `${JSON.stringify(statusHead(tracker, drain)).slice(0, -1)},"operations":[${[...next.values()].join(',')}]}`;
  return { json, parts: next };
}

function statusHead(tracker: OperationTracker, drain: DrainState): Omit<StatusBody, 'operations'> {
  return {
    shutting_down: tracker.isShuttingDown,
    in_progress_operations: tracker.inProgress,
    version: VERSION,
    draining_since: drain.since ? drain.since.toISOString() : null,
    drain_reason: drain.reason,
  };
}

function operationStatus(o: Operation): StatusOperation {
  // Only what came from outside is scrubbed; the command is one of the server's own names.
  const { repo, project } = processRedactor.redactValue({ repo: o.repo, project: o.project });
  return { id: o.id, command: o.command, repo, pull: o.pull, project, started_at: o.startedAt.toISOString() };
}

/**
 * The server's request listener. The two requests that come in bursts and polls, a plain
 * `GET /status` and every `POST /events`, are answered on node:http directly; everything else
 * (and /status with a query) goes through Express. Why: Express's per-request work (router,
 * request and response helpers) is a large part of a webhook's CPU and garbage during a burst
 * (figures in docs/reliability.md). Webhook bodies never reach body-parser: it would inflate
 * compressed ones (see webhook-intake.ts).
 */
export function buildRequestListener(deps: AppDeps): (req: IncomingMessage, res: ServerResponse) => void {
  const { app, sendStatus, intake } = buildRoutes(deps);
  return (req, res) => {
    if (req.method === 'GET' && req.url === STATUS_PATH) return sendStatus(res);
    // As Atlantis's router, the query does not matter.
    if (req.method === 'POST' && (req.url === '/events' || req.url?.startsWith('/events?'))) return intake.receive(req, res);
    app(req, res);
  };
}

function buildRoutes(deps: AppDeps): {
  app: express.Express;
  sendStatus: (res: ServerResponse) => void;
  intake: WebhookIntake;
} {
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);

  // Before everything else: a web UI path asked for under a name that is not this server's
  // (DNS rebinding, allowed-hosts.ts) gets nothing, not even a challenge.
  app.use((req: Request, res: Response, next: NextFunction) => {
    if (!deps.allowedHosts || !hostChecked(req.path)) return next();
    const decision = decideHost(req.headers.host, deps.allowedHosts);
    if (decision.kind === 'allowed') return next();
    deps.logger.warn('Request for a host name that is not this server refused', {
      host: decision.host,
      method: req.method,
      path: req.path,
    });
    sendText(res, 403, unknownHostMessage(decision.host));
  });

  // Before every route: an unknown path answers 401 too, as in Atlantis, so that without
  // credentials nothing tells which paths exist. The fast paths in buildRequestListener
  // (GET /status, POST /events) are open paths.
  app.use((req: Request, res: Response, next: NextFunction) => {
    const decision = decideWebAuth(req.path, req.headers.authorization, deps.webAuth);
    if (decision.kind === 'open' || decision.kind === 'allowed') return next();
    // As Atlantis: a wrong password is logged (never what was sent), a missing one is not.
    if (decision.kind === 'wrong')
      deps.logger.info('Web login refused: wrong username or password', { method: req.method, path: req.path });
    res.writeHead(401, {
      'www-authenticate': WWW_AUTHENTICATE,
      'content-type': 'text/plain; charset=utf-8',
      'x-content-type-options': 'nosniff',
      'content-length': Buffer.byteLength(UNAUTHORIZED_BODY),
    });
    res.end(UNAUTHORIZED_BODY);
  });

  // GET /status?wait_drained=<seconds> (see the contract): the controller holds one per
  // draining pod, so it learns of the end of a drain when it happens, not at its next poll.
  const heldStatus = new Set<() => void>();
  // Controllers and probes poll /status while hundreds of commands may be queued, each one
  // listed in the body: it is serialized once per change, not once per request.
  let cached: { version: number; drain: DrainState; body: Buffer } | undefined;
  let operationParts = new Map<string, string>();
  const sendStatus = (res: ServerResponse): void => {
    const version = deps.tracker.version;
    const drain = deps.drainState();
    if (cached?.version !== version || cached.drain !== drain) {
      const { json, parts } = serializeStatus(deps.tracker, drain, operationParts);
      operationParts = parts;
      // Never scrubbed as text: it holds no secret, and a short one (`false`, `0`) would
      // break the JSON the controller reads; its strings are scrubbed in operationStatus.
      cached = { version, drain, body: Buffer.from(json) };
    }
    res.writeHead(200, { 'content-type': 'application/json; charset=utf-8', 'content-length': cached.body.length });
    res.end(cached.body);
  };
  deps.tracker.onDrained(() => {
    // Answers first: a starved process may lose the CPU at any point, the log can wait,
    // and goes after the current statement sequence so that it follows that drain's
    // "Drain started" line.
    const held = [...heldStatus];
    for (const answer of held) answer();
    // Whether a controller was already waiting (0: its request, if any, comes later).
    queueMicrotask(() => deps.logger.info('Drained', { heldStatusRequests: held.length }));
  });
  app.get(STATUS_PATH, (req, res) => {
    const wait = parseWaitDrained(req.query[WAIT_DRAINED_PARAM]);
    if (typeof wait === 'string') return void res.status(400).type('text/plain').send(`${wait}\n`);
    // Past the cap, answer at once: the caller falls back to polling, memory stays bounded.
    if (wait === 0 || deps.tracker.isDrained || heldStatus.size >= MAX_HELD_STATUS_REQUESTS) return sendStatus(res);
    const release = () => {
      clearTimeout(timer);
      heldStatus.delete(answer);
    };
    const answer = () => {
      release();
      if (!res.writableEnded) sendStatus(res);
    };
    const timer = setTimeout(answer, wait * 1000);
    heldStatus.add(answer);
    res.on('close', release);
  });

  app.get(LIVENESS_PATH, (_req, res) => {
    res.status(200).json({ status: 'ok' });
  });

  app.get(READINESS_PATH, async (_req, res) => {
    const queueDuringDrain = deps.queueDuringDrain ?? false;
    // Draining without queueing: 503 at once, the store is not asked.
    if (deps.tracker.isShuttingDown && !queueDuringDrain) return void res.status(503).json({ status: 'draining' });
    const storeHealthy = await deps.storeHealthy();
    // A drain may have begun while the store answered: the state after the await decides.
    const r = readiness({ shuttingDown: deps.tracker.isShuttingDown, queueDuringDrain, storeHealthy });
    res.status(r.status).json({ status: r.text });
  });

  app.get('/metrics', async (_req, res) => {
    deps.metrics.operationsInProgress.set(deps.tracker.inProgress);
    res.set('Content-Type', deps.metrics.registry.contentType);
    res.send(await deps.metrics.registry.metrics());
  });

  const sendText = (res: ServerResponse, status: number, raw: string, headers: Record<string, string> = {}): void => {
    const text = processRedactor.redact(raw);
    res.writeHead(status, { ...headers, 'content-type': 'text/plain; charset=utf-8', 'content-length': Buffer.byteLength(text) });
    res.end(text);
  };
  const header = (req: IncomingMessage, name: string): string | undefined => {
    const v = req.headers[name];
    return typeof v === 'string' ? v : undefined;
  };
  const hooks = deps.webhooks;
  const ofHost = (req: IncomingMessage) => hostHeaders(req.headers, hooks?.headerNames ?? []);
  /** atlantis_webhooks_total, for every answer to POST /events (and a body that broke off: 400). */
  const countWebhook = (req: IncomingMessage, code: number): void => {
    deps.metrics.webhooksTotal.inc({ event: hooks ? hooks.eventLabel(ofHost(req)) : 'unknown', code: String(code) });
  };
  // A webhook whose body has been read: its handler waits for its turn (see turn-queue.ts).
  const answerWebhook = async (req: IncomingMessage, rawBody: Buffer, res: ServerResponse): Promise<void> => {
    const onWebhook = deps.onWebhook;
    if (!onWebhook) {
      countWebhook(req, 503);
      return sendText(res, 503, 'Webhook handling is not configured\n');
    }
    let out: WebhookResponse;
    try {
      const headers = ofHost(req);
      out = await deps.webhookQueue.run(() =>
        onWebhook({
          headers,
          event: hooks?.eventName(headers),
          deliveryId: hooks?.deliveryId(headers),
          rawBody,
          contentType: header(req, 'content-type'),
          forwardedBy: header(req, FORWARDED_BY_HEADER),
          forwardAuth: header(req, FORWARD_AUTH_HEADER),
        }),
      );
    } catch (e) {
      countWebhook(req, 500);
      deps.logger.error('Request failed', { path: '/events', error: (e as Error).message });
      return sendText(res, 500, `${(e as Error).message}\n`);
    }
    countWebhook(req, out.status);
    sendText(res, out.status, out.body, out.headers);
  };
  const intake = new WebhookIntake(headerRefusalOf(hooks), { onBody: answerWebhook, onRefused: countWebhook });

  deps.extraRoutes?.(app);

  // Errors of the routes above (and of body parsers the extra routes may use).
  app.use((err: Error & { status?: number; type?: string }, req: Request, res: Response, _next: NextFunction) => {
    const status = err.status ?? 500;
    if (status >= 500) deps.logger.error('Request failed', { path: req.path, error: err.message });
    // The rest of an oversized or broken body is never read: close the connection, so the
    // client does not send its next request on a socket the server is about to drop.
    if (err.type === 'entity.too.large' || status === 400) res.set('Connection', 'close');
    res
      .status(status)
      .type('text/plain')
      .send(processRedactor.redact(`${err.message}\n`));
  });

  return { app, sendStatus, intake };
}
