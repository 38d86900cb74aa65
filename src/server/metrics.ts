// Prometheus metrics of the server (SPEC section 8), on a registry of its own so that two
// servers in one test process do not share counters.
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import { collectProcessMetrics } from '../process-metrics.js';
import { AtlantisMetrics } from './atlantis-metrics.js';

export class ServerMetrics {
  readonly registry = new Registry();
  readonly operationsInProgress = new Gauge({
    name: 'atlantis_operations_in_progress',
    help: 'Operations (webhook-triggered commands) currently running',
    registers: [this.registry],
  });
  readonly draining = new Gauge({ name: 'atlantis_draining', help: '1 while the server is draining, else 0', registers: [this.registry] });
  readonly commandsTotal = new Counter({
    name: 'atlantis_commands_total',
    help: 'Commands run, by command and result',
    labelNames: ['command', 'result'] as const,
    registers: [this.registry],
  });
  readonly commandDuration = new Histogram({
    name: 'atlantis_command_duration_seconds',
    help: 'Wall time of commands, from acceptance to the last PR comment',
    labelNames: ['command'] as const,
    buckets: [0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600],
    registers: [this.registry],
  });
  readonly commandsRefused = new Counter({
    name: 'atlantis_commands_refused_total',
    help: 'Commands refused, by reason',
    labelNames: ['reason'] as const,
    registers: [this.registry],
  });
  readonly storeUp = new Gauge({
    name: 'atlantis_store_up',
    help: '1 when the state store answered its last check (/readyz) or call, 0 when it did not',
    registers: [this.registry],
  });
  readonly webhooksTotal = new Counter({
    name: 'atlantis_webhooks_total',
    help: 'Webhook requests, by event and HTTP status code',
    labelNames: ['event', 'code'] as const,
    registers: [this.registry],
  });
  readonly githubRequestFailures = new Counter({
    name: 'atlantis_github_request_failures_total',
    help: 'GitHub API requests that failed after retries, by operation',
    labelNames: ['operation'] as const,
    registers: [this.registry],
  });

  readonly webhooksForwarded = new Counter({
    name: 'atlantis_webhooks_forwarded_total',
    help: "Webhooks handed to the replica that owns their pull request: relayed (the owner's answer went back) or handled_here (the owner could not be reached)",
    labelNames: ['result'] as const,
    registers: [this.registry],
  });

  /** Atlantis v0.47's own names, beside these (atlantis-metrics.ts). */
  readonly atlantis = new AtlantisMetrics(this.registry);

  constructor(opts: { defaults?: boolean } = {}) {
    if (opts.defaults !== false) collectProcessMetrics(this.registry);
  }
}
