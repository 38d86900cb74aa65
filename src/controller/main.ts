// The controller role's process: flags, health and metrics endpoints on :8080.
// The reconciler is wired in by the controller issue; until then it only serves health.
import express from 'express';
import { once } from 'node:events';
import { type FlagSpec, type FlagValues } from '../config/flags.js';
import { createLogger, type LogLevel } from '../log.js';

export const CONTROLLER_FLAGS: FlagSpec[] = [
  { name: 'metrics-bind-address', type: 'string', default: '0.0.0.0:8080', envPrefix: 'ATLANTIS_OPERATOR_', description: 'Address for /healthz, /readyz and /metrics' },
  { name: 'leader-elect', type: 'bool', default: false, envPrefix: 'ATLANTIS_OPERATOR_', description: 'Use a coordination.k8s.io Lease so only one replica acts' },
  { name: 'namespace', type: 'string', envPrefix: 'ATLANTIS_OPERATOR_', description: 'Only watch this namespace (default: all namespaces)' },
  { name: 'log-level', type: 'string', default: 'info', envPrefix: 'ATLANTIS_OPERATOR_', description: 'Log level: debug, info, warn or error' },
];

export async function runController(values: FlagValues): Promise<number> {
  const logger = createLogger({ level: values['log-level'] as LogLevel });
  const [host, port] = splitHostPort(values['metrics-bind-address'] as string);
  const app = express();
  app.get('/healthz', (_req, res) => void res.json({ status: 'ok' }));
  app.get('/readyz', (_req, res) => void res.json({ status: 'ok' }));
  const http = app.listen(port, host);
  await once(http, 'listening');
  logger.info('Controller started', { metricsBindAddress: values['metrics-bind-address'] });
  await new Promise<void>((resolve) => {
    process.once('SIGTERM', resolve);
    process.once('SIGINT', resolve);
  });
  http.close();
  logger.info('Controller stopped');
  return 0;
}

function splitHostPort(addr: string): [string, number] {
  const i = addr.lastIndexOf(':');
  return [i > 0 ? addr.slice(0, i) : '0.0.0.0', Number(addr.slice(i + 1))];
}
