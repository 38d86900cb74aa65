// Holds one `GET /status?wait_drained` per draining pod, so the controller hears that a drain
// is over when the server says so rather than at its next poll: the server answers the held
// request the moment its last operation ends. Like an informer for /status: it keeps the
// last answer per pod and enqueues the owner when that answer changes; the reconcile reads
// the answer instead of asking the pod itself, so a reconcile never waits on a slow server.
// Each request is held for a few seconds only, so a pod whose answer is overdue (held time
// plus `lateAfterMs`) reads as not answering within seconds. The request itself is not given
// up that early: a server starved of CPU can take many seconds to answer, and an answer that
// comes late still counts (a short client timeout would drop it every time).
// Nothing here deletes or decides anything.
import { sleep } from '../../async.js';
import type { StatusProbe } from '../types.js';
import { isDrained } from '../rollout/planner.js';
import { probeServerStatus } from './status-probe.js';

export interface DrainWatchTarget {
  uid: string;
  podIP: string;
  /** The server container's restart count when the watch was asked for. */
  restarts: number;
}

export interface DrainWatchOptions {
  /** A pod's answer changed (e.g. it is drained now): look at its AtlantisDeployment again. */
  onChange: (key: string, answer: StatusProbe) => void;
  /** A watch ended on an unexpected error (a throwing onChange); the next sync starts it again. */
  onError?: (key: string, error: unknown) => void;
  /** How long the server may hold each request (seconds). */
  waitSeconds?: number;
  /**
   * Requests of one pod start at least this far apart: a server that answers at once (one
   * that does not know `wait_drained`) is polled at this pace instead of in a hot loop.
   */
  minIntervalMs?: number;
  /** After an error (refused, timeout), wait this long before asking again. */
  errorBackoffMs?: number;
  /** An answer not there this long after the held time reads as "not answering" (default 1.5 s). */
  lateAfterMs?: number;
  /** `onSent` is called once the request is on its way to the server. */
  longPoll?: (podIP: string, waitSeconds: number, signal: AbortSignal, onSent: () => void) => Promise<StatusProbe>;
}

/** How long the server holds each request; also bounds how old an answer gets while watched. */
export const DEFAULT_WAIT_SECONDS = 5;

/** A held request is given up (an error, then asked again) this long after its held time. */
const GIVE_UP_AFTER_MS = 60_000;

interface Watch extends DrainWatchTarget {
  key: string;
  latest?: StatusProbe;
  /** When the request in flight was sent. */
  askedAt?: number;
  abort: AbortController;
}

export class DrainWatch {
  private readonly watches = new Map<string, Watch>();
  private readonly longPoll: NonNullable<DrainWatchOptions['longPoll']>;

  constructor(private readonly o: DrainWatchOptions) {
    this.longPoll =
      o.longPoll ??
      ((ip, wait, signal, onSent) => probeServerStatus(ip, { waitDrainedSeconds: wait, timeoutMs: GIVE_UP_AFTER_MS, signal, onSent }));
  }

  /**
   * The pods of `key` that should be watched now: starts what is missing, restarts a watch
   * whose pod IP or container changed, stops the key's watches of pods not listed.
   */
  sync(key: string, targets: readonly DrainWatchTarget[]): void {
    const wanted = new Map(targets.map((t) => [t.uid, t]));
    for (const [uid, w] of this.watches) {
      const t = wanted.get(uid);
      if (w.key === key && (!t || t.podIP !== w.podIP || t.restarts !== w.restarts)) this.stop(uid);
    }
    for (const t of targets) if (!this.watches.has(t.uid)) void this.start(key, t);
  }

  /**
   * Starts watching one pod unless it is watched already (right before its drain starts).
   * Resolves once the first request is on its way (or has failed): sent before the drain
   * PATCH, it is held by the server when the server drains, so the answer comes in that
   * tick. A new connection otherwise goes out a loop turn after a PATCH on a kept-alive one,
   * and on a busy controller that turn can come after the server has already drained.
   */
  add(key: string, target: DrainWatchTarget): Promise<void> {
    if (this.watches.has(target.uid)) return Promise.resolve();
    return this.start(key, target);
  }

  /**
   * The pod's last answer, when it is from the same container and at most `maxAgeMs` old; an
   * error when the request in flight is overdue; 'pending' while the first request is held
   * (its answer enqueues the owner: asking the pod as well would only keep the reconcile, and
   * with it the key, busy on a server that may be starved); undefined otherwise (not watched,
   * or between requests after an error): then ask the pod directly.
   */
  observed(uid: string, restarts: number, now: Date, maxAgeMs: number): StatusProbe | 'pending' | undefined {
    const w = this.watches.get(uid);
    if (!w || w.restarts !== restarts) return undefined;
    const dueMs = (this.o.waitSeconds ?? DEFAULT_WAIT_SECONDS) * 1000 + (this.o.lateAfterMs ?? 1500);
    if (w.askedAt !== undefined && now.getTime() - w.askedAt > dueMs) {
      return { ok: false, error: `no answer for ${Math.round((now.getTime() - w.askedAt) / 1000)}s`, at: now };
    }
    if (!w.latest) return w.askedAt !== undefined ? 'pending' : undefined;
    return now.getTime() - w.latest.at.getTime() <= maxAgeMs ? w.latest : undefined;
  }

  /** Requests held (or about to be) right now. */
  size(): number {
    return this.watches.size;
  }

  stopAll(): void {
    for (const uid of [...this.watches.keys()]) this.stop(uid);
  }

  private stop(uid: string): void {
    this.watches.get(uid)?.abort.abort();
    this.watches.delete(uid);
  }

  /** Resolves when the first request is on its way, or has ended; never rejects. */
  private start(key: string, t: DrainWatchTarget): Promise<void> {
    const w: Watch = { ...t, key, abort: new AbortController() };
    this.watches.set(t.uid, w);
    return new Promise((sent) => {
      this.loop(w, sent)
        .catch((e: unknown) => {
          if (this.watches.get(w.uid) === w) this.watches.delete(w.uid);
          this.o.onError?.(w.key, e);
        })
        .finally(sent);
    });
  }

  private async loop(w: Watch, firstSent: () => void): Promise<void> {
    const wait = this.o.waitSeconds ?? DEFAULT_WAIT_SECONDS;
    const minInterval = this.o.minIntervalMs ?? 500;
    while (!w.abort.signal.aborted) {
      const started = Date.now();
      w.askedAt = started;
      const probe = await this.longPoll(w.podIP, wait, w.abort.signal, firstSent);
      firstSent();
      w.askedAt = undefined;
      if (w.abort.signal.aborted) return;
      const changed = !sameAnswer(w.latest, probe);
      w.latest = probe;
      if (changed) this.o.onChange(w.key, probe);
      // Drained is final for this container: keep the answer, hold nothing more.
      if (isDrained(probe)) return;
      const pause = probe.ok ? minInterval - (Date.now() - started) : (this.o.errorBackoffMs ?? 1000);
      if (pause > 0) await sleep(pause, w.abort.signal);
    }
  }
}

function sameAnswer(a: StatusProbe | undefined, b: StatusProbe): boolean {
  if (!a || a.ok !== b.ok) return false;
  if (!a.ok || !b.ok) return true; // both failed: the error text alone is no news
  return a.body.shutting_down === b.body.shutting_down && a.body.in_progress_operations === b.body.in_progress_operations;
}
