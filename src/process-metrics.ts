// Node.js process metrics (prom-client's defaults) for the server and the controller.
import { type Registry, collectDefaultMetrics } from 'prom-client';

/**
 * prom-client samples event-loop delay with a timer at this resolution; its default of 10 ms
 * wakes an idle process 100 times a second, which a node running a hundred idle servers pays
 * in CPU and wake-ups. At 100 ms the lag histogram still sees every stall that matters for
 * /status.
 */
export const EVENT_LOOP_MONITORING_PRECISION_MS = 100;

export function collectProcessMetrics(registry: Registry): void {
  collectDefaultMetrics({ register: registry, eventLoopMonitoringPrecision: EVENT_LOOP_MONITORING_PRECISION_MS });
}
