// The workflow's entry point: builds its parts and wires them into the server (the plugin).
// The store, the code host, working copies, jobs and the command runner; the intake of
// POST /events (intake/command-intake.ts); Atlantis's API and the web page; and, at start,
// crash recovery (the command and job journals) and the commands the previous server queued
// during its drain. Composition only: what happens is in the rooms below.
import type express from 'express';
import { VERSION } from '../../version.js';
import type { WebhookResponse } from '../http/app.js';
import { ApplyWebhooks } from '../notifications/apply-webhooks.js';
import { importAtStart, postImportNotices } from '../locks/bolt-import.js';
import type { StoreParts } from '../locks/store-parts.js';
import { redisStartWarnings, redisTarget } from '../locks/store-config.js';
import { waitingStore } from '../locks/store-wait.js';
import { openReplication } from '../replicas/router.js';
import type { AtlantisServer } from '../server.js';
import type { WebhookRequest } from '../vcs/host.js';
import { ownerTeams } from '../policy/policy-sets.js';
import { openVcsHost } from '../vcs/open-host.js';
import { lockDiscardedComment } from '../web/lock-delete.js';
import { WorkingCopies } from './checkout/working-copy.js';
import type { ApiCommandDeps } from './commands/api-command.js';
import { CommandRunner } from './commands/command-runner.js';
import { WorkflowHooks } from './commands/hooks.js';
import { CommandIntake } from './intake/command-intake.js';
import { RefusedEntries } from './intake/refused-entries.js';
import { JobLogPruner } from './jobs/job-logs.js';
import { JobOutputMirror } from './jobs/job-output-mirror.js';
import { JobRegistry } from './jobs/jobs.js';
import { openProjectRunner } from './jobs/terraform-setup.js';
import { repoAllowlistOf, serverRepoConfigOf } from './repo-config/startup-settings.js';

/** `parts`: the store's, from loadStoreParts (locks/open-store.ts). */
export function workflowPlugin(server: AtlantisServer, parts: StoreParts) {
  const cfg = server.config;
  const log = server.logger.child({ component: 'workflow' });
  const allowlist = repoAllowlistOf(cfg);
  const serverRepoConfig = serverRepoConfigOf(cfg);
  const store = parts.openStateStore(log);
  // The store as accepted commands use it: their calls wait out a short outage (store-wait.ts).
  const patient = waitingStore(store, { logger: log, onReachable: (up) => server.metrics.storeUp.set(up ? 1 : 0) });
  const leases = parts.openProjectLeases(log);
  // The code host (vcs/open-host.ts): the workflow never asks which.
  const host = openVcsHost(cfg.vcs, {
    logger: log,
    metrics: server.metrics.atlantis,
    maxCommentsPerCommand: cfg.maxCommentsPerCommand,
    statusName: cfg.vcsStatusName,
    ignoreStatusNames: cfg.ignoreVcsStatusNames,
    policyOwnerTeams: serverRepoConfig?.policies ? ownerTeams(serverRepoConfig.policies) : [],
  });
  const copies = new WorkingCopies(cfg.dataDir, host.git.token, log, server.processHost, {
    strategy: cfg.checkoutStrategy,
    depth: cfg.checkoutDepth,
    gitUser: host.git.username,
  });
  const projectRunner = openProjectRunner(cfg, {
    processHost: server.processHost,
    runner: server.runner,
    host,
    logger: log,
    serverRepoConfig,
  });
  // Replicas show each other's jobs from the store; a server alone has them all in memory.
  const jobs = new JobRegistry(store.shared ? { mirror: new JobOutputMirror(store, log) } : {});
  const jobLogPath = (id: string) => server.jobLogPath(id);
  const jobLogPruner = new JobLogPruner({
    dir: server.jobLogDir,
    retention: { maxAgeMs: cfg.jobLogRetentionMs, maxCount: cfg.jobLogMaxCount },
    running: () => new Set(jobs.running().map((j) => j.id)),
    onPruned: (id) => jobs.forget(id),
    logger: log,
  });
  const hooks = new WorkflowHooks({
    server: serverRepoConfig,
    runner: server.runner,
    jobs,
    jobLogPath,
    atlantisUrl: cfg.atlantisUrl,
    host,
    logger: log,
    statusName: cfg.vcsStatusName,
  });
  const runner = new CommandRunner({
    config: cfg,
    store: patient,
    leases,
    host,
    copies,
    jobs,
    projectRunner,
    metrics: server.metrics,
    logger: log,
    jobLogPath,
    serverRepoConfig,
    hooks,
    applyWebhooks: new ApplyWebhooks(cfg.webhooks, log),
  });
  const intake = new CommandIntake({
    server,
    config: cfg,
    store,
    patient,
    refused: new RefusedEntries(store, log),
    host,
    runner,
    copies,
    logger: log,
    allowlist,
    // The router is made below: a replica's death is recovered through this intake.
    route: (key, req) => replication.router.route(key, req),
  });
  const api: ApiCommandDeps = {
    config: cfg,
    runner,
    store,
    host,
    copies,
    logger: log,
    began: (repo, pull) => intake.began(repo, pull),
    ended: (repo, pull) => intake.ended(repo, pull),
  };
  const replication = openReplication(cfg, parts, {
    logger: log,
    metrics: server.metrics,
    isDraining: () => server.tracker.isShuttingDown,
    headerNames: host.webhooks.headerNames,
    // A replica died without leaving, and this one won the claim: its journal is ours to finish.
    onReplicaGone: (gone) => intake.recover(gone.id),
  });
  const { membership } = replication;
  const comment = (repo: string, pull: number, body: string) => intake.comment(repo, pull, body);

  return {
    webhooks: host.webhooks,
    // Counted under Atlantis's names by the replica the host sent it to, not again by the one it was handed to.
    onWebhook: async (req: WebhookRequest): Promise<WebhookResponse> => {
      const res = await replication.router.receive(req, (r) => intake.onWebhook(r));
      if (req.forwardedBy === undefined) host.webhooks.tally?.(req, res.status);
      return res;
    },
    storeHealthy: async () => {
      const up = await store.isHealthy();
      server.metrics.storeUp.set(up ? 1 : 0);
      return up;
    },
    extraRoutes: async (app: express.Express) => {
      // Loaded with Express, by the first request that needs it (http/app.ts), not at start.
      const [{ mountApi }, { mountWebUi }, { apiRoutes }] = await Promise.all([
        import('../http/api.js'),
        import('../web/routes.js'),
        import('./api-routes.js'),
      ]);
      mountApi(app, apiRoutes(api, { server, allowlist }));
      mountWebUi(app, {
        store,
        jobs,
        jobLogPath,
        logger: log,
        atlantisUrl: cfg.atlantisUrl,
        pullUrl: (repo, pull) => host.pullUrl(repo, pull),
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
        const mode = cfg.store.redis.sentinel ? 'sentinel' : 'single-node';
        log.info(`Utilizing Redis DB in ${mode} mode`, { redis: redisTarget(cfg.store.redis), replicaId: cfg.replicaId });
        for (const w of redisStartWarnings(cfg.store.redis)) log.warn(w);
      }
      // Before the journal is read: a second process under a live replica's id must not
      // take that replica's journal for its own (it refuses to start instead).
      await membership.claim();
      // Atlantis's atlantis.db in the data dir: its locks carried over, once (bolt-import.ts).
      await importAtStart(store, cfg.dataDir, `server ${cfg.replicaId}`, log);
      intake.setBotLogin(await host.botLogin());
      server.trackBackground(
        postImportNotices(store, comment, cfg.executableName, log).catch((e: Error) =>
          log.warn('Could not read the pull requests to tell after the Atlantis import', { error: e.message }),
        ),
      );
      await intake.recover();
      await membership.start();
      // A draining replica owns no PR: the others stop handing it webhooks at its next heartbeat.
      server.tracker.onShutDown(() =>
        membership.setDraining(true).catch((e: Error) => log.warn('Could not announce the drain to the replicas', { error: e.message })),
      );
      await jobLogPruner.start();
      await intake.replayQueue();
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
