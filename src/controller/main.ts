// The controller role's process: flags, /healthz, /readyz and /metrics, leader election on
// a Lease, and the reconciler (AtlantisController) started and stopped around it.
//
//   without --leader-elect   the reconciler starts at once (one replica only!)
//   with --leader-elect      the reconciler starts when this replica acquires the Lease; when
//                            the Lease is lost (not renewed within the renew deadline, or taken
//                            by another replica) the reconciler is stopped (its workers get
//                            leaseDuration - renewDeadline - retryPeriod, 3 s by default, to
//                            finish their key) and the process exits 1, so the Deployment
//                            restarts it as a clean follower (controller-runtime's behaviour)
//   SIGTERM / SIGINT         stop the reconciler (workers finish their current key), release
//                            the Lease (the standby takes over at its next poll), exit 0
//
// /readyz: 200 while leading (or without leader election) once the informers have synced;
// 200 on a standby as soon as its elector has made its first attempt (so a rolling update
// of the controller Deployment is not held up by the standby); 503 while shutting down.
// docs/leader-election.md has the details.
import express from 'express';
import type http from 'node:http';
import { type FlagSpec, type FlagValues, UsageError } from '../config/flags.js';
import { configureKubeClient } from '../k8s/client.js';
import { type KubeClientConfig, loadKubeConfig } from '../k8s/kubeconfig.js';
import { createLogger, type Logger, type LogLevel } from '../log.js';
import {
  DEFAULT_LEASE_DURATION_MS,
  DEFAULT_RENEW_DEADLINE_MS,
  DEFAULT_RETRY_PERIOD_MS,
  defaultIdentity,
  LeaderElector,
  validateDurations,
} from './leader-election.js';
import { type ControllerMetrics, createControllerMetrics } from './metrics.js';
import { AtlantisController } from './reconcile/controller.js';
import { DEFAULT_CONTENT_INTERVAL_MS } from './reconcile/referenced-content.js';
import { withTimeout } from '../async.js';

const P = 'ATLANTIS_OPERATOR_';
const DEFAULT_LEADER_ELECTION_NAMESPACE = 'atlantis-operator';
/** How long a stop of the reconciler may take before the process exits anyway (grace period is 30 s). */
const STOP_TIMEOUT_MS = 20_000;
/** The informers' default (src/k8s/informer.ts). */
const DEFAULT_WATCH_SILENCE_TIMEOUT_MS = 60_000;

export const CONTROLLER_FLAGS: FlagSpec[] = [
  {
    name: 'metrics-bind-address',
    type: 'string',
    default: '0.0.0.0:8080',
    envPrefix: P,
    description: 'Address for /healthz, /readyz and /metrics',
  },
  {
    name: 'leader-elect',
    type: 'bool',
    default: false,
    envPrefix: P,
    description: 'Use a coordination.k8s.io Lease so only one replica acts',
  },
  {
    name: 'leader-election-namespace',
    type: 'string',
    envPrefix: P,
    description: `Namespace of the leader election Lease (default: $POD_NAMESPACE, else ${DEFAULT_LEADER_ELECTION_NAMESPACE})`,
  },
  {
    name: 'leader-election-id',
    type: 'string',
    default: 'atlantis-operator-leader',
    envPrefix: P,
    description: 'Name of the leader election Lease',
  },
  {
    name: 'leader-elect-lease-duration',
    type: 'duration',
    default: DEFAULT_LEASE_DURATION_MS,
    envPrefix: P,
    description: 'How long a standby waits, after the last renewal it saw, before it takes the Lease over',
  },
  {
    name: 'leader-elect-renew-deadline',
    type: 'duration',
    default: DEFAULT_RENEW_DEADLINE_MS,
    envPrefix: P,
    description: 'How long the leader retries renewing the Lease before it gives up and exits',
  },
  {
    name: 'leader-elect-retry-period',
    type: 'duration',
    default: DEFAULT_RETRY_PERIOD_MS,
    envPrefix: P,
    description: 'Interval between leader election attempts',
  },
  { name: 'namespace', type: 'string', envPrefix: P, description: 'Only watch this namespace (default: all namespaces)' },
  {
    name: 'kubeconfig',
    type: 'string',
    envPrefix: P,
    description: 'Path to a kubeconfig file (default: $KUBECONFIG or ~/.kube/config, else the in-cluster service account)',
  },
  {
    name: 'max-concurrent-reconciles',
    type: 'int',
    default: 16,
    envPrefix: P,
    description: 'AtlantisDeployments reconciled in parallel (a reconcile mostly waits on the API server and on /status probes)',
  },
  {
    name: 'kube-api-qps',
    type: 'int',
    default: 0,
    envPrefix: P,
    description: "Client-side limit of Kubernetes API requests per second (0: none, rely on the API server's Priority and Fairness)",
  },
  {
    name: 'kube-api-burst',
    type: 'int',
    default: 0,
    envPrefix: P,
    description: 'Requests allowed at once above --kube-api-qps (default: the qps value)',
  },
  {
    name: 'watch-silence-timeout',
    type: 'duration',
    default: DEFAULT_WATCH_SILENCE_TIMEOUT_MS,
    envPrefix: P,
    description:
      'Restart a watch that delivered nothing, not even a bookmark, for this long (a half-open connection); watches are also renewed before this; at least 1s',
  },
  {
    name: 'referenced-content-interval',
    type: 'duration',
    default: DEFAULT_CONTENT_INTERVAL_MS,
    envPrefix: P,
    description:
      'How often the Secrets (their metadata only) and ConfigMaps the pods read are read again: a change to them rolls the pods within this long; at least 1s',
  },
  { name: 'log-level', type: 'string', default: 'info', envPrefix: P, description: 'Log level: debug, info, warn or error' },
];

export interface ControllerConfig {
  host: string;
  port: number;
  bindAddress: string;
  leaderElect: boolean;
  leaderElectionNamespace: string;
  leaderElectionId: string;
  leaseDurationMs: number;
  renewDeadlineMs: number;
  retryPeriodMs: number;
  namespace: string | undefined;
  kubeconfig: string | undefined;
  workers: number;
  kubeApiQps: number;
  kubeApiBurst: number;
  watchSilenceTimeoutMs: number;
  contentIntervalMs: number;
  logLevel: LogLevel;
}

/** Checks the flag values; every problem is a one-line UsageError naming the flag (exit 2). */
export function buildControllerConfig(values: FlagValues, env: NodeJS.ProcessEnv = process.env): ControllerConfig {
  const logLevel = values['log-level'] as string;
  if (!['debug', 'info', 'warn', 'error'].includes(logLevel))
    throw new UsageError(`invalid value "${logLevel}" for --log-level: must be debug, info, warn or error`);
  const bindAddress = values['metrics-bind-address'] as string;
  const [host, port] = splitHostPort(bindAddress);
  const workers = values['max-concurrent-reconciles'] as number;
  if (!(workers >= 1 && workers <= 1000))
    throw new UsageError(`invalid value "${workers}" for --max-concurrent-reconciles: must be between 1 and 1000`);
  const kubeApiQps = values['kube-api-qps'] as number;
  if (!(kubeApiQps >= 0 && kubeApiQps <= 100_000))
    throw new UsageError(`invalid value "${kubeApiQps}" for --kube-api-qps: must be between 0 (no limit) and 100000`);
  const kubeApiBurst = values['kube-api-burst'] as number;
  if (!(kubeApiBurst >= 0 && kubeApiBurst <= 100_000))
    throw new UsageError(`invalid value "${kubeApiBurst}" for --kube-api-burst: must be between 0 and 100000`);
  const leaseDurationMs = values['leader-elect-lease-duration'] as number;
  const renewDeadlineMs = values['leader-elect-renew-deadline'] as number;
  const retryPeriodMs = values['leader-elect-retry-period'] as number;
  try {
    validateDurations(leaseDurationMs, renewDeadlineMs, retryPeriodMs);
  } catch (e) {
    const msg = (e as Error).message;
    throw new UsageError(
      `invalid leader election timings (--leader-elect-lease-duration, --leader-elect-renew-deadline, --leader-elect-retry-period): ${msg.charAt(0).toLowerCase()}${msg.slice(1)}`,
    );
  }
  const watchSilenceTimeoutMs = values['watch-silence-timeout'] as number;
  if (!(watchSilenceTimeoutMs >= 1_000))
    throw new UsageError(`invalid value "${values['watch-silence-timeout']}ms" for --watch-silence-timeout: must be at least 1s`);
  const contentIntervalMs = values['referenced-content-interval'] as number;
  if (!(contentIntervalMs >= 1_000))
    throw new UsageError(
      `invalid value "${values['referenced-content-interval']}ms" for --referenced-content-interval: must be at least 1s`,
    );
  const nonEmpty = (v: unknown) => (typeof v === 'string' && v.trim() !== '' ? v.trim() : undefined);
  const leaderElectionId = nonEmpty(values['leader-election-id']);
  if (!leaderElectionId) throw new UsageError('--leader-election-id must not be empty');
  return {
    host,
    port,
    bindAddress,
    leaderElect: values['leader-elect'] === true,
    leaderElectionNamespace:
      nonEmpty(values['leader-election-namespace']) ?? nonEmpty(env.POD_NAMESPACE) ?? DEFAULT_LEADER_ELECTION_NAMESPACE,
    leaderElectionId,
    leaseDurationMs,
    renewDeadlineMs,
    retryPeriodMs,
    namespace: nonEmpty(values.namespace),
    kubeconfig: nonEmpty(values.kubeconfig),
    workers,
    kubeApiQps,
    kubeApiBurst: kubeApiBurst || kubeApiQps,
    watchSilenceTimeoutMs,
    contentIntervalMs,
    logLevel: logLevel as LogLevel,
  };
}

function splitHostPort(addr: string): [string, number] {
  const i = addr.lastIndexOf(':');
  const portText = i >= 0 ? addr.slice(i + 1) : '';
  const host = i > 0 ? addr.slice(0, i).replace(/^\[(.*)\]$/, '$1') : '0.0.0.0';
  const port = Number(portText);
  if (!/^\d+$/.test(portText) || port < 1 || port > 65535) {
    throw new UsageError(`invalid value "${addr}" for --metrics-bind-address: must be host:port`);
  }
  return [host, port];
}

function oneLine(s: string): string {
  return s.replace(/\s+/g, ' ').trim();
}

async function loadConfig(file: string | undefined): Promise<KubeClientConfig> {
  try {
    const kc = await loadKubeConfig(file);
    if (!kc.getCurrentCluster()) throw new Error('no current cluster');
    return kc;
  } catch (e) {
    if (file) throw new UsageError(`cannot load --kubeconfig ${file}: ${oneLine((e as Error).message)}`);
    throw new UsageError(`${oneLine((e as Error).message)} (or give --kubeconfig)`);
  }
}

/** Starts and stops one AtlantisController at a time; stop() waits for a start in progress (bounded). */
class ReconcilerRunner {
  private controller: AtlantisController | undefined;
  private starting: Promise<void> | undefined;

  constructor(
    private readonly make: () => AtlantisController,
    private readonly log: Logger,
  ) {}

  hasSynced(): boolean {
    return this.controller?.hasSynced() ?? false;
  }

  /** Starts the reconciler; resolves once its informers have synced and its workers run. */
  start(): Promise<void> {
    if (this.controller) return this.starting ?? Promise.resolve();
    const c = this.make();
    this.controller = c;
    this.log.info('Reconciler starting');
    this.starting = c.start().then(() => this.log.info('Reconciler started'));
    return this.starting;
  }

  async stop(timeoutMs: number): Promise<void> {
    const c = this.controller;
    if (!c) return;
    // Not waiting for a start that is still listing (e.g. the CRD is not installed yet): no
    // worker runs before the caches synced, and stop() ends the informers' list retries.
    const r = await withTimeout(c.stop(), timeoutMs);
    if (r === 'timeout') this.log.warn('Reconciler did not stop in time', { timeoutMs });
    else this.log.info('Reconciler stopped');
  }
}

export interface RunningController {
  /** Resolves with the process exit code: 0 after a signal, 1 after a lost Lease or a failed start. */
  exited: Promise<number>;
  /** Starts the shutdown (as a signal does). */
  shutdown(code: number, reason: string): Promise<number>;
  metrics: ControllerMetrics;
  elector: LeaderElector | undefined;
}

/** Starts the controller process's parts; the CLI waits on `exited`. */
export async function startController(cfg: ControllerConfig, logger: Logger): Promise<RunningController> {
  const kc = await loadConfig(cfg.kubeconfig);
  const metrics = createControllerMetrics({ collectDefaults: true });
  configureKubeClient(kc, {
    qps: cfg.kubeApiQps,
    burst: cfg.kubeApiBurst,
    onResponse: ({ method, status, seconds }) => {
      metrics.kubeApiRequests.inc({ method, code: status === 0 ? '<error>' : String(status) });
      metrics.kubeApiRequestDuration.observe({ method }, seconds);
    },
  });
  const runner = new ReconcilerRunner(
    () =>
      new AtlantisController({
        kc,
        namespace: cfg.namespace,
        logger,
        metrics,
        workers: cfg.workers,
        watchSilenceTimeoutMs: cfg.watchSilenceTimeoutMs,
        contentIntervalMs: cfg.contentIntervalMs,
      }),
    logger,
  );
  let elector: LeaderElector | undefined;
  const lostLeaseStopMs = Math.max(500, cfg.leaseDurationMs - cfg.renewDeadlineMs - cfg.retryPeriodMs);
  let shuttingDown: Promise<number> | undefined;
  let resolveExited!: (code: number) => void;
  const exited = new Promise<number>((r) => {
    resolveExited = r;
  });

  const ready = (): { ok: boolean; leader: boolean } => {
    if (shuttingDown !== undefined) return { ok: false, leader: false };
    if (!elector) return { ok: runner.hasSynced(), leader: true };
    if (elector.isLeader()) return { ok: runner.hasSynced(), leader: true };
    return { ok: elector.hasRun(), leader: false };
  };

  const app = express();
  app.disable('x-powered-by');
  app.get('/healthz', (_req, res) => void res.json({ status: 'ok' }));
  app.get('/readyz', (_req, res) => {
    const r = ready();
    res.status(r.ok ? 200 : 503).json({ status: r.ok ? 'ok' : 'not ready', leader: r.leader });
  });
  app.get('/metrics', async (_req, res) => {
    try {
      res.set('content-type', metrics.registry.contentType).send(await metrics.registry.metrics());
    } catch (e) {
      res.status(500).send((e as Error).message);
    }
  });
  const server = await listen(app, cfg);

  const shutdown = (code: number, reason: string): Promise<number> => {
    shuttingDown ??= (async () => {
      logger.info('Controller stopping', { reason, exitCode: code });
      // After a lost Lease another replica may take over soon: the workers get only until
      // then to finish their current key (the process exit ends the rest), like
      // controller-runtime, which exits at once.
      await runner.stop(code === 0 ? STOP_TIMEOUT_MS : lostLeaseStopMs);
      // After the reconciler stopped, so the next leader never overlaps with this one.
      if (elector) await withTimeout(elector.stop(), 10_000);
      metrics.setLeader(false);
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
      logger.info('Controller stopped', { exitCode: code });
      resolveExited(code);
      return code;
    })();
    return shuttingDown;
  };

  const startReconciler = () => {
    runner.start().catch((e: unknown) => {
      logger.error('Reconciler failed to start', { error: e as Error });
      void shutdown(1, 'reconciler failed to start');
    });
  };

  logger.info('Controller started', {
    metricsBindAddress: cfg.bindAddress,
    leaderElect: cfg.leaderElect,
    watchNamespace: cfg.namespace ?? '',
    workers: cfg.workers,
  });

  if (!cfg.leaderElect) {
    // Without leader election this process is the only one acting: it counts as the leader.
    metrics.setLeader(true);
    startReconciler();
  } else {
    elector = new LeaderElector({
      kc,
      namespace: cfg.leaderElectionNamespace,
      name: cfg.leaderElectionId,
      identity: defaultIdentity(),
      leaseDurationMs: cfg.leaseDurationMs,
      renewDeadlineMs: cfg.renewDeadlineMs,
      retryPeriodMs: cfg.retryPeriodMs,
      logger,
      onStartedLeading: () => {
        if (shuttingDown !== undefined) return;
        metrics.setLeader(true);
        startReconciler();
      },
      onStoppedLeading: () => {
        metrics.setLeader(false);
        logger.error('Leader lease lost, exiting');
        void shutdown(1, 'leader lease lost');
      },
    });
    elector.start();
  }
  return { exited, shutdown, metrics, elector };
}

async function listen(app: express.Express, cfg: ControllerConfig): Promise<http.Server> {
  return new Promise((resolve, reject) => {
    const server = app.listen(cfg.port, cfg.host);
    server.once('listening', () => resolve(server));
    server.once('error', (e: NodeJS.ErrnoException) => {
      if (e.code === 'EADDRINUSE' || e.code === 'EADDRNOTAVAIL' || e.code === 'EACCES') {
        reject(new UsageError(`cannot listen on ${cfg.bindAddress} (--metrics-bind-address): ${e.code}`));
      } else reject(e);
    });
  });
}

/** `atlantis-operator controller`: runs until a signal (exit 0) or a lost Lease (exit 1). */
export async function runController(values: FlagValues): Promise<number> {
  const cfg = buildControllerConfig(values);
  const logger = createLogger({ level: cfg.logLevel });
  const c = await startController(cfg, logger);
  const onSignal = (sig: NodeJS.Signals) => {
    void c.shutdown(0, sig);
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
  // The handlers stay installed: a second signal during the shutdown changes nothing.
  const code = await c.exited;
  // Idle keep-alive sockets must not hold the exit up; an unref'd timer only fires when
  // something else still keeps the event loop alive.
  setTimeout(() => process.exit(code), 1_000).unref();
  return code;
}
