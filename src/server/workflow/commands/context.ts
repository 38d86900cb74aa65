// What a command of a pull request is run with: the pull request as the server knows it when
// the command starts, and the request (autoplan, or a comment's command) the runner takes.
import type { ParsedCommand } from '../comment-parser/index.js';
import type { ProjectRun } from './project-runs.js';
import type { CheckoutStrategy } from '../checkout/working-copy.js';
import type { HostRequirementFacts } from '../../vcs/host.js';

/** What the server knows about a pull request when a command starts. */
export interface PullContext {
  repo: string;
  pull: number;
  /** Who asked (comment author, or PR author for autoplan). */
  user: string;
  cloneUrl: string;
  /** The base repository's clone URL (--checkout-strategy=merge); default cloneUrl. */
  baseCloneUrl?: string;
  headSha: string;
  headRef: string;
  baseRef: string;
  /** The PR's author and head repository (`owner/name`), when known (hook env). */
  author?: string;
  headRepo?: string;
  /** A run of POST /api/plan or /api/apply: no PR comment, the results are collected here. */
  api?: ApiRun;
  /** Overrides --checkout-strategy (a run of the API without a pull request checks out its ref). */
  strategy?: CheckoutStrategy;
  /** Approval and mergeability as the host said them when the command started (VcsHost.requirementFacts), when it reads them so. */
  hostFacts?: HostRequirementFacts | undefined;
}

/**
 * What an API run (workflow/commands/api-command.ts) gets back instead of the result comment: each
 * command's project results, and the error that stopped a command before or between its
 * projects (the comment's "**Plan Error**").
 */
export interface ApiRun {
  runs: ProjectRun[];
  error?: string;
}

export type CommandRequest =
  | { kind: 'autoplan'; ctx: PullContext }
  | { kind: 'comment'; ctx: PullContext; command: ParsedCommand; commentId?: number };
