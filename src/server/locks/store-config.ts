// Which store the server keeps its state in (`--locking-db-type` and the `--redis-*` flags),
// validated from the parsed flags. Pure: connecting is open-store.ts's job.
import { hostname } from 'node:os';
import { type FlagValues, UsageError } from '../../config/flags.js';

export interface RedisSettings {
  host: string;
  port: number;
  username?: string;
  /** A secret: the redactor scrubs it (secrets/server-secrets.ts). */
  password?: string;
  db: number;
  tls: boolean;
  /** With tls: accept any certificate and host name (Atlantis's --redis-insecure-skip-verify). */
  insecureSkipVerify: boolean;
}

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
  };
  const username = nonEmpty(values['redis-username']);
  if (username !== undefined) redis.username = username;
  const password = nonEmpty(values['redis-password']);
  if (password !== undefined) redis.password = password;
  return { type, redis };
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
    if (!/^https?:\/\/[^/@\s]+\/?$/.test(given))
      throw new UsageError(`invalid value "${given}" for --replica-url: must be http(s)://host:port, without a path or credentials`);
    return given.replace(/\/+$/, '');
  }
  const wildcard = bindAddress === '0.0.0.0' || bindAddress === '::' || bindAddress === '';
  const host = wildcard ? hostname() : bindAddress;
  return `http://${host.includes(':') ? `[${host}]` : host}:${port}`;
}
