// Which replica runs a PR's command when replicas share a store: the PR's owner
// (affinity.ts), so its working copy is reused and one PR's commands meet in one place. A
// webhook that landed elsewhere is handed to the owner and the owner's answer relayed (the
// owner journals the command before it answers, so a 200 means durable there); when the
// owner cannot be reached the webhook is handled here, as if no other replica existed.
import type { Logger } from '../../log.js';
import type { WebhookRequest, WebhookResponse } from '../http/app.js';
import type { ServerMetrics } from '../metrics.js';
import { type ReplicaInfo, afterForwardFailure, route } from './affinity.js';
import { forwardWebhook } from './forward.js';
import type { ReplicaMembership } from './registry.js';

export interface WebhookRouterDeps {
  membership: ReplicaMembership;
  /** This replica's drain has started (the tracker's flag): it owns nothing from then on. */
  isDraining: () => boolean;
  logger: Logger;
  metrics: ServerMetrics;
  /** How old the list of live replicas may be (default 1 s): one Redis round trip per second, not per webhook. */
  refreshMs?: number;
  forwardTimeoutMs?: number;
}

export class WebhookRouter {
  private live: ReplicaInfo[] = [];
  private liveAt = Number.NEGATIVE_INFINITY;
  private refreshing: Promise<void> | undefined;

  constructor(private readonly d: WebhookRouterDeps) {}

  /** The owner's answer when the webhook went to it; undefined when it is this replica's to handle. */
  async route(pullKey: string, req: WebhookRequest): Promise<WebhookResponse | undefined> {
    const self = { ...this.d.membership.self, draining: this.d.isDraining() };
    const decision = route(pullKey, self, await this.replicas(), req.forwardedBy === undefined ? {} : { forwardedBy: req.forwardedBy });
    if (decision.kind === 'local') return undefined;
    const to = decision.to;
    const outcome = await forwardWebhook(
      to.url,
      {
        rawBody: req.rawBody,
        ...(req.event !== undefined ? { event: req.event } : {}),
        ...(req.deliveryId !== undefined ? { deliveryId: req.deliveryId } : {}),
        ...(req.signature !== undefined ? { signature: req.signature } : {}),
        ...(req.contentType !== undefined ? { contentType: req.contentType } : {}),
      },
      { selfId: self.id, ...(this.d.forwardTimeoutMs !== undefined ? { timeoutMs: this.d.forwardTimeoutMs } : {}) },
    );
    const next = afterForwardFailure(outcome);
    if (next.kind === 'relay') {
      this.d.metrics.webhooksForwarded.inc({ result: 'relayed' });
      this.d.logger.info('Webhook handed to the replica that owns the pull request', {
        pullKey,
        owner: to.id,
        status: next.status,
        deliveryId: req.deliveryId,
      });
      return { status: next.status, body: next.body };
    }
    this.d.metrics.webhooksForwarded.inc({ result: 'handled_here' });
    this.d.logger.warn('Could not hand the webhook to the replica that owns the pull request; handling it here', {
      pullKey,
      owner: to.id,
      reason: next.reason,
      error: outcome.ok ? `status ${outcome.status}` : outcome.message,
      deliveryId: req.deliveryId,
    });
    this.invalidate();
    return undefined;
  }

  /** The next route() reads the list again (a forward failed: the owner may be gone). */
  invalidate(): void {
    this.liveAt = Number.NEGATIVE_INFINITY;
  }

  /** The live replicas, at most refreshMs old; on a failed read the last list (self alone at first). */
  private async replicas(): Promise<ReplicaInfo[]> {
    if (Date.now() - this.liveAt > (this.d.refreshMs ?? 1000)) {
      this.refreshing ??= this.d.membership
        .list()
        .then(
          (l) => {
            this.live = l;
          },
          (e: Error) => this.d.logger.warn('Could not read the live replicas; using the last list', { error: e.message }),
        )
        .finally(() => {
          this.liveAt = Date.now();
          this.refreshing = undefined;
        });
      await this.refreshing;
    }
    return this.live;
  }
}
