// What the HTTP surface (app.ts, express-app.ts) is given by the server, apart from the code
// that answers, so that both read one definition.
import type express from 'express';
import type { Logger } from '../../log.js';
import type { DrainState } from '../drain/drain-state.js';
import type { OperationTracker } from '../drain/operation-tracker.js';
import type { ServerMetrics } from '../metrics.js';
import type { VcsWebhooks, WebhookRequest } from '../vcs/host.js';
import type { AllowedHosts } from './allowed-hosts.js';
import type { TurnQueue } from './turn-queue.js';
import type { WebAuthConfig } from './web-auth.js';

/** What the HTTP surface reads of the host's webhooks (vcs/host.ts): their headers, before any body. */
export type WebhookHeaders = Pick<VcsWebhooks, 'headerNames' | 'eventName' | 'deliveryId' | 'eventLabel' | 'refuseBeforeBody'>;

export interface WebhookResponse {
  status: number;
  body: string;
  /** More response headers (the answer's proof to a forwarding replica). */
  headers?: Record<string, string>;
}

export interface AppDeps {
  tracker: OperationTracker;
  drainState: () => DrainState;
  metrics: ServerMetrics;
  logger: Logger;
  /** Whether the lock store answers; /readyz fails when it does not. */
  storeHealthy: () => Promise<boolean>;
  /** --queue-during-drain: a draining server stays ready (readiness.ts). */
  queueDuringDrain?: boolean;
  /** POST /events; absent until the workflow is wired. */
  onWebhook?: (req: WebhookRequest) => Promise<WebhookResponse>;
  /** Where webhook handlers wait for their turn (see turn-queue.ts); the server awaits it on close. */
  webhookQueue: TurnQueue;
  /**
   * The code host's webhook headers (vcs/host.ts): which are kept with the body, the event and
   * delivery they name, the metrics label, and, with a webhook secret, the refusal of a request
   * whose headers cannot authenticate before its body is read (see webhook-intake.ts). Absent
   * until the workflow is wired: no header is kept, every event is `unknown`.
   */
  webhooks?: WebhookHeaders;
  /** Extra routes (API, web UI) mounted last, when Express is loaded (see buildRequestListener). */
  extraRoutes?: (app: express.Express) => Promise<void> | void;
  /** --web-basic-auth: the credentials every path but the open ones needs (web-auth.ts); undefined when off. */
  webAuth?: WebAuthConfig;
  /** The names the web UI answers to (allowed-hosts.ts); undefined: no check. */
  allowedHosts?: AllowedHosts;
}
