// A real redis-server for tests (the Debian package; `make test` installs it through
// hack/deps/redis.sh): on a free 127.0.0.1 port, its own temp dir, the AOF fsynced at every
// write (so a SIGKILL loses nothing acknowledged), no RDB snapshots, in the foreground,
// logging to a file in its dir. Every process started here is killed when the test process
// exits, whatever happened.
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { SharedStateKey } from '../../src/server/locks/shared-state-key.js';

export interface RedisServer {
  host: string;
  port: number;
  /** The server's dir (`--dir`): the AOF and `redis.log` are here. */
  dir: string;
  logFile: string;
  /** SIGTERM, and wait for the exit. */
  stop(): Promise<void>;
  /** SIGKILL, and wait for the exit: a crash. */
  kill(): Promise<void>;
  /** SIGSTOP: up but silent, as behind a partition. */
  pause(): void;
  /** SIGCONT after pause. */
  resume(): void;
  /** Starts it again (stopping it first if it runs) on the same port and dir; the AOF brings the data back. */
  restart(): Promise<void>;
  /** Kills it if it runs and removes its dir. */
  cleanup(): Promise<void>;
}

export interface RedisServerOptions {
  /** `requirepass`: the default user's password. */
  password?: string;
  /** An ACL user with every permission (`user <name> on ><password> ~* &* +@all`). */
  user?: { name: string; password: string };
  /** Bound on the wait for a start. */
  startTimeoutMs?: number;
  /** More redis-server arguments, after these (e.g. `--replicaof`), at every start. */
  args?: string[];
}

const running = new Set<ChildProcess>();
process.once('exit', () => {
  for (const p of running) p.kill('SIGKILL');
});

export const REDIS_SERVER_BIN = process.env.REDIS_SERVER_BIN ?? 'redis-server';

async function freePort(host: string): Promise<number> {
  return await new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', reject);
    srv.listen(0, host, () => {
      const { port } = srv.address() as net.AddressInfo;
      srv.close(() => resolve(port));
    });
  });
}

/** One RESP exchange on a fresh socket: the first reply line, or undefined when nothing answers. */
function probe(host: string, port: number, payload: string, replies: number): Promise<string | undefined> {
  return new Promise((resolve) => {
    const sock = net.connect({ host, port });
    let buf = '';
    const done = (v: string | undefined) => {
      sock.destroy();
      resolve(v);
    };
    sock.setTimeout(500, () => done(undefined));
    sock.on('error', () => done(undefined));
    sock.on('connect', () => sock.write(payload));
    sock.on('data', (d: Buffer) => {
      buf += d.toString('utf8');
      // With AUTH first there are two replies; the PING's is the last one.
      const lines = buf.split('\r\n').filter((l) => l !== '');
      if (lines.length >= replies) done(lines.at(-1));
    });
  });
}

const resp = (...args: string[]): string => `*${args.length}\r\n${args.map((a) => `$${Buffer.byteLength(a)}\r\n${a}\r\n`).join('')}`;

export async function startRedisServer(opts: RedisServerOptions = {}): Promise<RedisServer> {
  const host = '127.0.0.1';
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'redis-test-'));
  const logFile = path.join(dir, 'redis.log');
  let port = await freePort(host);
  let child: ChildProcess | undefined;

  const args = (): string[] => {
    const a = ['--port', String(port), '--bind', host, '--dir', dir, '--appendonly', 'yes', '--appendfsync', 'always', '--save', ''];
    a.push('--daemonize', 'no', '--logfile', logFile, '--databases', '16');
    if (opts.password !== undefined) a.push('--requirepass', opts.password);
    if (opts.user) a.push('--user', opts.user.name, 'on', `>${opts.user.password}`, '~*', '&*', '+@all');
    a.push(...(opts.args ?? []));
    return a;
  };
  // AUTH first when the server needs it, so LOADING (the AOF being read) is seen, not NOAUTH.
  const auth = opts.user ? [opts.user.name, opts.user.password] : opts.password !== undefined ? [opts.password] : undefined;
  const ping = auth ? resp('AUTH', ...auth) + resp('PING') : resp('PING');

  const exited = (p: ChildProcess): Promise<void> =>
    p.exitCode !== null || p.signalCode !== null ? Promise.resolve() : new Promise((resolve) => p.once('exit', () => resolve()));

  const start = async (): Promise<void> => {
    const p = spawn(REDIS_SERVER_BIN, args(), { stdio: ['ignore', 'ignore', 'pipe'] });
    running.add(p);
    p.once('exit', () => running.delete(p));
    let stderr = '';
    p.stderr?.on('data', (d: Buffer) => {
      stderr += d.toString();
    });
    const spawnError = new Promise<Error>((resolve) => p.once('error', resolve));
    child = p;
    const deadline = Date.now() + (opts.startTimeoutMs ?? 15_000);
    while (Date.now() < deadline) {
      if (p.exitCode !== null || p.signalCode !== null) break;
      const failed = await Promise.race([spawnError, new Promise<undefined>((r) => setTimeout(() => r(undefined), 50))]);
      if (failed) throw new Error(`cannot start ${REDIS_SERVER_BIN}: ${failed.message} (install the Debian package redis-server)`);
      if ((await probe(host, port, ping, auth ? 2 : 1)) === '+PONG') return;
    }
    p.kill('SIGKILL');
    await exited(p);
    const log = fs.existsSync(logFile) ? fs.readFileSync(logFile, 'utf8').split('\n').slice(-15).join('\n') : '';
    throw new Error(`redis-server did not become ready on ${host}:${port}\n${stderr}${log}`);
  };

  const signal = async (sig: NodeJS.Signals): Promise<void> => {
    const p = child;
    if (!p || p.exitCode !== null || p.signalCode !== null) return;
    p.kill(sig);
    await exited(p);
  };

  // The port was free a moment ago; another process may take it first. Try a few.
  for (let attempt = 0; ; attempt++) {
    try {
      await start();
      break;
    } catch (err) {
      const inUse = fs.existsSync(logFile) && fs.readFileSync(logFile, 'utf8').includes('Address already in use');
      if (!inUse || attempt >= 3) {
        fs.rmSync(dir, { recursive: true, force: true });
        throw err;
      }
      fs.rmSync(logFile, { force: true });
      port = await freePort(host);
    }
  }

  return {
    host,
    port,
    dir,
    logFile,
    stop: () => signal('SIGTERM'),
    kill: () => signal('SIGKILL'),
    pause: () => child?.kill('SIGSTOP'),
    resume: () => child?.kill('SIGCONT'),
    restart: async () => {
      await signal('SIGTERM');
      await start();
    },
    cleanup: async () => {
      await signal('SIGKILL');
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

let keyFile: string | undefined;

/**
 * The shared state key file of this test process (a random hex key, made once, removed at
 * exit): every replica and store a test starts on one Redis uses it, as replicas share one Secret.
 */
export function sharedStateKeyFile(): string {
  if (keyFile !== undefined && fs.existsSync(keyFile)) return keyFile;
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ato-shared-key-'));
  keyFile = path.join(dir, 'key');
  fs.writeFileSync(keyFile, `${randomBytes(32).toString('hex')}\n`, { mode: 0o600 });
  process.once('exit', () => fs.rmSync(dir, { recursive: true, force: true }));
  return keyFile;
}

/** The key of sharedStateKeyFile(), for stores and registries a test opens itself. */
export function testSharedStateKey(): SharedStateKey {
  return SharedStateKey.readFile(sharedStateKeyFile());
}

/** The server flags of a replica on `redis`: the Redis store, its address, the replica's name, the shared key. */
export function replicaArgs(redis: Pick<RedisServer, 'host' | 'port'>, replicaId: string): string[] {
  return [
    '--locking-db-type',
    'redis',
    '--redis-host',
    redis.host,
    '--redis-port',
    String(redis.port),
    '--replica-id',
    replicaId,
    '--shared-state-key-file',
    sharedStateKeyFile(),
  ];
}
