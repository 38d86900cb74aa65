// The embedded StateStore (`--locking-db-type boltdb`, Atlantis's name for its embedded
// store): project locks, saved-plan metadata, each PR's plan status, the queue of commands
// received while draining, the journal of accepted commands and of jobs for crash recovery,
// in the data dir.
//
// SQLite through better-sqlite3 in WAL mode with synchronous=FULL: a committed transaction
// survives a crash or power loss, and a kill -9 in the middle of a write leaves the previous
// committed state (SQLite's journal rolls the partial write back on the next open). Every
// multi-row change runs in one transaction. better-sqlite3 is synchronous: each call is a
// few microseconds to a millisecond, so it does not need to be moved off the event loop. The
// methods are async only to fit the StateStore interface: each one's SQL runs, whole, when it
// is called (an async function runs synchronously up to its first await, and these have none).
import Database from 'better-sqlite3';
import fs from 'node:fs';
import path from 'node:path';
import { sqliteImportAtlantis, sqliteImportMarker, sqliteTakeImportNotices } from './bolt-import-sqlite.js';
import type { AtlantisImportBatch, AtlantisImportOutcome, ImportMarker, ImportNotice } from './bolt-import-types.js';
import { planPathIn } from './plan-file.js';
import { type ProjectOutcome, type ProjectPlanStatus, type PullStatus, mergePullStatus } from './pull-status.js';
import type { PolicySetStatus } from '../policy/policy-results.js';
import {
  type AcceptedCommand,
  type ApplyLock,
  type DeliveryAcceptance,
  isRecordableDelivery,
  type JobRecord,
  type JobResult,
  type JobStart,
  type LockHolder,
  type LockKey,
  type LockRecord,
  type PlanRecord,
  type QueuedCommand,
  type StateStore,
  type StoreKind,
  type TryLockResult,
} from './state-store.js';
import { JOB_OUTPUT_MAX } from './state-store.js';
import {
  type JobRow,
  type LockRow,
  type PlanRow,
  toJob,
  toLock,
  toPlan,
  type CommandRow,
  type QueueRow,
  toAccepted,
  toQueued,
} from './store-rows.js';

import { SqliteDeliveries } from './sqlite-deliveries.js';

export const STORE_FILENAME = 'atlantis-operator.db';

export interface StoreOptions {
  /** Clock for timestamps (tests). */
  now?: () => Date;
}

const SCHEMA = `
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS locks (
  repo TEXT NOT NULL, dir TEXT NOT NULL, workspace TEXT NOT NULL,
  pull INTEGER NOT NULL, user TEXT NOT NULL, project TEXT, time TEXT NOT NULL,
  PRIMARY KEY (repo, dir, workspace)
);
CREATE INDEX IF NOT EXISTS locks_pull ON locks (repo, pull);
CREATE TABLE IF NOT EXISTS plans (
  repo TEXT NOT NULL, pull INTEGER NOT NULL, dir TEXT NOT NULL, workspace TEXT NOT NULL,
  project TEXT, plan_path TEXT NOT NULL, head_sha TEXT NOT NULL, created_at TEXT NOT NULL, plan_sha256 TEXT,
  PRIMARY KEY (repo, pull, dir, workspace)
);
CREATE TABLE IF NOT EXISTS queue (
  id INTEGER PRIMARY KEY AUTOINCREMENT, repo TEXT NOT NULL, pull INTEGER NOT NULL,
  payload TEXT NOT NULL, enqueued_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS commands (
  seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL UNIQUE, repo TEXT NOT NULL, pull INTEGER NOT NULL,
  payload TEXT NOT NULL, accepted_at TEXT NOT NULL, started_at TEXT
);
CREATE TABLE IF NOT EXISTS jobs (
  id TEXT PRIMARY KEY, command TEXT NOT NULL, repo TEXT NOT NULL, pull INTEGER NOT NULL,
  project TEXT, dir TEXT, workspace TEXT, started_at TEXT NOT NULL,
  finished_at TEXT, result TEXT, summary TEXT
);
CREATE INDEX IF NOT EXISTS jobs_unfinished ON jobs (finished_at);
CREATE TABLE IF NOT EXISTS job_output (id TEXT PRIMARY KEY, text TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS pull_status (
  repo TEXT NOT NULL, pull INTEGER NOT NULL, head_sha TEXT NOT NULL, PRIMARY KEY (repo, pull)
);
CREATE TABLE IF NOT EXISTS deliveries (id TEXT PRIMARY KEY, command_id TEXT, at INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS deliveries_at ON deliveries (at);
CREATE TABLE IF NOT EXISTS pull_projects (
  repo TEXT NOT NULL, pull INTEGER NOT NULL, seq INTEGER NOT NULL, dir TEXT NOT NULL, workspace TEXT NOT NULL,
  project TEXT NOT NULL, status TEXT NOT NULL, PRIMARY KEY (repo, pull, dir, workspace, project)
);
`;

export class SqliteStore implements StateStore {
  readonly kind: StoreKind = 'boltdb';
  /** A data dir is one server's (its lock file says so). */
  readonly shared = false;
  readonly dataDir: string;
  readonly file: string;
  private readonly db: Database.Database;
  /** Prepared once per SQL text: preparing is a parse and plan on the event loop, every call. */
  private readonly statements = new Map<string, Database.Statement>();
  private readonly now: () => Date;
  private readonly deliveries: SqliteDeliveries;
  private closed = false;

  private constructor(dataDir: string, opts: StoreOptions) {
    this.dataDir = dataDir;
    this.file = path.join(dataDir, STORE_FILENAME);
    this.now = opts.now ?? (() => new Date());
    fs.mkdirSync(dataDir, { recursive: true });
    this.db = new Database(this.file);
    this.db.pragma('journal_mode = WAL');
    // FULL: the WAL is fsynced at every commit, so a commit that returned is durable.
    this.db.pragma('synchronous = FULL');
    this.db.pragma('busy_timeout = 5000');
    // One transaction: on a new data dir each statement would be a commit of its own, with its
    // fsyncs (synchronous FULL), all before the server answers its first /status.
    this.db.transaction(() => {
      this.db.exec(SCHEMA);
      // A data dir from before plan hashes were kept: add the column; its old plans have none.
      const cols = this.db.pragma('table_info(plans)') as { name: string }[];
      if (!cols.some((c) => c.name === 'plan_sha256')) this.db.exec('ALTER TABLE plans ADD COLUMN plan_sha256 TEXT');
      // A data dir from before policy checks: the projects' policy statuses (JSON) get a column.
      const projectCols = this.db.pragma('table_info(pull_projects)') as { name: string }[];
      if (!projectCols.some((c) => c.name === 'policy')) this.db.exec('ALTER TABLE pull_projects ADD COLUMN policy TEXT');
    })();
    this.deliveries = new SqliteDeliveries(
      (t) => this.sql(t),
      () => this.now().getTime(),
    );
  }

  /** Opens (creating if needed) the store in `dataDir`. Throws if the file is unusable. */
  static open(dataDir: string, opts: StoreOptions = {}): SqliteStore {
    return new SqliteStore(dataDir, opts);
  }

  private sql(text: string): Database.Statement {
    let st = this.statements.get(text);
    if (!st) {
      st = this.db.prepare(text);
      this.statements.set(text, st);
    }
    return st;
  }

  private ts(): string {
    return this.now().toISOString();
  }

  // ---- locks ----------------------------------------------------------------------

  async tryLock(key: LockKey, holder: LockHolder): Promise<TryLockResult> {
    const run = this.db.transaction((): TryLockResult => {
      const found = this.lockOf(key);
      if (found) return found.pull === holder.pull ? { acquired: true, lock: found } : { acquired: false, holder: found };
      const time = this.ts();
      this.sql('INSERT INTO locks (repo, dir, workspace, pull, user, project, time) VALUES (?, ?, ?, ?, ?, ?, ?)').run(
        key.repo,
        key.dir,
        key.workspace,
        holder.pull,
        holder.user,
        holder.project ?? null,
        time,
      );
      const lock: LockRecord = { ...key, pull: holder.pull, user: holder.user, time };
      if (holder.project !== undefined) lock.project = holder.project;
      return { acquired: true, lock };
    });
    // IMMEDIATE takes the write lock before the read, so two processes cannot both acquire.
    return run.immediate();
  }

  async getLock(key: LockKey): Promise<LockRecord | undefined> {
    return this.lockOf(key);
  }

  private lockOf(key: LockKey): LockRecord | undefined {
    const row = this.sql('SELECT * FROM locks WHERE repo = ? AND dir = ? AND workspace = ?').get(key.repo, key.dir, key.workspace) as
      | LockRow
      | undefined;
    return row ? toLock(row) : undefined;
  }

  async unlock(key: LockKey): Promise<LockRecord | undefined> {
    const run = this.db.transaction(() => {
      const l = this.lockOf(key);
      if (l) this.deleteLockRow(key);
      return l;
    });
    return run.immediate();
  }

  async unlockIfOwnedBy(key: LockKey, pull: number): Promise<LockRecord | undefined> {
    const run = this.db.transaction(() => {
      const l = this.lockOf(key);
      if (!l || l.pull !== pull) return undefined;
      this.deleteLockRow(key);
      return l;
    });
    return run.immediate();
  }

  private deleteLockRow(key: LockKey): void {
    this.sql('DELETE FROM locks WHERE repo = ? AND dir = ? AND workspace = ?').run(key.repo, key.dir, key.workspace);
  }

  async unlockAllForPull(
    repo: string,
    pull: number,
    opts: { discardPlans?: boolean } = {},
  ): Promise<{ locks: LockRecord[]; plans: PlanRecord[] }> {
    const run = this.db.transaction(() => {
      const locks = (this.sql('SELECT * FROM locks WHERE repo = ? AND pull = ? ORDER BY dir, workspace').all(repo, pull) as LockRow[]).map(
        toLock,
      );
      this.sql('DELETE FROM locks WHERE repo = ? AND pull = ?').run(repo, pull);
      let plans: PlanRecord[] = [];
      if (opts.discardPlans) {
        plans = this.plansOf(repo, pull);
        this.sql('DELETE FROM plans WHERE repo = ? AND pull = ?').run(repo, pull);
      }
      return { locks, plans };
    });
    return run.immediate();
  }

  async list(repo?: string): Promise<LockRecord[]> {
    const rows = (
      repo === undefined
        ? this.sql('SELECT * FROM locks ORDER BY repo, dir, workspace').all()
        : this.sql('SELECT * FROM locks WHERE repo = ? ORDER BY dir, workspace').all(repo)
    ) as LockRow[];
    return rows.map(toLock);
  }

  // ---- plans ----------------------------------------------------------------------

  /** Plan file path for one project of a pull on this replica (plan-file.ts's layout). */
  planPath(key: LockKey, pull: number, project?: string): string {
    return planPathIn(this.dataDir, key, pull, project);
  }

  async savePlan(rec: Omit<PlanRecord, 'createdAt'> & { createdAt?: string }): Promise<PlanRecord> {
    const createdAt = rec.createdAt ?? this.ts();
    this.sql(
      `INSERT INTO plans (repo, pull, dir, workspace, project, plan_path, head_sha, plan_sha256, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
         ON CONFLICT (repo, pull, dir, workspace) DO UPDATE SET project = excluded.project, plan_path = excluded.plan_path,
         head_sha = excluded.head_sha, plan_sha256 = excluded.plan_sha256, created_at = excluded.created_at`,
    ).run(rec.repo, rec.pull, rec.dir, rec.workspace, rec.project ?? null, rec.planPath, rec.headSha, rec.planSha256 ?? null, createdAt);
    return { ...rec, createdAt };
  }

  async getPlan(repo: string, pull: number, dir: string, workspace: string): Promise<PlanRecord | undefined> {
    return this.planOf(repo, pull, dir, workspace);
  }

  private planOf(repo: string, pull: number, dir: string, workspace: string): PlanRecord | undefined {
    const row = this.sql('SELECT * FROM plans WHERE repo = ? AND pull = ? AND dir = ? AND workspace = ?').get(repo, pull, dir, workspace) as
      | PlanRow
      | undefined;
    return row ? toPlan(row) : undefined;
  }

  async listPlans(repo: string, pull: number): Promise<PlanRecord[]> {
    return this.plansOf(repo, pull);
  }

  private plansOf(repo: string, pull: number): PlanRecord[] {
    return (this.sql('SELECT * FROM plans WHERE repo = ? AND pull = ? ORDER BY dir, workspace').all(repo, pull) as PlanRow[]).map(toPlan);
  }

  async deletePlan(repo: string, pull: number, dir: string, workspace: string): Promise<PlanRecord | undefined> {
    const run = this.db.transaction(() => {
      const p = this.planOf(repo, pull, dir, workspace);
      if (p) this.sql('DELETE FROM plans WHERE repo = ? AND pull = ? AND dir = ? AND workspace = ?').run(repo, pull, dir, workspace);
      return p;
    });
    return run.immediate();
  }

  /** The plan file is written to this data dir and only this server reads it: nothing to bring back. */
  async restorePlanFile(_plan: PlanRecord): Promise<string | undefined> {
    return undefined;
  }

  // ---- pull status (Atlantis's per-PR plan status) ---------------------------------

  async getPullStatus(repo: string, pull: number): Promise<PullStatus | undefined> {
    return this.pullStatusOf(repo, pull);
  }

  private pullStatusOf(repo: string, pull: number): PullStatus | undefined {
    const head = this.sql('SELECT head_sha FROM pull_status WHERE repo = ? AND pull = ?').get(repo, pull) as
      | { head_sha: string }
      | undefined;
    if (!head) return undefined;
    const rows = this.sql('SELECT dir, workspace, project, status, policy FROM pull_projects WHERE repo = ? AND pull = ? ORDER BY seq').all(
      repo,
      pull,
    ) as { dir: string; workspace: string; project: string; status: string; policy: string | null }[];
    return {
      headSha: head.head_sha,
      projects: rows.map(({ policy, ...r }) => ({
        ...r,
        status: r.status as ProjectPlanStatus,
        ...(policy ? { policyStatus: JSON.parse(policy) as PolicySetStatus[] } : {}),
      })),
    };
  }

  /** `replace` starts from nothing, as after a plan that found no projects. One transaction. */
  async updatePullStatus(
    repo: string,
    pull: number,
    headSha: string,
    outcomes: ProjectOutcome[],
    opts: { replace?: boolean } = {},
  ): Promise<PullStatus> {
    const run = this.db.transaction(() => {
      const next = mergePullStatus(opts.replace ? undefined : this.pullStatusOf(repo, pull), headSha, outcomes);
      this.deletePullStatusRows(repo, pull);
      this.sql('INSERT INTO pull_status (repo, pull, head_sha) VALUES (?, ?, ?)').run(repo, pull, headSha);
      const ins = this.sql(
        'INSERT INTO pull_projects (repo, pull, seq, dir, workspace, project, status, policy) VALUES (?, ?, ?, ?, ?, ?, ?, ?)',
      );
      for (const [i, p] of next.projects.entries())
        ins.run(repo, pull, i, p.dir, p.workspace, p.project, p.status, p.policyStatus ? JSON.stringify(p.policyStatus) : null);
      return next;
    });
    return run.immediate();
  }

  async markDiscarded(repo: string, pull: number, dir: string, workspace: string): Promise<void> {
    this.sql(
      `UPDATE pull_projects SET status = 'plan_discarded' WHERE rowid = (SELECT rowid FROM pull_projects
         WHERE repo = ? AND pull = ? AND dir = ? AND workspace = ? ORDER BY seq LIMIT 1)`,
    ).run(repo, pull, dir, workspace);
  }

  async deletePullStatus(repo: string, pull: number): Promise<void> {
    this.db.transaction(() => this.deletePullStatusRows(repo, pull)).immediate();
  }

  private deletePullStatusRows(repo: string, pull: number): void {
    this.sql('DELETE FROM pull_status WHERE repo = ? AND pull = ?').run(repo, pull);
    this.sql('DELETE FROM pull_projects WHERE repo = ? AND pull = ?').run(repo, pull);
  }

  // ---- drain queue ----------------------------------------------------------------

  async enqueue(repo: string, pull: number, payload: unknown, deliveryId?: string): Promise<number | undefined> {
    const run = this.db.transaction((): number | undefined => {
      if (deliveryId !== undefined && isRecordableDelivery(deliveryId)) {
        if (this.deliveries.replayOf(deliveryId)) return undefined;
        this.deliveries.record(deliveryId, null);
      }
      const r = this.sql('INSERT INTO queue (repo, pull, payload, enqueued_at) VALUES (?, ?, ?, ?)').run(
        repo,
        pull,
        JSON.stringify(payload ?? null),
        this.ts(),
      );
      return Number(r.lastInsertRowid);
    });
    return run.immediate();
  }

  async takeAll(): Promise<QueuedCommand[]> {
    const run = this.db.transaction(() => {
      const rows = this.sql('SELECT * FROM queue ORDER BY id').all() as QueueRow[];
      this.sql('DELETE FROM queue').run();
      return rows.map(toQueued);
    });
    return run.immediate();
  }

  async queueLength(): Promise<number> {
    return (this.sql('SELECT COUNT(*) AS n FROM queue').get() as { n: number }).n;
  }

  // ---- command journal ------------------------------------------------------------

  /** One INSERT, committed (and, synchronous=FULL, fsynced) when it returns. */
  async acceptCommand(cmd: { id: string; repo: string; pull: number; payload: unknown }): Promise<AcceptedCommand> {
    return this.insertCommand(cmd);
  }

  private insertCommand(cmd: { id: string; repo: string; pull: number; payload: unknown }): AcceptedCommand {
    const acceptedAt = this.ts();
    this.sql('INSERT INTO commands (id, repo, pull, payload, accepted_at) VALUES (?, ?, ?, ?, ?)').run(
      cmd.id,
      cmd.repo,
      cmd.pull,
      JSON.stringify(cmd.payload ?? null),
      acceptedAt,
    );
    return { ...cmd, payload: cmd.payload ?? null, acceptedAt };
  }

  async acceptDelivery(deliveryId: string, cmd: { id: string; repo: string; pull: number; payload: unknown }): Promise<DeliveryAcceptance> {
    if (!isRecordableDelivery(deliveryId)) return { accepted: await this.acceptCommand(cmd) };
    const run = this.db.transaction((): DeliveryAcceptance => {
      const replay = this.deliveries.replayOf(deliveryId);
      if (replay) return { replay };
      this.deliveries.record(deliveryId, cmd.id);
      return { accepted: this.insertCommand(cmd) };
    });
    return run.immediate();
  }

  async dropRefusedCommand(id: string, deliveryId?: string): Promise<void> {
    this.db
      .transaction(() => {
        this.sql('DELETE FROM commands WHERE id = ?').run(id);
        if (deliveryId !== undefined) this.deliveries.forget(deliveryId, id);
      })
      .immediate();
  }

  async commandStarted(id: string): Promise<void> {
    this.sql('UPDATE commands SET started_at = ? WHERE id = ?').run(this.ts(), id);
  }

  async commandFinished(id: string, _of?: string): Promise<void> {
    this.sql('DELETE FROM commands WHERE id = ?').run(id);
  }

  /** Every row: the data dir is this server's alone (its lock file says so). */
  async acceptedCommands(_of?: string): Promise<AcceptedCommand[]> {
    return (this.sql('SELECT * FROM commands ORDER BY seq').all() as CommandRow[]).map(toAccepted);
  }

  // ---- job journal ----------------------------------------------------------------

  async jobStarted(job: JobStart): Promise<JobRecord> {
    const startedAt = this.ts();
    this.sql(
      'INSERT OR REPLACE INTO jobs (id, command, repo, pull, project, dir, workspace, started_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)',
    ).run(job.id, job.command, job.repo, job.pull, job.project ?? null, job.dir ?? null, job.workspace ?? null, startedAt);
    return { ...job, startedAt };
  }

  async jobFinished(id: string, result: JobResult, summary?: string): Promise<void> {
    this.sql('UPDATE jobs SET finished_at = ?, result = ?, summary = ? WHERE id = ?').run(this.ts(), result, summary ?? null, id);
  }

  /** Jobs started but never finished: the previous process died while running them. */
  async unfinishedJobs(_of?: string): Promise<JobRecord[]> {
    return (this.sql('SELECT * FROM jobs WHERE finished_at IS NULL ORDER BY started_at, id').all() as JobRow[]).map(toJob);
  }

  async recentJobs(limit = 50): Promise<JobRecord[]> {
    return (this.sql('SELECT * FROM jobs ORDER BY started_at DESC, id DESC LIMIT ?').all(limit) as JobRow[]).map(toJob);
  }

  async getJob(id: string): Promise<JobRecord | undefined> {
    const row = this.sql('SELECT * FROM jobs WHERE id = ?').get(id) as JobRow | undefined;
    return row && toJob(row);
  }

  /** Drops finished jobs beyond the newest `keep`, so the journal does not grow forever. */
  async pruneJobs(keep = 1000): Promise<number> {
    return this.db.transaction(() => {
      const n = this.sql(
        'DELETE FROM jobs WHERE finished_at IS NOT NULL AND id NOT IN (SELECT id FROM jobs ORDER BY started_at DESC, id DESC LIMIT ?)',
      ).run(keep).changes;
      this.sql('DELETE FROM job_output WHERE id NOT IN (SELECT id FROM jobs)').run();
      return n;
    })();
  }

  // ---- job output: the cursor is a character offset ---------------------------------

  async appendJobOutput(id: string, chunk: string): Promise<void> {
    this.sql(
      'INSERT INTO job_output (id, text) VALUES (?, ?) ON CONFLICT (id) DO UPDATE SET text = text || excluded.text WHERE length(text) < ?',
    ).run(id, chunk, JOB_OUTPUT_MAX);
  }

  async readJobOutput(id: string, cursor = 0): Promise<{ text: string; cursor: number }> {
    const row = this.sql('SELECT substr(text, ? + 1) AS rest FROM job_output WHERE id = ?').get(cursor, id) as { rest: string } | undefined;
    const text = row?.rest ?? '';
    // SQLite counts characters (code points), not UTF-16 units as String.length does.
    return { text, cursor: cursor + [...text].length };
  }

  // ---- health ---------------------------------------------------------------------

  /** For /readyz: the database answers a read and the file is still there. */
  /** Opened by `open()` already: the file is local. */
  async connect(): Promise<void> {}

  async isHealthy(): Promise<boolean> {
    if (this.closed) return false;
    try {
      this.sql('SELECT 1 AS ok').get();
      fs.accessSync(this.file, fs.constants.R_OK | fs.constants.W_OK);
      return true;
    } catch {
      return false;
    }
  }

  /** Full check (slow on big files): SQLite's `PRAGMA integrity_check`. SQLite only: tests and operators. */
  integrityCheck(): string {
    const rows = this.db.pragma('integrity_check') as { integrity_check: string }[];
    return rows.map((r) => r.integrity_check).join('\n');
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.db.close();
  }

  // ---- global apply lock: one row of the meta table ---------------------------------

  async getApplyLock(): Promise<ApplyLock | undefined> {
    const row = this.sql("SELECT value FROM meta WHERE key = 'apply_lock'").get() as { value: string } | undefined;
    return row && (JSON.parse(row.value) as ApplyLock);
  }

  async setApplyLock(on: boolean, by: string): Promise<ApplyLock | undefined> {
    if (!on) {
      this.sql("DELETE FROM meta WHERE key = 'apply_lock'").run();
      return undefined;
    }
    const lock: ApplyLock = { time: this.now().toISOString(), by };
    this.sql("INSERT OR IGNORE INTO meta (key, value) VALUES ('apply_lock', ?)").run(JSON.stringify(lock));
    return this.getApplyLock();
  }

  // ---- the Atlantis import (bolt-import-sqlite.ts) ----
  async importAtlantisState(batch: AtlantisImportBatch): Promise<AtlantisImportOutcome> {
    return sqliteImportAtlantis(this.db, batch);
  }
  async atlantisImportMarker(): Promise<ImportMarker | undefined> {
    return sqliteImportMarker(this.db);
  }
  async takeImportNotices(): Promise<ImportNotice[]> {
    return sqliteTakeImportNotices(this.db);
  }
}
