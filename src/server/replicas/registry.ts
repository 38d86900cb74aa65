// The set of live replicas sharing one Redis (--locking-db-type redis), and the embedded
// store's registry of one. Each replica heartbeats its record; a record whose heartbeat key
// expired is a replica that died without leaving, and exactly one survivor is told.
//
// Key layout (P is `keyPrefix`, default `atlantis:`, as the store's; I a replica id):
//
//   P replicas                 HASH   I -> ReplicaInfo JSON, the last heartbeat of every replica not yet swept
//   P replica:I                STRING ReplicaInfo JSON, with a TTL (ttlMs): present while I is alive
//   P replica-gone:I:<beat>    STRING the id of the survivor that claimed I's death at its last heartbeat <beat> (24 h TTL)
//
// Liveness is the key's TTL, counted by Redis: the replicas' clocks never compare. A heartbeat
// writes the hash field and the key in one script; a sweep (one script, run by every replica's
// list() and after each of its heartbeats) drops the fields whose key expired and claims each
// death with SET NX on its claim key, so one death is reported once cluster-wide, by whichever
// replica swept first. A replica sweeps only after its own heartbeats have succeeded without a
// break for one TTL: after Redis was away (stopped, restarted, paused) every key may have
// expired meanwhile, and the others need one heartbeat period to write theirs again.
//
// Records are sealed with the shared state key (replica-record.ts): one that fails its check
// (written by someone without the key, or with a URL that is not scheme://host:port) is not a
// replica: it is never listed, never forwarded to, and its "death" is never taken over.
//
// One id, one live process: each process start has its own instance nonce, kept in the data
// dir (instance-file.ts). At start a replica claims its id: free, or held by a record of this
// data dir's previous run (that process is dead: the data dir lock is ours), it starts at once;
// held by another instance, it watches that record until it expires (dead: start) or is
// refreshed (alive: refuse to start), at most the record's remaining TTL.
import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import { UsageError } from '../../config/flags.js';
import type { Logger } from '../../log.js';
import { type RedisConnectionOptions, closeRedis, connectRedis, createRedisClient } from '../locks/redis-connection.js';
import { redisTarget } from '../locks/store-config.js';
import type { SharedStateKey } from '../locks/shared-state-key.js';
import type { ReplicaInfo } from './affinity.js';
import type { ReplicaMembership } from './membership.js';
import { readInstanceFile, writeInstanceFile } from './instance-file.js';
import { LocalReplicaRegistry } from './local-registry.js';
import { type ReplicaRecord, infoOf, openReplica, sealReplica } from './replica-record.js';

export { LocalReplicaRegistry };

export const DEFAULT_HEARTBEAT_MS = 2000;
export const DEFAULT_REPLICA_TTL_MS = 10_000;
const CLAIM_TTL_MS = 24 * 3600 * 1000;

export interface ReplicaRegistryOptions extends RedisConnectionOptions {
  self: { id: string; url: string };
  /** `--shared-state-key-file`: records are sealed with it, and others' checked. */
  key: SharedStateKey;
  /** Where this replica's instance nonce is kept between runs (in its data dir); none: every run is new. */
  instanceFile?: string;
  keyPrefix?: string;
  heartbeatMs?: number;
  /** How long a heartbeat keeps a replica alive; more than heartbeatMs (five of them by default). */
  ttlMs?: number;
  /** A replica died without leaving; called on one survivor per death. Errors are logged. */
  onReplicaGone?: (gone: ReplicaInfo) => void | Promise<void>;
  logger?: Logger;
  /** Clock of heartbeatAt (tests). */
  now?: () => number;
}

// KEYS replicas, replica:I; ARGV I, record, ttl ms. {1 when the hash held I before (0: new, or
// swept as gone), the alive key's value before (false: none)}.
const HEARTBEAT = `local had = redis.call('HEXISTS', KEYS[1], ARGV[1])
local prev = redis.call('GET', KEYS[2])
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('SET', KEYS[2], ARGV[2], 'PX', ARGV[3])
return {had, prev}`;

// KEYS replicas, replica:I; ARGV I, record, ttl ms, the alive key's value expected ('' absent).
// The first heartbeat of a start: 1 written, 0 the key changed since it was read.
const CLAIM = `local cur = redis.call('GET', KEYS[2])
if (ARGV[4] == '' and cur) or (ARGV[4] ~= '' and cur ~= ARGV[4]) then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('SET', KEYS[2], ARGV[2], 'PX', ARGV[3])
return 1`;

// KEYS replicas; ARGV alive-key prefix, claim-key prefix, claim ttl ms, '1' to sweep, own id.
// {live ids and records (id, rec, ...), ids and records of the deaths this call claimed}. Never sweeps the caller itself.
const SWEEP = `local all = redis.call('HGETALL', KEYS[1])
local live, gone = {}, {}
for i = 1, #all, 2 do
  local id, rec = all[i], all[i + 1]
  if redis.call('EXISTS', ARGV[1] .. id) == 1 then
    live[#live + 1] = id
    live[#live + 1] = rec
  elseif ARGV[4] == '1' and id ~= ARGV[5] then
    redis.call('HDEL', KEYS[1], id)
    local beat = string.match(rec, '"heartbeatAt":(%d+)') or redis.sha1hex(rec)
    if redis.call('SET', ARGV[2] .. id .. ':' .. beat, ARGV[5], 'NX', 'PX', ARGV[3]) then
      gone[#gone + 1] = id
      gone[#gone + 1] = rec
    end
  end
end
return {live, gone}`;

// KEYS replicas, replica:I; ARGV I, '"instance":"<own instance>"'. Only this instance's own
// record goes: a process that never got the id must not remove the live holder's.
const LEAVE = `local n = 0
local rec = redis.call('HGET', KEYS[1], ARGV[1])
if rec and string.find(rec, ARGV[2], 1, true) then redis.call('HDEL', KEYS[1], ARGV[1]) end
local cur = redis.call('GET', KEYS[2])
if cur and string.find(cur, ARGV[2], 1, true) then n = redis.call('DEL', KEYS[2]) end
return n`;

interface Scripts {
  atlReplicaHeartbeat(hash: string, alive: string, id: string, rec: string, ttl: number): Promise<[number, string | null]>;
  atlReplicaClaim(hash: string, alive: string, id: string, rec: string, ttl: number, expected: string): Promise<number>;
  atlReplicaSweep(
    hash: string,
    alivePrefix: string,
    claimPrefix: string,
    claimTtl: number,
    sweep: string,
    id: string,
  ): Promise<[string[], string[]]>;
  atlReplicaLeave(hash: string, alive: string, id: string, own: string): Promise<number>;
}

const byId = (a: ReplicaInfo, b: ReplicaInfo): number => Buffer.compare(Buffer.from(a.id), Buffer.from(b.id));

/** The registry on Redis, on its own connection (a blocked heartbeat never waits behind store calls, nor they behind it). */
export class ReplicaRegistry implements ReplicaMembership {
  private readonly redis: Redis;
  private readonly scripts: Scripts;
  private readonly p: string;
  private readonly heartbeatMs: number;
  private readonly ttlMs: number;
  private readonly now: () => number;
  private info: ReplicaRecord;
  /** Records already said to fail their check (bounded): each is logged once. */
  private readonly rejected = new Set<string>();
  private timer: NodeJS.Timeout | undefined;
  private running = false;
  private closed = false;
  private beatFailing = false;
  private beaten = false;
  /** Since when every heartbeat succeeded (undefined after a failure): sweeping waits one TTL from it. */
  private healthySince: number | undefined;

  constructor(private readonly opts: ReplicaRegistryOptions) {
    this.heartbeatMs = opts.heartbeatMs ?? DEFAULT_HEARTBEAT_MS;
    this.ttlMs = opts.ttlMs ?? DEFAULT_REPLICA_TTL_MS;
    if (!(this.heartbeatMs > 0) || !(this.ttlMs > this.heartbeatMs))
      throw new Error(`replica registry: the TTL (${this.ttlMs} ms) must be longer than the heartbeat (${this.heartbeatMs} ms)`);
    this.p = opts.keyPrefix ?? 'atlantis:';
    this.now = opts.now ?? Date.now;
    this.info = { id: opts.self.id, url: opts.self.url, draining: false, heartbeatAt: 0, instance: randomBytes(16).toString('hex') };
    this.redis = createRedisClient(opts);
    this.redis.defineCommand('atlReplicaHeartbeat', { numberOfKeys: 2, lua: HEARTBEAT });
    this.redis.defineCommand('atlReplicaClaim', { numberOfKeys: 2, lua: CLAIM });
    this.redis.defineCommand('atlReplicaSweep', { numberOfKeys: 1, lua: SWEEP });
    this.redis.defineCommand('atlReplicaLeave', { numberOfKeys: 2, lua: LEAVE });
    this.scripts = this.redis as unknown as Scripts;
    let down = false;
    // ioredis emits every failed attempt; log the change of state only.
    this.redis.on('error', (err: Error) => {
      if (!down) opts.logger?.warn('Replica registry lost its Redis connection', { error: err.message });
      down = true;
    });
    this.redis.on('ready', () => {
      if (down) opts.logger?.info('Replica registry Redis connection back');
      down = false;
    });
  }

  get self(): ReplicaInfo {
    return infoOf(this.info);
  }

  /** This process's instance nonce (its heartbeats carry it). */
  get instance(): string {
    return this.info.instance;
  }

  private get hashKey(): string {
    return `${this.p}replicas`;
  }

  private aliveKey(id: string): string {
    return `${this.p}replica:${id}`;
  }

  async start(): Promise<void> {
    await this.claim();
    await this.setDraining(false);
  }

  async claim(): Promise<void> {
    if (this.running) return;
    if (this.redis.status === 'wait') {
      try {
        await connectRedis(this.redis);
      } catch (err) {
        this.redis.disconnect();
        throw new Error(`replica registry: failed to connect to redis at ${redisTarget(this.opts)}: ${(err as Error).message}`);
      }
    }
    // Not serving until start(): the others route no PR here meanwhile.
    this.info = { ...this.info, draining: true };
    if (!this.beaten) await this.claimId();
    else await this.heartbeat();
    this.running = true;
    this.schedule();
  }

  /**
   * The first heartbeat of this process, when no other live process holds the id (see the
   * top of this file). Throws a one-line UsageError while another live replica holds it.
   */
  private async claimId(): Promise<void> {
    const id = this.info.id;
    const alive = this.aliveKey(id);
    const previous = this.opts.instanceFile ? readInstanceFile(this.opts.instanceFile, id) : undefined;
    if (this.opts.instanceFile) writeInstanceFile(this.opts.instanceFile, { replicaId: id, instance: this.info.instance });
    for (let attempt = 0; attempt < 100; attempt++) {
      const raw = await this.redis.get(alive);
      let expected = '';
      if (raw !== null) {
        const held = openReplica(this.opts.key, id, raw);
        if (!held.ok) {
          this.opts.logger?.warn('The record under this replica id fails its check: it is replaced', {
            replicaId: id,
            problem: held.problem,
          });
        } else if (held.record.instance === previous || held.record.instance === this.info.instance) {
          this.opts.logger?.info("Found this replica's record from a run that stopped without leaving: taking it over at once", {
            replicaId: id,
            lastHeartbeatAt: new Date(held.record.heartbeatAt).toISOString(),
          });
        } else {
          // Another instance: alive if it heartbeats again before its record expires.
          if (await this.refreshedBeforeExpiry(alive, raw, held.record)) {
            const age = Math.max(0, this.now() - held.record.heartbeatAt);
            throw new UsageError(
              `--replica-id ${id} is in use by another live replica (at ${held.record.url}, instance ${held.record.instance.slice(0, 8)}, heartbeat ${age} ms ago): each replica sharing a Redis needs its own --replica-id`,
            );
          }
          continue;
        }
        expected = raw;
      }
      const beat = { ...this.info, heartbeatAt: Math.max(this.now(), this.info.heartbeatAt + 1) };
      if ((await this.scripts.atlReplicaClaim(this.hashKey, alive, id, sealReplica(this.opts.key, beat), this.ttlMs, expected)) === 1) {
        this.info = beat;
        this.healthySince = beat.heartbeatAt;
        this.beaten = true;
        await this.list();
        return;
      }
    }
    throw new Error(`replica registry: could not claim replica id ${id}: its record kept changing`);
  }

  /**
   * Watches another instance's record `raw` under our id: true when that instance heartbeats
   * again (it is alive), false when the record expires or is replaced by another (read again).
   */
  private async refreshedBeforeExpiry(alive: string, raw: string, held: ReplicaRecord): Promise<boolean> {
    const pttl = await this.redis.pttl(alive);
    this.opts.logger?.warn('Another instance holds this replica id: waiting to see whether it is alive', {
      replicaId: held.id,
      instance: held.instance.slice(0, 8),
      url: held.url,
      expiresInMs: pttl,
    });
    // A record without a TTL is none of ours: taken as dead after one TTL.
    const end = Date.now() + (pttl > 0 ? pttl : this.ttlMs) + 200;
    const pollMs = Math.max(20, Math.min(250, Math.floor(this.heartbeatMs / 4)));
    while (Date.now() < end) {
      await new Promise((r) => setTimeout(r, pollMs));
      const now = await this.redis.get(alive);
      if (now === null) return false;
      if (now === raw) continue;
      const rec = openReplica(this.opts.key, held.id, now);
      return rec.ok && rec.record.instance === held.instance && rec.record.heartbeatAt > held.heartbeatAt;
    }
    return false;
  }

  private schedule(): void {
    // A chain of timeouts, not an interval: a heartbeat held up by a silent Redis (bounded by
    // the command timeout) never overlaps the next one.
    this.timer = setTimeout(() => void this.tick(), this.heartbeatMs);
    this.timer.unref();
  }

  private async tick(): Promise<void> {
    try {
      await this.heartbeat();
      if (this.beatFailing) this.opts.logger?.info('Replica heartbeats written again', { replicaId: this.info.id });
      this.beatFailing = false;
    } catch (e) {
      if (!this.beatFailing) this.opts.logger?.warn('Replica heartbeat failed', { replicaId: this.info.id, error: (e as Error).message });
      this.beatFailing = true;
    } finally {
      if (this.running) this.schedule();
    }
  }

  async heartbeat(): Promise<void> {
    const beat = { ...this.info, heartbeatAt: Math.max(this.now(), this.info.heartbeatAt + 1) };
    let had: number;
    let prev: string | null;
    try {
      [had, prev] = await this.scripts.atlReplicaHeartbeat(
        this.hashKey,
        this.aliveKey(beat.id),
        beat.id,
        sealReplica(this.opts.key, beat),
        this.ttlMs,
      );
    } catch (e) {
      this.healthySince = undefined;
      throw e;
    }
    this.info = beat;
    this.healthySince ??= beat.heartbeatAt;
    // Its record was gone: the others swept it as dead (it was cut off longer than the TTL), or Redis lost its data.
    if (had === 0 && this.beaten)
      this.opts.logger?.warn('Replica record was missing at heartbeat: announced again', { replicaId: beat.id });
    // Another live process took this id while this one was cut off from Redis (it checked at its start).
    const other = prev === null ? undefined : openReplica(this.opts.key, beat.id, prev);
    if (other?.ok && other.record.instance !== beat.instance && !this.rejected.has(other.record.instance)) {
      this.remember(other.record.instance);
      this.opts.logger?.error('Another replica heartbeats under this replica id: give each replica its own --replica-id', {
        replicaId: beat.id,
        otherInstance: other.record.instance.slice(0, 8),
        otherUrl: other.record.url,
      });
    }
    this.beaten = true;
    await this.list();
  }

  async setDraining(draining: boolean): Promise<void> {
    this.info = { ...this.info, draining };
    await this.heartbeat();
  }

  async list(): Promise<ReplicaInfo[]> {
    const sweep = this.healthySince !== undefined && this.now() - this.healthySince >= this.ttlMs;
    const [live, gone] = await this.scripts.atlReplicaSweep(
      this.hashKey,
      `${this.p}replica:`,
      `${this.p}replica-gone:`,
      CLAIM_TTL_MS,
      sweep ? '1' : '0',
      this.info.id,
    );
    for (let i = 0; i + 1 < gone.length; i += 2) {
      // A record that fails its check (or is kept under another id) was never a replica:
      // nothing of "its" journal is taken over.
      const r = this.checked(gone[i] as string, gone[i + 1] as string);
      if (r) this.reportGone(infoOf(r));
    }
    const out: ReplicaInfo[] = [];
    for (let i = 0; i + 1 < live.length; i += 2) {
      const r = this.checked(live[i] as string, live[i + 1] as string);
      if (r) out.push(infoOf(r));
    }
    return out.sort(byId);
  }

  /** The record of replica `id` when it passes its check; else undefined, logged once per record. */
  private checked(id: string, raw: string): ReplicaRecord | undefined {
    const r = openReplica(this.opts.key, id, raw);
    if (r.ok) return r.record;
    if (!this.rejected.has(raw)) {
      this.remember(raw);
      this.opts.logger?.warn('Ignored a replica record that fails its check against the shared state key', {
        replicaId: id,
        problem: r.problem,
      });
    }
    return undefined;
  }

  private remember(s: string): void {
    if (this.rejected.size >= 256) this.rejected.clear();
    this.rejected.add(s);
  }

  private reportGone(r: ReplicaInfo): void {
    this.opts.logger?.warn('Replica gone without leaving', { replicaId: r.id, lastHeartbeatAt: new Date(r.heartbeatAt).toISOString() });
    const cb = this.opts.onReplicaGone;
    if (!cb) return;
    void Promise.resolve()
      .then(() => cb(r))
      .catch((e: unknown) => this.opts.logger?.error('Handling a gone replica failed', { replicaId: r.id, error: (e as Error).message }));
  }

  stop(): void {
    this.running = false;
    clearTimeout(this.timer);
    this.timer = undefined;
  }

  async leave(): Promise<void> {
    this.stop();
    if (!this.beaten) return;
    await this.scripts.atlReplicaLeave(this.hashKey, this.aliveKey(this.info.id), this.info.id, `"instance":"${this.info.instance}"`);
  }

  async close(): Promise<void> {
    this.stop();
    if (this.closed) return;
    this.closed = true;
    await closeRedis(this.redis);
  }
}
