// The one interface the workflow uses for the server's durable state: project locks, saved
// plans, each PR's plan status, the queue of commands received while draining, and the job
// journal used for crash recovery. Two implementations: the embedded SQLite store of one
// server's data dir (`--locking-db-type boltdb`, Atlantis's name for "embedded") and Redis,
// shared by several replicas (`--locking-db-type redis`). The workflow never knows which.
// Also the command journal: a command is written here before its webhook is answered 200.
//
// Every method is async: Redis answers over the network. A method that throws leaves the
// state as it was (each implementation makes every multi-key change atomic).
import type { AtlantisImportBatch, AtlantisImportOutcome, ImportMarker, ImportNotice } from './bolt-import-types.js';
import type { ApplyLock, LockKey, LockRecord } from './lock-record.js';
import type { ProjectOutcome, PullStatus } from './pull-status.js';

export type { ApplyLock, LockKey, LockRecord } from './lock-record.js';

export type TryLockResult = { acquired: true; lock: LockRecord } | { acquired: false; holder: LockRecord };

export interface PlanRecord extends LockKey {
  pull: number;
  project?: string;
  /**
   * Where the plan file is on this replica (under `<dataDir>/plans/`). With a shared store
   * the bytes are in the store too; `restorePlanFile` writes them here when missing.
   */
  planPath: string;
  /** Commit the plan was made from; an apply on a newer head must plan again. */
  headSha: string;
  /**
   * sha256 (hex) of the plan file when terraform wrote it; the apply refuses a file that no
   * longer matches. Undefined for a plan recorded before hashes were kept (it must be re-planned).
   */
  planSha256?: string;
  createdAt: string;
  /**
   * Set only by a shared store: why its record of this plan failed its check against the
   * shared state key (written or changed in Redis by someone without the key, or moved from
   * another PR or project). Such a plan is never applied; it may only be discarded.
   */
  unverified?: string;
}

export interface QueuedCommand {
  id: number;
  repo: string;
  pull: number;
  /** Whatever the server needs to run the command again (e.g. the webhook event). */
  payload: unknown;
  enqueuedAt: string;
}

/**
 * A command this server answered 200 for and has not finished: written before the answer,
 * marked started just before its first side effect, removed when it ends.
 */
export interface AcceptedCommand {
  id: string;
  repo: string;
  pull: number;
  /** Whatever the server needs to run the command again (the work item). */
  payload: unknown;
  acceptedAt: string;
  /** Set once the command may have done something visible (a reaction, a comment, a job). */
  startedAt?: string;
}

export type JobResult = 'success' | 'failure' | 'error' | 'interrupted';

/** The most of one job's output a store keeps (the job's log file on its replica has all of it). */
export const JOB_OUTPUT_MAX = 2 * 1024 * 1024;

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

export type LockHolder = { pull: number; user: string; project?: string };

/**
 * How long a webhook delivery id is remembered (GitHub lets a delivery be sent again for 3
 * days): a delivery with an id seen in that time is a replay, answered without running.
 */
export const DELIVERY_TTL_MS = 72 * 3600 * 1000;

/** A delivery id the stores record: GitHub's are UUIDs; anything else is not deduplicated. */
export const isRecordableDelivery = (id: string): boolean => /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/.test(id);

/**
 * acceptDelivery's answer: the command journalled, or not, because that delivery id was
 * recorded before: `handled` when its command started or ended (or was queued), `pending`
 * while its command is journalled and not started yet (its fate is not known: the first
 * delivery may still be refused, so the replay is answered "try again later").
 */
export type DeliveryAcceptance = { accepted: AcceptedCommand } | { replay: 'handled' | 'pending' };

/** Atlantis's `--locking-db-type` values. */
export type StoreKind = 'boltdb' | 'redis';

export interface StateStore {
  readonly kind: StoreKind;
  /** Other server processes (replicas) read this store too: what only this one holds must be copied in. */
  readonly shared: boolean;

  // ---- locks ----
  /**
   * Takes the lock on repo+dir+workspace for `holder.pull`. Re-entrant for the same pull (as
   * in Atlantis: a PR re-planning its own locked project keeps the lock); else the holder.
   */
  tryLock(key: LockKey, holder: LockHolder): Promise<TryLockResult>;
  getLock(key: LockKey): Promise<LockRecord | undefined>;
  /** Releases one lock; returns it, if there was one. */
  unlock(key: LockKey): Promise<LockRecord | undefined>;
  /** Releases a lock only if `pull` holds it (a failed plan never gives back another PR's lock). */
  unlockIfOwnedBy(key: LockKey, pull: number): Promise<LockRecord | undefined>;
  /**
   * Releases every lock of a pull (PR closed, `atlantis unlock`); with `discardPlans` the
   * pull's plan records go in the same atomic change. Deleting this replica's plan files
   * is the caller's job.
   */
  unlockAllForPull(repo: string, pull: number, opts?: { discardPlans?: boolean }): Promise<{ locks: LockRecord[]; plans: PlanRecord[] }>;
  /** All locks, or one repo's, ordered by repo, dir, workspace. */
  list(repo?: string): Promise<LockRecord[]>;

  // ---- plans ----
  /** Where a project's plan file goes on this replica (pure: no I/O). */
  planPath(key: LockKey, pull: number, project?: string): string;
  /** Records (or replaces) a project's saved plan; a shared store also keeps the file's bytes. */
  savePlan(rec: Omit<PlanRecord, 'createdAt'> & { createdAt?: string }): Promise<PlanRecord>;
  getPlan(repo: string, pull: number, dir: string, workspace: string): Promise<PlanRecord | undefined>;
  /** A pull's plans ordered by dir, workspace. */
  listPlans(repo: string, pull: number): Promise<PlanRecord[]>;
  deletePlan(repo: string, pull: number, dir: string, workspace: string): Promise<PlanRecord | undefined>;
  /**
   * Makes sure `plan.planPath` holds the plan's bytes on this replica: a shared store writes
   * them from the store when this replica's file is missing or is not that plan's, after
   * checking them against the record's hash, and never replaces the file of the replica that
   * made the plan. Returns why the plan must not be applied (for the PR), or undefined; the
   * apply still checks the file's hash after.
   */
  restorePlanFile(plan: PlanRecord): Promise<string | undefined>;

  // ---- pull status (Atlantis's per-PR plan status) ----
  /** The PR's recorded plan status, undefined when it has none (never planned, or closed). */
  getPullStatus(repo: string, pull: number): Promise<PullStatus | undefined>;
  /** Records a command's results (merged for the same head, fresh for a new one, or `replace`). Atomic. */
  updatePullStatus(
    repo: string,
    pull: number,
    headSha: string,
    outcomes: ProjectOutcome[],
    opts?: { replace?: boolean },
  ): Promise<PullStatus>;
  /** A project's plan was discarded (lock deleted from the web page), as Atlantis's UpdateProjectStatus. */
  markDiscarded(repo: string, pull: number, dir: string, workspace: string): Promise<void>;
  /** Forgets the PR's plan status (PR closed). */
  deletePullStatus(repo: string, pull: number): Promise<void>;

  // ---- drain queue ----
  /**
   * Stores a command received while draining; returns its id. With `deliveryId` that delivery
   * is recorded in the same change, and nothing is queued (undefined) when it was recorded already.
   */
  enqueue(repo: string, pull: number, payload: unknown, deliveryId?: string): Promise<number | undefined>;
  /** Removes and returns every queued command, oldest first, atomically. */
  takeAll(): Promise<QueuedCommand[]>;
  queueLength(): Promise<number>;

  // ---- command journal ----
  /** Records an accepted command of this server (this replica), durably, before its 200. */
  acceptCommand(cmd: { id: string; repo: string; pull: number; payload: unknown }): Promise<AcceptedCommand>;
  /**
   * acceptCommand for a webhook delivery: the command journalled and `deliveryId` recorded (for
   * DELIVERY_TTL_MS) in one atomic change, unless that delivery id was recorded already (a
   * replay): then nothing is written. An id isRecordableDelivery refuses is not recorded.
   */
  acceptDelivery(deliveryId: string, cmd: { id: string; repo: string; pull: number; payload: unknown }): Promise<DeliveryAcceptance>;
  /**
   * A command answered 503 whose write may have landed: its entry goes, and the record of
   * `deliveryId` too when it names this command, in one change (so that a delivery sent again
   * runs, and the first never does).
   */
  dropRefusedCommand(id: string, deliveryId?: string): Promise<void>;
  /** The command is about to do its first side effect. Nothing for an id not journalled (or finished). */
  commandStarted(id: string): Promise<void>;
  /** The command ended, whatever its outcome: its entry goes. Idempotent. `of`: another replica's entry (takeover). */
  commandFinished(id: string, of?: string): Promise<void>;
  /**
   * This server's commands accepted and never finished, in the order they were accepted. A
   * data dir (SQLite) is one server's; on Redis, the replica of the same identity's only, or
   * with `of` those of that replica (a survivor taking over a dead one's; SQLite ignores it).
   */
  acceptedCommands(of?: string): Promise<AcceptedCommand[]>;

  // ---- job journal ----
  jobStarted(job: JobStart): Promise<JobRecord>;
  jobFinished(id: string, result: JobResult, summary?: string): Promise<void>;
  /**
   * Jobs this server (or the replica of the same identity before a restart) started and never
   * finished; with `of`, those replica `of` started (takeover; SQLite ignores it).
   */
  unfinishedJobs(of?: string): Promise<JobRecord[]>;
  /** The newest jobs first. */
  recentJobs(limit?: number): Promise<JobRecord[]>;
  /** One job's record, whichever replica started it. */
  getJob(id: string): Promise<JobRecord | undefined>;
  /** Drops finished jobs beyond the newest `keep` (their output too); returns how many went. */
  pruneJobs(keep?: number): Promise<number>;

  // ---- job output (what every replica's web page shows) ----
  /** Appends to a job's terraform output; past JOB_OUTPUT_MAX (about 2 MiB) the rest is dropped. */
  appendJobOutput(id: string, chunk: string): Promise<void>;
  /**
   * A job's output from `cursor` on (0: the start), and the cursor of the next read. The
   * cursor is the store's own position (bytes or characters), valid only for this job.
   */
  readJobOutput(id: string, cursor?: number): Promise<{ text: string; cursor: number }>;

  // ---- health ----
  /** Opens the connection (Redis) or nothing (SQLite, opened already); rejects when the store cannot be used. */
  connect(): Promise<void>;
  /** For /readyz: the store answers now. Cheap; never throws. */
  isHealthy(): Promise<boolean>;
  close(): Promise<void>;

  // ---- global apply lock (one for every replica of a shared store) ----
  /** The lock, or undefined while applies may run. */
  getApplyLock(): Promise<ApplyLock | undefined>;
  /** Turns it on (one already on is kept as it was, time and who) or off; returns it as it is after the call. */
  setApplyLock(on: boolean, by: string): Promise<ApplyLock | undefined>;

  // ---- the one-time import of Atlantis's atlantis.db (bolt-import.ts) ----
  /**
   * Writes the batch and its marker in one atomic change, unless a marker is there already
   * (then nothing is written). A lock or pull status the store has already is kept as it is.
   */
  importAtlantisState(batch: AtlantisImportBatch): Promise<AtlantisImportOutcome>;
  /** The marker of the import done, if any. */
  atlantisImportMarker(): Promise<ImportMarker | undefined>;
  /** Removes and returns the pull requests still to be told to plan again (one taker gets them). */
  takeImportNotices(): Promise<ImportNotice[]>;
}
