// The project leases in the Redis the replicas share (project-lease.ts says what a lease is):
// a key per project with a PX expiry, the token from INCR, each step one Lua script.
import type { Redis } from 'ioredis';
import type { Logger } from '../../log.js';
import { type LeaseBackend, type LeaseHolder, type LeaseTiming, Leases } from './project-lease.js';
import { type RedisConnectionOptions, connectRedis, createRedisClient, stopRedis } from './redis-connection.js';

// KEYS: the project's lease key (value: JSON {token, replicaId, jobId}); for acquire also the
// token counter. ARGV: holder JSON and TTL (acquire), or token (and TTL for renew).
const LEASE_SCRIPTS = {
  atlLeaseAcquire: {
    numberOfKeys: 2,
    lua: `local cur = redis.call('GET', KEYS[1])
local h = cjson.decode(ARGV[1])
if cur then
  local c = cjson.decode(cur)
  if c.replicaId == h.replicaId and c.jobId == h.jobId then
    redis.call('PEXPIRE', KEYS[1], ARGV[2])
    return c.token
  end
  return cur
end
local token = redis.call('INCR', KEYS[2])
redis.call('SET', KEYS[1], cjson.encode({token = token, replicaId = h.replicaId, jobId = h.jobId}), 'PX', ARGV[2])
return token`,
  },
  atlLeaseRenew: {
    numberOfKeys: 1,
    lua: `local cur = redis.call('GET', KEYS[1])
if not cur or cjson.decode(cur).token ~= tonumber(ARGV[1]) then return 0 end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1`,
  },
  atlLeaseRelease: {
    numberOfKeys: 1,
    lua: `local cur = redis.call('GET', KEYS[1])
if not cur or cjson.decode(cur).token ~= tonumber(ARGV[1]) then return 0 end
redis.call('DEL', KEYS[1])
return 1`,
  },
  atlLeaseCheck: {
    numberOfKeys: 1,
    lua: `local cur = redis.call('GET', KEYS[1])
if not cur or cjson.decode(cur).token ~= tonumber(ARGV[1]) then return 0 end
return 1`,
  },
} as const;

type LeaseScripts = { [K in keyof typeof LEASE_SCRIPTS]: (...args: (string | number)[]) => Promise<unknown> };

class RedisBackend implements LeaseBackend {
  private readonly s: LeaseScripts;
  private connected: Promise<void> | undefined;

  constructor(
    readonly redis: Redis,
    private readonly p: string,
  ) {
    for (const [name, def] of Object.entries(LEASE_SCRIPTS)) redis.defineCommand(name, def);
    this.s = redis as unknown as LeaseScripts;
  }

  /** The first call connects (the server's start connects the store, which reports a bad Redis). */
  private ready(): Promise<void> {
    this.connected ??= connectRedis(this.redis).catch((e: unknown) => {
      // Back to a state a later call can connect from; after a first connection, ioredis reconnects alone.
      this.redis.disconnect();
      this.connected = undefined;
      throw e;
    });
    return this.connected;
  }

  private k(field: string): string {
    return `${this.p}lease:${field}`;
  }

  async tryAcquire(field: string, holder: LeaseHolder, ttlMs: number): Promise<number | LeaseHolder> {
    await this.ready();
    const r = await this.s.atlLeaseAcquire(this.k(field), `${this.p}lease-token`, JSON.stringify(holder), ttlMs);
    if (typeof r === 'number') return r;
    const cur = JSON.parse(r as string) as LeaseHolder;
    return { replicaId: cur.replicaId, jobId: cur.jobId };
  }

  async renew(field: string, token: number, ttlMs: number): Promise<boolean> {
    return (await this.s.atlLeaseRenew(this.k(field), token, ttlMs)) === 1;
  }

  async release(field: string, token: number): Promise<boolean> {
    return (await this.s.atlLeaseRelease(this.k(field), token)) === 1;
  }

  async check(field: string, token: number): Promise<boolean> {
    return (await this.s.atlLeaseCheck(this.k(field), token)) === 1;
  }
}

export interface RedisLeaseOptions extends RedisConnectionOptions, LeaseTiming {
  keyPrefix?: string;
  logger?: Logger;
}

/** Leases in the Redis the replicas share, on a connection of their own (made at the first acquire). */
export class RedisProjectLeases extends Leases {
  constructor(opts: RedisLeaseOptions) {
    const redis = createRedisClient(opts);
    // The store's connection logs Redis going away; this one only must not crash on it.
    redis.on('error', () => undefined);
    super(new RedisBackend(redis, opts.keyPrefix ?? 'atlantis:'), opts, opts.logger, async () => {
      stopRedis(redis);
    });
  }
}
