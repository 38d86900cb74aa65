// What the server and the controller agree on: the two roles run as separate processes
// (often different versions during a rollout) and talk only through a pod annotation and
// GET /status. Both import this module; it imports neither, so one side cannot change the
// protocol without the other seeing it. Server side: own-pod-watch.ts, http/app.ts.
// Controller side: reconcile/status-probe.ts, rollout/*, resources/pod.ts.

/** The API group, also the domain of the annotations and labels the roles share. */
export const GROUP = 'atlantis-operator.dev';

/**
 * Set on a server pod to ask it to drain. The controller writes an RFC 3339 time; a user may
 * write anything (`kubectl annotate ... drain=now`). Removing it does not end a drain.
 */
export const ANNOTATION_DRAIN = `${GROUP}/drain`;

/**
 * Whether an annotation value asks for a drain: any value with a non-blank character. Both
 * roles decide with this, so a pod the controller counts as draining is one the server drains.
 */
export function drainRequested(value: string | null | undefined): boolean {
  return typeof value === 'string' && value.trim() !== '';
}

/** The port the server listens on in a pod (Atlantis's default, so a drop-in needs no change). */
export const SERVER_PORT = 4141;

/** The drain status, open to anyone who reaches the port (no secret in it). */
export const STATUS_PATH = '/status';
/**
 * Readiness: 200 while serving, 503 from the moment a drain starts (or while the lock store
 * is unusable), so a draining pod leaves the Service and new webhooks go to the others.
 */
export const READINESS_PATH = '/readyz';
/** Liveness: 200 while the process answers at all, draining or not. */
export const LIVENESS_PATH = '/healthz';

/** Who started the drain: SIGTERM/SIGINT, the pod annotation, or `atlantis-operator drain`. */
export type DrainTrigger = 'signal' | 'annotation' | 'cli';

/** One running or queued command, as /status lists it. */
export interface StatusOperation {
  id: string;
  command: string;
  repo: string;
  pull: number | null;
  project: string | null;
  started_at: string;
}

/** The JSON of GET /status as the server writes it: Atlantis's three fields first, then ours. */
export interface StatusBody {
  shutting_down: boolean;
  in_progress_operations: number;
  version: string;
  draining_since: string | null;
  drain_reason: DrainTrigger | null;
  operations: StatusOperation[];
}

/**
 * `GET /status?wait_drained=<seconds>` (our extension; Atlantis ignores query parameters): the
 * server holds the answer until it is drained or the wait is over. A server that does not know
 * it answers at once, which the caller must handle as an ordinary answer.
 */
export const WAIT_DRAINED_PARAM = 'wait_drained';
export const MAX_WAIT_DRAINED_SECONDS = 60;

/** Server side: the `wait_drained` value in seconds (0 = do not wait), or what is wrong with it. */
export function parseWaitDrained(value: unknown): number | string {
  if (value === undefined) return 0;
  const text = typeof value === 'string' ? value.trim() : '';
  const seconds = /^\d+(\.\d+)?$/.test(text) ? Number(text) : NaN;
  if (!(seconds >= 0 && seconds <= MAX_WAIT_DRAINED_SECONDS)) {
    return `${WAIT_DRAINED_PARAM} must be a number of seconds from 0 to ${MAX_WAIT_DRAINED_SECONDS}, given once (got ${JSON.stringify(value)})`;
  }
  return seconds;
}

/** Client side: the path and query asking for /status, held at most `waitSeconds` (kept within the bounds). */
export function statusRequestPath(waitSeconds = 0): string {
  const wait = Math.min(Math.max(waitSeconds, 0), MAX_WAIT_DRAINED_SECONDS);
  return wait > 0 ? `${STATUS_PATH}?${WAIT_DRAINED_PARAM}=${wait}` : STATUS_PATH;
}

/**
 * What the controller relies on in a /status answer: Atlantis's fields, so that a plain
 * Atlantis (or an older server) is understood as well. Only checked values are kept: the
 * answer comes from a pod that runs code from pull requests.
 */
export interface DrainStatus {
  shutting_down: boolean;
  in_progress_operations: number;
  version?: string;
}

/** Controller side: a /status answer's text, checked. */
export function parseStatusBody(text: string): { ok: true; body: DrainStatus } | { ok: false; error: string } {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    return { ok: false, error: 'not JSON' };
  }
  const o = (typeof raw === 'object' && raw !== null ? raw : {}) as Record<string, unknown>;
  const ops = o.in_progress_operations;
  if (typeof o.shutting_down !== 'boolean' || typeof ops !== 'number' || !Number.isSafeInteger(ops) || ops < 0) {
    return { ok: false, error: 'not an Atlantis /status answer' };
  }
  const body: DrainStatus = { shutting_down: o.shutting_down, in_progress_operations: ops };
  if (typeof o.version === 'string') body.version = o.version;
  return { ok: true, body };
}

/** Drained: the server refuses new work and has none left. Only then may its pod be deleted. */
export function reportsDrained(body: DrainStatus): boolean {
  return body.shutting_down && body.in_progress_operations === 0;
}
