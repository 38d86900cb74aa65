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
import { Redis } from 'ioredis';
import type { Logger } from '../../log.js';
import type { ServerConfig } from '../config.js';
import {
  type RedisConnectionOptions,
  closeRedis,
  connectRedis,
  redisClientOptions,
  redisConnection,
  redisTarget,
} from '../locks/redis-connection.js';
import type { ReplicaInfo } from './affinity.js';

export const DEFAULT_HEARTBEAT_MS = 2000;
export const DEFAULT_REPLICA_TTL_MS = 10_000;
const CLAIM_TTL_MS = 24 * 3600 * 1000;

/** What a replica knows of the others, whatever the store; the workflow takes this, never a class. */
export interface ReplicaMembership {
  /** This replica as it last announced itself. */
  readonly self: ReplicaInfo;
  /** Connects (Redis), writes the first heartbeat and keeps heartbeating. */
  start(): Promise<void>;
  /** One heartbeat now (the timer calls it); rejects when it could not be written. */
  heartbeat(): Promise<void>;
  /** Announces the drain (or its end) with a heartbeat at once. */
  setDraining(draining: boolean): Promise<void>;
  /** The live replicas, self included once its heartbeat is stored, sorted by id. */
  list(): Promise<ReplicaInfo[]>;
  /** Stops heartbeating, without leaving: to the others this replica dies after the TTL. */
  stop(): void;
  /** Clean shutdown: stops heartbeating and removes this replica's record at once. */
  leave(): Promise<void>;
  /** Stops heartbeating and closes the connection (no leave). */
  close(): Promise<void>;
}

export interface ReplicaRegistryOptions extends RedisConnectionOptions {
  self: { id: string; url: string };
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

// KEYS replicas, replica:I; ARGV I, record, ttl ms. 1 when the hash held I before (0: new, or swept as gone).
const HEARTBEAT = `local had = redis.call('HEXISTS', KEYS[1], ARGV[1])
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('SET', KEYS[2], ARGV[2], 'PX', ARGV[3])
return had`;

// KEYS replicas; ARGV alive-key prefix, claim-key prefix, claim ttl ms, '1' to sweep, own id.
// {live records, records of the deaths this call claimed}. Never sweeps the caller itself.
const SWEEP = `local all = redis.call('HGETALL', KEYS[1])
local live, gone = {}, {}
for i = 1, #all, 2 do
  local id, rec = all[i], all[i + 1]
  if redis.call('EXISTS', ARGV[1] .. id) == 1 then
    live[#live + 1] = rec
  elseif ARGV[4] == '1' and id ~= ARGV[5] then
    redis.call('HDEL', KEYS[1], id)
    local beat = string.match(rec, '"heartbeatAt":(%d+)') or redis.sha1hex(rec)
    if redis.call('SET', ARGV[2] .. id .. ':' .. beat, ARGV[5], 'NX', 'PX', ARGV[3]) then gone[#gone + 1] = rec end
  end
end
return {live, gone}`;

// KEYS replicas, replica:I; ARGV I.
const LEAVE = `redis.call('HDEL', KEYS[1], ARGV[1])
return redis.call('DEL', KEYS[2])`;

interface Scripts {
  atlReplicaHeartbeat(hash: string, alive: string, id: string, rec: string, ttl: number): Promise<number>;
  atlReplicaSweep(
    hash: string,
    alivePrefix: string,
    claimPrefix: string,
    claimTtl: number,
    sweep: string,
    id: string,
  ): Promise<[string[], string[]]>;
  atlReplicaLeave(hash: string, alive: string, id: string): Promise<number>;
}

const record = (r: ReplicaInfo): string => JSON.stringify({ id: r.id, url: r.url, draining: r.draining, heartbeatAt: r.heartbeatAt });

function parseRecord(s: string): ReplicaInfo | undefined {
  try {
    const v = JSON.parse(s) as Partial<ReplicaInfo>;
    if (typeof v.id !== 'string' || typeof v.url !== 'string' || typeof v.heartbeatAt !== 'number') return undefined;
    return { id: v.id, url: v.url, draining: v.draining === true, heartbeatAt: v.heartbeatAt };
  } catch {
    return undefined;
  }
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
  private info: ReplicaInfo;
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
    this.info = { id: opts.self.id, url: opts.self.url, draining: false, heartbeatAt: 0 };
    this.redis = new Redis(redisClientOptions(opts));
    this.redis.defineCommand('atlReplicaHeartbeat', { numberOfKeys: 2, lua: HEARTBEAT });
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
    return { ...this.info };
  }

  private get hashKey(): string {
    return `${this.p}replicas`;
  }

  private aliveKey(id: string): string {
    return `${this.p}replica:${id}`;
  }

  async start(): Promise<void> {
    if (this.running) return;
    if (this.redis.status === 'wait') {
      try {
        await connectRedis(this.redis);
      } catch (err) {
        this.redis.disconnect();
        throw new Error(`replica registry: failed to connect to redis at ${redisTarget(this.opts)}: ${(err as Error).message}`);
      }
    }
    await this.heartbeat();
    this.running = true;
    this.schedule();
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
    try {
      had = await this.scripts.atlReplicaHeartbeat(this.hashKey, this.aliveKey(beat.id), beat.id, record(beat), this.ttlMs);
    } catch (e) {
      this.healthySince = undefined;
      throw e;
    }
    this.info = beat;
    this.healthySince ??= beat.heartbeatAt;
    // Its record was gone: the others swept it as dead (it was cut off longer than the TTL), or Redis lost its data.
    if (had === 0 && this.beaten)
      this.opts.logger?.warn('Replica record was missing at heartbeat: announced again', { replicaId: beat.id });
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
    for (const rec of gone) {
      const r = parseRecord(rec);
      if (r) this.reportGone(r);
    }
    return live
      .map(parseRecord)
      .filter((r): r is ReplicaInfo => r !== undefined)
      .sort(byId);
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
    await this.scripts.atlReplicaLeave(this.hashKey, this.aliveKey(this.info.id), this.info.id);
  }

  async close(): Promise<void> {
    this.stop();
    if (this.closed) return;
    this.closed = true;
    await closeRedis(this.redis);
  }
}

/** The embedded store's registry: one server, so it alone is live and owns every PR. */
export class LocalReplicaRegistry implements ReplicaMembership {
  private info: ReplicaInfo;

  constructor(
    self: { id: string; url: string },
    private readonly now: () => number = Date.now,
  ) {
    this.info = { id: self.id, url: self.url, draining: false, heartbeatAt: now() };
  }

  get self(): ReplicaInfo {
    return { ...this.info };
  }

  async start(): Promise<void> {
    await this.heartbeat();
  }

  async heartbeat(): Promise<void> {
    this.info = { ...this.info, heartbeatAt: this.now() };
  }

  async setDraining(draining: boolean): Promise<void> {
    this.info = { ...this.info, draining };
    await this.heartbeat();
  }

  async list(): Promise<ReplicaInfo[]> {
    return [this.self];
  }

  stop(): void {}

  async leave(): Promise<void> {}

  async close(): Promise<void> {}
}

/** The registry that goes with the server's store (as open-store.ts opens the store): Redis shares it, the embedded one does not. */
export function openReplicaRegistry(
  cfg: Pick<ServerConfig, 'store' | 'replicaId'>,
  url: string,
  opts: Pick<ReplicaRegistryOptions, 'heartbeatMs' | 'ttlMs' | 'onReplicaGone' | 'logger' | 'keyPrefix'> = {},
): ReplicaMembership {
  const self = { id: cfg.replicaId, url };
  if (cfg.store.type === 'boltdb') return new LocalReplicaRegistry(self);
  const r = cfg.store.redis;
  return new ReplicaRegistry({
    ...opts,
    self,
    ...redisConnection(r),
  });
}
