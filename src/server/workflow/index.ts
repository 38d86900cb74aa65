// Wires the PR workflow into the server: lock store, code host, working copies, the
// command runner, POST /events, the web page, and, at start, crash recovery (the command and
// job journals) and the commands queued by the previous server during its drain.
import { randomUUID } from 'node:crypto';
import { rmSync } from 'node:fs';
import path from 'node:path';
import { VERSION } from '../../version.js';
import { since } from '../atlantis-metrics.js';
import { importAtStart, postImportNotices } from '../locks/bolt-import.js';
import { openStateStore } from '../locks/open-store.js';
import type { DeliveryAcceptance, StateStore } from '../locks/state-store.js';
import { storeUnreachable, waitingStore } from '../locks/store-wait.js';
import type { Operation } from '../drain/operation-tracker.js';
import { openProjectLeases } from '../locks/project-lease.js';
import { redisTarget } from '../locks/redis-connection.js';
import { redisStartWarnings } from '../locks/store-config.js';
import { openReplication } from '../replicas/router.js';
import type { AtlantisServer } from '../server.js';
import { GitCredsForInit } from '../terraform/git-creds.js';
import { TerraformBinaries } from '../terraform/tf-install.js';
import type { WebhookResponse } from '../http/app.js';
import { openVcsHost } from '../vcs/open-host.js';
import type { PullRequest, WebhookRequest } from '../vcs/host.js';
import { CommandRunner } from './commands/command-runner.js';
import type { PullContext } from './commands/context.js';
import { WorkflowHooks } from './commands/hooks.js';
import { JobLogPruner } from './jobs/job-logs.js';
import { JobOutputMirror } from './jobs/job-output-mirror.js';
import { JobRegistry } from './jobs/jobs.js';
import {
  SHUTTING_DOWN_COMMENT,
  pullClosedComment,
  queuedCommandStartingComment,
  queuedDuringDrainComment,
  storeUnavailableComment,
} from './pr/messages.js';
import { ProjectRunner } from './jobs/project-runner.js';
import { type RecoveryDeps, recoverJournal } from './intake/recovery.js';
import { RefusedEntries } from './intake/refused-entries.js';
import { type PullRefusal, gatePull } from './commands/pull-gate.js';
import { type WorkItem, decideWebhook } from './intake/webhook-decision.js';
import { lockDiscardedComment } from '../web/lock-delete.js';
import { repoAllowlistOf, serverRepoConfigOf } from './repo-config/startup-settings.js';
import { replayAnswer } from './intake/delivery-replay.js';
import { mountWebUi } from '../web/routes.js';
import { mountApi } from '../http/api.js';
import { type ApiCommandDeps, releasePullless } from './commands/api-command.js';
import { apiRoutes } from './api-routes.js';
import { WorkingCopies } from './checkout/working-copy.js';

/** The body of a 503 to a command whose journal write failed. */
export const STORE_UNAVAILABLE_BODY = 'The state store cannot be reached: the command was not accepted, try again later';
/** The body of a 503 to a close whose release of the PR's locks could not begin. */
export const CLOSE_STORE_UNAVAILABLE_BODY =
  "The state store cannot be reached: the pull request's locks were not released, try again later";

export function workflowPlugin(server: AtlantisServer) {
  const cfg = server.config;
  const log = server.logger.child({ component: 'workflow' });
  const allowlist = repoAllowlistOf(cfg);
  const serverRepoConfig = serverRepoConfigOf(cfg);
  const store = openStateStore(cfg, log);
  // The store as accepted commands use it: their calls wait out a short outage (store-wait.ts).
  const patient = waitingStore(store, { logger: log, onReachable: (up) => server.metrics.storeUp.set(up ? 1 : 0) });
  const refused = new RefusedEntries(store, log);
  const leases = openProjectLeases(cfg, log);
  // The code host (vcs/open-host.ts): the workflow never asks which.
  const host = openVcsHost(cfg.vcs, { logger: log, metrics: server.metrics.atlantis, maxCommentsPerCommand: cfg.maxCommentsPerCommand });
  const copies = new WorkingCopies(cfg.dataDir, host.git.token, log, server.processHost, {
    strategy: cfg.checkoutStrategy,
    depth: cfg.checkoutDepth,
    gitUser: host.git.username,
  });
  const terraformBinaries = new TerraformBinaries({
    tfBinary: cfg.tfBinary,
    download: cfg.tfDownload,
    downloadUrl: cfg.tfDownloadUrl,
    binDir: path.join(cfg.dataDir, 'bin'),
    host: server.processHost,
    logger: log,
    ...(cfg.tfDownloadKey ? { signingKey: { armored: cfg.tfDownloadKey, owner: 'the key of --tf-download-key-file' } } : {}),
  });
  if (cfg.tfDownload && cfg.tfDownloadUrl.startsWith('http://'))
    log.warn(
      'Terraform downloads use plain HTTP: what is fetched can be read and withheld on the way (a changed SHA256SUMS or zip is still refused by its signature)',
      {
        url: cfg.tfDownloadUrl,
      },
    );
  if (cfg.defaultTfVersion) {
    // As Atlantis: the default version is fetched at start, in the background; a failure is
    // logged here and told again on the PR of the first project that needs it.
    const v = cfg.defaultTfVersion;
    void terraformBinaries.binaryFor(v).catch((e: Error) => log.error('Could not get terraform', { version: v, error: e.message }));
  }
  // Replicas show each other's jobs from the store; a server alone has them all in memory.
  const jobs = new JobRegistry(store.shared ? { mirror: new JobOutputMirror(store, log) } : {});
  const jobLogPruner = new JobLogPruner({
    dir: server.jobLogDir,
    retention: { maxAgeMs: cfg.jobLogRetentionMs, maxCount: cfg.jobLogMaxCount },
    running: () => new Set(jobs.running().map((j) => j.id)),
    onPruned: (id) => jobs.forget(id),
    logger: log,
  });
  const runner = new CommandRunner({
    config: cfg,
    store: patient,
    leases,
    host,
    copies,
    jobs,
    projectRunner: new ProjectRunner(server.runner, {
      binaries: terraformBinaries,
      defaultVersion: cfg.defaultTfVersion,
      gitCreds: cfg.writeGitCreds ? new GitCredsForInit({ dir: path.join(cfg.dataDir, 'git-creds'), ...host.initCredentials }) : undefined,
    }),
    metrics: server.metrics,
    logger: log,
    jobLogPath: (id) => server.jobLogPath(id),
    serverRepoConfig,
    hooks: new WorkflowHooks({
      server: serverRepoConfig,
      runner: server.runner,
      jobs,
      jobLogPath: (id) => server.jobLogPath(id),
      atlantisUrl: cfg.atlantisUrl,
      host,
      logger: log,
    }),
  });
  const decisionOptions = {
    webhooks: host.webhooks,
    allowlist,
    hostname: host.hostname,
    user: host.user,
    botLogin: undefined as string | undefined,
    executableName: cfg.executableName,
    allowCommands: cfg.allowCommands,
    blockedExtraArgs: cfg.blockedExtraArgs,
    disableAutoplan: cfg.disableAutoplan,
    allowForkPrs: cfg.allowForkPrs,
    silenceForkPrErrors: cfg.silenceForkPrErrors,
  };

  const comment = (repo: string, pull: number, body: string): Promise<void> =>
    host.comment(repo, pull, body).then(
      () => undefined,
      (e: unknown) => {
        server.metrics.githubRequestFailures.inc({ operation: 'create_comment' });
        throw e;
      },
    );

  /** A command the PR may not run: the log line, the metric, and the reply unless silenced. */
  function refuse(repo: string, pull: number, command: string, gate: PullRefusal): Promise<void> {
    log.info(gate.log, { repo, pull, command });
    server.metrics.commandsRefused.inc({ reason: gate.reason === 'fork' ? 'fork_pull_request' : 'closed_pull_request' });
    return gate.comment === undefined ? Promise.resolve() : comment(repo, pull, gate.comment);
  }

  /** The outcome of a store call in atlantis_store_up: 1 when it answered, 0 when it failed. */
  const observed = <T>(p: Promise<T>): Promise<T> =>
    p.then(
      (v) => {
        server.metrics.storeUp.set(1);
        return v;
      },
      (e: unknown) => {
        server.metrics.storeUp.set(0);
        throw e;
      },
    );
  const lineOf = (item: WorkItem): string => (item.kind === 'autoplan' ? `${cfg.executableName} plan` : item.commandLine);
  const nameOf = (item: WorkItem): string => (item.kind === 'autoplan' ? 'plan' : item.command.name);

  /**
   * Runs an accepted command. `began` marks it started in the journal and is called just before
   * its first side effect: for a comment, after the read of the PR (GitHub's answer) and before
   * the refusal comment, the reaction, hooks and jobs; for autoplan, before the runner. Why
   * there: up to that point the command has done nothing anyone can see, so a server that dies
   * before it may run the command again from the start; after it, the command may have
   * commented, taken locks or run terraform, and running it again could apply twice.
   * `began` false (the store failed): the command stops before doing anything.
   */
  async function execute(item: WorkItem, began: () => Promise<boolean>): Promise<void> {
    if (item.kind === 'autoplan') return (await began()) ? runner.run({ kind: 'autoplan', ctx: item.ctx }) : undefined;
    let pr: PullRequest;
    try {
      pr = await host.getPull(item.repo, item.pull);
    } catch (e) {
      log.error('Could not read pull request', { repo: item.repo, pull: item.pull, error: (e as Error).message });
      server.metrics.commandsTotal.inc({ command: item.command.name, result: 'error' });
      return;
    }
    if (!(await began())) return;
    // A comment's payload says neither where the head is nor (reliably) whether the PR is
    // still open: GitHub's answer does, as Atlantis reads it.
    const gate = gatePull({ state: pr.state, headRepo: pr.headRepo, baseRepo: pr.baseRepo }, item.command.name, decisionOptions);
    if (gate.kind === 'refuse') return refuse(item.repo, item.pull, item.command.name, gate);
    const ctx: PullContext = {
      repo: item.repo,
      pull: item.pull,
      user: item.user,
      cloneUrl: pr.headCloneUrl ?? item.cloneUrl,
      baseCloneUrl: pr.baseCloneUrl ?? item.cloneUrl,
      headSha: pr.headSha,
      headRef: pr.headRef,
      baseRef: pr.baseRef,
      author: pr.author,
      headRepo: pr.headRepo ?? item.repo,
    };
    return runner.run({ kind: 'comment', ctx, command: item.command, commentId: item.commentId });
  }

  function operationInfo(item: WorkItem) {
    if (item.kind === 'autoplan') return { command: 'autoplan', repo: item.ctx.repo, pull: item.ctx.pull, project: null };
    const c = item.command;
    return {
      command: c.name,
      repo: item.repo,
      pull: item.pull,
      project: c.project ?? (c.dir !== undefined ? `${c.dir}${c.workspace ? `/${c.workspace}` : ''}` : null),
    };
  }

  /**
   * Accepts work as an operation, or refuses / queues it when draining. The decision is
   * synchronous: startOperation comes first, with no await before it (the drain's race guard),
   * and an accepted command is counted in `running` in the same tick. Then the command is
   * written to the journal, and 200 means it is stored (a server killed after the answer runs
   * it at its next start); a queued command waits for its enqueue the same way (202). A store
   * that cannot take the write: 503, and nothing was done (the operation ends here).
   */
  async function accept(item: WorkItem, deliveryId?: string): Promise<WebhookResponse> {
    const op = server.startOperation(operationInfo(item));
    const { repo, pull } = item.kind === 'autoplan' ? item.ctx : item;
    if (!op) {
      const line = lineOf(item);
      if (cfg.queueDuringDrain) {
        if ((await store.enqueue(repo, pull, item, deliveryId)) === undefined) return replayed(item, deliveryId, 'handled');
        server.trackBackground(comment(repo, pull, queuedDuringDrainComment(line)));
        log.info('Command queued during drain', { repo, pull, command: line });
        return { status: 202, body: 'Queued: the server is shutting down; the command runs on the next start\n' };
      }
      server.trackBackground(comment(repo, pull, SHUTTING_DOWN_COMMENT));
      log.info('Command refused during drain', { repo, pull, command: line });
      return { status: 503, body: `${SHUTTING_DOWN_COMMENT}\n` };
    }
    countRunning(repo, pull);
    const id = randomUUID();
    const cmd = { id, repo, pull, payload: item };
    let accepted: DeliveryAcceptance;
    try {
      // With a delivery id, a delivery seen before is not run again (its record and the entry: one write).
      accepted = await observed(
        deliveryId === undefined ? store.acceptCommand(cmd).then((a) => ({ accepted: a })) : store.acceptDelivery(deliveryId, cmd),
      );
    } catch (e) {
      log.warn('Command refused: the state store cannot be reached', { repo, pull, command: lineOf(item), error: (e as Error).message });
      server.metrics.commandsRefused.inc({ reason: 'store_unavailable' });
      // The write may have reached the store all the same: its entry must not run besides the redelivery.
      server.trackBackground(refused.add(id, deliveryId));
      await endCommand(repo, pull, op);
      return { status: 503, body: `${STORE_UNAVAILABLE_BODY}\n` };
    }
    if ('replay' in accepted) {
      await endCommand(repo, pull, op);
      return replayed(item, deliveryId, accepted.replay);
    }
    launch(item, id, op);
    return { status: 200, body: 'Processing...\n' };
  }

  function replayed(item: WorkItem, deliveryId: string | undefined, first: 'handled' | 'pending'): WebhookResponse {
    const { repo, pull } = item.kind === 'autoplan' ? item.ctx : item;
    return replayAnswer(first, { logger: log, metrics: server.metrics }, { repo, pull, command: lineOf(item), deliveryId });
  }

  function countRunning(repo: string, pull: number): void {
    const key = pullKey(repo, pull);
    const entry = running.get(key) ?? { count: 0, closed: false };
    entry.count++;
    running.set(key, entry);
  }

  /** Ends a command's operation after what a close left for it is released, as when that was synchronous. */
  function endCommand(repo: string, pull: number, op: Operation): Promise<void> {
    return commandDone(repo, pull)
      .catch((e: unknown) => log.error('Could not release a closed pull request', { repo, pull, error: (e as Error).message }))
      .finally(() => server.finishOperation(op));
  }

  /** Runs a journalled command (counted in `running`, its operation started) to its end, then removes its entry. */
  function launch(item: WorkItem, id: string, op: Operation): void {
    const { repo, pull } = item.kind === 'autoplan' ? item.ctx : item;
    const began = (): Promise<boolean> =>
      observed(patient.commandStarted(id)).then(
        () => true,
        async (e: unknown) => {
          log.error('Command not run: the state store cannot be reached', {
            repo,
            pull,
            command: lineOf(item),
            error: (e as Error).message,
          });
          await comment(repo, pull, storeUnavailableComment(nameOf(item), lineOf(item))).catch(() => undefined);
          return false;
        },
      );
    void execute(item, began)
      .catch((e: unknown) => log.error('Command crashed', { error: (e as Error).message }))
      .then(() => observed(patient.commandFinished(id)))
      .catch((e: unknown) => log.warn('Could not remove a finished command from the journal', { repo, pull, error: (e as Error).message }))
      .then(() => endCommand(repo, pull, op));
  }

  /**
   * Commands running per PR, and whether the PR was closed while they ran. Why: a command
   * accepted while the PR was open may take its lock after the close event released the PR's
   * locks; nothing would release that one. Entries exist only while commands run.
   */
  const running = new Map<string, { count: number; closed: boolean }>();
  const pullKey = (repo: string, pull: number): string => `${repo}#${pull}`;

  async function commandDone(repo: string, pull: number): Promise<void> {
    const key = pullKey(repo, pull);
    const entry = running.get(key);
    if (!entry || --entry.count > 0) return;
    running.delete(key);
    if (!entry.closed) return;
    const released = await releasePull(repo, pull);
    log.info('Released what commands took while their pull request was being closed', { repo, pull, locks: released });
  }

  /**
   * Releases a closed PR's locks and plans and deletes its working copies; returns the number
   * of locks. Two store calls: a command of this PR that records a status between them has
   * it deleted, as if it had come before the close; one still running releases again at its
   * end (commandDone). Whether a command runs is read before the first await, as before.
   * `first`: the store of the first call (the raw one for a webhook: a 503 at once, nothing done).
   */
  async function releasePull(repo: string, pull: number, first: StateStore = patient): Promise<number> {
    // Working copies stay while a command of this PR still runs in them (deleted when it ends).
    const removeCopies = !server.tracker.isShuttingDown && !running.has(pullKey(repo, pull));
    const { locks, plans } = await first.unlockAllForPull(repo, pull, { discardPlans: true });
    for (const p of plans) rmSync(p.planPath, { force: true });
    // As Atlantis: a closed PR's plan status goes too (a reopened PR plans afresh). Waiting:
    // once the locks went, a redelivered close would find nothing to tell the PR about.
    await patient.deletePullStatus(repo, pull);
    if (removeCopies) copies.remove(repo, pull);
    if (locks.length > 0) server.trackBackground(comment(repo, pull, pullClosedComment(locks)));
    return locks.length;
  }

  async function closePull(repo: string, pull: number): Promise<WebhookResponse> {
    // Not an operation: no terraform runs, and locks must not outlive a closed PR even when
    // the server is draining. The running commands are marked before any await.
    const entry = running.get(pullKey(repo, pull));
    if (entry) entry.closed = true;
    // As Atlantis: a closed PR's cancel mark and project states go with it.
    runner.forgetPull(repo, pull);
    let released: number;
    const started = process.hrtime.bigint();
    try {
      released = await releasePull(repo, pull, store);
      server.metrics.atlantis.pullClosed(true, since(started));
    } catch (e) {
      server.metrics.atlantis.pullClosed(false, since(started));
      if (!storeUnreachable(e)) throw e;
      log.warn('Close not handled: the state store cannot be reached', { repo, pull, error: (e as Error).message });
      return { status: 503, body: `${CLOSE_STORE_UNAVAILABLE_BODY}\n` };
    }
    return { status: 200, body: `Pull request closed: released ${released} lock(s)\n` };
  }

  async function onWebhook(req: WebhookRequest): Promise<WebhookResponse> {
    const d = decideWebhook(req, decisionOptions);
    switch (d.kind) {
      case 'respond':
        if (d.status >= 400)
          log.warn('Webhook rejected', { status: d.status, reason: d.body, event: req.event, deliveryId: req.deliveryId });
        return { status: d.status, body: `${d.body}\n` };
      case 'reply':
        // As Atlantis: a comment answered without running (help, usage, errors) gets the reaction too.
        if (host.react && cfg.emojiReaction !== '' && d.commentId !== undefined)
          server.trackBackground(
            host
              .react(d.repo, d.pull, d.commentId, cfg.emojiReaction)
              .catch((e: unknown) => log.warn('Failed to react to comment', { repo: d.repo, pull: d.pull, error: (e as Error).message })),
          );
        server.trackBackground(comment(d.repo, d.pull, d.body));
        return { status: d.status, body: `${d.responseBody}\n` };
      case 'close':
        // To the owner too: the replica running the PR's commands must see the close, so that
        // what they take after it is released when they end (commandDone).
        return (await router.route(pullKey(d.repo, d.pull), req)) ?? closePull(d.repo, d.pull);
      case 'refuse':
        server.trackBackground(refuse(d.repo, d.pull, 'autoplan', d.gate));
        return { status: d.status, body: `${d.body}\n` };
      case 'work': {
        // Replicas sharing a store: the PR's owner runs it (replicas/router.ts); else here.
        const { repo, pull } = d.item.kind === 'autoplan' ? d.item.ctx : d.item;
        return (await router.route(pullKey(repo, pull), req)) ?? accept(d.item, req.deliveryId);
      }
    }
  }

  const apiDeps: ApiCommandDeps = { config: cfg, runner, store, host, copies, logger: log, began: countRunning, ended: commandDone };
  const recovery: RecoveryDeps = {
    store: patient,
    logger: log,
    executableName: cfg.executableName,
    comment: (repo, pull, body) => server.trackBackground(comment(repo, pull, body)),
    lineOf,
    nameOf,
    resume: (item, id) => {
      const op = server.startOperation(operationInfo(item));
      if (!op) return false;
      const { repo, pull } = item.kind === 'autoplan' ? item.ctx : item;
      countRunning(repo, pull);
      launch(item, id, op);
      return true;
    },
    adopt: async (item) => void (await accept(item)),
    releasePullless: (repo, pull) => releasePullless({ ...apiDeps, store: patient }, repo, pull),
  };

  const { membership, router } = openReplication(cfg, {
    logger: log,
    metrics: server.metrics,
    isDraining: () => server.tracker.isShuttingDown,
    headerNames: host.webhooks.headerNames,
    // A replica died without leaving, and this one won the claim: its journal is ours to finish.
    onReplicaGone: async (gone) => {
      log.warn('A replica stopped heartbeating: taking over its interrupted jobs and accepted commands', { replica: gone.id });
      await recoverJournal(recovery, gone.id);
    },
  });

  async function replayQueue(): Promise<void> {
    for (const q of await store.takeAll()) {
      const item = q.payload as WorkItem;
      const line = lineOf(item);
      log.info('Running command queued during the previous drain', { repo: q.repo, pull: q.pull, command: line });
      server.trackBackground(comment(q.repo, q.pull, queuedCommandStartingComment(line)));
      await accept(item);
    }
  }

  return {
    webhooks: host.webhooks,
    // Counted under Atlantis's names by the replica the host sent it to, not again by the one it was handed to.
    onWebhook: async (req: WebhookRequest): Promise<WebhookResponse> => {
      const res = await router.receive(req, onWebhook);
      if (req.forwardedBy === undefined) host.webhooks.tally?.(req, res.status);
      return res;
    },
    storeHealthy: async () => {
      const up = await store.isHealthy();
      server.metrics.storeUp.set(up ? 1 : 0);
      return up;
    },
    extraRoutes: (app: import('express').Express) => {
      mountApi(app, apiRoutes(apiDeps, { server, allowlist }));
      mountWebUi(app, {
        store,
        jobs,
        jobLogPath: (id) => server.jobLogPath(id),
        logger: log,
        server: () => ({
          phase: server.drain.state.phase,
          drainingSince: server.drain.state.since,
          drainReason: server.drain.state.reason,
          inProgress: server.tracker.inProgress,
          ...(store.shared ? { replicaId: cfg.replicaId } : {}),
          version: VERSION,
        }),
        applyLockEnabled: !cfg.disableGlobalApplyLock,
        ...(cfg.webBasicAuth ? { webUser: cfg.webUsername } : {}),
        atlantisUrl: cfg.atlantisUrl,
        pullUrl: (repo, pull) => host.pullUrl(repo, pull),
        onLockDiscarded: (l) => {
          log.info('Lock deleted from the web page', { repo: l.repo, pull: l.pull, dir: l.dir, workspace: l.workspace });
          // An API run without a pull request (pull <= 0) has no PR to tell.
          if (l.pull > 0) server.trackBackground(comment(l.repo, l.pull, lockDiscardedComment(l.dir, l.workspace)));
        },
      });
    },
    start: async () => {
      // As Atlantis: a store that cannot be reached at start stops the start (a pod restarts).
      await store.connect();
      server.metrics.storeUp.set(1);
      if (cfg.store.type === 'redis') {
        log.info(`Utilizing Redis DB in ${cfg.store.redis.sentinel ? 'sentinel' : 'single-node'} mode`, {
          redis: redisTarget(cfg.store.redis),
          replicaId: cfg.replicaId,
        });
        for (const w of redisStartWarnings(cfg.store.redis)) log.warn(w);
      }
      // Before the journal is read: a second process under a live replica's id must not
      // take that replica's journal for its own (it refuses to start instead).
      await membership.claim();
      // Atlantis's atlantis.db in the data dir: its locks carried over, once (bolt-import.ts).
      await importAtStart(store, cfg.dataDir, `server ${cfg.replicaId}`, log);
      decisionOptions.botLogin = await host.botLogin();
      server.trackBackground(
        postImportNotices(store, comment, cfg.executableName, log).catch((e: Error) =>
          log.warn('Could not read the pull requests to tell after the Atlantis import', { error: e.message }),
        ),
      );
      await recoverJournal(recovery);
      await membership.start();
      // A draining replica owns no PR: the others stop handing it webhooks at its next heartbeat.
      server.tracker.onShutDown(() =>
        membership.setDraining(true).catch((e: Error) => log.warn('Could not announce the drain to the replicas', { error: e.message })),
      );
      await jobLogPruner.start();
      await replayQueue();
    },
    close: async () => {
      await membership.leave().catch((e: Error) => log.warn('Could not leave the replicas', { error: e.message }));
      await membership.close();
      await jobLogPruner.stop();
      await leases.close();
      await store.close();
    },
  };
}
