// Redis Sentinel for tests, from the Debian redis-server binary: a master and its replica
// (real redis-servers of redis-server.ts, the replica started with `--replicaof`), and three
// sentinels (`redis-server <conf> --sentinel`, each with its own writable conf in its own
// temp dir, since a sentinel rewrites it) with a quorum of 2 and a small
// `down-after-milliseconds`, so a dead master is replaced within seconds. Everything on free
// 127.0.0.1 ports; every sentinel is killed when the test process exits, whatever happened
// (the data servers by redis-server.ts). Every wait is bounded.
import { type ChildProcess, spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { Redis } from 'ioredis';
import { REDIS_SERVER_BIN, type RedisServer, sharedStateKeyFile, startRedisServer } from './redis-server.js';

export interface Sentinel {
  host: string;
  port: number;
  dir: string;
  logFile: string;
  /** SIGKILL, and wait for the exit. */
  kill(): Promise<void>;
  /** SIGSTOP: up but silent. */
  pause(): void;
  resume(): void;
}

export interface SentinelSetup {
  masterName: string;
  /** The data servers: [0] started as the master, [1] as its replica. Which is master now: `masterNode()`. */
  nodes: [RedisServer, RedisServer];
  sentinels: Sentinel[];
  /** The value of `--redis-sentinel-addresses`. */
  addresses: string;
  /** The data servers' password (`requirepass`, `masterauth`), if any. */
  password?: string;
  /** The sentinels' own password, if any. */
  sentinelPassword?: string;
  /** Each sentinel's answer to `SENTINEL get-master-addr-by-name` (the port), undefined when it does not answer. */
  masterPorts(): Promise<Array<number | undefined>>;
  /** Waits until every sentinel still running names `node` as the master; returns when they did. */
  waitForMaster(node: RedisServer, timeoutMs?: number): Promise<number>;
  /** The node that every running sentinel names as the master now (fails when they disagree). */
  masterNode(): Promise<RedisServer>;
  /** `INFO replication` of a data server, as fields. */
  replication(node: RedisServer): Promise<Record<string, string>>;
  /** Waits until `replica` has processed the master's whole replication stream (its `master_repl_offset`). */
  waitReplicated(master: RedisServer, replica: RedisServer, timeoutMs?: number): Promise<void>;
  /**
   * Tells every sentinel that `node` is the master now (SENTINEL REMOVE, then MONITOR with the
   * same settings), as an operator who moved the master by hand would.
   */
  remonitor(node: RedisServer): Promise<void>;
  /** Sets every sentinel's down-after-milliseconds for the master (SENTINEL SET). */
  setDownAfter(ms: number): Promise<void>;
  /** A client of a data server (the caller quits it). */
  client(node: RedisServer): Redis;
  cleanup(): Promise<void>;
}

export interface SentinelSetupOptions {
  masterName?: string;
  password?: string;
  sentinelPassword?: string;
  /** Default 1000 ms: how long a master may not answer before a sentinel thinks it down. */
  downAfterMs?: number;
  /** Default 5000 ms. */
  failoverTimeoutMs?: number;
  /** A master started by the caller (with `password`, `--masterauth`), instead of a new one. */
  master?: RedisServer;
  /** Where the replica replicates from (e.g. a proxy in front of the master); default the master. */
  replicaOf?: { host: string; port: number };
}

const running = new Set<ChildProcess>();
process.once('exit', () => {
  for (const p of running) p.kill('SIGKILL');
});

const HOST = '127.0.0.1';

async function freePort(): Promise<number> {
  return await new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', reject);
    srv.listen(0, HOST, () => {
      const { port } = srv.address() as net.AddressInfo;
      srv.close(() => resolve(port));
    });
  });
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** One short-lived client: no retries, no queue, bounded; `fn`'s answer, or undefined when it fails. */
async function ask<T>(port: number, password: string | undefined, fn: (r: Redis) => Promise<T>): Promise<T | undefined> {
  const r = new Redis({
    host: HOST,
    port,
    ...(password !== undefined ? { password } : {}),
    lazyConnect: true,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
    connectTimeout: 1000,
    commandTimeout: 1000,
  });
  r.on('error', () => undefined);
  try {
    await r.connect();
    return await fn(r);
  } catch {
    return undefined;
  } finally {
    r.disconnect();
  }
}

const alive = (p: ChildProcess) => p.exitCode === null && p.signalCode === null;

async function startSentinel(
  masterPort: number,
  o: Required<Pick<SentinelSetupOptions, 'masterName' | 'downAfterMs' | 'failoverTimeoutMs'>> & SentinelSetupOptions,
): Promise<Sentinel> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'redis-sentinel-test-'));
  const logFile = path.join(dir, 'sentinel.log');
  const conf = path.join(dir, 'sentinel.conf');
  for (let attempt = 0; ; attempt++) {
    const port = await freePort();
    const lines = [
      `port ${port}`,
      `bind ${HOST}`,
      'daemonize no',
      `dir ${dir}`,
      `logfile ${logFile}`,
      'sentinel resolve-hostnames no',
      `sentinel monitor ${o.masterName} ${HOST} ${masterPort} 2`,
      `sentinel down-after-milliseconds ${o.masterName} ${o.downAfterMs}`,
      `sentinel failover-timeout ${o.masterName} ${o.failoverTimeoutMs}`,
      `sentinel parallel-syncs ${o.masterName} 1`,
    ];
    if (o.password !== undefined) lines.push(`sentinel auth-pass ${o.masterName} ${o.password}`);
    if (o.sentinelPassword !== undefined) lines.push(`requirepass ${o.sentinelPassword}`);
    fs.writeFileSync(conf, `${lines.join('\n')}\n`, { mode: 0o600 });
    fs.rmSync(logFile, { force: true });
    const p = spawn(REDIS_SERVER_BIN, [conf, '--sentinel'], { stdio: ['ignore', 'ignore', 'pipe'] });
    running.add(p);
    p.once('exit', () => running.delete(p));
    let stderr = '';
    p.stderr?.on('data', (d: Buffer) => {
      stderr += d.toString();
    });
    p.once('error', () => undefined);
    const deadline = Date.now() + 15_000;
    let up = false;
    while (Date.now() < deadline && alive(p)) {
      if ((await ask(port, o.sentinelPassword, (r) => r.ping())) === 'PONG') {
        up = true;
        break;
      }
      await sleep(50);
    }
    if (up) {
      const exited = () => (alive(p) ? new Promise<void>((r) => p.once('exit', () => r())) : Promise.resolve());
      return {
        host: HOST,
        port,
        dir,
        logFile,
        kill: async () => {
          if (!alive(p)) return;
          p.kill('SIGKILL');
          await exited();
        },
        pause: () => p.kill('SIGSTOP'),
        resume: () => p.kill('SIGCONT'),
      };
    }
    p.kill('SIGKILL');
    const log = fs.existsSync(logFile) ? fs.readFileSync(logFile, 'utf8') : '';
    if (!log.includes('Address already in use') || attempt >= 3) {
      fs.rmSync(dir, { recursive: true, force: true });
      throw new Error(`redis sentinel did not start on ${HOST}:${port}\n${stderr}${log.split('\n').slice(-15).join('\n')}`);
    }
  }
}

export async function startSentinelSetup(opts: SentinelSetupOptions = {}): Promise<SentinelSetup> {
  const o = { masterName: 'atlantis', downAfterMs: 1000, failoverTimeoutMs: 5000, ...opts };
  // No diskless-sync delay: a replica (the old master, back) syncs at once instead of after 5 s.
  const auth = [...(o.password !== undefined ? ['--masterauth', o.password] : []), '--repl-diskless-sync-delay', '0'];
  const master = o.master ?? (await startRedisServer({ ...(o.password !== undefined ? { password: o.password } : {}), args: auth }));
  const from = o.replicaOf ?? master;
  const replica = await startRedisServer({
    ...(o.password !== undefined ? { password: o.password } : {}),
    args: [...auth, '--replicaof', from.host, String(from.port)],
  });
  const nodes: [RedisServer, RedisServer] = [master, replica];
  const sentinels: Sentinel[] = [];
  const cleanup = async () => {
    for (const s of sentinels) await s.kill();
    for (const n of nodes) await n.cleanup();
    for (const s of sentinels) fs.rmSync(s.dir, { recursive: true, force: true });
  };
  try {
    for (let i = 0; i < 3; i++) sentinels.push(await startSentinel(master.port, o));
  } catch (e) {
    await cleanup();
    throw e;
  }
  const sentinelAsk = <T>(s: Sentinel, fn: (r: Redis) => Promise<T>) => ask(s.port, o.sentinelPassword, fn);
  const up = async (s: Sentinel) => (await sentinelAsk(s, (r) => r.ping())) === 'PONG';

  const setup: SentinelSetup = {
    masterName: o.masterName,
    nodes,
    sentinels,
    addresses: sentinels.map((s) => `${s.host}:${s.port}`).join(','),
    ...(o.password !== undefined ? { password: o.password } : {}),
    ...(o.sentinelPassword !== undefined ? { sentinelPassword: o.sentinelPassword } : {}),
    masterPorts: () =>
      Promise.all(
        sentinels.map((s) =>
          sentinelAsk(s, async (r) => {
            const a = (await r.call('SENTINEL', 'get-master-addr-by-name', o.masterName)) as [string, string] | null;
            return a ? Number(a[1]) : undefined;
          }),
        ),
      ),
    async waitForMaster(node, timeoutMs = 30_000) {
      const end = Date.now() + timeoutMs;
      let seen: Array<number | undefined> = [];
      while (Date.now() < end) {
        const live = [];
        for (const s of sentinels) if (await up(s)) live.push(s);
        seen = await Promise.all(
          live.map((s) =>
            sentinelAsk(s, async (r) => Number(((await r.call('SENTINEL', 'get-master-addr-by-name', o.masterName)) as string[])[1])),
          ),
        );
        if (live.length > 0 && seen.every((p) => p === node.port)) return Date.now();
        await sleep(50);
      }
      throw new Error(`the sentinels did not name ${node.host}:${node.port} as the master within ${timeoutMs} ms: ${JSON.stringify(seen)}`);
    },
    async masterNode() {
      const ports = new Set((await setup.masterPorts()).filter((p) => p !== undefined));
      const node = nodes.find((n) => ports.size === 1 && ports.has(n.port));
      if (!node) throw new Error(`the sentinels disagree on the master: ${[...ports].join(', ')}`);
      return node;
    },
    async replication(node) {
      // A sentinel reconfiguring the server kills its clients: ask again, for a short while.
      let text: string | undefined;
      for (const end = Date.now() + 3000; text === undefined && Date.now() < end; ) {
        text = await ask(node.port, o.password, (r) => r.info('replication'));
        if (text === undefined) await sleep(50);
      }
      if (text === undefined) throw new Error(`${node.host}:${node.port} does not answer INFO`);
      return Object.fromEntries(
        text
          .split('\r\n')
          .filter((l) => l.includes(':'))
          .map((l) => [l.slice(0, l.indexOf(':')), l.slice(l.indexOf(':') + 1)]),
      );
    },
    async waitReplicated(m, r, timeoutMs = 10_000) {
      const end = Date.now() + timeoutMs;
      let seen = '';
      while (Date.now() < end) {
        const [mi, ri] = [await setup.replication(m), await setup.replication(r)];
        seen = `master ${mi.master_repl_offset}, replica ${ri.master_repl_offset} (link ${ri.master_link_status})`;
        if (ri.master_link_status === 'up' && ri.master_repl_offset === mi.master_repl_offset) return;
        await sleep(20);
      }
      throw new Error(`the replica did not catch up within ${timeoutMs} ms: ${seen}`);
    },
    async remonitor(node) {
      for (const s of sentinels) {
        const ok = await sentinelAsk(s, async (r) => {
          await r.call('SENTINEL', 'REMOVE', o.masterName);
          await r.call('SENTINEL', 'MONITOR', o.masterName, node.host, String(node.port), '2');
          const set = ['down-after-milliseconds', String(o.downAfterMs), 'failover-timeout', String(o.failoverTimeoutMs)];
          if (o.password !== undefined) set.push('auth-pass', o.password);
          return await r.call('SENTINEL', 'SET', o.masterName, ...set);
        });
        if (ok !== 'OK') throw new Error(`sentinel ${s.port} did not take the new master`);
      }
    },
    async setDownAfter(ms) {
      for (const s of sentinels) {
        const ok = await sentinelAsk(s, (r) => r.call('SENTINEL', 'SET', o.masterName, 'down-after-milliseconds', String(ms)));
        if (ok !== 'OK') throw new Error(`sentinel ${s.port} did not take down-after-milliseconds ${ms}`);
      }
    },
    client: (node) =>
      new Redis({
        host: node.host,
        port: node.port,
        ...(o.password !== undefined ? { password: o.password } : {}),
        maxRetriesPerRequest: 1,
      }),
    cleanup,
  };

  // Ready when every sentinel knows the replica and the two other sentinels (hello messages
  // through the master, every 2 s): only then can they agree on a failover.
  const end = Date.now() + 30_000;
  for (;;) {
    const known = await Promise.all(
      sentinels.map((s) =>
        sentinelAsk(s, async (r) => {
          const peers = (await r.call('SENTINEL', 'sentinels', o.masterName)) as unknown[];
          const reps = (await r.call('SENTINEL', 'replicas', o.masterName)) as string[][];
          const ok = reps.some((f) => f[f.indexOf('port') + 1] === String(replica.port) && /^slave$/.test(f[f.indexOf('flags') + 1] ?? ''));
          return peers.length === 2 && ok;
        }),
      ),
    );
    if (known.every((k) => k === true)) break;
    if (Date.now() > end) {
      await cleanup();
      throw new Error(`the sentinels did not discover each other and the replica within 30 s: ${JSON.stringify(known)}`);
    }
    await sleep(100);
  }
  return setup;
}

/** The server flags of a replica through `setup`'s sentinels: the Redis store, the sentinels, the replica's name, the shared key. */
export function sentinelReplicaArgs(setup: Pick<SentinelSetup, 'addresses' | 'masterName'>, replicaId: string): string[] {
  return [
    '--locking-db-type',
    'redis',
    '--redis-sentinel-addresses',
    setup.addresses,
    '--redis-sentinel-master-name',
    setup.masterName,
    '--replica-id',
    replicaId,
    '--shared-state-key-file',
    sharedStateKeyFile(),
  ];
}
