// AtlantisServer wires the server role together: HTTP surface, operation tracker, drain,
// process host and runner, and (when configured) the PR workflow and the own-Pod annotation watch.
// Tests build it in-process through this API; the CLI adds signal handlers and exits.
import { once } from 'node:events';
import { type Server, createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import type { DrainTrigger } from '../contract/drain-protocol.js';
import type { LogFields, Logger } from '../log.js';
import { DEFAULT_WEB_PASSWORD, type ServerConfig } from './config.js';
import { secureDataDir } from './data-dir.js';
import { DrainCoordinator } from './drain/drain-coordinator.js';
import { type Operation, type OperationInfo, OperationTracker } from './drain/operation-tracker.js';
import { DataDirLock } from './drain/data-dir-lock.js';
import { processIdentity, removePidFile, writePidFile } from './drain/pid-file.js';
import { type AppDeps, WEBHOOK_TURN_BUDGET_MS, buildRequestListener } from './http/app.js';
import { TurnQueue } from './http/turn-queue.js';
import { ServerMetrics } from './metrics.js';
import { childEnv } from './secrets/child-env.js';
import { processRedactor } from './secrets/redact.js';
import { serverSecretValues, weakSecretSettings } from './secrets/server-secrets.js';
import { allowedHosts } from './http/allowed-hosts.js';
import { ProcessHost } from './terraform/process-host.js';
import { ProcessRunner } from './terraform/runner.js';
import { since } from './atlantis-metrics.js';

export interface AtlantisServerOptions {
  config: ServerConfig;
  logger: Logger;
  /** Called once when a drain ends; the CLI exits the process with the code. */
  onExit?: (code: number) => void;
  /** Extra wiring (the workflow) that needs the core parts. */
  plugins?: Array<
    (server: AtlantisServer) => Partial<Pick<AppDeps, 'onWebhook' | 'extraRoutes' | 'storeHealthy' | 'webhooks'>> & {
      close?: () => Promise<void> | void;
      start?: () => Promise<void> | void;
    }
  >;
  /** Metrics registry; tests pass one without default metrics. */
  metrics?: ServerMetrics;
}

export type RunOutcome<T> = { started: true; value: T } | { started: false };

export class AtlantisServer {
  readonly tracker = new OperationTracker();
  readonly metrics: ServerMetrics;
  /** Starts every child process (git, terraform) off the event loop. */
  readonly processHost: ProcessHost;
  readonly runner: ProcessRunner;
  /** Webhook handlers waiting for their event-loop turn (see http/turn-queue.ts). */
  readonly webhookQueue = new TurnQueue(WEBHOOK_TURN_BUDGET_MS);
  readonly drain: DrainCoordinator;
  readonly logger: Logger;
  readonly config: ServerConfig;
  private http?: Server;
  private exitCode?: number;
  private readonly exitWaiters: Array<(code: number) => void> = [];
  private readonly closers: Array<() => Promise<void> | void> = [];
  private readonly starters: Array<() => Promise<void> | void> = [];
  private readonly appDeps: Partial<AppDeps> = {};
  private closing?: Promise<void>;
  private readonly operationTimers = new Map<string, () => void>();
  private readonly background = new Set<Promise<unknown>>();
  private readonly dataDirLock: DataDirLock;

  constructor(private readonly opts: AtlantisServerOptions) {
    this.config = opts.config;
    this.logger = opts.logger;
    // Before anything reads or writes the data dir (the store, crash recovery, the pid file).
    this.dataDirLock = DataDirLock.acquire(opts.config.dataDir);
    this.metrics = opts.metrics ?? new ServerMetrics();
    // Before any plugin opens the store or writes a file there.
    const dataDirProblem = secureDataDir(opts.config.dataDir);
    if (dataDirProblem)
      opts.logger.warn('Could not make the data dir private (0700); files the server creates in it are still 0600', {
        dataDir: opts.config.dataDir,
        error: dataDirProblem,
      });
    // Log lines, PR comments, job output and pages scrub these (secrets/redact.ts).
    processRedactor.addSource(() => serverSecretValues(opts.config));
    for (const { flag, weakness } of weakSecretSettings(opts.config))
      opts.logger.warn(
        'A secret is too short or too common to scrub wherever it appears: it is scrubbed only where it stands as a whole value; use a random value of 16 or more characters',
        { flag, weakness },
      );
    this.processHost = new ProcessHost({ logger: opts.logger, env: () => this.childEnv() });
    this.runner = new ProcessRunner({
      host: this.processHost,
      binary: opts.config.tfBinary,
      interruptGraceMs: opts.config.terraformInterruptGraceMs,
      logger: opts.logger,
    });
    this.drain = new DrainCoordinator({
      tracker: this.tracker,
      runner: this.runner,
      metrics: this.metrics,
      logger: opts.logger,
      timings: {
        drainTimeoutMs: opts.config.drainTimeoutMs,
        interruptGraceMs: opts.config.terraformInterruptGraceMs,
        forceExitMarginMs: 5_000,
      },
      onExit: (code) => void this.finish(code),
    });
    try {
      for (const plugin of opts.plugins ?? []) {
        const { close, start, ...deps } = plugin(this);
        Object.assign(this.appDeps, deps);
        if (close) this.closers.push(close);
        if (start) this.starters.push(start);
      }
    } catch (e) {
      this.dataDirLock.release();
      throw e;
    }
  }

  /** The environment of every child process: the server's without its settings and secrets. */
  private childEnv(): Record<string, string> {
    const { env, withheld } = childEnv(process.env, processRedactor.values());
    if (withheld.length)
      this.logger.info('Environment variables withheld from child processes', {
        names: withheld.map((w) => w.name),
        reasons: withheld.map((w) => w.reason),
      });
    return env;
  }

  /** Starts listening; resolves with the URL the server answers on. */
  async start(): Promise<string> {
    for (const s of this.starters) await s();
    const listener = buildRequestListener({
      tracker: this.tracker,
      drainState: () => this.drain.state,
      metrics: this.metrics,
      logger: this.logger,
      storeHealthy: this.appDeps.storeHealthy ?? (async () => true),
      queueDuringDrain: this.config.queueDuringDrain,
      onWebhook: this.appDeps.onWebhook,
      webhookQueue: this.webhookQueue,
      webhooks: this.appDeps.webhooks,
      extraRoutes: this.appDeps.extraRoutes,
      webAuth: this.config.webBasicAuth ? { username: this.config.webUsername, password: this.config.webPassword } : undefined,
      allowedHosts: allowedHosts(this.config.atlantisUrl, this.config.allowedHosts),
    });
    this.http = createServer(listener).listen(this.config.port, this.config.bindAddress);
    await once(this.http, 'listening');
    const url = this.url;
    writePidFile(this.config.dataDir, {
      pid: process.pid,
      url,
      startedAt: new Date().toISOString(),
      identity: processIdentity(process.pid),
    });
    this.logger.info('Server started', {
      url,
      dataDir: this.config.dataDir,
      atlantisUrl: this.config.atlantisUrl,
      webBasicAuth: this.config.webBasicAuth,
    });
    if (this.config.webBasicAuth && this.config.webPassword === DEFAULT_WEB_PASSWORD) {
      this.logger.warn(
        '--web-basic-auth is on with the default --web-password: anyone who knows Atlantis can read the web page and job logs',
      );
    }
    return url;
  }

  /** The URL this server answers on (a local address, for probes and the drain command). */
  get url(): string {
    const addr = this.http?.address() as AddressInfo | null | undefined;
    if (!addr) throw new Error('server is not listening');
    const host = addr.address === '0.0.0.0' || addr.address === '::' ? '127.0.0.1' : addr.address;
    return `http://${host.includes(':') ? `[${host}]` : host}:${addr.port}`;
  }

  /** Starts a drain (signal, annotation or cli). */
  requestDrain(trigger: DrainTrigger, details?: LogFields): void {
    this.drain.trigger(trigger, details);
  }

  /**
   * Starts one tracked operation, or returns undefined when shutting down (the caller must
   * refuse the work). Synchronous on purpose: acceptance and the shutting-down check are
   * one step in the tracker, so a webhook handler can decide before it answers.
   */
  startOperation(info: OperationInfo): Operation | undefined {
    const op = this.tracker.tryStart(info);
    if (!op) {
      this.metrics.commandsRefused.inc({ reason: 'shutting_down' });
      return undefined;
    }
    this.metrics.operationsInProgress.set(this.tracker.inProgress);
    const end = this.metrics.commandDuration.startTimer({ command: info.command });
    const started = process.hrtime.bigint();
    this.operationTimers.set(op.id, () => {
      end();
      this.metrics.atlantis.command(info.command, since(started));
    });
    return op;
  }

  finishOperation(op: Operation): void {
    this.operationTimers.get(op.id)?.();
    this.operationTimers.delete(op.id);
    this.tracker.finish(op.id);
    this.metrics.operationsInProgress.set(this.tracker.inProgress);
  }

  /** Runs `fn` as one tracked operation, or refuses when shutting down. */
  async runOperation<T>(info: OperationInfo, fn: (op: Operation) => Promise<T>): Promise<RunOutcome<T>> {
    const op = this.startOperation(info);
    if (!op) return { started: false };
    try {
      return { started: true, value: await fn(op) };
    } finally {
      this.finishOperation(op);
    }
  }

  /**
   * Work that is not an operation but must not be cut off by an exit, e.g. posting the
   * "shutting down" reply to a refused command. close() waits for it (bounded).
   */
  trackBackground(p: Promise<unknown>): void {
    const wrapped = p
      .catch((e: unknown) => this.logger.error('Background task failed', { error: e instanceof Error ? e.message : String(e) }))
      .finally(() => this.background.delete(wrapped));
    this.background.add(wrapped);
  }

  /** Resolves with the exit code once a drain has ended and the server is closed. */
  waitForExit(): Promise<number> {
    if (this.exitCode !== undefined) return Promise.resolve(this.exitCode);
    return new Promise((resolve) => this.exitWaiters.push(resolve));
  }

  /** Where job logs are: one file per job, `<job id>.log`. */
  get jobLogDir(): string {
    return path.join(this.config.dataDir, 'jobs');
  }

  jobLogPath(jobId: string): string {
    return path.join(this.jobLogDir, `${jobId}.log`);
  }

  /** Closes listeners and plugins without draining (tests, or after a finished drain). */
  close(): Promise<void> {
    this.closing ??= (async () => {
      this.drain.dispose();
      if (this.background.size) {
        await Promise.race([Promise.allSettled([...this.background]), new Promise((r) => setTimeout(r, 10_000).unref())]);
      }
      if (this.http) {
        // Webhooks already received get their answer (the drain refuses or queues them).
        await Promise.race([this.webhookQueue.idle(), new Promise((r) => setTimeout(r, 5_000).unref())]);
        this.http.closeAllConnections();
        await new Promise<void>((resolve) => this.http!.close(() => resolve()));
      }
      for (const c of this.closers) await c();
      this.processHost.close();
      removePidFile(this.config.dataDir, process.pid);
      this.dataDirLock.release();
    })();
    return this.closing;
  }

  private async finish(code: number): Promise<void> {
    await this.close();
    this.exitCode = code;
    for (const w of this.exitWaiters.splice(0)) w(code);
    this.opts.onExit?.(code);
  }
}
