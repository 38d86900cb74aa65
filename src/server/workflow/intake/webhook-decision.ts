// What to do with one webhook request, decided without I/O: authenticate and parse it (the
// host's part, vcs/host.ts), check the allowlist, parse the comment. The events handler carries the decision out.
import type { ParsedCommand } from '../comment-parser/index.js';
import { parseComment } from '../comment-parser/index.js';
import type { PullContext } from '../commands/context.js';
import type { VcsWebhooks, WebhookDelivery } from '../../vcs/host.js';
import type { RepoAllowlist } from '../../vcs/repo-allowlist.js';
import { type PullRefusal, gatePull } from '../commands/pull-gate.js';

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
  /** The host's webhooks (vcs/host.ts): how a delivery authenticates and what it means. */
  webhooks: Pick<VcsWebhooks, 'authenticate' | 'parse'>;
  allowlist: RepoAllowlist;
  /** The host's name in --repo-allowlist (vcs/host.ts). */
  hostname: string;
  /** The user the server acts as (`@user` starts a command); '' when none. */
  user: string;
  /** Login of the server's own comments when it is not `user`: a GitHub App's `<slug>[bot]`. */
  botLogin?: string | undefined;
  executableName: string;
  allowCommands: readonly string[];
  blockedExtraArgs: readonly string[];
  disableAutoplan: boolean;
  allowForkPrs: boolean;
  silenceForkPrErrors: boolean;
}

export function decideWebhook(req: WebhookDelivery, o: DecisionOptions): WebhookDecision {
  const refused = o.webhooks.authenticate(req);
  if (refused) return { kind: 'respond', ...refused };
  const ev = o.webhooks.parse(req);
  if (ev.kind === 'answer') return { kind: 'respond', status: ev.status, body: ev.body };
  const repo = ev.kind === 'pull' ? ev.pull.repo : ev.repo;
  if (!o.allowlist.isAllowed(repo, o.hostname)) {
    return { kind: 'respond', status: 403, body: `Repo not allowlisted: ${o.hostname}/${repo}` };
  }
  if (ev.kind === 'pull') {
    const pr = ev.pull;
    if (ev.action === 'closed') return { kind: 'close', repo, pull: pr.number };
    if (!ev.autoplan) return { kind: 'respond', status: 200, body: 'Ignoring draft pull request' };
    // Before --disable-autoplan, as Atlantis: a fork PR gets its reply even then.
    const gate = gatePull({ state: pr.state, headRepo: pr.headRepo, baseRepo: pr.baseRepo }, 'autoplan', o);
    if (gate.kind === 'refuse') {
      const body =
        gate.reason === 'fork' ? 'Ignoring pull request from a fork: --allow-fork-prs is not set' : 'Ignoring closed pull request';
      return { kind: 'refuse', repo, pull: pr.number, gate, status: 200, body };
    }
    if (o.disableAutoplan) return { kind: 'respond', status: 200, body: 'Ignoring: autoplan is disabled' };
    return {
      kind: 'work',
      item: {
        kind: 'autoplan',
        ctx: {
          repo,
          pull: pr.number,
          user: pr.author,
          cloneUrl: pr.headCloneUrl,
          baseCloneUrl: pr.baseCloneUrl,
          headSha: pr.headSha,
          headRef: pr.headRef,
          baseRef: pr.baseRef,
          author: pr.author,
          headRepo: pr.headRepo ?? repo,
        },
      },
    };
  }
  // A comment on a pull request
  const parsed = parseComment(ev.body, {
    executableName: o.executableName,
    vcsUser: o.user,
    allowCommands: o.allowCommands,
    blockedExtraArgs: o.blockedExtraArgs,
  });
  const ownLogin = o.botLogin ?? o.user;
  if (ownLogin !== '' && ev.author.toLowerCase() === ownLogin.toLowerCase()) {
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
      commentId: ev.commentId,
    };
  }
  return {
    kind: 'work',
    item: {
      kind: 'comment',
      repo,
      pull: ev.pull,
      user: ev.author,
      cloneUrl: ev.cloneUrl,
      command: parsed.command,
      commentId: ev.commentId,
      commandLine: ev.body.trim(),
    },
  };
}
