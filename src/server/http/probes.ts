// The kubelet's probes, /healthz and /readyz: answered on node:http by app.ts (a pod is probed
// every few seconds from its start, and Express, loaded on the first request that needs it,
// would otherwise be loaded by the first probe) and through Express for the rest (HEAD, a
// query). The same bytes either way, as Express's res.json writes them.
import type { ServerResponse } from 'node:http';
import type { AppDeps } from './app-deps.js';
import { readiness } from './readiness.js';

function sendJson(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'Content-Type': 'application/json; charset=utf-8', 'Content-Length': Buffer.byteLength(text) });
  res.end(text);
}

/** GET /healthz: the process answers. */
export function answerLiveness(res: ServerResponse): void {
  sendJson(res, 200, { status: 'ok' });
}

/** GET /readyz: readiness.ts decides from the drain and the store. */
export async function answerReadiness(
  deps: Pick<AppDeps, 'tracker' | 'queueDuringDrain' | 'storeHealthy'>,
  res: ServerResponse,
): Promise<void> {
  const queueDuringDrain = deps.queueDuringDrain ?? false;
  // Draining without queueing: 503 at once, the store is not asked.
  if (deps.tracker.isShuttingDown && !queueDuringDrain) return sendJson(res, 503, { status: 'draining' });
  const storeHealthy = await deps.storeHealthy();
  // A drain may have begun while the store answered: the state after the await decides.
  const r = readiness({ shuttingDown: deps.tracker.isShuttingDown, queueDuringDrain, storeHealthy });
  sendJson(res, r.status, { status: r.text });
}
