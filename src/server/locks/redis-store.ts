// The StateStore on Redis, shared by several server replicas (`--locking-db-type redis`).
//
// Key layout (P is `keyPrefix`, default `atlantis:`; R#N is `<owner/name>#<pull>`, which the
// last `#` splits unambiguously because the pull is a number; F is the JSON array
// `[repo, dir, workspace]`, G the JSON array `[dir, workspace]`, both injective):
//
//   P locks                  HASH  F -> LockRecord JSON (project only when set)
//   P pull-locks:R#N         SET   the F of every lock pull N of repo R holds (unlockAllForPull)
//   P plans:R#N              HASH  G -> plan record JSON (no planPath: each replica computes its
//                                  own; `fileSha256`/`fileSize` describe the bytes kept below,
//                                  `madeBy` the replica that planned, `mac` its seal)
//   P planfiles:R#N          HASH  G -> the plan file's bytes (absent when no file was written)
//   P pull-status:R#N        HASH  v -> version, json -> PullStatus JSON
//   P version                STRING counter giving every pull-status write a never-reused version
//   P queue                  LIST  queued command JSON, oldest first
//   P queue-id               STRING counter of queued command ids
//   P commands:<replicaId>   HASH  command id -> accepted command JSON (with `seq`, its order, and `mac`), until it finishes
//   P commands-started:<replicaId>  HASH  command id -> the time it started (absent: not started)
//   P commands-seq           STRING counter giving accepted commands their order
//   P jobs                   HASH  job id -> JobRecord JSON at start, with the `replicaId` that started it and `mac`
//   P jobs-finished          HASH  job id -> { finishedAt, result, summary } JSON
//   P jobs-by-start          ZSET  job id scored by startedAt (ms): newest first, ties by id
//   P jobs-unfinished        HASH  job id -> replicaId, until the job finishes
//   P job-output:<job id>    STRING the job's terraform output (at most JOB_OUTPUT_MAX bytes), gone
//                                  with the job's record or JOB_OUTPUT_TTL_MS after its last append
//   P apply-lock             STRING the global apply lock's JSON ({ time, by }), absent while applies may run
//   P atlantis-import*       the one-time import of Atlantis's atlantis.db (bolt-import-redis.ts)
//   P delivery:<delivery id> STRING `<replicaId>\n<command id>` (or `queued`): a webhook delivery accepted, for
//                                  DELIVERY_TTL_MS (a delivery sent again with that id is not run again)
//   P quarantine:<key>:<field> STRING an entry of <key> that could not be used, moved aside for 7 days
//
// Trust: Redis is storage that others may write to. The records that decide what runs (plans,
// accepted and queued commands, jobs) are sealed with the shared state key, which Redis never
// sees, and checked when read (redis-records.ts): a plan that fails is never applied, a journal
// entry that fails is quarantined, a PR status that fails (it holds policy approvals) is as
// if none were kept (run plan again). Locks, leases and the apply lock are not sealed: a
// writer can drop or change them (a denial of service), not make anything run.
//
// Atomicity: every change of more than one key is one Lua script (defineCommand) or one
// MULTI/EXEC. The read-merge-write of a pull status is optimistic: read `v`, merge in JS
// with mergePullStatus, then a script writes only if `v` is unchanged (else read again). That
// is WATCH without WATCH's per-connection state, which a shared, pipelined connection cannot
// keep per call; versions come from one counter, so a delete and re-create never reuse one.
// One script (unlock) derives a key from the stored record (the lock's pull-locks set): fine
// on a single Redis (with or without replicas), not on Redis Cluster, which is not supported.
//
// Durability is Redis's: run it with `appendonly yes` and `appendfsync always` (or accept
// losing the last second with `everysec`).
import type { Redis } from 'ioredis';
import type { Logger } from '../../log.js';
import { type RedisConnectionOptions, closeRedis, connectRedis, createRedisClient } from './redis-connection.js';
import { redisTarget } from './store-config.js';
import { redisImportAtlantis, redisImportMarker, redisTakeImportNotices } from './bolt-import-redis.js';
import type { AtlantisImportBatch, AtlantisImportOutcome, ImportMarker, ImportNotice } from './bolt-import-types.js';
import { type ProjectOutcome, type PullStatus, mergePullStatus } from './pull-status.js';
import { RedisJournal } from './redis-journal.js';
import { openPullStatus, sealPullStatus } from './redis-records.js';
import { RedisPlans, byDirWs } from './redis-plans.js';
import { SCRIPTS, type Scripts } from './redis-scripts.js';
import { getApplyLock, setApplyLock } from './redis-apply-lock.js';
import type { SharedStateKey } from './shared-state-key.js';
import type {
  AcceptedCommand,
  ApplyLock,
  DeliveryAcceptance,
  JobRecord,
  JobResult,
  JobStart,
  LockHolder,
  LockKey,
  LockRecord,
  PlanRecord,
  QueuedCommand,
  StateStore,
  TryLockResult,
} from './state-store.js';
import { JOB_OUTPUT_MAX } from './state-store.js';

export interface RedisStoreOptions extends RedisConnectionOptions {
  /** The data dir of this replica: plan files go under `<dataDir>/plans/`. */
  dataDir: string;
  /** Who this server is (its pod name): the jobs it starts are its own to recover. */
  replicaId: string;
  keyPrefix?: string;
  /** `--shared-state-key-file`: seals the records that decide what runs (redis-records.ts). */
  sharedStateKey: SharedStateKey;
  /** Clock for timestamps (tests). */
  now?: () => Date;
  logger?: Logger;
}

/** A job's output outlives its last append by the default job log retention (168h). */
const JOB_OUTPUT_TTL_MS = 168 * 3600 * 1000;

type Reply = string | null;

/** SQLite's BINARY collation: compare the UTF-8 bytes, so both stores order alike. */
const byteCmp = (a: string, b: string): number => Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8'));

export class RedisStore implements StateStore {
  readonly kind = 'redis' as const;
  readonly shared = true;
  readonly dataDir: string;
  readonly replicaId: string;
  private readonly p: string;
  private readonly now: () => Date;
  private readonly scripts: Scripts;
  private readonly plans: RedisPlans;
  private readonly journal: RedisJournal;
  private closed = false;

  private constructor(
    private readonly redis: Redis,
    private readonly opts: RedisStoreOptions,
  ) {
    this.dataDir = opts.dataDir;
    this.replicaId = opts.replicaId;
    this.p = opts.keyPrefix ?? 'atlantis:';
    this.now = opts.now ?? (() => new Date());
    for (const [name, def] of Object.entries(SCRIPTS)) redis.defineCommand(name, def);
    this.scripts = redis as unknown as Scripts;
    const shared = {
      redis,
      prefix: this.p,
      key: opts.sharedStateKey,
      replicaId: opts.replicaId,
      now: this.now,
      ...(opts.logger ? { logger: opts.logger } : {}),
    };
    this.plans = new RedisPlans({ ...shared, dataDir: opts.dataDir });
    this.journal = new RedisJournal({ ...shared, scripts: this.scripts });
  }

  /** A store on a connection not made yet (`connect()` makes it): the server opens it at start. */
  static create(opts: RedisStoreOptions): RedisStore {
    if (!opts.replicaId) throw new Error('RedisStore: replicaId is required');
    if (!opts.sharedStateKey) throw new Error('RedisStore: sharedStateKey is required');
    return new RedisStore(createRedisClient(opts), opts);
  }

  /** Connects to Redis; rejects with the reason when it cannot be reached or refuses the login. */
  static async connect(opts: RedisStoreOptions): Promise<RedisStore> {
    const store = RedisStore.create(opts);
    await store.connect();
    return store;
  }

  async connect(): Promise<void> {
    const { redis, opts } = this;
    let lastError: Error | undefined;
    let down = false;
    // ioredis emits every failed attempt; log the change of state only, not each retry.
    redis.on('error', (err: Error) => {
      lastError = err;
      if (!down) opts.logger?.warn('Redis connection lost', { redis: redisTarget(opts), error: err.message });
      down = true;
    });
    redis.on('ready', () => {
      if (down) opts.logger?.info('Redis connection back', { redis: redisTarget(opts) });
      down = false;
    });
    try {
      await connectRedis(redis);
    } catch (err) {
      redis.disconnect();
      const why = lastError?.message ?? (err as Error).message;
      // Atlantis's start-up error text.
      throw new Error(`failed to connect to redis at ${redisTarget(opts)}: ${why}`);
    }
  }

  private ts(): string {
    return this.now().toISOString();
  }

  private rn(repo: string, pull: number): string {
    return `${repo}#${pull}`;
  }

  // ---- locks ----------------------------------------------------------------------

  async tryLock(key: LockKey, holder: LockHolder): Promise<TryLockResult> {
    const lock: LockRecord = {
      repo: key.repo,
      dir: key.dir,
      workspace: key.workspace,
      pull: holder.pull,
      user: holder.user,
      time: this.ts(),
    };
    if (holder.project !== undefined) lock.project = holder.project;
    const cur = (await this.scripts.atlTryLock(
      `${this.p}locks`,
      `${this.p}pull-locks:${this.rn(key.repo, holder.pull)}`,
      lockField(key),
      JSON.stringify(lock),
    )) as Reply;
    if (cur === null) return { acquired: true, lock };
    const held = JSON.parse(cur) as LockRecord;
    return held.pull === holder.pull ? { acquired: true, lock: held } : { acquired: false, holder: held };
  }

  async getLock(key: LockKey): Promise<LockRecord | undefined> {
    return parse<LockRecord>(await this.redis.hget(`${this.p}locks`, lockField(key)));
  }

  unlock(key: LockKey): Promise<LockRecord | undefined> {
    return this.unlockWhere(key, '');
  }

  unlockIfOwnedBy(key: LockKey, pull: number): Promise<LockRecord | undefined> {
    return this.unlockWhere(key, String(pull));
  }

  private async unlockWhere(key: LockKey, pull: string): Promise<LockRecord | undefined> {
    return parse<LockRecord>((await this.scripts.atlUnlock(`${this.p}locks`, lockField(key), pull, this.p)) as Reply);
  }

  async unlockAllForPull(
    repo: string,
    pull: number,
    opts: { discardPlans?: boolean } = {},
  ): Promise<{ locks: LockRecord[]; plans: PlanRecord[] }> {
    const rn = this.rn(repo, pull);
    const [locks, plans] = (await this.scripts.atlUnlockPull(
      `${this.p}locks`,
      `${this.p}pull-locks:${rn}`,
      `${this.p}plans:${rn}`,
      `${this.p}planfiles:${rn}`,
      opts.discardPlans ? '1' : '0',
    )) as [string[], string[]];
    const discarded: PlanRecord[] = [];
    for (let i = 0; i + 1 < plans.length; i += 2) discarded.push(this.plans.toPlan(repo, pull, plans[i] as string, plans[i + 1] as string));
    return {
      locks: locks.map((l) => JSON.parse(l) as LockRecord).sort(byDirWs),
      plans: discarded.sort(byDirWs),
    };
  }

  async list(repo?: string): Promise<LockRecord[]> {
    const all = Object.values(await this.redis.hgetall(`${this.p}locks`)).map((s) => JSON.parse(s) as LockRecord);
    return all.filter((l) => repo === undefined || l.repo === repo).sort((a, b) => byteCmp(a.repo, b.repo) || byDirWs(a, b));
  }

  // ---- plans: redis-plans.ts ------------------------------------------------------

  planPath(key: LockKey, pull: number, project?: string): string {
    return this.plans.planPath(key, pull, project);
  }
  savePlan(rec: Omit<PlanRecord, 'createdAt'> & { createdAt?: string }): Promise<PlanRecord> {
    return this.plans.save(rec);
  }
  getPlan(repo: string, pull: number, dir: string, workspace: string): Promise<PlanRecord | undefined> {
    return this.plans.get(repo, pull, dir, workspace);
  }
  listPlans(repo: string, pull: number): Promise<PlanRecord[]> {
    return this.plans.list(repo, pull);
  }
  deletePlan(repo: string, pull: number, dir: string, workspace: string): Promise<PlanRecord | undefined> {
    return this.plans.delete(repo, pull, dir, workspace);
  }
  restorePlanFile(plan: PlanRecord): Promise<string | undefined> {
    return this.plans.restore(plan);
  }

  // ---- pull status ----------------------------------------------------------------

  async getPullStatus(repo: string, pull: number): Promise<PullStatus | undefined> {
    return this.openStatus(repo, pull, await this.redis.hget(`${this.p}pull-status:${this.rn(repo, pull)}`, 'json'));
  }

  /** The kept status if its seal holds; else none (logged): a forged approval never counts. */
  private openStatus(repo: string, pull: number, raw: string | null): PullStatus | undefined {
    if (raw === null) return undefined;
    const opened = openPullStatus(this.opts.sharedStateKey, repo, pull, raw);
    if (opened.ok) return opened.value;
    this.opts.logger?.warn('Pull request status in Redis not used: it failed its check against the shared state key', {
      repo,
      pull,
      problem: opened.problem,
    });
    return undefined;
  }

  async updatePullStatus(
    repo: string,
    pull: number,
    headSha: string,
    outcomes: ProjectOutcome[],
    opts: { replace?: boolean } = {},
  ): Promise<PullStatus> {
    if (opts.replace) {
      const next = mergePullStatus(undefined, headSha, outcomes);
      await this.casStatus(repo, pull, '*', next);
      return next;
    }
    return (await this.changeStatus(repo, pull, (cur) => mergePullStatus(cur, headSha, outcomes))) as PullStatus;
  }

  async markDiscarded(repo: string, pull: number, dir: string, workspace: string): Promise<void> {
    await this.changeStatus(repo, pull, (cur) => {
      const hit = cur?.projects.find((p) => p.dir === dir && p.workspace === workspace);
      if (!cur || !hit) return undefined;
      hit.status = 'plan_discarded';
      return cur;
    });
  }

  async deletePullStatus(repo: string, pull: number): Promise<void> {
    await this.redis.del(`${this.p}pull-status:${this.rn(repo, pull)}`);
  }

  /** Read, change, write if nobody wrote in between; else again. `change` returning undefined writes nothing. */
  private async changeStatus(
    repo: string,
    pull: number,
    change: (cur: PullStatus | undefined) => PullStatus | undefined,
  ): Promise<PullStatus | undefined> {
    const key = `${this.p}pull-status:${this.rn(repo, pull)}`;
    for (let attempt = 0; attempt < 100; attempt++) {
      const [v, json] = await this.redis.hmget(key, 'v', 'json');
      const next = change(this.openStatus(repo, pull, json ?? null));
      if (next === undefined) return undefined;
      if (await this.casStatus(repo, pull, v ?? '', next)) return next;
      // Lost a race with another writer: back off a little (jittered) so the retries spread.
      if (attempt >= 3) await new Promise((r) => setTimeout(r, Math.random() * 5 * attempt));
    }
    throw new Error(`pull status of ${repo}#${pull}: too many concurrent writers, gave up`);
  }

  private async casStatus(repo: string, pull: number, expected: string, next: PullStatus): Promise<boolean> {
    const key = `${this.p}pull-status:${this.rn(repo, pull)}`;
    const sealed = sealPullStatus(this.opts.sharedStateKey, repo, pull, next);
    return (await this.scripts.atlCasStatus(key, `${this.p}version`, expected, sealed)) === 1;
  }

  // ---- drain queue, command and job journals: redis-journal.ts ----------------------

  enqueue(repo: string, pull: number, payload: unknown, deliveryId?: string): Promise<number | undefined> {
    return this.journal.enqueue(repo, pull, payload, deliveryId);
  }
  takeAll(): Promise<QueuedCommand[]> {
    return this.journal.takeAll();
  }
  queueLength(): Promise<number> {
    return this.journal.queueLength();
  }
  acceptCommand(cmd: { id: string; repo: string; pull: number; payload: unknown }): Promise<AcceptedCommand> {
    return this.journal.acceptCommand(cmd);
  }
  acceptDelivery(deliveryId: string, cmd: { id: string; repo: string; pull: number; payload: unknown }): Promise<DeliveryAcceptance> {
    return this.journal.acceptDelivery(deliveryId, cmd);
  }
  dropRefusedCommand(id: string, deliveryId?: string): Promise<void> {
    return this.journal.dropRefusedCommand(id, deliveryId);
  }
  commandStarted(id: string): Promise<void> {
    return this.journal.commandStarted(id);
  }
  commandFinished(id: string, of?: string): Promise<void> {
    return this.journal.commandFinished(id, of);
  }
  acceptedCommands(of?: string): Promise<AcceptedCommand[]> {
    return this.journal.acceptedCommands(of);
  }
  jobStarted(job: JobStart): Promise<JobRecord> {
    return this.journal.jobStarted(job);
  }
  jobFinished(id: string, result: JobResult, summary?: string): Promise<void> {
    return this.journal.jobFinished(id, result, summary);
  }
  unfinishedJobs(of?: string): Promise<JobRecord[]> {
    return this.journal.unfinishedJobs(of);
  }
  recentJobs(limit?: number): Promise<JobRecord[]> {
    return this.journal.recentJobs(limit);
  }
  pruneJobs(keep?: number): Promise<number> {
    return this.journal.pruneJobs(keep);
  }
  getJob(id: string): Promise<JobRecord | undefined> {
    return this.journal.getJob(id);
  }

  // ---- job output: the cursor is a byte offset; every append is whole, so a read ends on a character

  async appendJobOutput(id: string, chunk: string): Promise<void> {
    await this.scripts.atlAppendOutput(`${this.p}job-output:${id}`, chunk, JOB_OUTPUT_MAX, JOB_OUTPUT_TTL_MS);
  }

  async readJobOutput(id: string, cursor = 0): Promise<{ text: string; cursor: number }> {
    const bytes = await this.redis.getrangeBuffer(`${this.p}job-output:${id}`, cursor, -1);
    return { text: bytes.toString('utf8'), cursor: cursor + bytes.length };
  }

  // ---- health ---------------------------------------------------------------------

  /** A PING answered within 1 s. Without a connection it is false at once (no offline queue). */
  async isHealthy(): Promise<boolean> {
    if (this.closed) return false;
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<'late'>((resolve) => {
      timer = setTimeout(() => resolve('late'), 1000);
    });
    try {
      return (await Promise.race([this.redis.ping(), late])) === 'PONG';
    } catch {
      return false;
    } finally {
      clearTimeout(timer);
    }
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await closeRedis(this.redis);
  }

  readonly getApplyLock = (): Promise<ApplyLock | undefined> => getApplyLock(this.redis, this.p);
  readonly setApplyLock = (on: boolean, by: string): Promise<ApplyLock | undefined> =>
    setApplyLock(this.redis, this.p, on, { time: this.now().toISOString(), by });

  // ---- the Atlantis import (bolt-import-redis.ts has its keys) ----
  readonly importAtlantisState = (batch: AtlantisImportBatch): Promise<AtlantisImportOutcome> =>
    redisImportAtlantis(this.redis, this.p, batch, lockField, (repo, pull, st) => sealPullStatus(this.opts.sharedStateKey, repo, pull, st));
  readonly atlantisImportMarker = (): Promise<ImportMarker | undefined> => redisImportMarker(this.redis, this.p);
  readonly takeImportNotices = (): Promise<ImportNotice[]> => redisTakeImportNotices(this.redis, this.p);
}

const lockField = (k: LockKey): string => JSON.stringify([k.repo, k.dir, k.workspace]);
const parse = <T>(s: string | null): T | undefined => (s === null ? undefined : (JSON.parse(s) as T));
