// The routes of the HTTP surface that go through Express (SPEC section 3): the host and web
// auth checks, /status with a query, the probes, /metrics, the extra routes (API, web UI) and
// the error answer. Imported by app.ts at the first request that needs them, not at start.
import type { ServerResponse } from 'node:http';
import express, { type NextFunction, type Request, type Response } from 'express';
import { LIVENESS_PATH, READINESS_PATH, STATUS_PATH, WAIT_DRAINED_PARAM, parseWaitDrained } from '../../contract/drain-protocol.js';
import { processRedactor } from '../secrets/redact.js';
import { decideHost, hostChecked, unknownHostMessage } from './allowed-hosts.js';
import type { AppDeps } from './app-deps.js';
import { answerLiveness, answerReadiness } from './probes.js';
import { UNAUTHORIZED_BODY, WWW_AUTHENTICATE, decideWebAuth } from './web-auth.js';

/** Held `/status?wait_drained` requests at most; one per controller watching is the norm. */
export const MAX_HELD_STATUS_REQUESTS = 256;

/** What app.ts made at start: the /status answer, the held requests a drain's end answers, its plain-text answer. */
export interface StartParts {
  sendStatus: (res: ServerResponse) => void;
  heldStatus: Set<() => void>;
  sendText: (res: ServerResponse, status: number, raw: string) => void;
}

export async function buildExpressApp(deps: AppDeps, { sendStatus, heldStatus, sendText }: StartParts): Promise<express.Express> {
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

  app.get(LIVENESS_PATH, (_req, res) => answerLiveness(res));
  app.get(READINESS_PATH, (_req, res, next) => answerReadiness(deps, res).catch(next));

  app.get('/metrics', async (_req, res) => {
    deps.metrics.operationsInProgress.set(deps.tracker.inProgress);
    res.set('Content-Type', deps.metrics.registry.contentType);
    res.send(await deps.metrics.registry.metrics());
  });

  await deps.extraRoutes?.(app);

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

  return app;
}
