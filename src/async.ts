// Small promise helpers shared by the server and the controller.

/**
 * Resolves after `ms`, or as soon as `signal` aborts (it never rejects: a caller that passes a
 * signal checks it after the wait).
 */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) {
      resolve();
      return;
    }
    const t = setTimeout(done, ms);
    signal?.addEventListener('abort', done, { once: true });
    function done(): void {
      clearTimeout(t);
      signal?.removeEventListener('abort', done);
      resolve();
    }
  });
}

/** Waits for `p`, at most `ms`: its value, or 'timeout'. The timer never outlives the wait. */
export async function withTimeout<T>(p: Promise<T>, ms: number): Promise<T | 'timeout'> {
  let timer: NodeJS.Timeout | undefined;
  const t = new Promise<'timeout'>((resolve) => {
    timer = setTimeout(() => resolve('timeout'), ms);
  });
  try {
    return await Promise.race([p, t]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Node fires a timer whose delay is over 2^31-1 ms (about 24.8 days) after 1 ms, with only a
 * warning. Every delay that can come from a user's setting goes through clampTimerDelay (when
 * an early wake-up is harmless, e.g. a requeue that re-checks) or setLongTimeout (when it is
 * not, e.g. a drain deadline that interrupts terraform).
 */
export const MAX_TIMER_DELAY_MS = 2_147_483_647;

export function clampTimerDelay(ms: number): number {
  if (Number.isNaN(ms)) throw new RangeError('timer delay is NaN');
  return Math.min(Math.max(0, ms), MAX_TIMER_DELAY_MS);
}

export interface LongTimeout {
  clear(): void;
}

/** setTimeout for any finite delay: chains Node timers until the deadline has passed. */
export function setLongTimeout(fn: () => void, ms: number, opts: { unref?: boolean } = {}): LongTimeout {
  if (!Number.isFinite(ms)) throw new RangeError(`timer delay must be finite, got ${ms}`);
  const deadline = Date.now() + Math.max(0, ms);
  let timer: NodeJS.Timeout | undefined;
  const step = (): void => {
    const left = deadline - Date.now();
    if (left > 0) {
      arm(left);
      return;
    }
    timer = undefined;
    fn();
  };
  const arm = (left: number): void => {
    timer = setTimeout(step, Math.min(left, MAX_TIMER_DELAY_MS));
    if (opts.unref) timer.unref();
  };
  arm(Math.max(0, ms));
  return {
    clear: () => {
      if (timer) clearTimeout(timer);
      timer = undefined;
    },
  };
}
