// Which store the server keeps its state in (`--locking-db-type` and the `--redis-*` flags),
// validated from the parsed flags. Pure: connecting is open-store.ts's job.
import { hostname } from 'node:os';
import { type FlagValues, UsageError } from '../../config/flags.js';
import { replicaUrlProblem } from '../replicas/replica-record.js';
import { SharedStateKey } from './shared-state-key.js';

export interface RedisSettings {
  /** The data connection's address; not used when `sentinel` is set (the sentinels name the master). */
  host: string;
  port: number;
  username?: string;
  /** A secret: the redactor scrubs it (secrets/server-secrets.ts). */
  password?: string;
  db: number;
  tls: boolean;
  /** With tls: accept any certificate and host name (Atlantis's --redis-insecure-skip-verify). */
  insecureSkipVerify: boolean;
  /** `--redis-sentinel-*` (ours): find the master through these sentinels; TLS settings apply to them too. */
  sentinel?: SentinelSettings;
  /** `--shared-state-key-file` (ours): what the replicas sign their records in Redis with; a secret. */
  sharedStateKey: SharedStateKey;
}

export interface SentinelSettings {
  addresses: Array<{ host: string; port: number }>;
  /** The master group's name in the sentinels' configuration (`sentinel monitor <name> ...`). */
  masterName: string;
  username?: string;
  /** A secret: the redactor scrubs it (secrets/server-secrets.ts). */
  password?: string;
}

/** Sentinel's own default port. */
export const SENTINEL_DEFAULT_PORT = 26379;

export type StoreConfig = { type: 'boltdb' } | { type: 'redis'; redis: RedisSettings };

const nonEmpty = (v: unknown): string | undefined => (typeof v === 'string' && v.length > 0 ? v : undefined);

export function storeConfigFromFlags(values: FlagValues): StoreConfig {
  const type = values['locking-db-type'] as string;
  if (type === 'boltdb') return { type };
  if (type !== 'redis') throw new UsageError(`invalid value "${type}" for --locking-db-type: must be one of boltdb, redis`);
  const port = values['redis-port'] as number;
  if (port < 1 || port > 65535) throw new UsageError(`invalid value ${port} for --redis-port: must be between 1 and 65535`);
  const db = values['redis-db'] as number;
  if (db < 0) throw new UsageError(`invalid value ${db} for --redis-db: must be 0 or more`);
  const redis: RedisSettings = {
    // As Atlantis's client: no host means the local one.
    host: nonEmpty(values['redis-host']) ?? 'localhost',
    port,
    db,
    tls: values['redis-tls-enabled'] === true,
    insecureSkipVerify: values['redis-insecure-skip-verify'] === true,
    sharedStateKey: sharedStateKeyFromFlags(values),
  };
  const username = nonEmpty(values['redis-username']);
  if (username !== undefined) redis.username = username;
  const password = nonEmpty(values['redis-password']);
  if (password !== undefined) redis.password = password;
  const sentinel = sentinelFromFlags(values);
  if (sentinel !== undefined) redis.sentinel = sentinel;
  return { type, redis };
}

/** Where a connection goes, for messages: `host:port`, or the master's name and the sentinels. */
export function redisTarget(o: { host: string; port: number; sentinel?: SentinelSettings }): string {
  if (o.sentinel === undefined) return `${o.host}:${o.port}`;
  const at = o.sentinel.addresses.map((a) => (a.host.includes(':') ? `[${a.host}]:${a.port}` : `${a.host}:${a.port}`));
  return `master ${o.sentinel.masterName} through sentinels ${at.join(',')}`;
}

/**
 * What the server says at start about a Redis that anyone on its network could use: one line
 * each for no password and no TLS. Pure.
 */
export function redisStartWarnings(r: RedisSettings): string[] {
  const out: string[] = [];
  if (r.password === undefined)
    out.push(
      'Redis is used without a password (--redis-password): anyone who can reach it can read the shared state and change it; records that decide what runs are signed with the shared state key, but such a writer can still drop locks and plans (a denial of service)',
    );
  if (!r.tls)
    out.push(
      'Redis is used without TLS (--redis-tls-enabled): the shared state, plan files included, and the Redis password cross the network unencrypted',
    );
  return out;
}

/** `--shared-state-key-file`: required with Redis, read here (never echoed: only its path and size). */
function sharedStateKeyFromFlags(values: FlagValues): SharedStateKey {
  const file = nonEmpty(values['shared-state-key-file']);
  if (file === undefined)
    throw new UsageError(
      '--shared-state-key-file is required with --locking-db-type redis: the replicas sign what they keep in Redis with that key, which Redis never sees, so that anyone who can write to Redis cannot make them run a plan or a command',
    );
  try {
    return SharedStateKey.readFile(file);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    throw new UsageError(
      `--shared-state-key-file ${file} ${code ? `cannot be read: ${code}` : `is not a usable key: ${(e as Error).message}`}`,
    );
  }
}

/** `--redis-sentinel-*`, undefined when no addresses are given; the rest of them alone is a mistake, refused. */
function sentinelFromFlags(values: FlagValues): SentinelSettings | undefined {
  const list = values['redis-sentinel-addresses'];
  const raw = Array.isArray(list) ? list : [];
  const masterName = nonEmpty(values['redis-sentinel-master-name']);
  const username = nonEmpty(values['redis-sentinel-username']);
  const password = nonEmpty(values['redis-sentinel-password']);
  if (raw.length === 0) {
    // Named without values: the password may be a secret, so only flag names are echoed.
    const orphan = (
      [
        ['redis-sentinel-master-name', masterName],
        ['redis-sentinel-username', username],
        ['redis-sentinel-password', password],
      ] as const
    ).find(([, v]) => v !== undefined);
    if (orphan) throw new UsageError(`--${orphan[0]} is set without --redis-sentinel-addresses`);
    return undefined;
  }
  // One source of the master's address: a --redis-host left over from a single Redis would be ignored silently.
  if (nonEmpty(values['redis-host']) !== undefined)
    throw new UsageError(
      '--redis-host and --redis-sentinel-addresses are both set: with Sentinel the sentinels name the master; unset --redis-host',
    );
  if (values['redis-port'] !== 6379)
    throw new UsageError(
      '--redis-port and --redis-sentinel-addresses are both set: with Sentinel the sentinels name the master; unset --redis-port',
    );
  if (masterName === undefined) throw new UsageError('--redis-sentinel-master-name is required with --redis-sentinel-addresses');
  if (/\s/.test(masterName))
    throw new UsageError(`invalid value "${masterName}" for --redis-sentinel-master-name: must not contain spaces`);
  const s: SentinelSettings = { addresses: raw.map(parseSentinelAddress), masterName };
  if (username !== undefined) s.username = username;
  if (password !== undefined) s.password = password;
  return s;
}

/** `host:port`, `[v6]:port`, or a host alone (port 26379). */
export function parseSentinelAddress(a: string): { host: string; port: number } {
  const m = /^(?:\[([0-9A-Fa-f:.]+)\]|([^\s:/@[\]]+))(?::(\d{1,5}))?$/.exec(a);
  const host = m?.[1] ?? m?.[2];
  const port = m?.[3] === undefined ? SENTINEL_DEFAULT_PORT : Number(m[3]);
  if (!m || host === undefined || port < 1 || port > 65535)
    throw new UsageError(`invalid value "${a}" for --redis-sentinel-addresses: must be host:port[,host:port...]`);
  return { host, port };
}

/** `--replica-id`, else the host name (a pod's name); limited to what is safe in a Redis key and a log line. */
export function replicaIdFromFlags(values: FlagValues): string {
  const given = nonEmpty(values['replica-id']);
  // A host name is whatever the machine says: made safe rather than refused, so an odd one
  // never stops a server that does not even share a store.
  if (given === undefined)
    return (
      hostname()
        .replace(/[^A-Za-z0-9._-]/g, '-')
        .replace(/^[^A-Za-z0-9]+/, '')
        .slice(0, 253) || 'atlantis'
    );
  const id = given;
  if (!/^[A-Za-z0-9][A-Za-z0-9._-]{0,252}$/.test(id))
    throw new UsageError(`invalid value "${id}" for --replica-id: letters, digits, '.', '_' and '-' only, at most 253`);
  return id;
}

/** `--replica-url`, else this server's own address: the bind address, or the host name when bound to all. */
export function replicaUrlFromFlags(values: FlagValues, bindAddress: string, port: number): string {
  const given = nonEmpty(values['replica-url']);
  if (given !== undefined) {
    const url = given.replace(/\/$/, '');
    const problem = replicaUrlProblem(url);
    if (problem) throw new UsageError(`invalid value "${given}" for --replica-url: ${problem}`);
    return url;
  }
  const wildcard = bindAddress === '0.0.0.0' || bindAddress === '::' || bindAddress === '';
  const host = wildcard ? hostname() : bindAddress;
  return `http://${host.includes(':') ? `[${host}]` : host}:${port}`;
}
