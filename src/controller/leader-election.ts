// Leader election on a coordination.k8s.io/v1 Lease, with the semantics of client-go's
// tools/leaderelection (docs/leader-election.md):
//
//   - A candidate takes the Lease when it does not exist (create), when its holderIdentity is
//     empty (released), or when it has expired. "Expired" is judged on the candidate's OWN
//     clock: the Lease record must not have changed for leaseDurationSeconds since the
//     candidate last saw it change. The timestamps in the record are written for humans and
//     never compared with the local clock, so clock skew between replicas does not matter
//     (only a difference in clock *rate* would).
//   - Every write is a PUT (or POST for a missing Lease) carrying the metadata.resourceVersion
//     that was read: two candidates that race for one Lease both write, the API server accepts
//     one and answers 409 Conflict to the other, which simply stays a follower.
//   - The leader renews every retryPeriod. If it has not renewed successfully for
//     renewDeadline (< leaseDuration), or it sees another holder in the Lease, it stops
//     leading at once and calls onStoppedLeading; the process then exits (controller-runtime's
//     behaviour) so a fresh replica starts clean. As renewDeadline < leaseDuration, it has
//     stopped before any follower can consider the Lease expired.
//   - stop() releases the Lease when leading (holderIdentity cleared, leaseDurationSeconds 1),
//     so a follower takes over at its next poll instead of waiting a whole lease duration.
//
// Followers poll every retryPeriod plus a random jitter of up to jitterFactor x retryPeriod.
// client-go uses a factor of 1.2; the default here is 0.2, so that a released Lease is taken
// over within about one retry period (we run two replicas; a stampede is not a concern).
//
// The decisions are pure functions (observeLease, decideLease, nextLeaseSpec, releaseSpec),
// table-tested in test/leader-election.test.ts; LeaderElector is the loop around them.
import { randomUUID } from 'node:crypto';
import os from 'node:os';
import type { KubeClientConfig } from '../k8s/kubeconfig.js';
import { apiPath, kubeRequest } from '../k8s/client.js';
import type { Logger } from '../log.js';

export const DEFAULT_LEASE_DURATION_MS = 15_000;
export const DEFAULT_RENEW_DEADLINE_MS = 10_000;
export const DEFAULT_RETRY_PERIOD_MS = 2_000;
export const DEFAULT_JITTER_FACTOR = 0.2;

/** The spec of a coordination.k8s.io/v1 Lease, as far as leader election uses it. */
export interface LeaseSpec {
  holderIdentity?: string | null;
  leaseDurationSeconds?: number | null;
  /** MicroTime, RFC 3339 with microseconds */
  acquireTime?: string | null;
  renewTime?: string | null;
  leaseTransitions?: number | null;
}

export interface Lease {
  apiVersion?: string;
  kind?: string;
  metadata?: { name?: string; namespace?: string; resourceVersion?: string; [k: string]: unknown };
  spec?: LeaseSpec;
}

/** What a candidate knows of the Lease: its last seen record and when (local clock) that record last changed. */
export interface LeaseObservation {
  spec: LeaseSpec;
  /** local time (ms) at which this candidate first saw this exact record */
  observedAtMs: number;
}

export type LeaseDecision =
  /** no Lease object: create it with us as the holder */
  | 'create'
  /** free (no holder) or expired: take it over (leaseTransitions + 1) */
  | 'acquire'
  /** we hold it: renew (keep acquireTime and leaseTransitions) */
  | 'renew'
  /** another candidate holds a valid Lease */
  | 'wait';

function recordKey(spec: LeaseSpec): string {
  return JSON.stringify([
    spec.holderIdentity ?? '',
    spec.leaseDurationSeconds ?? null,
    spec.acquireTime ?? null,
    spec.renewTime ?? null,
    spec.leaseTransitions ?? null,
  ]);
}

/**
 * Folds a freshly read Lease spec into the previous observation: the observation time moves
 * only when the record changed (client-go's observedRawRecord / observedTime).
 */
export function observeLease(prev: LeaseObservation | undefined, spec: LeaseSpec, nowMs: number): LeaseObservation {
  if (prev && recordKey(prev.spec) === recordKey(spec)) return prev;
  return { spec: { ...spec }, observedAtMs: nowMs };
}

/** True while the observed record is younger than its leaseDurationSeconds (local clock). */
export function leaseValid(obs: LeaseObservation, nowMs: number, fallbackLeaseDurationMs: number): boolean {
  const secs = obs.spec.leaseDurationSeconds;
  const durationMs = typeof secs === 'number' && secs > 0 ? secs * 1000 : fallbackLeaseDurationMs;
  return obs.observedAtMs + durationMs > nowMs;
}

/**
 * What a candidate should do given what it observed (undefined = the Lease does not exist).
 * Pure; the caller writes the result with the resourceVersion it read.
 */
export function decideLease(obs: LeaseObservation | undefined, identity: string, nowMs: number, leaseDurationMs: number): LeaseDecision {
  if (!obs) return 'create';
  const holder = obs.spec.holderIdentity ?? '';
  if (holder === identity) return 'renew';
  if (holder === '') return 'acquire';
  return leaseValid(obs, nowMs, leaseDurationMs) ? 'wait' : 'acquire';
}

/** True when a leader that last renewed at lastRenewMs must give up (client-go's RenewDeadline). */
export function renewDeadlinePassed(lastRenewMs: number, nowMs: number, renewDeadlineMs: number): boolean {
  return nowMs - lastRenewMs >= renewDeadlineMs;
}

/** RFC 3339 with microseconds, the MicroTime format the API server parses. */
export function microTime(d: Date): string {
  return d.toISOString().replace(/\.(\d{3})Z$/, '.$1000Z');
}

/** Lease durations are whole seconds in the Lease; a fraction is rounded up. */
export function leaseDurationSeconds(leaseDurationMs: number): number {
  return Math.max(1, Math.ceil(leaseDurationMs / 1000));
}

/** The spec to write for a create/acquire/renew decision. */
export function nextLeaseSpec(
  decision: Exclude<LeaseDecision, 'wait'>,
  old: LeaseSpec | undefined,
  identity: string,
  now: Date,
  leaseDurationMs: number,
): LeaseSpec {
  const t = microTime(now);
  const base = { holderIdentity: identity, leaseDurationSeconds: leaseDurationSeconds(leaseDurationMs), renewTime: t };
  switch (decision) {
    case 'create':
      return { ...base, acquireTime: t, leaseTransitions: 0 };
    case 'acquire':
      return { ...base, acquireTime: t, leaseTransitions: (old?.leaseTransitions ?? 0) + 1 };
    case 'renew':
      return { ...base, acquireTime: old?.acquireTime ?? t, leaseTransitions: old?.leaseTransitions ?? 0 };
  }
}

/** The spec a leader writes on a graceful stop: no holder, so the next candidate takes it at once. */
export function releaseSpec(old: LeaseSpec | undefined, now: Date): LeaseSpec {
  const t = microTime(now);
  return { holderIdentity: '', leaseDurationSeconds: 1, acquireTime: t, renewTime: t, leaseTransitions: old?.leaseTransitions ?? 0 };
}

/** `<POD_NAME or hostname>_<uuid>`: unique per process, readable in `kubectl get lease`. */
export function defaultIdentity(): string {
  return `${process.env.POD_NAME || os.hostname()}_${randomUUID()}`;
}

export interface LeaderElectionOptions {
  kc: KubeClientConfig;
  namespace: string;
  name: string;
  identity: string;
  /** how long followers wait after the last observed change before taking over (default 15 s) */
  leaseDurationMs?: number;
  /** how long the leader keeps retrying a failing renew before it gives up (default 10 s) */
  renewDeadlineMs?: number;
  /** the interval between tries (default 2 s) */
  retryPeriodMs?: number;
  /** followers wait retryPeriod x (1 + random x jitterFactor) between polls (default 0.2) */
  jitterFactor?: number;
  logger: Logger;
  /** called (not awaited by the loop) when this candidate becomes the leader */
  onStartedLeading: () => void | Promise<void>;
  /**
   * Called when leadership is LOST (renew deadline passed, or another holder seen). Not called
   * by stop(). The elector does not try again afterwards: exit the process.
   */
  onStoppedLeading: () => void;
  /** called when the observed holder changes to a (non-empty) identity, ours included */
  onNewLeader?: (identity: string) => void;
  now?: () => Date;
  /** @internal test hook, awaited just before every write to the Lease */
  beforeWrite?: (decision: Exclude<LeaseDecision, 'wait'> | 'release') => Promise<void>;
}

export interface AttemptResult {
  /** true when we hold the Lease after this attempt */
  ok: boolean;
  decision: LeaseDecision | 'error';
  /** the write lost a race (409) */
  conflict: boolean;
  /** the holder we observed (after a successful write: us) */
  holder: string;
  error?: string;
}

type ElectorState = 'idle' | 'running' | 'stopped' | 'lost';

export class LeaderElector {
  readonly identity: string;
  readonly leaseDurationMs: number;
  readonly renewDeadlineMs: number;
  readonly retryPeriodMs: number;
  private readonly jitterFactor: number;
  private readonly path: string;
  private readonly log: Logger;
  private readonly now: () => Date;
  private state: ElectorState = 'idle';
  private leading = false;
  private lease: Lease | undefined;
  private observation: LeaseObservation | undefined;
  private lastRenewMs = 0;
  private reportedLeader = '';
  private loopDone: Promise<void> | undefined;
  private wake: (() => void) | undefined;
  private sleepTimer: NodeJS.Timeout | undefined;
  private attempts = 0;

  constructor(private readonly o: LeaderElectionOptions) {
    this.identity = o.identity;
    this.leaseDurationMs = o.leaseDurationMs ?? DEFAULT_LEASE_DURATION_MS;
    this.renewDeadlineMs = o.renewDeadlineMs ?? DEFAULT_RENEW_DEADLINE_MS;
    this.retryPeriodMs = o.retryPeriodMs ?? DEFAULT_RETRY_PERIOD_MS;
    this.jitterFactor = o.jitterFactor ?? DEFAULT_JITTER_FACTOR;
    validateDurations(this.leaseDurationMs, this.renewDeadlineMs, this.retryPeriodMs);
    if (!o.identity) throw new Error('Leader election identity must not be empty');
    this.path = apiPath('coordination.k8s.io/v1', 'leases', o.namespace, o.name);
    this.now = o.now ?? (() => new Date());
    this.log = o.logger.child({ lease: { namespace: o.namespace, name: o.name }, identity: o.identity });
  }

  /** Starts the election loop in the background. */
  start(): void {
    if (this.state !== 'idle') throw new Error('LeaderElector already started');
    this.state = 'running';
    this.log.info('Leader election started', {
      leaseDurationMs: this.leaseDurationMs,
      renewDeadlineMs: this.renewDeadlineMs,
      retryPeriodMs: this.retryPeriodMs,
    });
    this.loopDone = this.loop();
  }

  isLeader(): boolean {
    return this.leading;
  }

  /** The last observed holder ('' when none). */
  leader(): string {
    return this.observation?.spec.holderIdentity ?? '';
  }

  /** True once the first attempt (acquire or not) has finished. */
  hasRun(): boolean {
    return this.attempts > 0;
  }

  /**
   * Stops the loop and, when leading and `release` is not false, releases the Lease so that a
   * follower takes over at once. Does not call onStoppedLeading. `release: false` simulates a
   * crash (tests): the Lease stays held until it expires.
   */
  async stop(opts: { release?: boolean } = {}): Promise<void> {
    const prev = this.state;
    if (prev === 'stopped') return;
    this.state = 'stopped';
    this.interruptSleep();
    await this.loopDone;
    if (this.leading && opts.release !== false) await this.release();
    this.leading = false;
    if (prev !== 'idle') this.log.info('Leader election stopped');
  }

  private interruptSleep(): void {
    if (this.sleepTimer) clearTimeout(this.sleepTimer);
    this.sleepTimer = undefined;
    const w = this.wake;
    this.wake = undefined;
    w?.();
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      this.wake = resolve;
      this.sleepTimer = setTimeout(
        () => {
          this.sleepTimer = undefined;
          this.wake = undefined;
          resolve();
        },
        Math.max(0, ms),
      );
    });
  }

  private nowMs(): number {
    return this.now().getTime();
  }

  private async loop(): Promise<void> {
    for (let i = 0; this.state === 'running'; i++) {
      const r = await this.tryAcquireOrRenew();
      if (this.state !== 'running') {
        // stopped while this attempt was in flight: if it took the Lease, stop() releases it
        if (r.ok) this.leading = true;
        return;
      }
      const t = this.nowMs();
      if (this.leading) {
        if (!r.ok) {
          const otherHolder = r.decision === 'wait';
          if (otherHolder || renewDeadlinePassed(this.lastRenewMs, t, this.renewDeadlineMs)) {
            this.lose(otherHolder ? 'another holder' : 'renew deadline passed', r);
            return;
          }
          this.log.warn('Lease renew failed', { error: r.error ?? (r.conflict ? 'conflict' : ''), attempt: i });
          // retry, but never sleep past the deadline
          const left = this.lastRenewMs + this.renewDeadlineMs - t;
          await this.sleep(Math.min(this.retryPeriodMs, left));
          continue;
        }
        await this.sleep(this.retryPeriodMs);
        continue;
      }
      if (r.ok) {
        this.leading = true;
        this.log.info('Leader lease acquired', { leaseTransitions: this.observation?.spec.leaseTransitions ?? 0 });
        void Promise.resolve()
          .then(() => this.o.onStartedLeading())
          .catch((e: unknown) => this.log.error('Started leading callback failed', { error: e as Error }));
        await this.sleep(this.retryPeriodMs);
        continue;
      }
      if (r.decision === 'error' || r.conflict) {
        this.log.debug('Leader lease not acquired', { error: r.error ?? 'conflict' });
      }
      await this.sleep(this.retryPeriodMs * (1 + Math.random() * this.jitterFactor));
    }
  }

  private lose(reason: string, r: AttemptResult): void {
    this.leading = false;
    this.state = 'lost';
    this.log.error('Leader lease lost', { reason, holder: r.holder, error: r.error });
    try {
      this.o.onStoppedLeading();
    } catch (e) {
      this.log.error('Stopped leading callback failed', { error: e as Error });
    }
  }

  private requestTimeoutMs(): number {
    // A follower risks nothing by waiting: a slow API server (or a slow TLS handshake on a
    // starved machine) must not make every attempt time out.
    if (!this.leading) return Math.max(this.renewDeadlineMs, 10_000);
    // a hung request must not hold a leader past its renew deadline
    return Math.max(50, this.lastRenewMs + this.renewDeadlineMs - this.nowMs());
  }

  private reportLeader(): void {
    const holder = this.observation?.spec.holderIdentity ?? '';
    if (holder === this.reportedLeader) return;
    this.reportedLeader = holder;
    if (holder === '') return;
    this.log.info('New leader observed', { holder });
    try {
      this.o.onNewLeader?.(holder);
    } catch (e) {
      this.log.error('New leader callback failed', { error: e as Error });
    }
  }

  /**
   * One try, like client-go's tryAcquireOrRenew: the leader first renews optimistically with
   * the Lease it last wrote; otherwise (or on a conflict) it reads the Lease, decides, writes.
   */
  async tryAcquireOrRenew(): Promise<AttemptResult> {
    const started = this.nowMs();
    try {
      return await this.attempt(started);
    } catch (e) {
      return { ok: false, decision: 'error', conflict: false, holder: this.leader(), error: (e as Error).message };
    } finally {
      this.attempts++;
      this.reportLeader();
    }
  }

  private async attempt(started: number): Promise<AttemptResult> {
    // 1. fast path: a leader renews with the object it last wrote
    if (this.leading && this.lease) {
      const spec = nextLeaseSpec('renew', this.lease.spec, this.identity, new Date(started), this.leaseDurationMs);
      const w = await this.write('renew', { ...this.lease, spec });
      if (w.ok) return this.wrote(w.lease, started, 'renew');
      if (!w.conflict) return { ok: false, decision: 'error', conflict: false, holder: this.leader(), error: w.error };
      this.log.debug('Lease changed since the last renew; reading it');
    }
    // 2. read
    const res = await kubeRequest<Lease>(this.o.kc, 'GET', this.path, undefined, { timeoutMs: this.requestTimeoutMs() });
    let observed: Lease | undefined;
    if (res.status === 200) observed = res.body;
    else if (res.status !== 404)
      return { ok: false, decision: 'error', conflict: false, holder: this.leader(), error: `GET lease: ${res.status}` };
    const now = this.nowMs();
    if (observed) this.observation = observeLease(this.observation, observed.spec ?? {}, now);
    else this.observation = undefined;
    this.lease = observed;
    const decision = decideLease(this.observation, this.identity, now, this.leaseDurationMs);
    if (decision === 'wait') return { ok: false, decision, conflict: false, holder: this.leader() };
    // 3. write with the resourceVersion we read. The times written (and the renew deadline)
    // count from this decision, which came after we saw the Lease expire.
    const spec = nextLeaseSpec(decision, observed?.spec, this.identity, new Date(now), this.leaseDurationMs);
    const body: Lease = observed
      ? { ...observed, spec }
      : { apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', metadata: { name: this.o.name, namespace: this.o.namespace }, spec };
    const w = await this.write(decision, body);
    if (w.ok) return this.wrote(w.lease, now, decision);
    return { ok: false, decision: w.conflict ? decision : 'error', conflict: w.conflict, holder: this.leader(), error: w.error };
  }

  /** `at` is the time written as renewTime: before the write, so the renew deadline is conservative. */
  private wrote(lease: Lease, at: number, decision: LeaseDecision): AttemptResult {
    this.lease = lease;
    this.observation = observeLease(undefined, lease.spec ?? {}, this.nowMs());
    this.lastRenewMs = at;
    return { ok: true, decision, conflict: false, holder: this.identity };
  }

  private async write(
    decision: Exclude<LeaseDecision, 'wait'> | 'release',
    body: Lease,
  ): Promise<{ ok: true; lease: Lease } | { ok: false; conflict: boolean; error: string }> {
    await this.o.beforeWrite?.(decision);
    const create = decision === 'create';
    const path = create ? apiPath('coordination.k8s.io/v1', 'leases', this.o.namespace) : this.path;
    const res = await kubeRequest<Lease>(this.o.kc, create ? 'POST' : 'PUT', path, body, { timeoutMs: this.requestTimeoutMs() });
    if (res.status === 200 || res.status === 201) return { ok: true, lease: res.body };
    // 409: someone else wrote first (update Conflict, or AlreadyExists on create)
    const conflict = res.status === 409;
    const msg = (res.body as { message?: string } | undefined)?.message ?? '';
    return { ok: false, conflict, error: `${create ? 'POST' : 'PUT'} lease: ${res.status}${msg ? ` ${msg}` : ''}` };
  }

  /** Clears holderIdentity so that the next candidate need not wait for the Lease to expire. */
  private async release(): Promise<void> {
    for (let i = 0; i < 3; i++) {
      try {
        if (!this.lease) {
          const g = await kubeRequest<Lease>(this.o.kc, 'GET', this.path, undefined, { timeoutMs: 5_000 });
          if (g.status !== 200) break;
          this.lease = g.body;
        }
        if ((this.lease.spec?.holderIdentity ?? '') !== this.identity) {
          this.log.info('Leader lease not released: held by another candidate', { holder: this.lease.spec?.holderIdentity ?? '' });
          return;
        }
        await this.o.beforeWrite?.('release');
        const body: Lease = { ...this.lease, spec: releaseSpec(this.lease.spec, this.now()) };
        const res = await kubeRequest<Lease>(this.o.kc, 'PUT', this.path, body, { timeoutMs: 5_000 });
        if (res.status === 200) {
          this.lease = res.body;
          this.observation = observeLease(undefined, res.body.spec ?? {}, this.nowMs());
          this.log.info('Leader lease released');
          return;
        }
        if (res.status !== 409) {
          this.log.warn('Leader lease release failed', { status: res.status });
          return;
        }
        this.lease = undefined; // re-read and check we still hold it
      } catch (e) {
        this.log.warn('Leader lease release failed', { error: e as Error });
        return;
      }
    }
  }
}

/** Throws unless leaseDuration > renewDeadline > retryPeriod > 0 (client-go's rules, without its 1.2 jitter factor). */
export function validateDurations(leaseDurationMs: number, renewDeadlineMs: number, retryPeriodMs: number): void {
  if (!(retryPeriodMs > 0)) throw new Error('The retry period must be greater than zero');
  if (!(leaseDurationMs >= 1000)) throw new Error('The lease duration must be at least 1s (Leases count whole seconds)');
  if (!(leaseDurationMs > renewDeadlineMs)) throw new Error('The lease duration must be greater than the renew deadline');
  if (!(renewDeadlineMs > retryPeriodMs)) throw new Error('The renew deadline must be greater than the retry period');
}
