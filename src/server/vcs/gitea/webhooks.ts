// Gitea's webhooks behind the host interface (VcsWebhooks): the four headers the server reads,
// the signature (X-Gitea-Signature), and Gitea's events turned into the workflow's. The parsing
// itself is webhook.ts.
import type { PullRequest, VcsEvent, VcsWebhooks, WebhookAnswer, WebhookDelivery, WebhookRequest } from '../host.js';
import { type GiteaHookPull, isWellFormedGiteaSignature, parseGiteaWebhook, verifyGiteaSignature } from './webhook.js';

export const GITEA_EVENT_HEADER = 'x-gitea-event';
export const GITEA_EVENT_TYPE_HEADER = 'x-gitea-event-type';
export const GITEA_DELIVERY_HEADER = 'x-gitea-delivery';
export const GITEA_SIGNATURE_HEADER = 'x-gitea-signature';

/** Atlantis's words for a delivery whose signature is missing or wrong (its status is 400; ours 401, as for GitHub). */
export const GITEA_BAD_SIGNATURE_TEXT = 'request did not pass validation: invalid signature';

/**
 * The X-Gitea-Event-Type values atlantis_webhooks_total names: what a repository webhook with
 * the pull request events sends. Read before the signature is checked, so any other value is
 * `other`: one series, not one per value an unauthenticated sender makes up.
 */
export const GITEA_EVENT_LABELS: readonly string[] = [
  'pull_request',
  'pull_request_sync',
  'pull_request_comment',
  'pull_request_assign',
  'pull_request_label',
  'pull_request_milestone',
  'pull_request_review_approved',
  'pull_request_review_rejected',
  'pull_request_review_comment',
  'pull_request_review_request',
  'issue_comment',
  'push',
];

export function giteaEventLabel(header: string | undefined): string {
  if (header === undefined) return 'unknown';
  return GITEA_EVENT_LABELS.includes(header) ? header : 'other';
}

/** The webhook's pull request as the workflow reads it. */
function pullOf(p: GiteaHookPull): PullRequest & Required<Pick<PullRequest, 'headCloneUrl' | 'baseCloneUrl'>> {
  return {
    repo: p.baseRepo.fullName,
    number: p.number,
    state: p.state === 'open' ? 'open' : 'closed',
    author: p.author,
    headSha: p.headSha,
    headRef: p.headRef,
    baseRef: p.baseRef,
    headRepo: p.headRepo ? p.headRepo.fullName : null,
    baseRepo: p.baseRepo.fullName,
    headCloneUrl: p.headRepo?.cloneUrl ?? p.baseRepo.cloneUrl,
    baseCloneUrl: p.baseRepo.cloneUrl,
  };
}

/**
 * Atlantis autoplans every `pull_request` and `pull_request_sync` delivery of an open pull
 * request (opened, reopened, edited, synchronized: removing `WIP:` from the title is an edit)
 * and cleans up only a merged one. Here a draft is not autoplanned (as --allow-draft-prs is
 * refused) and a pull request closed without merging releases its locks too.
 */
function pullEvent(action: string, p: GiteaHookPull): VcsEvent {
  const pull = pullOf(p);
  if (p.state !== 'open') return { kind: 'pull', action: 'closed', pull, autoplan: false };
  return { kind: 'pull', action: action === 'opened' || action === 'reopened' ? 'opened' : 'updated', pull, autoplan: !p.draft };
}

/** Gitea's webhooks signed with `secret` (undefined: --insecure-no-webhook-secret, nothing is checked). */
export function giteaWebhooks(o: { secret: string | undefined }): VcsWebhooks {
  const { secret } = o;
  const unauthorized: WebhookAnswer = { status: 401, body: GITEA_BAD_SIGNATURE_TEXT };
  return {
    // In this order: the forward's proof covers the event, its type, the delivery and the signature.
    headerNames: [GITEA_EVENT_HEADER, GITEA_EVENT_TYPE_HEADER, GITEA_DELIVERY_HEADER, GITEA_SIGNATURE_HEADER],
    eventName: (h) => h[GITEA_EVENT_TYPE_HEADER] ?? h[GITEA_EVENT_HEADER],
    deliveryId: (h) => h[GITEA_DELIVERY_HEADER],
    eventLabel: (h) => giteaEventLabel(h[GITEA_EVENT_TYPE_HEADER]),
    // Without a well-formed signature a delivery can only be refused: its body is not read.
    ...(secret === undefined
      ? {}
      : {
          refuseBeforeBody: (h: WebhookRequest['headers']) =>
            isWellFormedGiteaSignature(h[GITEA_SIGNATURE_HEADER]) ? undefined : unauthorized,
        }),
    authenticate: (req: WebhookDelivery) =>
      secret === undefined || verifyGiteaSignature(secret, req.rawBody, req.headers[GITEA_SIGNATURE_HEADER]) ? undefined : unauthorized,
    parse(req): VcsEvent {
      const type = req.headers[GITEA_EVENT_TYPE_HEADER];
      if (!req.headers[GITEA_EVENT_HEADER] || !type)
        return { kind: 'answer', status: 400, body: 'missing X-Gitea-Event or X-Gitea-Event-Type header' };
      const ev = parseGiteaWebhook(type, req.rawBody, req.headers[GITEA_DELIVERY_HEADER]);
      if (ev.kind === 'malformed') return { kind: 'answer', status: 400, body: `Failed to parse request body: ${ev.error}` };
      if (ev.kind === 'ignored') return { kind: 'answer', status: 200, body: ev.reason };
      if (ev.kind === 'pull') return pullEvent(ev.action, ev.pull);
      return ev;
    },
  };
}
