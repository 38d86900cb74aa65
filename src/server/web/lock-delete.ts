// Deleting one project lock from the web page, as Atlantis's DELETE /locks?id=...: the lock
// goes, the locking PR's plan of that project goes with it (records and file), the PR's plan
// status marks the project discarded, and the PR is told with Atlantis's warning.
import { rmSync } from 'node:fs';
import type { LockKey, LockRecord, StateStore } from '../locks/state-store.js';

/** Atlantis's comment on the PR whose lock was deleted from the web page. */
export function lockDiscardedComment(dir: string, workspace: string): string {
  return (
    `**Warning**: The plan for dir: \`${dir}\` workspace: \`${workspace}\` was **discarded** via the Atlantis UI.\n\n` +
    'To `apply` this plan you must run `plan` again.'
  );
}

/** Releases the lock and discards its plan; returns the lock, or undefined when there was none. */
export async function discardLock(store: StateStore, key: LockKey): Promise<LockRecord | undefined> {
  // Three store calls, not one change: another command may run between them. The lock goes
  // first, so nothing planned after this can be the plan of a lock that is gone; a plan of
  // the locking PR that lands in between is deleted or marked discarded, as if it had been
  // saved just before (a discarded status only ever makes the PR plan again).
  const lock = await store.unlock(key);
  if (!lock) return undefined;
  const plan = await store.deletePlan(lock.repo, lock.pull, lock.dir, lock.workspace);
  if (plan) rmSync(plan.planPath, { force: true });
  await store.markDiscarded(lock.repo, lock.pull, lock.dir, lock.workspace);
  return lock;
}
