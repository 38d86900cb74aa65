// A work queue keyed by `namespace/name`, with client-go's workqueue semantics:
// - a key is queued at most once (dedup), however many events arrive for it;
// - a key is never handed to two workers at once: re-added while processing, it is queued
//   again when the worker calls done(), so the latest state is always reconciled;
// - addAfter for requeue hints, addRateLimited for failures (per-key exponential backoff,
//   capped), forget() to reset a key's backoff after a success;
// - shutDown(): get() returns undefined once the queue is empty, new adds are ignored;
// - add(key, { urgent: true }) puts a key before all others (like controller-runtime's
//   priority queue): a pod that finished draining should not wait behind routine resyncs;
//   get({ urgentOnly: true }) serves only such keys, so a few workers kept for them are free
//   even while every other worker waits on a slow API server.
// Timers come from an injectable clock, so tests drive time without sleeping.

import { clampTimerDelay } from '../async.js';
import { backoffDelay } from '../backoff.js';

export interface QueueClock {
  now(): number;
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

export const realClock: QueueClock = {
  now: () => Date.now(),
  setTimeout: (fn, ms) => {
    // A requeue at drainTimeoutSeconds (no upper bound in the CRD) can be weeks away; past
    // Node's timer limit it would fire at once, in a loop. Waking early only re-checks.
    const t = setTimeout(fn, clampTimerDelay(ms));
    // Delayed requeues must not keep a shutting-down process alive.
    t.unref();
    return t;
  },
  clearTimeout: (h) => clearTimeout(h as NodeJS.Timeout),
};

export interface WorkQueueOptions {
  /** First retry delay; doubled per consecutive failure. */
  baseDelayMs?: number;
  /** Cap of the retry delay. */
  maxDelayMs?: number;
  clock?: QueueClock;
  /** Called when a worker takes a key, with how long it waited in the queue (a metric). */
  onTake?(waitedMs: number): void;
}

export const DEFAULT_BASE_DELAY_MS = 5;
export const DEFAULT_MAX_DELAY_MS = 5 * 60_000;

/** Key of a namespaced object. */
export function objectKey(namespace: string, name: string): string {
  return `${namespace}/${name}`;
}

export function splitKey(key: string): { namespace: string; name: string } {
  const i = key.indexOf('/');
  if (i <= 0 || i === key.length - 1) throw new Error(`Invalid work queue key: ${JSON.stringify(key)}`);
  return { namespace: key.slice(0, i), name: key.slice(i + 1) };
}

export { backoffDelay } from '../backoff.js';

export class WorkQueue {
  private readonly queue: string[] = [];
  /** Urgent keys, served before `queue`. */
  private readonly urgentQueue: string[] = [];
  /** Keys added as urgent and not handed out since. */
  private readonly urgent = new Set<string>();
  /** Keys that need processing (queued, or re-added while processing). */
  private readonly dirty = new Set<string>();
  private readonly processing = new Set<string>();
  private readonly delayed = new Map<string, { at: number; handle: unknown }>();
  private readonly failures = new Map<string, number>();
  /** When each queued key entered the queue. */
  private readonly queuedAt = new Map<string, number>();
  private readonly waiters: Array<(key: string | undefined) => void> = [];
  /** Workers waiting for an urgent key only. */
  private readonly urgentWaiters: Array<(key: string | undefined) => void> = [];
  private shutting = false;
  private readonly baseDelayMs: number;
  private readonly maxDelayMs: number;
  private readonly clock: QueueClock;
  private readonly onTake?: (waitedMs: number) => void;

  constructor(options: WorkQueueOptions = {}) {
    this.onTake = options.onTake;
    this.baseDelayMs = options.baseDelayMs ?? DEFAULT_BASE_DELAY_MS;
    this.maxDelayMs = options.maxDelayMs ?? DEFAULT_MAX_DELAY_MS;
    this.clock = options.clock ?? realClock;
  }

  add(key: string, opts: { urgent?: boolean } = {}): void {
    if (this.shutting) return;
    if (opts.urgent && !this.urgent.has(key)) {
      this.urgent.add(key);
      // Already waiting in the normal queue: move it to the front, or straight to an idle
      // urgent-only worker (no other worker is idle while a key waits).
      const i = this.queue.indexOf(key);
      if (i >= 0) {
        this.queue.splice(i, 1);
        const w = this.urgentWaiters.shift();
        if (w) w(this.take(key));
        else this.urgentQueue.push(key);
        return; // queued (or now taken) already: nothing more to mark
      }
    }
    if (this.dirty.has(key)) return;
    this.dirty.add(key);
    if (this.processing.has(key)) return; // queued again by done()
    this.push(key);
  }

  /** Adds the key after `ms`; a pending earlier addAfter for the key wins over a later one. */
  addAfter(key: string, ms: number): void {
    if (this.shutting) return;
    if (ms <= 0) {
      this.add(key);
      return;
    }
    const at = this.clock.now() + ms;
    const existing = this.delayed.get(key);
    if (existing && existing.at <= at) return;
    if (existing) this.clock.clearTimeout(existing.handle);
    const handle = this.clock.setTimeout(() => {
      const cur = this.delayed.get(key);
      if (cur?.handle === handle) this.delayed.delete(key);
      this.add(key);
    }, ms);
    this.delayed.set(key, { at, handle });
  }

  /** Requeue after a failure, with this key's backoff; returns the delay used. */
  addRateLimited(key: string): number {
    const n = this.failures.get(key) ?? 0;
    this.failures.set(key, n + 1);
    const delay = backoffDelay(n, this.baseDelayMs, this.maxDelayMs);
    this.addAfter(key, delay);
    return delay;
  }

  /** Stop tracking the key's failures (call after a successful reconcile). */
  forget(key: string): void {
    this.failures.delete(key);
  }

  numRequeues(key: string): number {
    return this.failures.get(key) ?? 0;
  }

  /** Next key to process; undefined once shut down and empty. Call done(key) when finished. */
  get(opts: { urgentOnly?: boolean } = {}): Promise<string | undefined> {
    const key = this.urgentQueue.shift() ?? (opts.urgentOnly ? undefined : this.queue.shift());
    if (key !== undefined) return Promise.resolve(this.take(key));
    if (this.shutting) return Promise.resolve(undefined);
    return new Promise((resolve) => (opts.urgentOnly ? this.urgentWaiters : this.waiters).push(resolve));
  }

  done(key: string): void {
    this.processing.delete(key);
    if (this.dirty.has(key)) this.push(key);
  }

  shutDown(): void {
    this.shutting = true;
    for (const { handle } of this.delayed.values()) this.clock.clearTimeout(handle);
    this.delayed.clear();
    // Workers blocked in get() with nothing queued are released.
    if (this.len() === 0) for (const w of this.waiters.splice(0)) w(undefined);
    // Waiting means no urgent key is queued; plain keys are not theirs to drain.
    for (const w of this.urgentWaiters.splice(0)) w(undefined);
  }

  get shuttingDown(): boolean {
    return this.shutting;
  }

  /** Keys waiting for a worker: the atlantis_operator_workqueue_depth metric. */
  len(): number {
    return this.queue.length + this.urgentQueue.length;
  }

  /** Keys scheduled by addAfter / addRateLimited and not due yet. */
  delayedCount(): number {
    return this.delayed.size;
  }

  isProcessing(key: string): boolean {
    return this.processing.has(key);
  }

  private take(key: string): string {
    const at = this.queuedAt.get(key);
    this.queuedAt.delete(key);
    this.onTake?.(at === undefined ? 0 : this.clock.now() - at);
    this.processing.add(key);
    this.dirty.delete(key);
    this.urgent.delete(key);
    return key;
  }

  private push(key: string): void {
    const w = (this.urgent.has(key) ? this.urgentWaiters.shift() : undefined) ?? this.waiters.shift();
    if (w) w(this.take(key));
    else {
      this.queuedAt.set(key, this.clock.now());
      (this.urgent.has(key) ? this.urgentQueue : this.queue).push(key);
    }
  }
}

export interface ReconcileOutcome {
  /** Reconcile again after this long even without events (the planner's requeue hint). */
  requeueAfterMs?: number | null;
}

/**
 * Runs `workers` loops that take keys and call `handle`. A success forgets the key's
 * failures (and honours requeueAfterMs); a throw requeues it rate-limited. Resolves when the
 * queue is shut down and every worker has finished its current key.
 */
export async function runWorkers(
  queue: WorkQueue,
  workers: number,
  handle: (key: string) => Promise<ReconcileOutcome | undefined> | Promise<void>,
  onError: (key: string, err: unknown, retryInMs: number) => void = () => {},
  /** More workers, on top of `workers`, that take urgent keys only. */
  urgentWorkers = 0,
): Promise<void> {
  const loop = async (urgentOnly: boolean): Promise<void> => {
    for (;;) {
      const key = await queue.get({ urgentOnly });
      if (key === undefined) return;
      try {
        const out = await handle(key);
        queue.forget(key);
        if (out && typeof out.requeueAfterMs === 'number') queue.addAfter(key, out.requeueAfterMs);
      } catch (err) {
        const delay = queue.addRateLimited(key);
        onError(key, err, delay);
      } finally {
        queue.done(key);
      }
    }
  };
  await Promise.all([
    ...Array.from({ length: Math.max(1, workers) }, () => loop(false)),
    ...Array.from({ length: Math.max(0, urgentWorkers) }, () => loop(true)),
  ]);
}
