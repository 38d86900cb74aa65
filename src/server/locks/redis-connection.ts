// The one mapping of the `--redis-*` settings to an ioredis connection, and the one way to
// connect and to end one: the store, the project leases and the replica registry each open
// a connection of their own with these. A single Redis (`--redis-host`) or the master that
// Redis Sentinel names (`--redis-sentinel-*`), followed through a failover.
import { Redis, type RedisOptions } from 'ioredis';
import type { RedisSettings, SentinelSettings } from './store-config.js';

export interface RedisConnectionOptions {
  /** The data connection's address; not used with `sentinel`. */
  host: string;
  port: number;
  username?: string;
  password?: string;
  db?: number;
  /** With `sentinel`: for the sentinels and the master alike. */
  tls?: { rejectUnauthorized?: boolean };
  /** Through Redis Sentinel: the master is the one these sentinels name now. */
  sentinel?: SentinelSettings;
}

/** The connection of the `--redis-*` settings: the store, the leases and the registry each open one of these. */
export function redisConnection(r: RedisSettings): RedisConnectionOptions {
  return {
    host: r.host,
    port: r.port,
    db: r.db,
    ...(r.username !== undefined ? { username: r.username } : {}),
    ...(r.password !== undefined ? { password: r.password } : {}),
    ...(r.tls ? { tls: { rejectUnauthorized: !r.insecureSkipVerify } } : {}),
    ...(r.sentinel !== undefined ? { sentinel: r.sentinel } : {}),
  };
}

/**
 * Whether an error reply means this connection is on the wrong server, so ioredis should
 * reconnect (the call itself still fails). READONLY: the server was a master and has been
 * demoted to a replica while this connection stayed open; through Sentinel a new connection
 * goes to the master the sentinels name now. Also inside a script's error text.
 */
export function reconnectOnErrorReply(err: Error): boolean {
  return /\bREADONLY\b/.test(err.message);
}

/** Bound on a first connection: through Sentinel, ioredis asks the sentinels again and again while none answers. */
export const REDIS_CONNECT_DEADLINE_MS = 10_000;

/** Connects a client of redisClientOptions; rejects (and stops it) when that takes longer than the deadline. */
export async function connectRedis(redis: Redis, deadlineMs = REDIS_CONNECT_DEADLINE_MS): Promise<void> {
  let last: Error | undefined;
  const onError = (e: Error) => {
    last = e;
  };
  redis.on('error', onError);
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      redis.disconnect();
      reject(new Error(`no connection within ${deadlineMs} ms${last ? `: ${last.message}` : ''}`));
    }, deadlineMs);
  });
  try {
    await Promise.race([redis.connect(), late]);
  } finally {
    clearTimeout(timer);
    redis.off('error', onError);
  }
}

/** Ends a client: QUIT when connected, and no more reconnecting either way. */
export async function closeRedis(redis: Redis): Promise<void> {
  stoppedByUs.add(redis);
  try {
    await redis.quit();
  } catch {
    // Not connected: stop reconnecting instead.
  }
  redis.disconnect();
}

/** Clients the server ended on purpose: reviveWhenEnded leaves them ended. */
const stoppedByUs = new WeakSet<Redis>();

/** Ends a client at once, with no reconnecting. */
export function stopRedis(redis: Redis): void {
  stoppedByUs.add(redis);
  redis.disconnect();
}

/**
 * ioredis 5 ends a Sentinel client for good when the sentinels' +switch-master reaches its
 * failover detector while a reconnect is asking them for the master: the detector closes the
 * connector under that attempt, which fails with "Connection is closed.", and the client never
 * tries again (ioredis#1683; seen when a master was killed under load). An end the server did
 * not ask for, once the client had been connected, is such an end: connect again after the
 * retry delay, as ioredis would have, and again after every such end.
 */
export function reviveWhenEnded(redis: Redis, delayMs = 1000): void {
  let wasReady = false;
  redis.on('ready', () => {
    wasReady = true;
  });
  redis.on('end', () => {
    if (!wasReady || stoppedByUs.has(redis)) return;
    setTimeout(() => {
      if (redis.status === 'end' && !stoppedByUs.has(redis)) redis.connect().catch(() => undefined);
    }, delayMs).unref();
  });
}

/** A client of redisClientOptions that comes back from an end it did not ask for (reviveWhenEnded). */
export function createRedisClient(o: RedisConnectionOptions): Redis {
  const redis = new Redis(redisClientOptions(o));
  reviveWhenEnded(redis);
  return redis;
}

/** ioredis options; every choice is about failing fast while Redis is away and recovering alone. */
export function redisClientOptions(o: RedisConnectionOptions): RedisOptions {
  const tls = o.tls ? { rejectUnauthorized: o.tls.rejectUnauthorized ?? true } : undefined;
  // Reconnect forever, 50 ms doubling to at most 1 s apart: back soon after Redis is.
  const retryStrategy = (times: number) => Math.min(50 * 2 ** Math.min(times, 5), 1000);
  return {
    ...(o.sentinel === undefined ? { host: o.host, port: o.port } : sentinelOptions(o.sentinel, tls, retryStrategy)),
    ...(o.username !== undefined ? { username: o.username } : {}),
    ...(o.password !== undefined ? { password: o.password } : {}),
    db: o.db ?? 0,
    ...(tls ? { tls } : {}),
    // connect() decides when the first connection happens, and fails if it cannot be made.
    lazyConnect: true,
    // Without a connection a command fails at once instead of waiting in a queue: the caller
    // (a webhook, /readyz) gets an answer now, and a write it gave up on is never sent later.
    enableOfflineQueue: false,
    // Commands in flight when the connection drops fail on that drop (no retry on the next
    // connection) and are never re-sent: a script whose outcome is unknown must not run twice.
    maxRetriesPerRequest: 0,
    autoResendUnfulfilledCommands: false,
    // A connection that is up but silent (a partition, a stopped Redis) still bounds each call.
    // A call that timed out may still run in Redis later, as with any networked store; callers
    // treat it as failed, and a retry is safe (tryLock is re-entrant, the rest are idempotent).
    commandTimeout: 2000,
    connectTimeout: 2000,
    keepAlive: 10_000,
    retryStrategy,
    reconnectOnError: (err: Error) => reconnectOnErrorReply(err),
  };
}

/** The Sentinel part of the ioredis options (the master's role is checked on every connection). */
function sentinelOptions(
  s: SentinelSettings,
  tls: { rejectUnauthorized: boolean } | undefined,
  retryStrategy: (times: number) => number,
): RedisOptions {
  return {
    sentinels: s.addresses.map((a) => ({ host: a.host, port: a.port })),
    name: s.masterName,
    role: 'master',
    ...(s.username !== undefined ? { sentinelUsername: s.username } : {}),
    ...(s.password !== undefined ? { sentinelPassword: s.password } : {}),
    // TLS to the master (ioredis uses `tls` for it only with this) and to the sentinels.
    ...(tls ? { enableTLSForSentinelMode: true, sentinelTLS: tls } : {}),
    // A sentinel that is up but silent must not hold up the search for the master.
    sentinelCommandTimeout: 2000,
    // All sentinels unreachable: ask them again, never give up (a number every time, or
    // ioredis ends the client for good).
    sentinelRetryStrategy: retryStrategy,
    // The sentinels' +switch-master ends the connection to a master that was replaced while
    // it stayed reachable but silent (paused, partitioned), which nothing else would end; its
    // subscriptions to the sentinels come back as soon as a lost sentinel does.
    failoverDetector: true,
    sentinelReconnectStrategy: retryStrategy,
  };
}
