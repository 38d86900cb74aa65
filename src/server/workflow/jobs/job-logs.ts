// Job logs (<data-dir>/jobs/<job id>.log) hold terraform's full output, which can quote
// variables and state: they are kept private (0600) and deleted by age and count
// (--job-log-retention, --job-log-max-count), once at start and then periodically.
// The choice of what to delete is pure (jobLogsToPrune); the pruner does the file I/O.
import { chmod, lstat, readdir, unlink } from 'node:fs/promises';
import path from 'node:path';
import type { Logger } from '../../../log.js';

/** Only files named like the server's own job logs are ever considered (job ids are UUIDs). */
const JOB_LOG_FILE = /^([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})\.log$/;

export interface JobLogRetention {
  /** Delete logs last written longer ago than this; 0 = no age limit. */
  maxAgeMs: number;
  /** Keep at most this many logs, the most recently written; 0 = no count limit. */
  maxCount: number;
}

export interface JobLogEntry {
  id: string;
  mtimeMs: number;
}

export type PruneReason = 'age' | 'count';

/**
 * Which logs to delete and why. A running job's log is never deleted (it still counts towards
 * maxCount); the age limit goes first, then the oldest of the rest go until maxCount remain.
 */
export function jobLogsToPrune(
  entries: readonly JobLogEntry[],
  now: number,
  retention: JobLogRetention,
  running: ReadonlySet<string>,
): Array<{ id: string; reason: PruneReason }> {
  const idle = entries
    .filter((e) => !running.has(e.id))
    // Newest first; equal times by id, so that the answer does not depend on readdir's order.
    .sort((a, b) => b.mtimeMs - a.mtimeMs || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  const room = retention.maxCount > 0 ? Math.max(0, retention.maxCount - (entries.length - idle.length)) : Infinity;
  const out: Array<{ id: string; reason: PruneReason }> = [];
  let kept = 0;
  for (const e of idle) {
    if (retention.maxAgeMs > 0 && now - e.mtimeMs > retention.maxAgeMs) out.push({ id: e.id, reason: 'age' });
    else if (kept >= room) out.push({ id: e.id, reason: 'count' });
    else kept++;
  }
  return out;
}

export const MIN_PRUNE_INTERVAL_MS = 1_000;
export const MAX_PRUNE_INTERVAL_MS = 3_600_000;
/** With a count limit only, how often to look. */
export const COUNT_ONLY_PRUNE_INTERVAL_MS = 600_000;

/**
 * How often to prune: a quarter of the age limit, so that no log outlives it by more than a
 * quarter, between 1 s and 1 h (a bounded timer, whatever the flag says).
 */
export function pruneIntervalMs(retention: JobLogRetention): number {
  const wanted = retention.maxAgeMs > 0 ? retention.maxAgeMs / 4 : COUNT_ONLY_PRUNE_INTERVAL_MS;
  return Math.round(Math.min(MAX_PRUNE_INTERVAL_MS, Math.max(MIN_PRUNE_INTERVAL_MS, wanted)));
}

export interface JobLogPrunerOptions {
  dir: string;
  retention: JobLogRetention;
  /** Ids of jobs that are running now. */
  running: () => ReadonlySet<string>;
  /** Called for each deleted log (the web page forgets the job). */
  onPruned?: (id: string) => void;
  logger: Logger;
}

export class JobLogPruner {
  private timer?: NodeJS.Timeout;
  private current?: Promise<void>;
  private stopped = false;

  constructor(private readonly opts: JobLogPrunerOptions) {}

  /** Prunes now, then every pruneIntervalMs; does nothing when both limits are 0. */
  async start(): Promise<void> {
    const { maxAgeMs, maxCount } = this.opts.retention;
    if (maxAgeMs === 0 && maxCount === 0) return;
    await this.pruneOnce();
    this.schedule();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.current;
  }

  /** One pass; never throws (a failed pass is logged, the next one tries again). */
  pruneOnce(): Promise<void> {
    this.current ??= this.pass()
      .catch((e: unknown) => {
        this.opts.logger.warn('Could not prune job logs', { dir: this.opts.dir, error: (e as Error).message });
      })
      .finally(() => {
        this.current = undefined;
      });
    return this.current;
  }

  private schedule(): void {
    if (this.stopped) return;
    // unref: a pending prune never keeps the process alive; chained, so passes never overlap.
    this.timer = setTimeout(() => void this.pruneOnce().then(() => this.schedule()), pruneIntervalMs(this.opts.retention)).unref();
  }

  private async pass(): Promise<void> {
    let names: string[];
    try {
      names = await readdir(this.opts.dir);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') return; // no job has run yet
      throw e;
    }
    // A jobs dir made by a version before 0700 modes.
    if (((await lstat(this.opts.dir)).mode & 0o077) !== 0) await chmod(this.opts.dir, 0o700);
    const entries: JobLogEntry[] = [];
    for (const name of names) {
      const id = JOB_LOG_FILE.exec(name)?.[1];
      if (!id) continue;
      const file = path.join(this.opts.dir, name);
      const st = await lstat(file).catch(() => undefined);
      if (!st?.isFile()) continue;
      // Logs written by versions before 0600 modes: made private as they are found.
      if ((st.mode & 0o077) !== 0) await chmod(file, 0o600).catch(() => undefined);
      entries.push({ id, mtimeMs: st.mtimeMs });
    }
    const doomed = jobLogsToPrune(entries, Date.now(), this.opts.retention, this.opts.running());
    if (doomed.length === 0) return;
    const mtimes = new Map(entries.map((e) => [e.id, e.mtimeMs]));
    for (const { id, reason } of doomed) {
      await unlink(path.join(this.opts.dir, `${id}.log`)).catch((e: NodeJS.ErrnoException) => {
        if (e.code !== 'ENOENT') throw e;
      });
      this.opts.onPruned?.(id);
      this.opts.logger.debug('Pruned job log', { jobId: id, reason, lastWritten: new Date(mtimes.get(id)!).toISOString() });
    }
    this.opts.logger.info('Pruned job logs', {
      removedByAge: doomed.filter((d) => d.reason === 'age').length,
      removedByCount: doomed.filter((d) => d.reason === 'count').length,
      kept: entries.length - doomed.length,
    });
  }
}
