// The GitHub client's public types: what it returns (comments, statuses, pull requests,
// approvals, merge settings), its options, its error, and the allowlist host of a base URL.
// client.ts re-exports them, so callers import from there.
import type { Logger } from '../../../log.js';
import type { Redactor } from '../../secrets/redact.js';

export type ReactionContent = '+1' | '-1' | 'laugh' | 'confused' | 'heart' | 'hooray' | 'rocket' | 'eyes';
export type CommitState = 'pending' | 'success' | 'failure' | 'error';

export interface CommitStatus {
  state: CommitState;
  /** e.g. `atlantis/plan`, `atlantis/apply`, `atlantis/plan: dir/default` */
  context: string;
  description?: string;
  targetUrl?: string;
}

export interface CreatedComment {
  id: number;
  htmlUrl?: string;
}

/** A PR conversation comment, as --hide-prev-plan-comments needs it. */
export interface IssueComment {
  id: number;
  /** GraphQL global id (REST `node_id`). */
  nodeId: string;
  /** null when GitHub gives no user (a deleted account). */
  login: string | null;
  body: string;
}

export interface PullInfo {
  number: number;
  state: string;
  draft: boolean;
  merged: boolean;
  /** null while GitHub is still computing it. */
  mergeable: boolean | null;
  mergeableState: string;
  headSha: string;
  headRef: string;
  baseRef: string;
  /** Clone URL of the head repo (a fork's URL for PRs from forks). */
  headCloneUrl?: string;
  baseCloneUrl?: string;
  /** `owner/name` of the head repository; null when GitHub has none (a deleted fork). */
  headRepo: string | null;
  /** `owner/name` of the base repository (undefined if GitHub left it out). */
  baseRepo?: string;
  user: string;
}

/** Which merge methods a repository allows (false when GitHub leaves a setting out, as go-github reads it). */
export interface RepoMergeSettings {
  allowMergeCommit: boolean;
  allowRebaseMerge: boolean;
  allowSquashMerge: boolean;
}

export interface Approval {
  approved: boolean;
  approvedBy: string[];
}

export interface RetryOptions {
  /** Total attempts including the first. */
  maxAttempts?: number;
  baseDelayMs?: number;
  maxDelayMs?: number;
  /** A rate limit asking for a longer wait than this fails at once instead. */
  maxRateLimitWaitMs?: number;
}

export interface GitHubClientOptions {
  /** Default https://api.github.com. GitHub Enterprise: https://HOST/api/v3. */
  baseUrl?: string;
  token: string | (() => string | Promise<string>);
  /** `token` (default; personal tokens) or `Bearer` (GitHub App installation tokens). */
  authScheme?: 'token' | 'Bearer';
  userAgent?: string;
  logger?: Logger;
  retry?: RetryOptions;
  /** Per attempt. */
  timeoutMs?: number;
  sleep?: (ms: number) => Promise<void>;
  random?: () => number;
  /** Scrubs what we write; default: the process's (every server's secrets, and our token). */
  redactor?: Redactor;
  /** --max-comments-per-command: a longer output loses its start (0: no limit; default 100). */
  maxCommentsPerCommand?: number;
  /**
   * GitHub answered 401 to `token`: called, then the request is sent once more with whatever
   * `token()` gives next (a GitHub App installation token that was revoked or expired early).
   */
  tokenRejected?: (token: string) => void;
}

export class GitHubApiError extends Error {
  constructor(
    readonly method: string,
    readonly path: string,
    readonly status: number,
    readonly githubMessage: string,
    readonly documentationUrl?: string,
    readonly details?: unknown,
  ) {
    super(`GitHub API ${method} ${path}: ${status === 0 ? 'no response' : status} ${githubMessage}`.trim());
    this.name = 'GitHubApiError';
  }

  /** No answer, and the request surely never reached GitHub (connection refused). */
  notSent = false;
}

/** Host to use in `--repo-allowlist` matching for a client base URL. */
export function hostForBaseUrl(baseUrl: string): string {
  const u = new URL(baseUrl);
  return u.hostname === 'api.github.com' ? 'github.com' : u.host;
}
