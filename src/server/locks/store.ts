// The server's durable state in the data dir: project locks, saved-plan metadata, the queue
// of commands received while draining, and a journal of jobs for crash recovery.
//
// SQLite through better-sqlite3 in WAL mode with synchronous=FULL: a committed transaction
// survives a crash or power loss, and a kill -9 in the middle of a write leaves the previous
// committed state (SQLite's journal rolls the partial write back on the next open). Every
// multi-row change runs in one transaction. better-sqlite3 is synchronous: each call is a
// few microseconds to a millisecond, so it does not need to be moved off the event loop.
import Database from 'better-sqlite3';
import fs from 'node:fs';
import path from 'node:path';
import { planFileName } from './plan-file.js';
import { type JobRow, type LockRow, type PlanRow, toJob, toLock, toPlan } from './store-rows.js';
import { type ProjectOutcome, type ProjectPlanStatus, type PullStatus, mergePullStatus } from './pull-status.js';

// The pure plan-file helpers live in plan-file.ts; re-exported for existing importers.
export { fileSha256, planFileName, planFileProblem } from './plan-file.js';

export const STORE_FILENAME = 'atlantis-operator.db';

export interface LockKey {
  /** `owner/name` */
  repo: string;
  /** Repo-relative dir, `.` for the root. */
  dir: string;
  workspace: string;
}

export interface LockRecord extends LockKey {
  pull: number;
  user: string;
  project?: string;
  /** RFC 3339 time the lock was taken. */
  time: string;
}

export type TryLockResult = { acquired: true; lock: LockRecord } | { acquired: false; holder: LockRecord };

export interface PlanRecord extends LockKey {
  pull: number;
  project?: string;
  /** Absolute path of the saved plan file (under `<dataDir>/plans/`). */
  planPath: string;
  /** Commit the plan was made from; an apply on a newer head must plan again. */
  headSha: string;
  /**
   * sha256 (hex) of the plan file when terraform wrote it; the apply refuses a file that no
   * longer matches. Undefined for a plan recorded before hashes were kept (it must be re-planned).
   */
  planSha256?: string;
  createdAt: string;
}

export interface QueuedCommand {
  id: number;
  repo: string;
  pull: number;
  /** Whatever the server needs to run the command again (e.g. the webhook event). */
  payload: unknown;
  enqueuedAt: string;
}

export type JobResult = 'success' | 'failure' | 'error' | 'interrupted';

export interface JobStart {
  id: string;
  command: string;
  repo: string;
  pull: number;
  project?: string;
  dir?: string;
  workspace?: string;
}

export interface JobRecord extends JobStart {
  startedAt: string;
  finishedAt?: string;
  result?: JobResult;
  summary?: string;
}

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
CREATE TABLE IF NOT EXISTS jobs (
  id TEXT PRIMARY KEY, command TEXT NOT NULL, repo TEXT NOT NULL, pull INTEGER NOT NULL,
  project TEXT, dir TEXT, workspace TEXT, started_at TEXT NOT NULL,
  finished_at TEXT, result TEXT, summary TEXT
);
CREATE INDEX IF NOT EXISTS jobs_unfinished ON jobs (finished_at);
CREATE TABLE IF NOT EXISTS pull_status (
  repo TEXT NOT NULL, pull INTEGER NOT NULL, head_sha TEXT NOT NULL, PRIMARY KEY (repo, pull)
);
CREATE TABLE IF NOT EXISTS pull_projects (
  repo TEXT NOT NULL, pull INTEGER NOT NULL, seq INTEGER NOT NULL, dir TEXT NOT NULL, workspace TEXT NOT NULL,
  project TEXT NOT NULL, status TEXT NOT NULL, PRIMARY KEY (repo, pull, dir, workspace, project)
);
`;

export class LockStore {
  readonly dataDir: string;
  readonly file: string;
  private readonly db: Database.Database;
  /** Prepared once per SQL text: preparing is a parse and plan on the event loop, every call. */
  private readonly statements = new Map<string, Database.Statement>();
  private readonly now: () => Date;
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
    this.db.exec(SCHEMA);
    // A data dir from before plan hashes were kept: add the column; its old plans have none.
    const cols = this.db.pragma('table_info(plans)') as { name: string }[];
    if (!cols.some((c) => c.name === 'plan_sha256')) this.db.exec('ALTER TABLE plans ADD COLUMN plan_sha256 TEXT');
  }

  /** Opens (creating if needed) the store in `dataDir`. Throws if the file is unusable. */
  static open(dataDir: string, opts: StoreOptions = {}): LockStore {
    return new LockStore(dataDir, opts);
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

  /**
   * Takes the lock on repo+dir+workspace for `pull`. Re-entrant for the same pull (as in
   * Atlantis: a PR re-planning its own locked project keeps the lock). Otherwise returns
   * the holder.
   */
  tryLock(key: LockKey, holder: { pull: number; user: string; project?: string }): TryLockResult {
    const run = this.db.transaction((): TryLockResult => {
      const row = this.sql('SELECT * FROM locks WHERE repo = ? AND dir = ? AND workspace = ?').get(key.repo, key.dir, key.workspace) as
        | LockRow
        | undefined;
      if (row) {
        if (row.pull === holder.pull) return { acquired: true, lock: toLock(row) };
        return { acquired: false, holder: toLock(row) };
      }
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

  getLock(key: LockKey): LockRecord | undefined {
    const row = this.sql('SELECT * FROM locks WHERE repo = ? AND dir = ? AND workspace = ?').get(key.repo, key.dir, key.workspace) as
      | LockRow
      | undefined;
    return row ? toLock(row) : undefined;
  }

  /** Releases one lock. Returns the released lock, if there was one. */
  unlock(key: LockKey): LockRecord | undefined {
    const run = this.db.transaction(() => {
      const l = this.getLock(key);
      if (l) this.sql('DELETE FROM locks WHERE repo = ? AND dir = ? AND workspace = ?').run(key.repo, key.dir, key.workspace);
      return l;
    });
    return run.immediate();
  }

  /**
   * Releases every lock of a pull (PR closed, `atlantis unlock`). With `discardPlans` the
   * pull's plan records go in the same transaction; the returned plans' files are the
   * caller's to delete.
   */
  unlockAllForPull(repo: string, pull: number, opts: { discardPlans?: boolean } = {}): { locks: LockRecord[]; plans: PlanRecord[] } {
    const run = this.db.transaction(() => {
      const locks = (this.sql('SELECT * FROM locks WHERE repo = ? AND pull = ? ORDER BY dir, workspace').all(repo, pull) as LockRow[]).map(
        toLock,
      );
      this.sql('DELETE FROM locks WHERE repo = ? AND pull = ?').run(repo, pull);
      let plans: PlanRecord[] = [];
      if (opts.discardPlans) {
        plans = this.listPlans(repo, pull);
        this.sql('DELETE FROM plans WHERE repo = ? AND pull = ?').run(repo, pull);
      }
      return { locks, plans };
    });
    return run.immediate();
  }

  /** All locks, or those of one repo, ordered by repo, dir, workspace. */
  list(repo?: string): LockRecord[] {
    const rows = (
      repo === undefined
        ? this.sql('SELECT * FROM locks ORDER BY repo, dir, workspace').all()
        : this.sql('SELECT * FROM locks WHERE repo = ? ORDER BY dir, workspace').all(repo)
    ) as LockRow[];
    return rows.map(toLock);
  }

  // ---- plans ----------------------------------------------------------------------

  /** Where a pull's plan files should be written: `<dataDir>/plans/<owner>/<name>/<pull>/`. */
  planDir(repo: string, pull: number): string {
    const safe = repo
      .split('/')
      .map((s) => encodeURIComponent(s))
      .join(path.sep);
    return path.join(this.dataDir, 'plans', safe, String(pull));
  }

  /** Plan file path for one project of a pull: `<planDir>/<planFileName>`. */
  planPath(key: LockKey, pull: number, project?: string): string {
    return path.join(this.planDir(key.repo, pull), planFileName(key.dir, key.workspace, project));
  }

  /** Records (or replaces) the saved plan of one project of a pull. */
  savePlan(rec: Omit<PlanRecord, 'createdAt'> & { createdAt?: string }): PlanRecord {
    const createdAt = rec.createdAt ?? this.ts();
    this.sql(
      `INSERT INTO plans (repo, pull, dir, workspace, project, plan_path, head_sha, plan_sha256, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
         ON CONFLICT (repo, pull, dir, workspace) DO UPDATE SET project = excluded.project, plan_path = excluded.plan_path,
         head_sha = excluded.head_sha, plan_sha256 = excluded.plan_sha256, created_at = excluded.created_at`,
    ).run(rec.repo, rec.pull, rec.dir, rec.workspace, rec.project ?? null, rec.planPath, rec.headSha, rec.planSha256 ?? null, createdAt);
    return { ...rec, createdAt };
  }

  getPlan(repo: string, pull: number, dir: string, workspace: string): PlanRecord | undefined {
    const row = this.sql('SELECT * FROM plans WHERE repo = ? AND pull = ? AND dir = ? AND workspace = ?').get(repo, pull, dir, workspace) as
      | PlanRow
      | undefined;
    return row ? toPlan(row) : undefined;
  }

  listPlans(repo: string, pull: number): PlanRecord[] {
    return (this.sql('SELECT * FROM plans WHERE repo = ? AND pull = ? ORDER BY dir, workspace').all(repo, pull) as PlanRow[]).map(toPlan);
  }

  deletePlan(repo: string, pull: number, dir: string, workspace: string): PlanRecord | undefined {
    const run = this.db.transaction(() => {
      const p = this.getPlan(repo, pull, dir, workspace);
      if (p) this.sql('DELETE FROM plans WHERE repo = ? AND pull = ? AND dir = ? AND workspace = ?').run(repo, pull, dir, workspace);
      return p;
    });
    return run.immediate();
  }

  /**
   * Releases a lock only if `pull` holds it (a failed plan gives back what it took, never
   * another PR's lock). Returns the released lock.
   */
  unlockIfOwnedBy(key: LockKey, pull: number): LockRecord | undefined {
    const run = this.db.transaction(() => {
      const l = this.getLock(key);
      if (!l || l.pull !== pull) return undefined;
      this.sql('DELETE FROM locks WHERE repo = ? AND dir = ? AND workspace = ?').run(key.repo, key.dir, key.workspace);
      return l;
    });
    return run.immediate();
  }

  // ---- pull status (Atlantis's per-PR plan status) ---------------------------------

  /** The PR's recorded plan status, undefined when it has none (never planned, or closed). */
  getPullStatus(repo: string, pull: number): PullStatus | undefined {
    const head = this.sql('SELECT head_sha FROM pull_status WHERE repo = ? AND pull = ?').get(repo, pull) as
      | { head_sha: string }
      | undefined;
    if (!head) return undefined;
    const rows = this.sql('SELECT dir, workspace, project, status FROM pull_projects WHERE repo = ? AND pull = ? ORDER BY seq').all(
      repo,
      pull,
    ) as { dir: string; workspace: string; project: string; status: string }[];
    return { headSha: head.head_sha, projects: rows.map((r) => ({ ...r, status: r.status as ProjectPlanStatus })) };
  }

  /**
   * Records a command's results (merged for the same head, fresh for a new one; `replace`
   * starts from nothing, as after a plan that found no projects). One transaction.
   */
  updatePullStatus(repo: string, pull: number, headSha: string, outcomes: ProjectOutcome[], opts: { replace?: boolean } = {}): PullStatus {
    const run = this.db.transaction(() => {
      const next = mergePullStatus(opts.replace ? undefined : this.getPullStatus(repo, pull), headSha, outcomes);
      this.deletePullStatusRows(repo, pull);
      this.sql('INSERT INTO pull_status (repo, pull, head_sha) VALUES (?, ?, ?)').run(repo, pull, headSha);
      const ins = this.sql('INSERT INTO pull_projects (repo, pull, seq, dir, workspace, project, status) VALUES (?, ?, ?, ?, ?, ?, ?)');
      for (const [i, p] of next.projects.entries()) ins.run(repo, pull, i, p.dir, p.workspace, p.project, p.status);
      return next;
    });
    return run.immediate();
  }

  /** A project's plan was discarded (lock deleted from the web page), as Atlantis's UpdateProjectStatus. */
  markDiscarded(repo: string, pull: number, dir: string, workspace: string): void {
    this.sql(
      `UPDATE pull_projects SET status = 'plan_discarded' WHERE rowid = (SELECT rowid FROM pull_projects
         WHERE repo = ? AND pull = ? AND dir = ? AND workspace = ? ORDER BY seq LIMIT 1)`,
    ).run(repo, pull, dir, workspace);
  }

  /** Forgets the PR's plan status (PR closed). */
  deletePullStatus(repo: string, pull: number): void {
    this.db.transaction(() => this.deletePullStatusRows(repo, pull)).immediate();
  }

  private deletePullStatusRows(repo: string, pull: number): void {
    this.sql('DELETE FROM pull_status WHERE repo = ? AND pull = ?').run(repo, pull);
    this.sql('DELETE FROM pull_projects WHERE repo = ? AND pull = ?').run(repo, pull);
  }

  // ---- drain queue ----------------------------------------------------------------

  /** Stores a command received while draining. Returns its position id. */
  enqueue(repo: string, pull: number, payload: unknown): number {
    const r = this.sql('INSERT INTO queue (repo, pull, payload, enqueued_at) VALUES (?, ?, ?, ?)').run(
      repo,
      pull,
      JSON.stringify(payload ?? null),
      this.ts(),
    );
    return Number(r.lastInsertRowid);
  }

  /** Removes and returns every queued command, oldest first, in one transaction. */
  takeAll(): QueuedCommand[] {
    const run = this.db.transaction(() => {
      const rows = this.sql('SELECT * FROM queue ORDER BY id').all() as {
        id: number;
        repo: string;
        pull: number;
        payload: string;
        enqueued_at: string;
      }[];
      this.sql('DELETE FROM queue').run();
      return rows.map((r) => ({
        id: r.id,
        repo: r.repo,
        pull: r.pull,
        payload: JSON.parse(r.payload) as unknown,
        enqueuedAt: r.enqueued_at,
      }));
    });
    return run.immediate();
  }

  queueLength(): number {
    return (this.sql('SELECT COUNT(*) AS n FROM queue').get() as { n: number }).n;
  }

  // ---- job journal ----------------------------------------------------------------

  jobStarted(job: JobStart): JobRecord {
    const startedAt = this.ts();
    this.sql(
      'INSERT OR REPLACE INTO jobs (id, command, repo, pull, project, dir, workspace, started_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)',
    ).run(job.id, job.command, job.repo, job.pull, job.project ?? null, job.dir ?? null, job.workspace ?? null, startedAt);
    return { ...job, startedAt };
  }

  jobFinished(id: string, result: JobResult, summary?: string): void {
    this.sql('UPDATE jobs SET finished_at = ?, result = ?, summary = ? WHERE id = ?').run(this.ts(), result, summary ?? null, id);
  }

  /** Jobs started but never finished: the previous process died while running them. */
  unfinishedJobs(): JobRecord[] {
    return (this.sql('SELECT * FROM jobs WHERE finished_at IS NULL ORDER BY started_at, id').all() as JobRow[]).map(toJob);
  }

  recentJobs(limit = 50): JobRecord[] {
    return (this.sql('SELECT * FROM jobs ORDER BY started_at DESC, id DESC LIMIT ?').all(limit) as JobRow[]).map(toJob);
  }

  /** Drops finished jobs beyond the newest `keep`, so the journal does not grow forever. */
  pruneJobs(keep = 1000): number {
    return this.sql(
      'DELETE FROM jobs WHERE finished_at IS NOT NULL AND id NOT IN (SELECT id FROM jobs ORDER BY started_at DESC LIMIT ?)',
    ).run(keep).changes;
  }

  // ---- health ---------------------------------------------------------------------

  /** For /readyz: the database answers a read and the file is still there. */
  isHealthy(): boolean {
    if (this.closed) return false;
    try {
      this.sql('SELECT 1 AS ok').get();
      fs.accessSync(this.file, fs.constants.R_OK | fs.constants.W_OK);
      return true;
    } catch {
      return false;
    }
  }

  /** Full check (slow on big files): SQLite's `PRAGMA integrity_check`. */
  integrityCheck(): string {
    const rows = this.db.pragma('integrity_check') as { integrity_check: string }[];
    return rows.map((r) => r.integrity_check).join('\n');
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.db.close();
  }
}
