// Which pull requests a command may run on, as Atlantis checks it before running anything:
// forks only with --allow-fork-prs, closed pull requests for unlock only. Pure; the facts come
// from a webhook or from the host's answer.
import { CLOSED_PR_COMMENT, FORK_PR_COMMENT } from '../pr/messages.js';

/** What decides whether a command may run on a pull request, from a webhook or GitHub's API. */
export interface PullFacts {
  /** `open` or `closed`, as GitHub says. */
  state: string;
  /** `owner/name` of the head repository; null when GitHub has none (the fork was deleted). */
  headRepo: string | null;
  /** `owner/name` of the base repository. */
  baseRepo: string;
}

export type PullRefusal = {
  kind: 'refuse';
  reason: 'fork' | 'closed';
  /** The log line's message. */
  log: string;
  /** The PR comment; undefined when silenced. */
  comment: string | undefined;
};

export type PullGate = { kind: 'run' } | PullRefusal;

/** --allow-fork-prs and --silence-fork-pr-errors. */
export interface PullGateOptions {
  allowForkPrs: boolean;
  silenceForkPrErrors: boolean;
}

/** `owner` of `owner/name`, as Atlantis splits a full name (at the last slash). */
function ownerOf(fullName: string): string {
  return fullName.slice(0, Math.max(0, fullName.lastIndexOf('/')));
}

/**
 * Whether `command` (a comment command's name, or `autoplan`) may run on the pull request, as
 * Atlantis checks it before running anything: a PR whose head repository has another owner
 * than the base (a fork) is refused unless --allow-fork-prs, with a comment unless
 * --silence-fork-pr-errors; a PR that is not open is refused for every command but unlock,
 * with a comment. A deleted fork (no head repository) counts as a fork: nothing says whose it
 * was.
 */
export function gatePull(pull: PullFacts, command: string, o: PullGateOptions): PullGate {
  const fork = pull.headRepo === null || ownerOf(pull.headRepo) !== ownerOf(pull.baseRepo);
  if (fork && !o.allowForkPrs) {
    return {
      kind: 'refuse',
      reason: 'fork',
      log: 'Refused a command on a pull request from a fork',
      comment: o.silenceForkPrErrors ? undefined : FORK_PR_COMMENT,
    };
  }
  if (pull.state !== 'open' && command !== 'unlock') {
    return { kind: 'refuse', reason: 'closed', log: 'Refused a command on a closed pull request', comment: CLOSED_PR_COMMENT };
  }
  return { kind: 'run' };
}
