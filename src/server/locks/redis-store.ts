// The StateStore on Redis, shared by several server replicas (`--locking-db-type redis`).
//
// Key layout (P is `keyPrefix`, default `atlantis:`; R#N is `<owner/name>#<pull>`, which the
// last `#` splits unambiguously because the pull is a number; F is the JSON array
// `[repo, dir, workspace]`, G the JSON array `[dir, workspace]`, both injective):
//
//   P locks                  HASH  F -> LockRecord JSON (project only when set)
//   P pull-locks:R#N         SET   the F of every lock pull N of repo R holds (unlockAllForPull)
//   P plans:R#N              HASH  G -> plan record JSON (no planPath: each replica computes its
//                                  own; `fileSha256`/`fileSize` describe the bytes kept below)
//   P planfiles:R#N          HASH  G -> the plan file's bytes (absent when no file was written)
//   P pull-status:R#N        HASH  v -> version, json -> PullStatus JSON
//   P version                STRING counter giving every pull-status write a never-reused version
//   P queue                  LIST  queued command JSON, oldest first
//   P queue-id               STRING counter of queued command ids
//   P commands:<replicaId>   HASH  command id -> accepted command JSON (with `seq`, its order), until it finishes
//   P commands-started:<replicaId>  HASH  command id -> the time it started (absent: not started)
//   P commands-seq           STRING counter giving accepted commands their order
//   P jobs                   HASH  job id -> JobRecord JSON at start, with the `replicaId` that started it
//   P jobs-finished          HASH  job id -> { finishedAt, result, summary } JSON
//   P jobs-by-start          ZSET  job id scored by startedAt (ms): newest first, ties by id
//   P jobs-unfinished        HASH  job id -> replicaId, until the job finishes
//   P job-output:<job id>    STRING the job's terraform output (at most JOB_OUTPUT_MAX bytes), gone
//                                  with the job's record or JOB_OUTPUT_TTL_MS after its last append
//   P apply-lock             STRING the global apply lock's JSON ({ time, by }), absent while applies may run
//   P atlantis-import*       the one-time import of Atlantis's atlantis.db (bolt-import-redis.ts)
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
import { createHash } from 'node:crypto';
import { Redis } from 'ioredis';
import type { Logger } from '../../log.js';
import { localSha256, readPlanBytes, writeFileAtomic } from './plan-bytes.js';
import { type RedisConnectionOptions, closeRedis, connectRedis, redisClientOptions, redisTarget } from './redis-connection.js';
import { redisImportAtlantis, redisImportMarker, redisTakeImportNotices } from './bolt-import-redis.js';
import type { AtlantisImportBatch, AtlantisImportOutcome, ImportMarker, ImportNotice } from './bolt-import-types.js';
import { planPathIn } from './plan-file.js';
import { type ProjectOutcome, type PullStatus, mergePullStatus } from './pull-status.js';
import { SCRIPTS, type Scripts } from './redis-scripts.js';
import { getApplyLock, setApplyLock } from './redis-apply-lock.js';
import type {
  AcceptedCommand,
  ApplyLock,
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
  /** Clock for timestamps (tests). */
  now?: () => Date;
  logger?: Logger;
}

/** The stored plan record: a PlanRecord without the replica-local path, plus its bytes' hash. */
interface StoredPlan extends Omit<PlanRecord, 'planPath'> {
  fileSha256?: string;
  fileSize?: number;
}

/** A job's output outlives its last append by the default job log retention (168h). */
const JOB_OUTPUT_TTL_MS = 168 * 3600 * 1000;

interface StoredJob extends JobRecord {
  replicaId: string;
}

type Reply = string | null;

/** SQLite's BINARY collation: compare the UTF-8 bytes, so both stores order alike. */
const byteCmp = (a: string, b: string): number => Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8'));
const byDirWs = (a: LockKey, b: LockKey): number => byteCmp(a.dir, b.dir) || byteCmp(a.workspace, b.workspace);

export class RedisStore implements StateStore {
  readonly kind = 'redis' as const;
  readonly shared = true;
  readonly dataDir: string;
  readonly replicaId: string;
  private readonly p: string;
  private readonly now: () => Date;
  private readonly scripts: Scripts;
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
  }

  /** A store on a connection not made yet (`connect()` makes it): the server opens it at start. */
  static create(opts: RedisStoreOptions): RedisStore {
    if (!opts.replicaId) throw new Error('RedisStore: replicaId is required');
    return new RedisStore(new Redis(redisClientOptions(opts)), opts);
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
    return {
      locks: locks.map((l) => JSON.parse(l) as LockRecord).sort(byDirWs),
      plans: plans.map((s) => this.toPlan(s)).sort(byDirWs),
    };
  }

  async list(repo?: string): Promise<LockRecord[]> {
    const all = Object.values(await this.redis.hgetall(`${this.p}locks`)).map((s) => JSON.parse(s) as LockRecord);
    return all.filter((l) => repo === undefined || l.repo === repo).sort((a, b) => byteCmp(a.repo, b.repo) || byDirWs(a, b));
  }

  // ---- plans ----------------------------------------------------------------------

  /** Plan file path for one project of a pull on this replica (plan-file.ts's layout). */
  planPath(key: LockKey, pull: number, project?: string): string {
    return planPathIn(this.dataDir, key, pull, project);
  }

  private toPlan(json: string): PlanRecord {
    const { fileSha256: _sha, fileSize: _size, ...rec } = JSON.parse(json) as StoredPlan;
    return { ...rec, planPath: this.planPath(rec, rec.pull, rec.project) };
  }

  /** Records the plan and the bytes of `rec.planPath` (when there is a file) in one MULTI. */
  async savePlan(rec: Omit<PlanRecord, 'createdAt'> & { createdAt?: string }): Promise<PlanRecord> {
    const createdAt = rec.createdAt ?? this.ts();
    const bytes = await readPlanBytes(rec.planPath);
    const { planPath: _local, ...rest } = rec;
    const stored: StoredPlan = { ...rest, createdAt };
    if (bytes) {
      stored.fileSha256 = createHash('sha256').update(bytes).digest('hex');
      stored.fileSize = bytes.length;
    }
    const rn = this.rn(rec.repo, rec.pull);
    const g = planField(rec.dir, rec.workspace);
    const tx = this.redis.multi().hset(`${this.p}plans:${rn}`, g, JSON.stringify(stored));
    if (bytes) tx.hset(`${this.p}planfiles:${rn}`, g, bytes);
    else tx.hdel(`${this.p}planfiles:${rn}`, g);
    execOk(await tx.exec());
    return { ...rec, createdAt };
  }

  async getPlan(repo: string, pull: number, dir: string, workspace: string): Promise<PlanRecord | undefined> {
    const s = await this.redis.hget(`${this.p}plans:${this.rn(repo, pull)}`, planField(dir, workspace));
    return s === null ? undefined : this.toPlan(s);
  }

  async listPlans(repo: string, pull: number): Promise<PlanRecord[]> {
    return (await this.redis.hvals(`${this.p}plans:${this.rn(repo, pull)}`)).map((s) => this.toPlan(s)).sort(byDirWs);
  }

  async deletePlan(repo: string, pull: number, dir: string, workspace: string): Promise<PlanRecord | undefined> {
    const rn = this.rn(repo, pull);
    const g = planField(dir, workspace);
    const res = execOk(
      await this.redis.multi().hget(`${this.p}plans:${rn}`, g).hdel(`${this.p}plans:${rn}`, g).hdel(`${this.p}planfiles:${rn}`, g).exec(),
    );
    const s = res[0] as Reply;
    return s === null ? undefined : this.toPlan(s);
  }

  /** Writes the stored bytes to `plan.planPath` when the file there is missing or differs. */
  async restorePlanFile(plan: PlanRecord): Promise<void> {
    const rn = this.rn(plan.repo, plan.pull);
    const g = planField(plan.dir, plan.workspace);
    const meta = parse<StoredPlan>(await this.redis.hget(`${this.p}plans:${rn}`, g));
    if (meta?.fileSha256 === undefined) return;
    if ((await localSha256(plan.planPath)) === meta.fileSha256) return;
    // The record and the bytes of one moment, and checked against each other.
    const res = execOk(await this.redis.multi().hget(`${this.p}plans:${rn}`, g).hgetBuffer(`${this.p}planfiles:${rn}`, g).exec());
    const now = parse<StoredPlan>(res[0] as Reply);
    const bytes = res[1] as Buffer | null;
    if (now?.fileSha256 === undefined || bytes === null) return;
    if (createHash('sha256').update(bytes).digest('hex') !== now.fileSha256) {
      throw new Error(
        `the plan file kept in Redis for ${plan.repo}#${plan.pull} ${plan.dir}/${plan.workspace} does not match its recorded sha256`,
      );
    }
    await writeFileAtomic(plan.planPath, bytes);
  }

  // ---- pull status ----------------------------------------------------------------

  async getPullStatus(repo: string, pull: number): Promise<PullStatus | undefined> {
    return parse<PullStatus>(await this.redis.hget(`${this.p}pull-status:${this.rn(repo, pull)}`, 'json'));
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
      const next = change(parse<PullStatus>(json ?? null));
      if (next === undefined) return undefined;
      if (await this.casStatus(repo, pull, v ?? '', next)) return next;
      // Lost a race with another writer: back off a little (jittered) so the retries spread.
      if (attempt >= 3) await new Promise((r) => setTimeout(r, Math.random() * 5 * attempt));
    }
    throw new Error(`pull status of ${repo}#${pull}: too many concurrent writers, gave up`);
  }

  private async casStatus(repo: string, pull: number, expected: string, next: PullStatus): Promise<boolean> {
    const key = `${this.p}pull-status:${this.rn(repo, pull)}`;
    return (await this.scripts.atlCasStatus(key, `${this.p}version`, expected, JSON.stringify(next))) === 1;
  }

  // ---- drain queue ----------------------------------------------------------------

  async enqueue(repo: string, pull: number, payload: unknown): Promise<number> {
    const body = JSON.stringify({ repo, pull, payload: payload ?? null, enqueuedAt: this.ts() });
    return Number(await this.scripts.atlEnqueue(`${this.p}queue`, `${this.p}queue-id`, body));
  }

  async takeAll(): Promise<QueuedCommand[]> {
    const res = execOk(await this.redis.multi().lrange(`${this.p}queue`, 0, -1).del(`${this.p}queue`).exec());
    return (res[0] as string[]).map((s) => JSON.parse(s) as QueuedCommand);
  }

  queueLength(): Promise<number> {
    return this.redis.llen(`${this.p}queue`);
  }

  // ---- command journal ------------------------------------------------------------

  private commandKeys(of = this.replicaId): [string, string] {
    return [`${this.p}commands:${of}`, `${this.p}commands-started:${of}`];
  }

  /** One script: the entry and its place in the order. Durable once Redis has it in its AOF. */
  async acceptCommand(cmd: { id: string; repo: string; pull: number; payload: unknown }): Promise<AcceptedCommand> {
    const rec: AcceptedCommand = { id: cmd.id, repo: cmd.repo, pull: cmd.pull, payload: cmd.payload ?? null, acceptedAt: this.ts() };
    await this.scripts.atlAcceptCommand(this.commandKeys()[0], `${this.p}commands-seq`, cmd.id, JSON.stringify(rec));
    return rec;
  }

  async commandStarted(id: string): Promise<void> {
    await this.scripts.atlCommandStarted(...this.commandKeys(), id, this.ts());
  }

  async commandFinished(id: string, of?: string): Promise<void> {
    const [cmds, started] = this.commandKeys(of);
    execOk(await this.redis.multi().hdel(cmds, id).hdel(started, id).exec());
  }

  async acceptedCommands(of?: string): Promise<AcceptedCommand[]> {
    const [cmds, started] = this.commandKeys(of);
    const res = execOk(await this.redis.multi().hgetall(cmds).hgetall(started).exec());
    const at = res[1] as Record<string, string>;
    return Object.values(res[0] as Record<string, string>)
      .map((s) => JSON.parse(s) as AcceptedCommand & { seq: number })
      .sort((a, b) => a.seq - b.seq)
      .map(({ seq: _seq, ...c }) => (at[c.id] !== undefined ? { ...c, startedAt: at[c.id] as string } : c));
  }

  // ---- job journal ----------------------------------------------------------------

  async jobStarted(job: JobStart): Promise<JobRecord> {
    const startedAt = this.ts();
    const rec: StoredJob = { ...job, startedAt, replicaId: this.replicaId };
    execOk(
      await this.redis
        .multi()
        .hset(`${this.p}jobs`, job.id, JSON.stringify(rec))
        .hdel(`${this.p}jobs-finished`, job.id)
        .zadd(`${this.p}jobs-by-start`, Date.parse(startedAt), job.id)
        .hset(`${this.p}jobs-unfinished`, job.id, this.replicaId)
        .exec(),
    );
    return { ...job, startedAt };
  }

  async jobFinished(id: string, result: JobResult, summary?: string): Promise<void> {
    const fin = JSON.stringify({ finishedAt: this.ts(), result, ...(summary !== undefined ? { summary } : {}) });
    await this.scripts.atlJobFinished(`${this.p}jobs`, `${this.p}jobs-finished`, `${this.p}jobs-unfinished`, id, fin);
  }

  async unfinishedJobs(of = this.replicaId): Promise<JobRecord[]> {
    const recs = (await this.scripts.atlUnfinished(`${this.p}jobs-unfinished`, `${this.p}jobs`, of)) as string[];
    return recs.map((s) => toJob(s, null)).sort((a, b) => byteCmp(a.startedAt, b.startedAt) || byteCmp(a.id, b.id));
  }

  async recentJobs(limit = 50): Promise<JobRecord[]> {
    if (limit === 0) return [];
    const [recs, fins] = (await this.scripts.atlRecentJobs(
      `${this.p}jobs`,
      `${this.p}jobs-finished`,
      `${this.p}jobs-by-start`,
      limit < 0 ? -1 : limit - 1,
    )) as [Reply[], Reply[]];
    const out: JobRecord[] = [];
    for (const [i, s] of recs.entries()) if (s !== null) out.push(toJob(s, fins[i] ?? null));
    return out;
  }

  async pruneJobs(keep = 1000): Promise<number> {
    if (keep < 0) return 0;
    return Number(
      await this.scripts.atlPruneJobs(`${this.p}jobs`, `${this.p}jobs-finished`, `${this.p}jobs-by-start`, keep, `${this.p}job-output:`),
    );
  }

  async getJob(id: string): Promise<JobRecord | undefined> {
    const [rec, fin] = execOk(await this.redis.multi().hget(`${this.p}jobs`, id).hget(`${this.p}jobs-finished`, id).exec()) as [
      Reply,
      Reply,
    ];
    return rec === null ? undefined : toJob(rec, fin);
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
    redisImportAtlantis(this.redis, this.p, batch, lockField);
  readonly atlantisImportMarker = (): Promise<ImportMarker | undefined> => redisImportMarker(this.redis, this.p);
  readonly takeImportNotices = (): Promise<ImportNotice[]> => redisTakeImportNotices(this.redis, this.p);
}

const lockField = (k: LockKey): string => JSON.stringify([k.repo, k.dir, k.workspace]);
const planField = (dir: string, workspace: string): string => JSON.stringify([dir, workspace]);
const parse = <T>(s: string | null): T | undefined => (s === null ? undefined : (JSON.parse(s) as T));

function toJob(rec: string, fin: string | null): JobRecord {
  const { replicaId: _r, ...job } = JSON.parse(rec) as StoredJob;
  return fin === null ? job : { ...job, ...(JSON.parse(fin) as Pick<JobRecord, 'finishedAt' | 'result' | 'summary'>) };
}

/** The replies of a MULTI, or the first error in it. */
function execOk(res: [Error | null, unknown][] | null): unknown[] {
  if (res === null) throw new Error('Redis transaction aborted');
  for (const [err] of res) if (err) throw err;
  return res.map(([, v]) => v);
}
