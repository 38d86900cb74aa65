// Shared by the replica fault tests (replicas-redis-outage-e2e, replicas-kill-e2e): replicas
// on one Redis with the stamped workflow, their own log lines and pages, and what a run of
// commands may leave behind in Redis (key layout: src/server/locks/redis-store.ts, the lease
// in project-lease.ts, the registry in replicas/registry.ts).
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { Redis } from 'ioredis';
import { type ReplicaInfo, ownerOf } from '../../src/server/replicas/affinity.js';
import type { CliProcess } from './cli.js';
import type { RedisServer } from './redis-server.js';
import { replicaArgs } from './redis-server.js';
import { type WorkflowEnv, startWorkflowServer, tempDataDir } from './workflow-env.js';

export interface Replica {
  id: string;
  p: CliProcess;
  url: string;
  dataDir: string;
}

/** Starts replica `id` on `host` with the Redis store and `extra` flags; its data dir goes into `dirs`. */
export async function startReplica(
  env: WorkflowEnv,
  redis: RedisServer,
  host: string,
  id: string,
  extra: string[],
  dirs: string[],
): Promise<Replica> {
  const dataDir = tempDataDir();
  dirs.push(dataDir);
  const started = await startWorkflowServer(env, dataDir, host, [...replicaArgs(redis, id), ...extra]);
  return { id, ...started, dataDir };
}

export const isAlive = (r: Replica): boolean => r.p.child.exitCode === null && r.p.child.signalCode === null;

/** The replica owning `pullKey` among `among`, by the servers' own rule. */
export function ownerAmong(pullKey: string, among: readonly Replica[]): Replica {
  const infos: ReplicaInfo[] = among.map((r) => ({ id: r.id, url: r.url, draining: false, heartbeatAt: 0 }));
  const id = ownerOf(pullKey, infos)?.id;
  const r = among.find((x) => x.id === id);
  if (!r) throw new Error(`no owner for ${pullKey}`);
  return r;
}

/** The replica's JSON log lines with message `msg`. */
export const logLines = (r: Replica, msg: string): Array<Record<string, unknown>> =>
  r.p
    .output()
    .split('\n')
    .filter((l) => l.startsWith('{') && l.includes(`"msg":${JSON.stringify(msg)}`))
    .map((l) => JSON.parse(l) as Record<string, unknown>);

/** With KEEP_REPLICA_LOGS=<dir>, each replica's whole output is written there as <id>.log (for a failure's post-mortem). */
export function keepLogs(replicas: readonly Replica[], prefix = ''): void {
  const dir = process.env.KEEP_REPLICA_LOGS;
  if (!dir) return;
  mkdirSync(dir, { recursive: true });
  for (const r of replicas) writeFileSync(path.join(dir, `${prefix}${r.id}.log`), r.p.output());
}

export const logTails = (replicas: readonly Replica[], lines = 30): string =>
  replicas.map((r) => `--- ${r.id} (last lines)\n${r.p.output().split('\n').slice(-lines).join('\n')}`).join('\n');

/** The rows of the index page's Locks table. */
export async function lockRows(url: string): Promise<string> {
  const page = await (await fetch(`${url}/`, { signal: AbortSignal.timeout(10_000) })).text();
  return page.slice(page.indexOf('<h2>Locks</h2>'), page.indexOf('<h2>Running jobs</h2>'));
}

export const NO_LOCK_ROW = '<td colspan="6">none</td>';

export async function readyz(url: string): Promise<number> {
  return (await fetch(`${url}/readyz`, { signal: AbortSignal.timeout(5000) })).status;
}

/** One sample of /metrics, `name{labels}` exactly as written there; undefined when absent. */
export async function metric(url: string, series: string): Promise<number | undefined> {
  const text = await (await fetch(`${url}/metrics`, { signal: AbortSignal.timeout(5000) })).text();
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

export async function inProgress(url: string): Promise<number> {
  const s = (await (await fetch(`${url}/status`, { signal: AbortSignal.timeout(5000) })).json()) as { in_progress_operations: number };
  return s.in_progress_operations;
}

/**
 * What commands left in Redis that should be gone once they all ended and the PRs closed:
 * locks (the hash and the per-PR sets), project leases, command journal entries of any
 * replica, unfinished jobs, the drain queue. Empty when nothing is left.
 */
export async function leftInRedis(redis: Pick<RedisServer, 'host' | 'port'>, prefix = 'atlantis:'): Promise<string[]> {
  const c = new Redis({ host: redis.host, port: redis.port, lazyConnect: true, maxRetriesPerRequest: 1 });
  try {
    await c.connect();
    const out: string[] = [];
    for (const [k, v] of Object.entries(await c.hgetall(`${prefix}locks`))) out.push(`lock ${k} ${v}`);
    for (const k of await c.keys(`${prefix}pull-locks:*`)) out.push(`${k}: ${(await c.smembers(k)).join(' ')}`);
    for (const k of await c.keys(`${prefix}lease:*`)) out.push(`${k}: ${await c.get(k)} (ttl ${await c.pttl(k)} ms)`);
    for (const k of [...(await c.keys(`${prefix}commands:*`)), ...(await c.keys(`${prefix}commands-started:*`))])
      for (const [id, v] of Object.entries(await c.hgetall(k))) out.push(`${k} ${id}: ${v.slice(0, 200)}`);
    for (const [id, who] of Object.entries(await c.hgetall(`${prefix}jobs-unfinished`))) out.push(`unfinished job ${id} of ${who}`);
    for (const q of await c.lrange(`${prefix}queue`, 0, -1)) out.push(`queued ${q.slice(0, 200)}`);
    return out;
  } finally {
    c.disconnect();
  }
}
