// From an authenticated webhook to a running command: the decision (webhook-decision.ts)
// carried out. A command is accepted as an operation of the drain, journalled before the
// webhook is answered, queued or refused while draining, and launched; a closed pull request's
// locks, plans and working copies are released, also what its running commands take after the
// close. Recovery (recovery.ts) and the drain queue come back through here at start.
import { randomUUID } from 'node:crypto';
import { rmSync } from 'node:fs';
import type { Logger } from '../../../log.js';
import { since } from '../../atlantis-metrics.js';
import type { ServerConfig } from '../../config.js';
import type { Operation, OperationInfo } from '../../drain/operation-tracker.js';
import type { WebhookResponse } from '../../http/app.js';
import type { DeliveryAcceptance, StateStore } from '../../locks/state-store.js';
import { storeUnreachable } from '../../locks/store-wait.js';
import type { AtlantisServer } from '../../server.js';
import type { PullRequest, VcsHost, WebhookRequest } from '../../vcs/host.js';
import type { RepoAllowlist } from '../../vcs/repo-allowlist.js';
import type { WorkingCopies } from '../checkout/working-copy.js';
import type { CommandRunner } from '../commands/command-runner.js';
import { releasePullless } from '../commands/api-command.js';
import type { PullContext } from '../commands/context.js';
import { type PullRefusal, gatePull } from '../commands/pull-gate.js';
import {
  SHUTTING_DOWN_COMMENT,
  pullClosedComment,
  queuedCommandStartingComment,
  queuedDuringDrainComment,
  storeUnavailableComment,
} from '../pr/messages.js';
import { replayAnswer } from './delivery-replay.js';
import { type RecoveryDeps, recoverJournal } from './recovery.js';
import type { RefusedEntries } from './refused-entries.js';
import { type DecisionOptions, type WorkItem, decideWebhook } from './webhook-decision.js';

/** The body of a 503 to a command whose journal write failed. */
export const STORE_UNAVAILABLE_BODY = 'The state store cannot be reached: the command was not accepted, try again later';
/** The body of a 503 to a close whose release of the PR's locks could not begin. */
export const CLOSE_STORE_UNAVAILABLE_BODY =
  "The state store cannot be reached: the pull request's locks were not released, try again later";

export interface CommandIntakeDeps {
  server: Pick<AtlantisServer, 'startOperation' | 'finishOperation' | 'trackBackground' | 'tracker' | 'metrics'>;
  config: Pick<
    ServerConfig,
    | 'executableName'
    | 'queueDuringDrain'
    | 'emojiReaction'
    | 'allowCommands'
    | 'blockedExtraArgs'
    | 'disableAutoplan'
    | 'allowForkPrs'
    | 'silenceForkPrErrors'
  >;
  /** The store as a webhook uses it: a 503 at once when it is away. */
  store: StateStore;
  /** The store as accepted commands use it: their calls wait out a short outage (store-wait.ts). */
  patient: StateStore;
  refused: RefusedEntries;
  host: VcsHost;
  runner: CommandRunner;
  copies: WorkingCopies;
  logger: Logger;
  /** --repo-allowlist */
  allowlist: RepoAllowlist;
  /** The answer of the PR's owner when the webhook went to another replica (replicas/router.ts); undefined: handled here. */
  route: (pullKey: string, req: WebhookRequest) => Promise<WebhookResponse | undefined>;
}

const pullKey = (repo: string, pull: number): string => `${repo}#${pull}`;
const pullOf = (item: WorkItem): { repo: string; pull: number } => (item.kind === 'autoplan' ? item.ctx : item);

export class CommandIntake {
  /**
   * Commands running per PR, and whether the PR was closed while they ran. Why: a command
   * accepted while the PR was open may take its lock after the close event released the PR's
   * locks; nothing would release that one. Entries exist only while commands run.
   */
  private readonly running = new Map<string, { count: number; closed: boolean }>();
  /** What the webhook decision is made with (webhook-decision.ts). */
  private readonly decision: DecisionOptions;

  constructor(private readonly d: CommandIntakeDeps) {
    const c = d.config;
    this.decision = {
      webhooks: d.host.webhooks,
      allowlist: d.allowlist,
      hostname: d.host.hostname,
      user: d.host.user,
      executableName: c.executableName,
      allowCommands: c.allowCommands,
      blockedExtraArgs: c.blockedExtraArgs,
      disableAutoplan: c.disableAutoplan,
      allowForkPrs: c.allowForkPrs,
      silenceForkPrErrors: c.silenceForkPrErrors,
    };
  }

  /** The login of the server's own comments when it is not the host's user (known at start). */
  setBotLogin(login: string | undefined): void {
    this.decision.botLogin = login;
  }

  /** Posts a comment; a failure is counted (and thrown). */
  comment(repo: string, pull: number, body: string): Promise<void> {
    return this.d.host.comment(repo, pull, body).then(
      () => undefined,
      (e: unknown) => {
        this.d.server.metrics.githubRequestFailures.inc({ operation: 'create_comment' });
        throw e;
      },
    );
  }

  /** One webhook, handled here or by the PR's owner. */
  async onWebhook(req: WebhookRequest): Promise<WebhookResponse> {
    const { server, host, config: cfg, logger: log } = this.d;
    const d = decideWebhook(req, this.decision);
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
        server.trackBackground(this.comment(d.repo, d.pull, d.body));
        return { status: d.status, body: `${d.responseBody}\n` };
      case 'close':
        // To the owner too: the replica running the PR's commands must see the close, so that
        // what they take after it is released when they end (commandDone).
        return (await this.d.route(pullKey(d.repo, d.pull), req)) ?? this.closePull(d.repo, d.pull);
      case 'refuse':
        server.trackBackground(this.refuse(d.repo, d.pull, 'autoplan', d.gate));
        return { status: d.status, body: `${d.body}\n` };
      case 'work': {
        // Replicas sharing a store: the PR's owner runs it (replicas/router.ts); else here.
        const { repo, pull } = pullOf(d.item);
        return (await this.d.route(pullKey(repo, pull), req)) ?? this.accept(d.item, req.deliveryId);
      }
    }
  }

  /**
   * Accepts work as an operation, or refuses / queues it when draining. The decision is
   * synchronous: startOperation comes first, with no await before it (the drain's race guard),
   * and an accepted command is counted in `running` in the same tick. Then the command is
   * written to the journal, and 200 means it is stored (a server killed after the answer runs
   * it at its next start); a queued command waits for its enqueue the same way (202). A store
   * that cannot take the write: 503, and nothing was done (the operation ends here).
   */
  async accept(item: WorkItem, deliveryId?: string): Promise<WebhookResponse> {
    const { server, store, logger: log } = this.d;
    const op = server.startOperation(this.operationInfo(item));
    const { repo, pull } = pullOf(item);
    if (!op) {
      const line = this.lineOf(item);
      if (this.d.config.queueDuringDrain) {
        if ((await store.enqueue(repo, pull, item, deliveryId)) === undefined) return this.replayed(item, deliveryId, 'handled');
        server.trackBackground(this.comment(repo, pull, queuedDuringDrainComment(line)));
        log.info('Command queued during drain', { repo, pull, command: line });
        return { status: 202, body: 'Queued: the server is shutting down; the command runs on the next start\n' };
      }
      server.trackBackground(this.comment(repo, pull, SHUTTING_DOWN_COMMENT));
      log.info('Command refused during drain', { repo, pull, command: line });
      return { status: 503, body: `${SHUTTING_DOWN_COMMENT}\n` };
    }
    this.began(repo, pull);
    const id = randomUUID();
    const cmd = { id, repo, pull, payload: item };
    let accepted: DeliveryAcceptance;
    try {
      // With a delivery id, a delivery seen before is not run again (its record and the entry: one write).
      accepted = await this.observed(
        deliveryId === undefined ? store.acceptCommand(cmd).then((a) => ({ accepted: a })) : store.acceptDelivery(deliveryId, cmd),
      );
    } catch (e) {
      log.warn('Command refused: the state store cannot be reached', {
        repo,
        pull,
        command: this.lineOf(item),
        error: (e as Error).message,
      });
      server.metrics.commandsRefused.inc({ reason: 'store_unavailable' });
      // The write may have reached the store all the same: its entry must not run besides the redelivery.
      server.trackBackground(this.d.refused.add(id, deliveryId));
      await this.endCommand(repo, pull, op);
      return { status: 503, body: `${STORE_UNAVAILABLE_BODY}\n` };
    }
    if ('replay' in accepted) {
      await this.endCommand(repo, pull, op);
      return this.replayed(item, deliveryId, accepted.replay);
    }
    this.launch(item, id, op);
    return { status: 200, body: 'Processing...\n' };
  }

  /** A command of the PR starts (a webhook's, or the API's): a close meanwhile releases what it takes after it. */
  began(repo: string, pull: number): void {
    const key = pullKey(repo, pull);
    const entry = this.running.get(key) ?? { count: 0, closed: false };
    entry.count++;
    this.running.set(key, entry);
  }

  /** A command of the PR ended: the last one of a PR closed meanwhile releases what they took. */
  async ended(repo: string, pull: number): Promise<void> {
    const key = pullKey(repo, pull);
    const entry = this.running.get(key);
    if (!entry || --entry.count > 0) return;
    this.running.delete(key);
    if (!entry.closed) return;
    const released = await this.releasePull(repo, pull);
    this.d.logger.info('Released what commands took while their pull request was being closed', { repo, pull, locks: released });
  }

  /** The commands the previous server queued during its drain, each accepted again. */
  async replayQueue(): Promise<void> {
    for (const q of await this.d.store.takeAll()) {
      const item = q.payload as WorkItem;
      const line = this.lineOf(item);
      this.d.logger.info('Running command queued during the previous drain', { repo: q.repo, pull: q.pull, command: line });
      this.d.server.trackBackground(this.comment(q.repo, q.pull, queuedCommandStartingComment(line)));
      await this.accept(item);
    }
  }

  /**
   * Finishes what a dead server accepted (recovery.ts): this server's own journal at start, or
   * the journal of a replica that died without leaving, once this one won the claim.
   */
  async recover(deadReplica?: string): Promise<void> {
    if (deadReplica !== undefined)
      this.d.logger.warn('A replica stopped heartbeating: taking over its interrupted jobs and accepted commands', {
        replica: deadReplica,
      });
    await recoverJournal(this.recoveryDeps(), deadReplica);
  }

  /** What recovery needs to resume, adopt or release a dead server's commands. */
  private recoveryDeps(): RecoveryDeps {
    const { server, patient, copies, runner } = this.d;
    return {
      store: this.d.patient,
      logger: this.d.logger,
      executableName: this.d.config.executableName,
      comment: (repo, pull, body) => server.trackBackground(this.comment(repo, pull, body)),
      lineOf: (item) => this.lineOf(item),
      nameOf: (item) => this.nameOf(item),
      resume: (item, id) => {
        const op = server.startOperation(this.operationInfo(item));
        if (!op) return false;
        const { repo, pull } = pullOf(item);
        this.began(repo, pull);
        this.launch(item, id, op);
        return true;
      },
      adopt: async (item) => void (await this.accept(item)),
      releasePullless: (repo, pull) => releasePullless({ store: patient, copies, runner }, repo, pull),
    };
  }

  /** A command the PR may not run: the log line, the metric, and the reply unless silenced. */
  private refuse(repo: string, pull: number, command: string, gate: PullRefusal): Promise<void> {
    this.d.logger.info(gate.log, { repo, pull, command });
    this.d.server.metrics.commandsRefused.inc({ reason: gate.reason === 'fork' ? 'fork_pull_request' : 'closed_pull_request' });
    return gate.comment === undefined ? Promise.resolve() : this.comment(repo, pull, gate.comment);
  }

  /** The outcome of a store call in atlantis_store_up: 1 when it answered, 0 when it failed. */
  private observed<T>(p: Promise<T>): Promise<T> {
    const up = this.d.server.metrics.storeUp;
    return p.then(
      (v) => {
        up.set(1);
        return v;
      },
      (e: unknown) => {
        up.set(0);
        throw e;
      },
    );
  }

  private lineOf(item: WorkItem): string {
    return item.kind === 'autoplan' ? `${this.d.config.executableName} plan` : item.commandLine;
  }

  private nameOf(item: WorkItem): string {
    return item.kind === 'autoplan' ? 'plan' : item.command.name;
  }

  private operationInfo(item: WorkItem): OperationInfo {
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
   * Runs an accepted command. `began` marks it started in the journal and is called just before
   * its first side effect: for a comment, after the read of the PR (the host's answer) and before
   * the refusal comment, the reaction, hooks and jobs; for autoplan, before the runner. Why
   * there: up to that point the command has done nothing anyone can see, so a server that dies
   * before it may run the command again from the start; after it, the command may have
   * commented, taken locks or run terraform, and running it again could apply twice.
   * `began` false (the store failed): the command stops before doing anything.
   */
  private async execute(item: WorkItem, began: () => Promise<boolean>): Promise<void> {
    const { runner, logger: log } = this.d;
    if (item.kind === 'autoplan') return (await began()) ? runner.run({ kind: 'autoplan', ctx: item.ctx }) : undefined;
    let pr: PullRequest;
    try {
      pr = await this.d.host.getPull(item.repo, item.pull);
    } catch (e) {
      log.error('Could not read pull request', { repo: item.repo, pull: item.pull, error: (e as Error).message });
      this.d.server.metrics.commandsTotal.inc({ command: item.command.name, result: 'error' });
      return;
    }
    if (!(await began())) return;
    // A comment's payload says neither where the head is nor (reliably) whether the PR is
    // still open: the host's answer does, as Atlantis reads it.
    const gate = gatePull({ state: pr.state, headRepo: pr.headRepo, baseRepo: pr.baseRepo }, item.command.name, this.decision);
    if (gate.kind === 'refuse') return this.refuse(item.repo, item.pull, item.command.name, gate);
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

  private replayed(item: WorkItem, deliveryId: string | undefined, first: 'handled' | 'pending'): WebhookResponse {
    const { repo, pull } = pullOf(item);
    const deps = { logger: this.d.logger, metrics: this.d.server.metrics };
    return replayAnswer(first, deps, { repo, pull, command: this.lineOf(item), deliveryId });
  }

  /** Ends a command's operation after what a close left for it is released, as when that was synchronous. */
  private endCommand(repo: string, pull: number, op: Operation): Promise<void> {
    return this.ended(repo, pull)
      .catch((e: unknown) => this.d.logger.error('Could not release a closed pull request', { repo, pull, error: (e as Error).message }))
      .finally(() => this.d.server.finishOperation(op));
  }

  /** Runs a journalled command (counted in `running`, its operation started) to its end, then removes its entry. */
  private launch(item: WorkItem, id: string, op: Operation): void {
    const { patient, logger: log } = this.d;
    const { repo, pull } = pullOf(item);
    const began = (): Promise<boolean> =>
      this.observed(patient.commandStarted(id)).then(
        () => true,
        async (e: unknown) => {
          log.error('Command not run: the state store cannot be reached', {
            repo,
            pull,
            command: this.lineOf(item),
            error: (e as Error).message,
          });
          await this.comment(repo, pull, storeUnavailableComment(this.nameOf(item), this.lineOf(item))).catch(() => undefined);
          return false;
        },
      );
    void this.execute(item, began)
      .catch((e: unknown) => log.error('Command crashed', { error: (e as Error).message }))
      .then(() => this.observed(patient.commandFinished(id)))
      .catch((e: unknown) => log.warn('Could not remove a finished command from the journal', { repo, pull, error: (e as Error).message }))
      .then(() => this.endCommand(repo, pull, op));
  }

  /**
   * Releases a closed PR's locks and plans and deletes its working copies; returns the number
   * of locks. Two store calls: a command of this PR that records a status between them has
   * it deleted, as if it had come before the close; one still running releases again at its
   * end (ended()). Whether a command runs is read before the first await, as before.
   * `first`: the store of the first call (the raw one for a webhook: a 503 at once, nothing done).
   */
  private async releasePull(repo: string, pull: number, first: StateStore = this.d.patient): Promise<number> {
    // Working copies stay while a command of this PR still runs in them (deleted when it ends).
    const removeCopies = !this.d.server.tracker.isShuttingDown && !this.running.has(pullKey(repo, pull));
    const { locks, plans } = await first.unlockAllForPull(repo, pull, { discardPlans: true });
    for (const p of plans) rmSync(p.planPath, { force: true });
    // As Atlantis: a closed PR's plan status goes too (a reopened PR plans afresh). Waiting:
    // once the locks went, a redelivered close would find nothing to tell the PR about.
    await this.d.patient.deletePullStatus(repo, pull);
    if (removeCopies) this.d.copies.remove(repo, pull);
    if (locks.length > 0) this.d.server.trackBackground(this.comment(repo, pull, pullClosedComment(locks)));
    return locks.length;
  }

  private async closePull(repo: string, pull: number): Promise<WebhookResponse> {
    const { server, logger: log } = this.d;
    // Not an operation: no terraform runs, and locks must not outlive a closed PR even when
    // the server is draining. The running commands are marked before any await.
    const entry = this.running.get(pullKey(repo, pull));
    if (entry) entry.closed = true;
    // As Atlantis: a closed PR's cancel mark and project states go with it.
    this.d.runner.forgetPull(repo, pull);
    let released: number;
    const started = process.hrtime.bigint();
    try {
      released = await this.releasePull(repo, pull, this.d.store);
      server.metrics.atlantis.pullClosed(true, since(started));
    } catch (e) {
      server.metrics.atlantis.pullClosed(false, since(started));
      if (!storeUnreachable(e)) throw e;
      log.warn('Close not handled: the state store cannot be reached', { repo, pull, error: (e as Error).message });
      return { status: 503, body: `${CLOSE_STORE_UNAVAILABLE_BODY}\n` };
    }
    return { status: 200, body: `Pull request closed: released ${released} lock(s)\n` };
  }
}
