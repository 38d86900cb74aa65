// Store calls that wait out a short outage of the store instead of failing at once.
//
// Why: a webhook must learn at once that the store is away (503, so GitHub's delivery can be
// sent again), which is why the Redis clients fail fast (redisClientOptions). A command that
// was answered 200 has no one to tell: if its writes failed on the first try, it would end
// half-done (a lock taken and its plan not saved, its journal entry left "started", a job
// left running forever in the journal, a lease held until its TTL). So the command's calls
// are retried while the error says the store cannot be reached (not when the store answered
// with an error), for a bounded time; every such call is idempotent or re-entrant, which is
// what makes a retry after an unknown outcome (a timeout, a reply lost with the connection)
// safe. Calls that are not (acceptCommand, enqueue, takeAll, appendJobOutput) are never
// retried here.
import { sleep } from '../../async.js';
import type { Logger } from '../../log.js';
import type { StateStore } from './state-store.js';

/** How long a command's store call waits for the store to come back before it fails. */
export const STORE_WAIT_MS = 60_000;

const CONNECTION_MESSAGES = new Set([
  // ioredis without a connection and without an offline queue.
  "Stream isn't writeable and enableOfflineQueue options is false",
  // ioredis: the connection dropped with the call in flight, or was closed.
  'Connection is closed.',
  // ioredis commandTimeout: connected but silent (paused, partitioned).
  'Command timed out',
]);
const CONNECTION_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTCONN']);

/**
 * Whether a failed store call failed because the store could not be reached, or refused the
 * call for a moment without running it (worth another try), as opposed to an answer of the
 * store (a script error, a wrong type).
 */
export function storeUnreachable(e: unknown): boolean {
  if (!(e instanceof Error)) return false;
  if (CONNECTION_MESSAGES.has(e.message)) return true;
  // maxRetriesPerRequest 0: a call queued when the connection dropped.
  if (e.name === 'MaxRetriesPerRequestError') return true;
  // Refused for a moment, not run: still reading its AOF after a restart, a master demoted in a
  // failover (the client reconnects to the new one), too few replicas in sync, no master.
  if (/^(LOADING|READONLY|NOREPLICAS|MASTERDOWN) /.test(e.message)) return true;
  const code = (e as NodeJS.ErrnoException).code;
  return code !== undefined && CONNECTION_CODES.has(code);
}

export interface WaitOptions {
  /** Default STORE_WAIT_MS. */
  maxWaitMs?: number;
  logger?: Logger;
  /** The store answered (true) or could not be reached (false): atlantis_store_up. */
  onReachable?: (up: boolean) => void;
  /** Clock (tests). */
  now?: () => number;
}

/** Pause before try n+1: 100 ms doubling to 1 s (the clients reconnect at most 1 s apart). */
export const retryPauseMs = (n: number): number => Math.min(100 * 2 ** (n - 1), 1000);

/** Runs `call`, again while it fails with the store unreachable, until `maxWaitMs` have passed; then its last error. */
export async function waitingForStore<T>(what: string, call: () => Promise<T>, o: WaitOptions = {}): Promise<T> {
  const now = o.now ?? Date.now;
  const start = now();
  const end = start + (o.maxWaitMs ?? STORE_WAIT_MS);
  for (let n = 1; ; n++) {
    try {
      const v = await call();
      if (n > 1) {
        o.onReachable?.(true);
        o.logger?.info('State store reachable again: the waiting call went through', { call: what, waitedMs: now() - start });
      }
      return v;
    } catch (e) {
      if (!storeUnreachable(e)) throw e;
      o.onReachable?.(false);
      const pause = retryPauseMs(n);
      if (now() + pause > end) {
        o.logger?.error('State store still unreachable: the call gives up', {
          call: what,
          waitedMs: now() - start,
          error: (e as Error).message,
        });
        throw e;
      }
      if (n === 1)
        o.logger?.warn('State store unreachable: the call waits for it', {
          call: what,
          maxWaitMs: end - start,
          error: (e as Error).message,
        });
      await sleep(pause);
    }
  }
}

/**
 * Which StateStore methods wait (true) and which answer at once (false). Every member is
 * named, so a new method must be placed here: false for the intake's writes (a 503 now is
 * the point) and for those a repeat would change (enqueue appends, takeAll empties).
 */
const WAITS = {
  kind: false,
  shared: false,
  tryLock: true,
  getLock: true,
  unlock: true,
  unlockIfOwnedBy: true,
  unlockAllForPull: true,
  list: true,
  planPath: false,
  savePlan: true,
  getPlan: true,
  listPlans: true,
  deletePlan: true,
  restorePlanFile: true,
  getPullStatus: true,
  updatePullStatus: true,
  markDiscarded: true,
  deletePullStatus: true,
  enqueue: false,
  takeAll: false,
  queueLength: true,
  acceptCommand: false,
  acceptDelivery: false,
  // Idempotent, and the cleanup of a refused command: it may wait.
  dropRefusedCommand: true,
  commandStarted: true,
  commandFinished: true,
  acceptedCommands: true,
  jobStarted: true,
  jobFinished: true,
  unfinishedJobs: true,
  recentJobs: true,
  getJob: true,
  pruneJobs: true,
  // Appends: a repeat after a lost reply would copy the output twice (the copy is cosmetic).
  appendJobOutput: false,
  readJobOutput: true,
  // Read before an accepted apply runs; set by a person on the page, who gets the error now.
  getApplyLock: true,
  setApplyLock: false,
  connect: false,
  isHealthy: false,
  close: false,
  // Used at start only, with the raw store: a failure is reported there, not waited out.
  importAtlantisState: false,
  atlantisImportMarker: false,
  takeImportNotices: false,
} as const satisfies Record<keyof StateStore, boolean>;

/** `store` whose calls (those WAITS marks) wait out an outage, for the work of accepted commands. */
export function waitingStore(store: StateStore, o: WaitOptions = {}): StateStore {
  return new Proxy(store, {
    get(target, prop, receiver) {
      const v: unknown = Reflect.get(target, prop, receiver);
      if (typeof v !== 'function') return v;
      const fn = v as (...args: unknown[]) => Promise<unknown>;
      if (!(WAITS as Record<PropertyKey, boolean>)[prop]) return fn.bind(target);
      return (...args: unknown[]) => waitingForStore(String(prop), () => fn.apply(target, args), o);
    },
  });
}
