// The GitHub stand-in's pull requests as the route groups share them (github-standin-pulls.ts,
// -merge.ts, -app.ts), and GitHub's answers they all give; github-standin.ts re-exports them.
import type { StandinProtection } from './github-standin-graphql.js';

export const DOCS_URL = 'https://docs.github.com/rest';

export interface StandinFile {
  filename: string;
  status?: 'added' | 'modified' | 'removed' | 'renamed';
  previous_filename?: string;
}

export interface StandinReview {
  user: string;
  state: 'APPROVED' | 'CHANGES_REQUESTED' | 'COMMENTED' | 'DISMISSED' | 'PENDING';
}

export interface StandinPull {
  number: number;
  headSha: string;
  headRef: string;
  baseRef: string;
  baseSha: string;
  draft: boolean;
  merged: boolean;
  state: 'open' | 'closed';
  /** null: GitHub has not computed it yet. */
  mergeable: boolean | null;
  mergeableState: string;
  user: string;
  title: string;
  files: StandinFile[];
  reviews: StandinReview[];
  /**
   * The head repository when it is not the base one: a fork's `owner/name` (GitHub then gives
   * its own owner, clone_url and `fork: true`), or null for a deleted fork (GitHub's
   * `head.repo: null`). Undefined: the head branch is in the base repository.
   */
  headRepo?: string | null;
  /** clone_url of the fork (default https://github.com/<headRepo>.git). */
  headCloneUrl?: string;
  /** What GraphQL says blocks the PR (branch protection, rulesets, check runs); see github-standin-graphql.ts. */
  protection?: StandinProtection;
  /** Label names (GET .../issues/<n>/labels). */
  labels?: string[];
}

export function notFound(): [number, unknown] {
  return [404, { message: 'Not Found', documentation_url: DOCS_URL }];
}
