// OperationTracker counts the operations (one webhook-triggered command, from acceptance
// until its last PR comment is posted) and owns the shutting-down flag. Like Atlantis's
// Drainer, "may I start?" and "we are shutting down" are one decision: both happen
// synchronously on the event loop with no await in between, so once shuttingDown is
// true no operation can start and a zero count read afterwards can never go back up.
import { randomUUID } from 'node:crypto';

export interface OperationInfo {
  command: string;
  repo: string;
  pull: number | null;
  project: string | null;
}

export interface Operation extends OperationInfo {
  id: string;
  startedAt: Date;
}

export class OperationTracker {
  private shuttingDown = false;
  private changes = 0;
  private readonly running = new Map<string, Operation>();
  private idleWaiters: Array<() => void> = [];
  private drainedListeners: Array<() => void> = [];
  private shutDownListeners: Array<() => void> = [];

  /** Starts an operation, or returns undefined when shutting down: the caller must refuse the work. */
  tryStart(info: OperationInfo): Operation | undefined {
    if (this.shuttingDown) return undefined;
    const op: Operation = { ...info, id: randomUUID(), startedAt: new Date() };
    this.running.set(op.id, op);
    this.changes++;
    return op;
  }

  /** Marks an operation done; wakes waiters when it was the last one. Idempotent. */
  finish(id: string): void {
    if (!this.running.delete(id)) return;
    this.changes++;
    if (this.running.size > 0) return;
    if (this.shuttingDown) this.notifyDrained();
    const waiters = this.idleWaiters;
    this.idleWaiters = [];
    for (const w of waiters) w();
  }

  /** Stops new operations from starting; returns true for the call that flipped the flag. */
  shutDown(): boolean {
    if (this.shuttingDown) return false;
    this.shuttingDown = true;
    this.changes++;
    this.notify('shutDownListeners');
    if (this.running.size === 0) this.notifyDrained();
    return true;
  }

  /** Goes up on every change of what /status shows, so its body can be serialized once per change. */
  get version(): number {
    return this.changes;
  }
  get isShuttingDown(): boolean {
    return this.shuttingDown;
  }
  get inProgress(): number {
    return this.running.size;
  }
  /** Shutting down with nothing left running: final (no operation can start any more). */
  get isDrained(): boolean {
    return this.shuttingDown && this.running.size === 0;
  }

  /** The running operations, oldest first, for /status and the web page. */
  operations(): Operation[] {
    return [...this.running.values()];
  }

  /** Resolves as soon as no operation runs (at once when none does). */
  waitIdle(): Promise<void> {
    if (this.running.size === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  /**
   * Calls `listener` once, synchronously, at the moment the tracker becomes drained
   * (shutting down with no operation left; a state that never changes again), or at once
   * when it already is. Synchronous rather than a promise: the held /status answers go out
   * in the same statement sequence as the drain's start, ahead of anything queued after it,
   * which on a node short of CPU is the difference between one time slice and several.
   */
  onDrained(listener: () => void): void {
    if (this.isDrained) listener();
    else this.drainedListeners.push(listener);
  }

  /** Calls `listener` once when the drain starts (no operation may start from then on), or at once when it has. */
  onShutDown(listener: () => void): void {
    if (this.shuttingDown) listener();
    else this.shutDownListeners.push(listener);
  }

  private notifyDrained(): void {
    this.notify('drainedListeners');
  }

  private notify(which: 'drainedListeners' | 'shutDownListeners'): void {
    const listeners = this[which];
    this[which] = [];
    for (const l of listeners) {
      // A listener's error must not stop the caller (shutDown, finish) half way: it is
      // thrown again after the current statement sequence, as a promise callback's was.
      try {
        l();
      } catch (e) {
        queueMicrotask(() => {
          throw e;
        });
      }
    }
  }
}
