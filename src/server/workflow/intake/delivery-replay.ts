// The answer to a webhook whose X-GitHub-Delivery was accepted before (a replay, or GitHub's
// "Redeliver" of a delivery that did run): nothing runs again. Atlantis runs such a delivery
// again; this is a deliberate difference (docs/server.md).
import type { Logger } from '../../../log.js';
import type { WebhookResponse } from '../../http/app.js';
import type { ServerMetrics } from '../../metrics.js';

/** The first delivery's command started or ended (or was queued): answered 200, nothing runs. */
export const REPLAY_HANDLED_BODY = 'Replay of a delivery that was accepted before (same X-GitHub-Delivery): not run again';
/**
 * The first delivery's command is journalled and has not started: it may still be one refused
 * with 503 whose entry is being removed, so the sender is asked to try again (nothing runs twice).
 */
export const REPLAY_PENDING_BODY =
  'A delivery with this X-GitHub-Delivery was accepted and has not started yet: not run twice; send it again later if it does not run';

/** The answer to a replay, logged and counted (atlantis_commands_refused_total{reason="delivery_replayed"}). */
export function replayAnswer(
  first: 'handled' | 'pending',
  d: { logger: Logger; metrics: ServerMetrics },
  info: { repo: string; pull: number; command: string; deliveryId: string | undefined },
): WebhookResponse {
  d.logger.info('Webhook delivery replayed: not run again', { ...info, first });
  d.metrics.commandsRefused.inc({ reason: 'delivery_replayed' });
  return first === 'handled' ? { status: 200, body: `${REPLAY_HANDLED_BODY}\n` } : { status: 503, body: `${REPLAY_PENDING_BODY}\n` };
}
