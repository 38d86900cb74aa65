// What to do with one webhook request, decided without I/O: authenticate, parse, check the
// allowlist, parse the comment. The events handler carries the decision out.
import type { ParsedCommand } from '../comment-parser/index.js';
import { parseComment } from '../comment-parser/index.js';
import type { PullContext } from '../commands/context.js';
import type { RepoAllowlist } from '../../vcs/repo-allowlist.js';
import { BAD_SIGNATURE_TEXT, type PullRequestEvent, parseWebhook, verifySignature } from '../../vcs/github/webhook.js';
import { type PullFacts, type PullRefusal, gatePull } from '../commands/pull-gate.js';

/** A unit of work that becomes one operation (and can be queued during a drain). */
export type WorkItem =
  | { kind: 'autoplan'; ctx: PullContext }
  | {
      kind: 'comment';
      repo: string;
      pull: number;
      user: string;
      cloneUrl: string;
      command: ParsedCommand;
      commentId: number;
      commandLine: string;
    };

export type WebhookDecision =
  | { kind: 'respond'; status: number; body: string }
  /** Post `body` on the PR and run nothing (help, usage, parse errors). */
  | { kind: 'reply'; repo: string; pull: number; body: string; status: number; responseBody: string; commentId?: number }
  | { kind: 'work'; item: WorkItem }
  /** PR closed: release its locks and plans, delete its working copies. */
  | { kind: 'close'; repo: string; pull: number }
  /** A command the PR may not run (see gatePull): log `log`, post `comment` if any, run nothing. */
  | { kind: 'refuse'; repo: string; pull: number; gate: PullRefusal; status: number; body: string };

export interface DecisionOptions {
  webhookSecret: string | undefined;
  allowlist: RepoAllowlist;
  ghHostname: string;
  ghUser: string;
  /** Login of the server's own comments when it is not ghUser: a GitHub App's `<slug>[bot]`. */
  botLogin?: string | undefined;
  executableName: string;
  allowCommands: readonly string[];
  blockedExtraArgs: readonly string[];
  disableAutoplan: boolean;
  allowForkPrs: boolean;
  silenceForkPrErrors: boolean;
}

export interface IncomingWebhook {
  event: string | undefined;
  signature: string | undefined;
  deliveryId: string | undefined;
  rawBody: Buffer;
}

export function decideWebhook(req: IncomingWebhook, o: DecisionOptions): WebhookDecision {
  if (o.webhookSecret !== undefined && !verifySignature(o.webhookSecret, req.rawBody, req.signature)) {
    return { kind: 'respond', status: 401, body: BAD_SIGNATURE_TEXT };
  }
  if (!req.event) return { kind: 'respond', status: 400, body: 'missing X-GitHub-Event header' };
  const ev = parseWebhook(req.event, req.rawBody, req.deliveryId);
  if (ev.kind === 'malformed') return { kind: 'respond', status: 400, body: `Failed parsing webhook: ${ev.error}` };
  if (ev.kind === 'ignored') return { kind: 'respond', status: 200, body: `Ignoring ${ev.event} event: ${ev.reason}` };
  const repo = ev.repository.full_name;
  if (!o.allowlist.isAllowed(repo, o.ghHostname)) {
    return { kind: 'respond', status: 403, body: `Repo not allowlisted: ${o.ghHostname}/${repo}` };
  }
  if (ev.kind === 'pull_request') {
    const pr = ev.pull_request;
    if (ev.action === 'closed') return { kind: 'close', repo, pull: ev.number };
    if (!ev.autoplan) return { kind: 'respond', status: 200, body: 'Ignoring draft pull request' };
    // Before --disable-autoplan, as Atlantis: a fork PR gets its reply even then.
    const gate = gatePull(pullFactsOf(ev), 'autoplan', o);
    if (gate.kind === 'refuse') {
      const body =
        gate.reason === 'fork' ? 'Ignoring pull request from a fork: --allow-fork-prs is not set' : 'Ignoring closed pull request';
      return { kind: 'refuse', repo, pull: ev.number, gate, status: 200, body };
    }
    if (o.disableAutoplan) return { kind: 'respond', status: 200, body: 'Ignoring: autoplan is disabled' };
    return {
      kind: 'work',
      item: {
        kind: 'autoplan',
        ctx: {
          repo,
          pull: ev.number,
          user: pr.user.login,
          cloneUrl: pr.head.repo?.clone_url ?? ev.repository.clone_url,
          baseCloneUrl: ev.repository.clone_url,
          headSha: pr.head.sha,
          headRef: pr.head.ref,
          baseRef: pr.base.ref,
          author: pr.user.login,
          headRepo: pr.head.repo?.full_name ?? repo,
        },
      },
    };
  }
  // issue_comment on a pull request
  const parsed = parseComment(ev.comment.body, {
    executableName: o.executableName,
    ghUser: o.ghUser,
    allowCommands: o.allowCommands,
    blockedExtraArgs: o.blockedExtraArgs,
  });
  const ownLogin = o.botLogin ?? o.ghUser;
  if (ownLogin !== '' && ev.comment.user.login.toLowerCase() === ownLogin.toLowerCase()) {
    return { kind: 'respond', status: 200, body: 'Ignoring comment from our own user' };
  }
  if (parsed.kind === 'ignore') return { kind: 'respond', status: 200, body: 'Ignoring non-command comment' };
  if (parsed.kind === 'reply') {
    return {
      kind: 'reply',
      repo,
      pull: ev.pull,
      body: parsed.body,
      status: 200,
      responseBody: parsed.error ? 'Commenting back on pull request: invalid command' : 'Commenting back on pull request',
      commentId: ev.comment.id,
    };
  }
  return {
    kind: 'work',
    item: {
      kind: 'comment',
      repo,
      pull: ev.pull,
      user: ev.comment.user.login,
      cloneUrl: ev.repository.clone_url,
      command: parsed.command,
      commentId: ev.comment.id,
      commandLine: ev.comment.body.trim(),
    },
  };
}

/** PullFacts of a pull_request event: the head and base repositories of its pull_request. */
export function pullFactsOf(ev: PullRequestEvent): PullFacts {
  const pr = ev.pull_request;
  return {
    state: pr.state,
    headRepo: pr.head.repo ? pr.head.repo.full_name : null,
    baseRepo: pr.base.repo ? pr.base.repo.full_name : ev.repository.full_name,
  };
}
