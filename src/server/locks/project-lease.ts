// The project lease: held by one job at a time, cluster-wide, while it runs terraform in a
// project (repo + dir + workspace). Atlantis's project lock keeps OTHER pull requests out;
// the lease also keeps apart two commands of the same PR that land on two replicas.
//
// A lease has a TTL and is renewed every TTL/6 while the job runs, so a replica that dies or
// is cut off loses it within one TTL and another can go on. Its token comes from a counter
// that never goes back: every acquire, renew, release and check compares it, so a replica
// whose lease expired can never extend, release or pass the check of the lease another
// holds now. `stillHeld()` is the fencing check, made before a result is written back.
//
// Calls wait for a Redis that cannot be reached (store-wait.ts): acquire as any call of an
// accepted command, the check and the release at most one TTL (after that the lease is gone),
// a renewal until the next one is due (so it lands as soon as Redis is back). So a Redis
// outage shorter than the TTL less a renewal period and the reconnect loses no lease.
//
// RedisProjectLeases (redis-lease.ts): a key per project with a PX expiry, the token from INCR,
// each step one Lua script. LocalProjectLeases: the embedded store's; the data-dir lock already
// guarantees one server per data dir, so an in-memory map with a counter is enough.
import type { Logger } from '../../log.js';
import type { LockKey } from './state-store.js';
import { waitingForStore } from './store-wait.js';

export interface LeaseHolder {
  replicaId: string;
  jobId: string;
}

export interface Lease {
  /** Fencing token: greater than that of every lease of any project acquired before. */
  readonly token: number;
  /** Extends the TTL; false when the lease is no longer ours (expired, maybe taken since). */
  renew(): Promise<boolean>;
  /** The fencing check: true only while this lease, with this token, is the project's. */
  stillHeld(): Promise<boolean>;
  /** Gives it back (and stops renewing); never touches a lease someone else holds now. */
  release(): Promise<void>;
}

export type LeaseAcquireResult = { held: true; lease: Lease } | { held: false; holder: LeaseHolder };

export interface ProjectLeases {
  /**
   * The lease, or who holds it. Not re-entrant, except for the very same holder (replica and
   * job) asking again: it gets the lease it holds, as when the answer to its first ask was lost.
   */
  acquire(key: LockKey, holder: LeaseHolder): Promise<LeaseAcquireResult>;
  /** Stops the renewals of leases still held (they expire) and closes the connection. */
  close(): Promise<void>;
}

export interface LeaseTiming {
  /** Default 30 s. */
  ttlMs?: number;
  /** Default ttlMs / 6; 0: no automatic renewal (tests). */
  renewEveryMs?: number;
}

/** What a store of leases does, each step atomic; `field` names the project. */
export interface LeaseBackend {
  /** The new token, or the current holder. */
  tryAcquire(field: string, holder: LeaseHolder, ttlMs: number): Promise<number | LeaseHolder>;
  renew(field: string, token: number, ttlMs: number): Promise<boolean>;
  release(field: string, token: number): Promise<boolean>;
  check(field: string, token: number): Promise<boolean>;
}

const DEFAULT_TTL_MS = 30_000;
/** The same job asking again (its first answer was lost with the connection): it gets its own lease back. */
const sameJob = (a: LeaseHolder, b: LeaseHolder): boolean => a.replicaId === b.replicaId && a.jobId === b.jobId;
/** Injective: JSON of the three parts. */
const fieldOf = (k: LockKey): string => JSON.stringify([k.repo, k.dir, k.workspace]);

class HeldLease implements Lease {
  private timer: NodeJS.Timeout | undefined;
  private lost = false;
  private renewing = false;

  constructor(
    private readonly backend: LeaseBackend,
    private readonly key: LockKey,
    private readonly holder: LeaseHolder,
    readonly token: number,
    private readonly ttlMs: number,
    renewEveryMs: number,
    private readonly logger: Logger | undefined,
    private readonly live: Set<HeldLease>,
  ) {
    live.add(this);
    if (renewEveryMs > 0) {
      this.timer = setInterval(() => void this.renewBeforeNext(renewEveryMs), renewEveryMs);
      this.timer.unref();
    }
  }

  /** The timer's renewal: while Redis cannot be reached it is tried again until the next one is due. */
  private async renewBeforeNext(periodMs: number): Promise<void> {
    if (this.renewing) return;
    this.renewing = true;
    try {
      await this.renew(periodMs);
    } finally {
      this.renewing = false;
    }
  }

  async renew(waitMs = 0): Promise<boolean> {
    if (this.lost) return false;
    let ok: boolean;
    try {
      ok = await waitingForStore('project lease renewal', () => this.backend.renew(fieldOf(this.key), this.token, this.ttlMs), {
        maxWaitMs: waitMs,
      });
    } catch (e) {
      // Redis away for a moment: the next renewal may still come in time.
      this.logger?.warn('Could not renew the project lease', { ...this.fields(), error: (e as Error).message });
      return false;
    }
    if (!ok) this.markLost();
    return ok;
  }

  async stillHeld(): Promise<boolean> {
    if (this.lost) return false;
    try {
      // Redis away for a moment: the lease outlives it by its TTL, so the answer is worth the wait.
      if (await this.waiting('project lease check', () => this.backend.check(fieldOf(this.key), this.token))) return true;
    } catch (e) {
      // Unknown counts as lost: the caller must not write a result it cannot vouch for.
      this.logger?.warn('Could not check the project lease', { ...this.fields(), error: (e as Error).message });
      return false;
    }
    this.markLost();
    return false;
  }

  async release(): Promise<void> {
    this.stop();
    if (this.lost) return;
    this.lost = true;
    // Else the project stays closed to every other job until the TTL ends.
    await this.waiting('project lease release', () => this.backend.release(fieldOf(this.key), this.token));
  }

  /** A backend call that waits for Redis to come back, no longer than the lease could live. */
  private waiting<T>(what: string, call: () => Promise<T>): Promise<T> {
    return waitingForStore(what, call, { maxWaitMs: this.ttlMs, ...(this.logger ? { logger: this.logger } : {}) });
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    this.live.delete(this);
  }

  private markLost(): void {
    if (this.lost) return;
    this.lost = true;
    this.stop();
    this.logger?.error('Lost the project lease: it expired, another replica may have run terraform in the project', this.fields());
  }

  private fields() {
    return { ...this.key, ...this.holder, token: this.token };
  }
}

/** The leases of one backend: what LocalProjectLeases and RedisProjectLeases share. */
export class Leases implements ProjectLeases {
  private readonly live = new Set<HeldLease>();
  private readonly ttlMs: number;
  private readonly renewEveryMs: number;

  constructor(
    private readonly backend: LeaseBackend,
    timing: LeaseTiming,
    private readonly logger: Logger | undefined,
    private readonly onClose: () => Promise<void> = async () => undefined,
  ) {
    this.ttlMs = timing.ttlMs ?? DEFAULT_TTL_MS;
    this.renewEveryMs = timing.renewEveryMs ?? Math.floor(this.ttlMs / 6);
  }

  async acquire(key: LockKey, holder: LeaseHolder): Promise<LeaseAcquireResult> {
    // Retried while Redis cannot be reached: the job asking is one whose command was answered 200.
    const r = await waitingForStore('project lease acquire', () => this.backend.tryAcquire(fieldOf(key), holder, this.ttlMs), {
      ...(this.logger ? { logger: this.logger } : {}),
    });
    if (typeof r !== 'number') return { held: false, holder: r };
    return { held: true, lease: new HeldLease(this.backend, key, holder, r, this.ttlMs, this.renewEveryMs, this.logger, this.live) };
  }

  async close(): Promise<void> {
    for (const l of [...this.live]) l.stop();
    await this.onClose();
  }
}

/** In-process leases for the embedded store (one server per data dir: the data-dir lock). */
export class LocalProjectLeases extends Leases {
  constructor(opts: LeaseTiming & { logger?: Logger; now?: () => number } = {}) {
    super(new MemoryBackend(opts.now ?? Date.now), opts, opts.logger);
  }
}

class MemoryBackend implements LeaseBackend {
  private readonly leases = new Map<string, { token: number; holder: LeaseHolder; expiresAt: number }>();
  private counter = 0;

  constructor(private readonly now: () => number) {}

  private current(field: string) {
    const l = this.leases.get(field);
    if (l && l.expiresAt <= this.now()) this.leases.delete(field);
    return this.leases.get(field);
  }

  async tryAcquire(field: string, holder: LeaseHolder, ttlMs: number): Promise<number | LeaseHolder> {
    const cur = this.current(field);
    if (cur && sameJob(cur.holder, holder)) {
      cur.expiresAt = this.now() + ttlMs;
      return cur.token;
    }
    if (cur) return cur.holder;
    const token = ++this.counter;
    this.leases.set(field, { token, holder: { ...holder }, expiresAt: this.now() + ttlMs });
    return token;
  }

  async renew(field: string, token: number, ttlMs: number): Promise<boolean> {
    const cur = this.current(field);
    if (cur?.token !== token) return false;
    cur.expiresAt = this.now() + ttlMs;
    return true;
  }

  async release(field: string, token: number): Promise<boolean> {
    if (this.current(field)?.token !== token) return false;
    this.leases.delete(field);
    return true;
  }

  async check(field: string, token: number): Promise<boolean> {
    return this.current(field)?.token === token;
  }
}
