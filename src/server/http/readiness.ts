// What /readyz answers: the pure decision. A draining server is unready, so that Kubernetes
// takes it out of the Service, except with --queue-during-drain: then it still takes webhooks
// (it queues their commands for its successor on the same data dir), and leaving the Service
// would only make GitHub's deliveries fail while it drains.
export interface ReadinessInput {
  shuttingDown: boolean;
  queueDuringDrain: boolean;
  storeHealthy: boolean;
}

export interface Readiness {
  status: 200 | 503;
  /** The JSON body's `status`. */
  text: 'ok' | 'draining' | 'draining, queueing commands' | 'lock store unusable';
}

export function readiness(i: ReadinessInput): Readiness {
  if (i.shuttingDown && !i.queueDuringDrain) return { status: 503, text: 'draining' };
  // Queueing writes to the store too: without it, nothing can be taken in.
  if (!i.storeHealthy) return { status: 503, text: 'lock store unusable' };
  if (i.shuttingDown) return { status: 200, text: 'draining, queueing commands' };
  return { status: 200, text: 'ok' };
}
