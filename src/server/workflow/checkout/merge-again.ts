// --checkout-strategy=merge before a plan (Atlantis's MergeAgain): when the base branch moved
// on, the head is merged into it again. Done once per workspace of the command, before any
// of its projects runs, so no working copy changes under a running terraform (Atlantis holds
// a read lock on the working dir for that); under the checkout lock of that workspace.
import { assertNoEscapingSymlink } from './checkout-paths.js';
import type { KeyedMutex } from '../../../concurrency.js';
import { type CheckoutRequest, type WorkingCopies, checkoutRequest } from './working-copy.js';

/** Per workspace: whether it was merged again, or why that failed (told on its projects). */
export type MergedAgain = Map<string, boolean | Error>;

export async function mergeAgainPerWorkspace(
  copies: WorkingCopies,
  checkoutLock: KeyedMutex,
  pull: Omit<CheckoutRequest, 'workspace'>,
  workspaces: Iterable<string>,
): Promise<MergedAgain> {
  const merge = (ws: string) =>
    checkoutLock.run(`${pull.repo}#${pull.pull}#${ws}`, async () => {
      const merged = await copies.mergeAgain(checkoutRequest(pull, ws));
      // The new base's files are checked as the first checkout's were.
      if (merged) await assertNoEscapingSymlink(copies.dirFor(pull.repo, pull.pull, ws));
      return merged;
    });
  return new Map(await Promise.all([...new Set(workspaces)].map(async (ws) => [ws, await merge(ws).catch((e: Error) => e)] as const)));
}
