// The global apply lock, as Atlantis's: turned on and off on the web page (web/actions.ts),
// kept in the store (one for every replica), and read before every apply, from a comment or
// from the API (which must call checkApplyLock too): while it is on the apply is refused with
// Atlantis's comment; when the store cannot say, it is refused with Atlantis's other text and
// a failed apply status. `--disable-global-apply-lock` turns the whole feature off.
import type { ApplyLock, StateStore } from '../../locks/state-store.js';

/** Atlantis's reply to an apply while the global apply lock is on, word for word (its executable name is fixed in it). */
export const APPLY_DISABLED_COMMENT = '**Error:** Running `atlantis apply` is disabled.';
/** Atlantis's reply when the lock could not be read, word for word. */
export const APPLY_LOCK_CHECK_FAILED_COMMENT =
  '**Error:** Failed to check global apply lock. Running `atlantis apply` is not allowed until the lock backend is reachable.';

export type ApplyLockGate =
  | { kind: 'run' }
  /** `failStatus`: the PR's apply status becomes failed too (Atlantis does it only when the check failed). */
  | { kind: 'refuse'; comment: string; failStatus: boolean; log: string; error?: string };

/**
 * Whether an apply may go on. `read`: what the store answered (a lock, none, or the error it
 * threw); undefined when it was not asked (the feature is off).
 */
export function decideApplyLock(disabled: boolean, read: { lock: ApplyLock | undefined } | { error: Error } | undefined): ApplyLockGate {
  if (disabled || read === undefined) return { kind: 'run' };
  if ('error' in read)
    return {
      kind: 'refuse',
      comment: APPLY_LOCK_CHECK_FAILED_COMMENT,
      failStatus: true,
      log: 'Apply refused: the global apply lock could not be checked',
      error: read.error.message,
    };
  if (read.lock)
    return { kind: 'refuse', comment: APPLY_DISABLED_COMMENT, failStatus: false, log: 'Apply refused: applies are disabled globally' };
  return { kind: 'run' };
}

/** Reads the lock (unless the feature is off) and decides. Never throws. */
export async function checkApplyLock(store: StateStore, disabled: boolean): Promise<ApplyLockGate> {
  if (disabled) return decideApplyLock(true, undefined);
  try {
    return decideApplyLock(false, { lock: await store.getApplyLock() });
  } catch (e) {
    return decideApplyLock(false, { error: e as Error });
  }
}
