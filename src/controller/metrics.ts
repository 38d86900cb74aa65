// Controller metrics (SPEC section 8) on a registry of their own, so a process that also
// hosts server metrics (tests, the demo) never mixes or double-registers them.
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import { collectProcessMetrics } from '../process-metrics.js';
import type { Action } from './rollout/planner.js';

/** The `result` label of the reconcile metrics (the reconciler's own answer is ReconcileResult). */
export type ReconcileOutcome = 'success' | 'error' | 'requeue';

export interface ControllerMetrics {
  registry: Registry;
  reconcileTotal: Counter<'result'>;
  reconcileDuration: Histogram;
  drainDuration: Histogram;
  drainTimeoutsTotal: Counter;
  rolloutsTotal: Counter;
  leader: Gauge;
  workqueueDepth: Gauge;
  workqueueQueueDuration: Histogram;
  statusProbeDuration: Histogram<'result'>;
  statusWatches: Gauge;
  kubeApiRequests: Counter<'method' | 'code'>;
  kubeApiRequestDuration: Histogram<'method'>;
  surgePods: Gauge;
  /** An AtlantisDeployment's status.surgeReplicas, summed over all of them in atlantis_operator_surge_pods. */
  setSurgePods(key: string, count: number): void;
  /** The AtlantisDeployment is gone: its share of per-deployment gauges goes too. */
  forgetDeployment(key: string): void;
  /** Times one reconcile and counts it; `result` decides the label. */
  observeReconcile(result: ReconcileOutcome, seconds: number): void;
  /** Call after an action of the plan was carried out (not before: a failed delete is no drain). */
  recordExecuted(action: Action): void;
  setLeader(isLeader: boolean): void;
}

export interface ControllerMetricsOptions {
  /** Reads the queue depth at scrape time (WorkQueue.len). */
  workqueueDepth?: () => number;
  /** Node process metrics (memory, CPU, event loop) on the same registry. */
  collectDefaults?: boolean;
}

export function createControllerMetrics(options: ControllerMetricsOptions = {}): ControllerMetrics {
  const registry = new Registry();
  const reconcileTotal = new Counter({
    name: 'atlantis_operator_reconcile_total',
    help: 'Reconciles of AtlantisDeployments by result (success, error, requeue)',
    labelNames: ['result'] as const,
    registers: [registry],
  });
  const reconcileDuration = new Histogram({
    name: 'atlantis_operator_reconcile_duration_seconds',
    help: 'Time one reconcile of an AtlantisDeployment took',
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [registry],
  });
  const drainDuration = new Histogram({
    name: 'atlantis_operator_drain_duration_seconds',
    help: 'Time from a pod drain start to its delete request',
    // Drains last as long as the longest terraform run: seconds to hours.
    buckets: [1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200, 14400],
    registers: [registry],
  });
  const drainTimeoutsTotal = new Counter({
    name: 'atlantis_operator_drain_timeouts_total',
    help: 'Drains that passed updateStrategy.drainTimeoutSeconds',
    registers: [registry],
  });
  const rolloutsTotal = new Counter({
    name: 'atlantis_operator_rollouts_total',
    help: 'Rollouts completed (every pod at the update revision and Ready)',
    registers: [registry],
  });
  const leader = new Gauge({
    name: 'atlantis_operator_leader',
    help: '1 while this controller replica holds the leader Lease, else 0',
    registers: [registry],
  });
  leader.set(0);
  const depthFn = options.workqueueDepth;
  const workqueueDepth = new Gauge({
    name: 'atlantis_operator_workqueue_depth',
    help: 'AtlantisDeployment keys waiting for a worker',
    registers: [registry],
    ...(depthFn
      ? {
          collect(this: Gauge) {
            this.set(depthFn());
          },
        }
      : {}),
  });
  workqueueDepth.set(0);
  // Sub-second buckets: these explain a slow drain -> delete (a long queue, a slow /status).
  const fastBuckets = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];
  const workqueueQueueDuration = new Histogram({
    name: 'atlantis_operator_workqueue_queue_duration_seconds',
    help: 'Time an AtlantisDeployment key waited in the work queue before a worker took it',
    buckets: fastBuckets,
    registers: [registry],
  });
  const statusProbeDuration = new Histogram({
    name: 'atlantis_operator_status_probe_duration_seconds',
    help: 'Time a GET /status of a draining server pod took, by result (ok, error)',
    labelNames: ['result'] as const,
    buckets: fastBuckets,
    registers: [registry],
  });
  const statusWatches = new Gauge({
    name: 'atlantis_operator_status_watches',
    help: 'Draining server pods the controller holds a GET /status?wait_drained request to (or keeps the answer of)',
    registers: [registry],
  });
  statusWatches.set(0);
  const kubeApiRequests = new Counter({
    name: 'atlantis_operator_kube_api_requests_total',
    help: 'Requests to the Kubernetes API by method (WATCH for watches) and HTTP status code (<error> when there was no answer)',
    labelNames: ['method', 'code'] as const,
    registers: [registry],
  });
  const kubeApiRequestDuration = new Histogram({
    name: 'atlantis_operator_kube_api_request_duration_seconds',
    help: 'Time until the Kubernetes API answered a request, by method',
    labelNames: ['method'] as const,
    buckets: fastBuckets,
    registers: [registry],
  });
  const surgeByKey = new Map<string, number>();
  const surgePods = new Gauge({
    name: 'atlantis_operator_surge_pods',
    help: 'Server pods started beside an older pod of their ordinal (status.surgeReplicas), over all AtlantisDeployments',
    registers: [registry],
    collect(this: Gauge) {
      let n = 0;
      for (const v of surgeByKey.values()) n += v;
      this.set(n);
    },
  });
  if (options.collectDefaults) collectProcessMetrics(registry);

  return {
    registry,
    reconcileTotal,
    reconcileDuration,
    drainDuration,
    drainTimeoutsTotal,
    rolloutsTotal,
    leader,
    workqueueDepth,
    workqueueQueueDuration,
    statusProbeDuration,
    statusWatches,
    kubeApiRequests,
    kubeApiRequestDuration,
    surgePods,
    setSurgePods(key, count) {
      if (count > 0) surgeByKey.set(key, count);
      else surgeByKey.delete(key);
    },
    forgetDeployment(key) {
      surgeByKey.delete(key);
    },
    observeReconcile(result, seconds) {
      reconcileTotal.inc({ result });
      reconcileDuration.observe(seconds);
    },
    recordExecuted(action) {
      if (action.type === 'deletePod' && action.drainDurationSeconds !== null) drainDuration.observe(action.drainDurationSeconds);
      // One count per timed-out drain: the Warning event fires once per pod for Wait, and the
      // delete happens once for Interrupt (its event carries the same reason).
      if (action.type === 'emitEvent' && action.reason === 'DrainTimeout') drainTimeoutsTotal.inc();
      if (action.type === 'emitEvent' && action.reason === 'RolloutComplete') rolloutsTotal.inc();
    },
    setLeader(isLeader) {
      leader.set(isLeader ? 1 : 0);
    },
  };
}
