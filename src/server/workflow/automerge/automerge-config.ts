// The automerge settings checked at start (--automerge-method) against the merge methods
// Atlantis knows (vcs/host.ts). A leaf: config.ts reads it without the rest of automerge.ts.
import { MERGE_METHODS } from '../../vcs/host.js';

/** --automerge-method's check at start, Atlantis's words (Go prints the list as `[a b c]`). */
export function automergeMethodProblem(method: string): string | undefined {
  if (method === '' || (MERGE_METHODS as readonly string[]).includes(method)) return undefined;
  return `invalid --automerge-method: must be one of [${MERGE_METHODS.join(' ')}]`;
}
