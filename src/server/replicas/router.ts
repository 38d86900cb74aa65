// Which replica runs a PR's command when replicas share a store: the PR's owner
// (affinity.ts), so its working copy is reused and one PR's commands meet in one place. A
// webhook that landed elsewhere is handed to the owner and the owner's answer relayed (the
// owner journals the command before it answers, so a 200 means durable there); when the
// owner cannot be reached the webhook is handled here, as if no other replica existed.
//
// With the shared state key, a forward proves where it comes from and the owner's answer
// proves where it comes from (forward-auth.ts): a forward that fails is handled as a direct
// delivery (routed again), an answer without its proof counts as no answer (handled here).
import type { Logger } from '../../log.js';
import type { SharedStateKey } from '../locks/shared-state-key.js';
import type { WebhookResponse } from '../http/app.js';
import type { WebhookRequest } from '../vcs/host.js';
import type { ServerMetrics } from '../metrics.js';
import { type ForwardOutcome, type ReplicaInfo, afterForwardFailure, route } from './affinity.js';
import { forwardWebhook } from './forward.js';
import { FORWARD_ANSWER_HEADER, answerAuth, answerIsAuthentic, checkForwardAuth, forwardAuth } from './forward-auth.js';
import type { ServerConfig } from '../config.js';
import type { StoreParts } from '../locks/store-parts.js';
import type { ReplicaMembership } from './membership.js';

export interface WebhookRouterDeps {
  membership: ReplicaMembership;
  /** This replica's drain has started (the tracker's flag): it owns nothing from then on. */
  isDraining: () => boolean;
  logger: Logger;
  metrics: ServerMetrics;
  /** How old the list of live replicas may be (default 1 s): one Redis round trip per second, not per webhook. */
  refreshMs?: number;
  forwardTimeoutMs?: number;
  /** The replicas' shared state key (Redis); without it there is no other replica to trust. */
  key?: SharedStateKey;
  /** The code host's webhook headers (vcs/host.ts VcsWebhooks.headerNames): sent on, in this order under the forward's proof. */
  headerNames: readonly string[];
}

export class WebhookRouter {
  private live: ReplicaInfo[] = [];
  private liveAt = Number.NEGATIVE_INFINITY;
  private refreshing: Promise<void> | undefined;

  constructor(private readonly d: WebhookRouterDeps) {}

  /**
   * Every webhook that lands here: a forward is checked first (one that fails its proof is
   * handled as a direct delivery), and the answer to a checked one carries this replica's proof.
   */
  async receive(req: WebhookRequest, handle: (req: WebhookRequest) => Promise<WebhookResponse>): Promise<WebhookResponse> {
    if (req.forwardedBy === undefined) return handle(req);
    const { forwardedBy: from, forwardAuth: _auth, ...direct } = req;
    const key = this.d.key;
    const check = key
      ? checkForwardAuth(
          key,
          req.forwardAuth,
          {
            from,
            to: this.d.membership.self.id,
            headers: this.headerValues(req),
            body: req.rawBody,
          },
          Date.now(),
        )
      : ({ ok: false, problem: 'this server shares no state key with other replicas' } as const);
    if (!check.ok) {
      this.d.logger.warn('A webhook marked as forwarded by a replica failed its check: handled as a direct delivery', {
        forwardedBy: from,
        problem: check.problem,
        deliveryId: req.deliveryId,
      });
      return handle(direct);
    }
    const out = await handle(req);
    return {
      ...out,
      headers: { ...(out.headers ?? {}), [FORWARD_ANSWER_HEADER]: answerAuth(key as SharedStateKey, check.nonce, out.status) },
    };
  }

  /** The owner's answer when the webhook went to it; undefined when it is this replica's to handle. */
  async route(pullKey: string, req: WebhookRequest): Promise<WebhookResponse | undefined> {
    const self = { ...this.d.membership.self, draining: this.d.isDraining() };
    const decision = route(pullKey, self, await this.replicas(), req.forwardedBy === undefined ? {} : { forwardedBy: req.forwardedBy });
    if (decision.kind === 'local') return undefined;
    const to = decision.to;
    const key = this.d.key;
    // Only replicas that share the key are ever listed (registry.ts); without one, nothing is forwarded.
    if (!key) return undefined;
    const auth = forwardAuth(key, { from: self.id, to: to.id, headers: this.headerValues(req), body: req.rawBody }, Date.now());
    const sent = await forwardWebhook(
      to.url,
      {
        rawBody: req.rawBody,
        headers: req.headers,
        ...(req.contentType !== undefined ? { contentType: req.contentType } : {}),
      },
      { selfId: self.id, auth: auth.header, ...(this.d.forwardTimeoutMs !== undefined ? { timeoutMs: this.d.forwardTimeoutMs } : {}) },
    );
    // An answer without the owner's proof is no answer: whoever listens there is not a replica.
    const outcome: ForwardOutcome =
      sent.ok && !answerIsAuthentic(key, sent.proof, auth.nonce, sent.status)
        ? { ok: false, failure: 'error', message: `the answer (status ${sent.status}) carries no proof of the shared state key` }
        : sent;
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

  /** The values of the host's webhook headers, in the host's order (the forward's proof covers them). */
  private headerValues(req: WebhookRequest): Array<string | undefined> {
    return this.d.headerNames.map((n) => req.headers[n]);
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

/** The registry and the router of the server's store: Redis shares them with the key, the embedded store has one replica. */
export function openReplication(
  cfg: Pick<ServerConfig, 'store' | 'replicaUrl'>,
  parts: Pick<StoreParts, 'openReplicaRegistry'>,
  d: Pick<WebhookRouterDeps, 'logger' | 'metrics' | 'isDraining' | 'headerNames'> & { onReplicaGone: (gone: ReplicaInfo) => Promise<void> },
): { membership: ReplicaMembership; router: WebhookRouter } {
  const membership = parts.openReplicaRegistry(cfg.replicaUrl, { logger: d.logger, onReplicaGone: d.onReplicaGone });
  const key = cfg.store.type === 'redis' ? { key: cfg.store.redis.sharedStateKey } : {};
  return { membership, router: new WebhookRouter({ ...d, membership, ...key }) };
}
