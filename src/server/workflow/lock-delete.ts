// Deleting one project lock from the web page, as Atlantis's DELETE /locks?id=...: the lock
// goes, the locking PR's plan of that project goes with it (records and file), the PR's plan
// status marks the project discarded, and the PR is told with Atlantis's warning.
import { rmSync } from 'node:fs';
import type { LockKey, LockRecord, LockStore } from '../locks/store.js';

/** Atlantis's comment on the PR whose lock was deleted from the web page. */
export function lockDiscardedComment(dir: string, workspace: string): string {
  return (
    `**Warning**: The plan for dir: \`${dir}\` workspace: \`${workspace}\` was **discarded** via the Atlantis UI.\n\n` +
    'To `apply` this plan you must run `plan` again.'
  );
}

/** Releases the lock and discards its plan; returns the lock, or undefined when there was none. */
export function discardLock(store: LockStore, key: LockKey): LockRecord | undefined {
  const lock = store.unlock(key);
  if (!lock) return undefined;
  const plan = store.deletePlan(lock.repo, lock.pull, lock.dir, lock.workspace);
  if (plan) rmSync(plan.planPath, { force: true });
  store.markDiscarded(lock.repo, lock.pull, lock.dir, lock.workspace);
  return lock;
}
