// Which pull requests a command may run on (src/server/workflow/pull-gate.ts), as
// Atlantis decides it: fork PRs only with --allow-fork-prs (a reply unless
// --silence-fork-pr-errors), closed PRs for unlock only. Pure: gatePull, and decideWebhook on
// pull_request payloads shaped like GitHub's (test/support/github-standin.ts).
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { describe, it } from 'node:test';
import { CLOSED_PR_COMMENT, FORK_PR_COMMENT } from '../src/server/workflow/pr/messages.js';
import { type PullFacts, gatePull } from '../src/server/workflow/commands/pull-gate.js';
import { type DecisionOptions, type WebhookDecision, decideWebhook } from '../src/server/workflow/intake/webhook-decision.js';
import { parseRepoAllowlist } from '../src/server/vcs/repo-allowlist.js';
import { type PullRequestPayloadOptions, githubDelivery, pullRequestPayload } from './support/github-standin.js';
import { githubWebhooks } from '../src/server/vcs/github/webhooks.js';

const OPEN: PullFacts = { state: 'open', headRepo: 'acme/infra', baseRepo: 'acme/infra' };
const FORK: PullFacts = { state: 'open', headRepo: 'mallory/infra', baseRepo: 'acme/infra' };
const flags = (allowForkPrs = false, silenceForkPrErrors = false) => ({ allowForkPrs, silenceForkPrErrors });

describe('gatePull', () => {
  type Want = 'run' | 'fork (comment)' | 'fork (silent)' | 'closed (comment)';
  const rows: Array<[string, PullFacts, string, ReturnType<typeof flags>, Want]> = [
    ['same repo, open', OPEN, 'plan', flags(), 'run'],
    ['same repo, open, autoplan', OPEN, 'autoplan', flags(), 'run'],
    ['fork, open', FORK, 'plan', flags(), 'fork (comment)'],
    ['fork, autoplan', FORK, 'autoplan', flags(), 'fork (comment)'],
    ['fork, unlock (forks are refused for every command)', FORK, 'unlock', flags(), 'fork (comment)'],
    ['fork, silenced', FORK, 'apply', flags(false, true), 'fork (silent)'],
    ['fork, allowed', FORK, 'plan', flags(true), 'run'],
    ['fork, allowed and silenced', FORK, 'plan', flags(true, true), 'run'],
    ['deleted fork (no head repo)', { ...FORK, headRepo: null }, 'plan', flags(), 'fork (comment)'],
    ['deleted fork, allowed', { ...FORK, headRepo: null }, 'plan', flags(true), 'run'],
    // Atlantis compares owners: another repo of the same owner is not a fork.
    ['same owner, other repo', { ...OPEN, headRepo: 'acme/infra-copy' }, 'plan', flags(), 'run'],
    ['other owner, same repo name', { ...OPEN, headRepo: 'acme-evil/infra' }, 'plan', flags(), 'fork (comment)'],
    ['owner prefix is not the owner', { ...OPEN, headRepo: 'acm/infra' }, 'plan', flags(), 'fork (comment)'],
    ['owners compared as GitHub writes them', { ...OPEN, headRepo: 'ACME/infra' }, 'plan', flags(), 'fork (comment)'],
    ['closed, plan', { ...OPEN, state: 'closed' }, 'plan', flags(), 'closed (comment)'],
    ['closed, apply', { ...OPEN, state: 'closed' }, 'apply', flags(), 'closed (comment)'],
    ['closed, version', { ...OPEN, state: 'closed' }, 'version', flags(), 'closed (comment)'],
    ['closed, autoplan', { ...OPEN, state: 'closed' }, 'autoplan', flags(), 'closed (comment)'],
    ['closed, unlock runs', { ...OPEN, state: 'closed' }, 'unlock', flags(), 'run'],
    ['any state but open counts as closed', { ...OPEN, state: 'merged' }, 'plan', flags(), 'closed (comment)'],
    ['closed fork: the fork reply comes first', { ...FORK, state: 'closed' }, 'plan', flags(), 'fork (comment)'],
    ['closed fork, silenced: nothing is said', { ...FORK, state: 'closed' }, 'plan', flags(false, true), 'fork (silent)'],
    ['closed fork, allowed: closed', { ...FORK, state: 'closed' }, 'plan', flags(true), 'closed (comment)'],
  ];
  for (const [what, pull, command, o, want] of rows) {
    it(what, () => {
      const g = gatePull(pull, command, o);
      const got: Want =
        g.kind === 'run'
          ? 'run'
          : g.reason === 'closed'
            ? 'closed (comment)'
            : g.comment === undefined
              ? 'fork (silent)'
              : 'fork (comment)';
      assert.equal(got, want);
      if (g.kind === 'refuse') {
        assert.equal(g.comment, g.reason === 'closed' ? CLOSED_PR_COMMENT : g.comment === undefined ? undefined : FORK_PR_COMMENT);
        assert.match(g.log, g.reason === 'fork' ? /fork/ : /closed/);
      }
    });
  }

  it("the replies are Atlantis's texts", () => {
    assert.equal(
      FORK_PR_COMMENT,
      "Atlantis commands can't be run on fork pull requests. To enable, set --allow-fork-prs  or, to disable this message, set --silence-fork-pr-errors",
    );
    assert.equal(CLOSED_PR_COMMENT, "Atlantis commands can't be run on closed pull requests");
  });
});

describe('decideWebhook on pull_request events from forks', () => {
  const options = (o: Partial<DecisionOptions> = {}): DecisionOptions => ({
    webhooks: githubWebhooks({ secret: undefined }),
    allowlist: parseRepoAllowlist('github.com/acme/*'),
    hostname: 'github.com',
    user: 'atlantis-bot',
    executableName: 'atlantis',
    allowCommands: ['plan', 'apply', 'unlock', 'version'],
    blockedExtraArgs: [],
    disableAutoplan: false,
    allowForkPrs: false,
    silenceForkPrErrors: false,
    ...o,
  });
  const decide = (p: Partial<PullRequestPayloadOptions>, o: Partial<DecisionOptions> = {}): WebhookDecision =>
    decideWebhook(
      githubDelivery({
        event: 'pull_request',
        signature: undefined,
        deliveryId: crypto.randomUUID(),
        rawBody: Buffer.from(
          JSON.stringify(pullRequestPayload({ repo: 'acme/infra', action: 'opened', number: 7, headSha: 'a'.repeat(40), ...p })),
        ),
      }),
      options(o),
    );
  type Want = 'autoplan' | 'refuse fork (comment)' | 'refuse fork (silent)' | 'close' | 'ignore';
  const summary = (d: WebhookDecision): Want | string => {
    if (d.kind === 'work') return d.item.kind;
    if (d.kind === 'refuse') return `refuse ${d.gate.reason} (${d.gate.comment === undefined ? 'silent' : 'comment'})`;
    if (d.kind === 'close') return 'close';
    if (d.kind === 'respond' && d.status === 200) return 'ignore';
    return `${d.kind} ${JSON.stringify(d)}`;
  };
  const rows: Array<[string, Partial<PullRequestPayloadOptions>, Partial<DecisionOptions>, Want]> = [
    ['opened, same repo', {}, {}, 'autoplan'],
    ['opened from a fork', { headRepo: 'mallory/infra' }, {}, 'refuse fork (comment)'],
    ['synchronize from a fork', { action: 'synchronize', headRepo: 'mallory/infra' }, {}, 'refuse fork (comment)'],
    ['ready_for_review from a fork', { action: 'ready_for_review', headRepo: 'mallory/infra' }, {}, 'refuse fork (comment)'],
    ['opened from a deleted fork', { headRepo: null }, {}, 'refuse fork (comment)'],
    ['opened from a fork, silenced', { headRepo: 'mallory/infra' }, { silenceForkPrErrors: true }, 'refuse fork (silent)'],
    ['opened from a fork, allowed', { headRepo: 'mallory/infra' }, { allowForkPrs: true }, 'autoplan'],
    // As Atlantis: the fork check comes before --disable-autoplan, and drafts are ignored first.
    ['opened from a fork, autoplan disabled', { headRepo: 'mallory/infra' }, { disableAutoplan: true }, 'refuse fork (comment)'],
    ['draft from a fork', { headRepo: 'mallory/infra', draft: true }, {}, 'ignore'],
    // Closing a fork's PR still releases whatever it holds.
    ['closed from a fork', { action: 'closed', headRepo: 'mallory/infra' }, {}, 'close'],
  ];
  for (const [what, p, o, want] of rows) it(what, () => assert.equal(summary(decide(p, o)), want));

  it('an allowed fork PR is cloned from the fork', () => {
    const d = decide({ headRepo: 'mallory/infra', headCloneUrl: 'https://github.com/mallory/infra.git' }, { allowForkPrs: true });
    assert.ok(d.kind === 'work' && d.item.kind === 'autoplan');
    assert.equal(d.item.ctx.cloneUrl, 'https://github.com/mallory/infra.git');
  });
});
