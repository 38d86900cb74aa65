// GitHub's webhooks behind the host interface (VcsWebhooks): the three headers the server
// reads, the signature (X-Hub-Signature-256), GitHub's events turned into the workflow's, and
// Atlantis's atlantis_github_event_* series. The parsing itself is webhook.ts.
import { type AtlantisMetrics, countWebhook } from '../../atlantis-metrics.js';
import type { PullRequest, VcsEvent, VcsWebhooks, WebhookAnswer, WebhookDelivery, WebhookRequest } from '../host.js';
import { BAD_SIGNATURE_TEXT, type PullRequestEvent, isWellFormedSignature, parseWebhook, verifySignature } from './webhook.js';

export const EVENT_HEADER = 'x-github-event';
export const DELIVERY_HEADER = 'x-github-delivery';
export const SIGNATURE_HEADER = 'x-hub-signature-256';

/**
 * The `X-GitHub-Event` values atlantis_webhooks_total names: the events the server handles and
 * those GitHub sends to an Atlantis webhook set up as its docs say. The header is read before
 * the signature is checked, so any other value is `other`: one series, not one per value an
 * unauthenticated sender makes up.
 */
export const WEBHOOK_EVENT_LABELS: readonly string[] = ['issue_comment', 'pull_request', 'pull_request_review', 'push', 'ping'];

/** The `event` label for an `X-GitHub-Event` header: a known name, `unknown` when absent, else `other`. */
export function webhookEventLabel(header: string | undefined): string {
  if (header === undefined) return 'unknown';
  return WEBHOOK_EVENT_LABELS.includes(header) ? header : 'other';
}

/** The pull request of a pull_request event, as the workflow reads it. */
function pullOf(ev: PullRequestEvent): PullRequest & Required<Pick<PullRequest, 'headCloneUrl' | 'baseCloneUrl'>> {
  const pr = ev.pull_request;
  const repo = ev.repository.full_name;
  return {
    repo,
    number: ev.number,
    state: pr.state === 'open' ? 'open' : 'closed',
    author: pr.user.login,
    headSha: pr.head.sha,
    headRef: pr.head.ref,
    baseRef: pr.base.ref,
    headRepo: pr.head.repo ? pr.head.repo.full_name : null,
    baseRepo: pr.base.repo ? pr.base.repo.full_name : repo,
    headCloneUrl: pr.head.repo?.clone_url ?? ev.repository.clone_url,
    baseCloneUrl: ev.repository.clone_url,
  };
}

/** GitHub's webhooks signed with `secret` (undefined: --insecure-no-webhook-secret, nothing is checked). */
export function githubWebhooks(o: { secret: string | undefined; metrics?: AtlantisMetrics }): VcsWebhooks {
  const { secret } = o;
  const authentic = (req: WebhookDelivery): boolean =>
    secret === undefined || verifySignature(secret, req.rawBody, req.headers[SIGNATURE_HEADER]);
  const unauthorized: WebhookAnswer = { status: 401, body: BAD_SIGNATURE_TEXT };
  return {
    // In this order: the forward's proof covers the event, the delivery and the signature (forward-auth.ts).
    headerNames: [EVENT_HEADER, DELIVERY_HEADER, SIGNATURE_HEADER],
    eventName: (h) => h[EVENT_HEADER],
    deliveryId: (h) => h[DELIVERY_HEADER],
    eventLabel: (h) => webhookEventLabel(h[EVENT_HEADER]),
    // Without a well-formed signature a delivery can only be refused: its body is not read.
    ...(secret === undefined
      ? {}
      : { refuseBeforeBody: (h: WebhookRequest['headers']) => (isWellFormedSignature(h[SIGNATURE_HEADER]) ? undefined : unauthorized) }),
    authenticate: (req) => (authentic(req) ? undefined : unauthorized),
    parse(req): VcsEvent {
      const event = req.headers[EVENT_HEADER];
      if (!event) return { kind: 'answer', status: 400, body: 'missing X-GitHub-Event header' };
      const ev = parseWebhook(event, req.rawBody, req.headers[DELIVERY_HEADER]);
      if (ev.kind === 'malformed') return { kind: 'answer', status: 400, body: `Failed parsing webhook: ${ev.error}` };
      if (ev.kind === 'ignored') return { kind: 'answer', status: 200, body: `Ignoring ${ev.event} event: ${ev.reason}` };
      if (ev.kind === 'pull_request') {
        const action = ev.action === 'closed' ? 'closed' : ev.action === 'opened' ? 'opened' : 'updated';
        return { kind: 'pull', action, pull: pullOf(ev), autoplan: ev.autoplan };
      }
      return {
        kind: 'comment',
        repo: ev.repository.full_name,
        pull: ev.pull,
        cloneUrl: ev.repository.clone_url,
        commentId: ev.comment.id,
        body: ev.comment.body,
        author: ev.comment.user.login,
      };
    },
    ...(o.metrics
      ? {
          tally: (req, status) =>
            countWebhook(
              o.metrics as AtlantisMetrics,
              { event: req.headers[EVENT_HEADER], signature: req.headers[SIGNATURE_HEADER], rawBody: req.rawBody },
              status,
              () => authentic(req),
            ),
        }
      : {}),
  };
}
