// The server's HTTP surface (SPEC section 3). Handlers here only read state; /status in
// particular does no I/O so it answers at once while terraform runs.
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import type express from 'express';
import { VERSION } from '../../version.js';
import { LIVENESS_PATH, READINESS_PATH, STATUS_PATH, type StatusBody, type StatusOperation } from '../../contract/drain-protocol.js';
import type { DrainState } from '../drain/drain-state.js';
import type { Operation, OperationTracker } from '../drain/operation-tracker.js';
import { processRedactor } from '../secrets/redact.js';
import { FORWARDED_BY_HEADER } from '../replicas/forward.js';
import { FORWARD_AUTH_HEADER } from '../replicas/forward-auth.js';
import { type HeaderRefusal, MAX_WEBHOOK_BYTES, WebhookIntake } from './webhook-intake.js';
import type { AppDeps, WebhookHeaders, WebhookResponse } from './app-deps.js';
import { answerLiveness, answerReadiness } from './probes.js';

export { MAX_WEBHOOK_BYTES };
export type { AppDeps, WebhookHeaders, WebhookResponse } from './app-deps.js';

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

/**
 * Webhook handlers started per event-loop turn, at most this many milliseconds' worth (see
 * turn-queue.ts): a few handlers, so that a burst is taken in quickly, and /status waits a
 * few milliseconds at most behind them.
 */
export const WEBHOOK_TURN_BUDGET_MS = 3;

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
 * The requests answered on node:http, without Express: a plain GET /status, every POST /events
 * (as Atlantis's router, the query does not matter) and the kubelet's plain GET /healthz and
 * /readyz (open paths, never host-checked: web-auth.ts, allowed-hosts.ts). Undefined: Express.
 */
export function fastPath(method: string | undefined, url: string | undefined): 'status' | 'events' | 'liveness' | 'readiness' | undefined {
  if (method === 'POST') return url === '/events' || url?.startsWith('/events?') ? 'events' : undefined;
  if (method !== 'GET') return undefined;
  if (url === STATUS_PATH) return 'status';
  if (url === LIVENESS_PATH) return 'liveness';
  if (url === READINESS_PATH) return 'readiness';
  return undefined;
}

/**
 * The server's request listener. The requests that come in bursts and polls (fastPath) are
 * answered on node:http directly; everything else (and /status with a query) goes through
 * Express (express-app.ts). Why: Express's per-request work (router, request and response
 * helpers) is a large part of a webhook's CPU and garbage during a burst (figures in
 * docs/reliability.md). Webhook bodies never reach body-parser: it would inflate compressed
 * ones (see webhook-intake.ts).
 */
export function buildRequestListener(deps: AppDeps): (req: IncomingMessage, res: ServerResponse) => void {
  const sendStatus = statusSender(deps);
  // GET /status?wait_drained=<seconds> (see the contract): the controller holds one per
  // draining pod, so it learns of the end of a drain when it happens, not at its next poll.
  // Registered at start: a drain may end before Express is loaded.
  const heldStatus = new Set<() => void>();
  deps.tracker.onDrained(() => {
    // Answers first: a starved process may lose the CPU at any point, the log can wait,
    // and goes after the current statement sequence so that it follows that drain's
    // "Drain started" line.
    const held = [...heldStatus];
    for (const answer of held) answer();
    // Whether a controller was already waiting (0: its request, if any, comes later).
    queueMicrotask(() => deps.logger.info('Drained', { heldStatusRequests: held.length }));
  });
  const intake = webhookIntake(deps);
  // Express (with body-parser and mime-db, ~630 KB of the bundle) is imported by the first
  // request that needs it, not at start: the two requests above never do. One build for all;
  // requests that come while it loads wait for it.
  let app: Promise<express.Express> | undefined;
  const expressApp = () => {
    app ??= import('./express-app.js').then((m) => m.buildExpressApp(deps, { sendStatus, heldStatus, sendText }));
    return app;
  };
  return (req, res) => {
    switch (fastPath(req.method, req.url)) {
      case 'status':
        return sendStatus(res);
      case 'events':
        return intake.receive(req, res);
      case 'liveness':
        return answerLiveness(res);
      case 'readiness':
        return void answerReadiness(deps, res).catch((e: Error) => {
          deps.logger.error('Request failed', { path: READINESS_PATH, error: e.message });
          sendText(res, 500, `${e.message}\n`);
        });
    }
    expressApp().then(
      (a) => a(req, res),
      (e: Error) => {
        // Not retried: Node.js keeps a failed import's error. The probes do not need Express, so the
        // pod stays up; the UI, the API and /metrics answer this until it is restarted.
        const message = `Could not load the HTTP routes: ${e.message}`;
        deps.logger.error('Request failed', { path: req.url?.split('?')[0], error: message });
        sendText(res, 500, `${message}\n`);
      },
    );
  };
}

/** The answer to GET /status. */
function statusSender(deps: AppDeps): (res: ServerResponse) => void {
  // Controllers and probes poll /status while hundreds of commands may be queued, each one
  // listed in the body: it is serialized once per change, not once per request.
  let cached: { version: number; drain: DrainState; body: Buffer } | undefined;
  let operationParts = new Map<string, string>();
  return (res) => {
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
}

/** A plain-text answer, scrubbed of secrets. */
function sendText(res: ServerResponse, status: number, raw: string, headers: Record<string, string> = {}): void {
  const text = processRedactor.redact(raw);
  res.writeHead(status, { ...headers, 'content-type': 'text/plain; charset=utf-8', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

/** POST /events: the intake reads the body, then the handler waits for its turn. */
function webhookIntake(deps: AppDeps): WebhookIntake {
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
  return new WebhookIntake(headerRefusalOf(hooks), { onBody: answerWebhook, onRefused: countWebhook });
}
