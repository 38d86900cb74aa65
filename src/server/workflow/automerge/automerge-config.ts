// The automerge settings checked at start (--automerge-method): the merge methods Atlantis
// knows. A leaf: config.ts reads it without the rest of automerge.ts.

export const MERGE_METHODS = ['merge', 'rebase', 'squash'] as const;
export type MergeMethod = (typeof MERGE_METHODS)[number];

/** --automerge-method's check at start, Atlantis's words (Go prints the list as `[a b c]`). */
export function automergeMethodProblem(method: string): string | undefined {
  if (method === '' || (MERGE_METHODS as readonly string[]).includes(method)) return undefined;
  return `invalid --automerge-method: must be one of [${MERGE_METHODS.join(' ')}]`;
}
