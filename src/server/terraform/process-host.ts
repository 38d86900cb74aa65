// The process host: every child process of the server is started by one small worker process
// (process-host-worker), never by the server itself. A spawn forks the process that calls it:
// forking the (large) server blocks the calling thread until the child has exec'd, once for
// every git and terraform process; from a worker thread of the server it would still stall
// the event loop (the page-table copy holds the address-space lock the main thread needs;
// see process-host-worker.ts). The server keeps everything else: it learns the
// pid, gets output and exit as messages, and sends signals itself (process.kill works on any
// pid of the same user).
//
// The worker starts on the first spawn, keeps the server alive only while a child runs, exits
// when the server does (its IPC channel closes), and is replaced when it dies: children in
// flight then are killed (their output pipes are gone, nobody would supervise them) and
// reported as failed with a message saying so.
import { type ChildProcess, fork } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { Logger } from '../../log.js';
import { childEnv } from '../secrets/child-env.js';
import type { FromWorker, SpawnExit, SpawnSpec, ToWorker } from './process-host-protocol.js';

export type { SpawnExit, SpawnSpec } from './process-host-protocol.js';

// --lite-mode: V8 without its optimizing compilers and with lazier metadata; the worker only
// relays messages, and its CPU went down, not up (less compiling). --no-expose-wasm: lite mode
// turns WebAssembly off and would otherwise say so on stderr at every start.
const WORKER_EXEC_ARGV = ['--max-semi-space-size=1', '--lite-mode', '--no-expose-wasm'];

export interface SpawnListeners {
  /** The child runs (called before any output). Not called when it never started. */
  onStart?: (pid: number) => void;
  /** 'stream' specs: a chunk of combined stdout/stderr. */
  onOutput?: (chunk: string) => void;
}

interface InFlight extends SpawnListeners {
  spec: SpawnSpec;
  pid?: number;
  startedAt: number;
  resolve: (exit: SpawnExit) => void;
}

export interface ProcessHostOptions {
  logger: Logger;
  /** The worker module; by default the one next to this module (tsc output, bundle or source). */
  workerUrl?: URL;
  /**
   * The worker's environment, which every child inherits (see secrets/child-env.ts); asked
   * each time a worker is started. Default: the server's environment without ATLANTIS_*.
   */
  env?: () => Record<string, string>;
}

export class ProcessHost {
  private worker?: ChildProcess;
  private nextId = 1;
  private closed = false;
  private readonly inFlight = new Map<number, InFlight>();

  constructor(private readonly opts: ProcessHostOptions) {}

  /** Starts a child process through the worker; resolves when it has exited (never rejects). */
  spawn(spec: SpawnSpec, listeners: SpawnListeners = {}): Promise<SpawnExit> {
    const id = this.nextId++;
    this.closed = false;
    return new Promise<SpawnExit>((resolve) => {
      let worker: ChildProcess;
      try {
        worker = this.ensureWorker();
      } catch (e) {
        resolve({ exitCode: null, signal: null, durationMs: 0, error: `Could not start the process host: ${(e as Error).message}` });
        return;
      }
      this.inFlight.set(id, { ...listeners, spec, startedAt: performance.now(), resolve });
      if (this.inFlight.size === 1) keepAlive(worker, true); // a running child keeps the server alive, as before
      worker.send({ type: 'spawn', id, spec } satisfies ToWorker);
    });
  }

  /** Pid of the current worker process; undefined before the first spawn. */
  get pid(): number | undefined {
    return this.worker?.pid;
  }

  /** Lets the worker go: now if no child runs, else once the last one has exited. */
  close(): void {
    this.closed = true;
    this.disconnectIfDone();
  }

  private disconnectIfDone(): void {
    if (this.closed && this.inFlight.size === 0 && this.worker?.connected) this.worker.disconnect();
  }

  private ensureWorker(): ChildProcess {
    if (this.worker?.connected) return this.worker;
    const url = this.opts.workerUrl ?? defaultWorkerUrl();
    // Not the server's execArgv (a profiler, a heap size): the worker is small and does one
    // thing. Its young generation is capped at 1 MiB per semi-space (V8's default grows to
    // 16): the output it relays is short-lived strings, and with the default a burst of output
    // kept ~15 MiB more resident (40 runs of 200 KB each: peak RSS 89 MiB, 72 with the cap)
    // for ~10% more of the worker's CPU; lite mode takes that back and ~5 MiB more (see
    // WORKER_EXEC_ARGV). Its stdout is unused; stderr is the server's, for what V8 itself may print.
    // Its environment is the children's, already clean: /proc/<worker pid>/environ, which a
    // child of ours can read, holds no secret either.
    const env = this.opts.env?.() ?? childEnv(process.env, []).env;
    const worker = fork(fileURLToPath(url), [], { execArgv: WORKER_EXEC_ARGV, env, stdio: ['ignore', 'ignore', 'inherit', 'ipc'] });
    keepAlive(worker, false);
    worker.on('message', (m: FromWorker) => this.onMessage(m));
    worker.on('error', (e) => this.opts.logger.error('Process host failed', { error: e.message }));
    worker.on('exit', (code, signal) => this.onWorkerExit(worker, code, signal));
    this.worker = worker;
    return worker;
  }

  private onMessage(m: FromWorker): void {
    if (m.type === 'fatal') {
      this.opts.logger.error('Process host failed', { error: m.error });
      return;
    }
    const f = this.inFlight.get(m.id);
    if (!f) return;
    switch (m.type) {
      case 'started':
        f.pid = m.pid;
        f.onStart?.(m.pid);
        break;
      case 'output':
        f.onOutput?.(m.chunk);
        break;
      case 'exit':
        this.settle(m.id, m.exit);
        break;
    }
  }

  private settle(id: number, exit: SpawnExit): void {
    const f = this.inFlight.get(id);
    if (!f) return;
    this.inFlight.delete(id);
    if (this.inFlight.size === 0 && this.worker) keepAlive(this.worker, false);
    this.disconnectIfDone();
    f.resolve(exit);
  }

  private onWorkerExit(worker: ChildProcess, code: number | null, signal: NodeJS.Signals | null): void {
    if (this.worker !== worker) return;
    this.worker = undefined; // the next spawn starts a new one
    if (this.inFlight.size === 0) return;
    const how = code !== null ? `exit code ${code}` : `signal ${signal}`;
    this.opts.logger.error('Process host stopped; failing the processes it supervised', {
      exitCode: code,
      signal,
      processes: this.inFlight.size,
    });
    for (const [id, f] of [...this.inFlight]) {
      let what = 'it did not start';
      if (f.pid !== undefined) {
        what = `process ${f.pid} was killed`;
        try {
          process.kill(f.spec.detached ? -f.pid : f.pid, 'SIGKILL');
        } catch (e) {
          if ((e as NodeJS.ErrnoException).code !== 'ESRCH')
            this.opts.logger.error('Could not kill process', { pid: f.pid, error: (e as Error).message });
        }
      }
      this.settle(id, {
        exitCode: null,
        signal: null,
        durationMs: Math.round(performance.now() - f.startedAt),
        error: `The server's process host stopped unexpectedly (${how}) while running ${f.spec.command}; ${what}.`,
      });
    }
  }
}

/** Whether the worker (its process and its IPC channel) keeps the server's event loop alive. */
function keepAlive(worker: ChildProcess, on: boolean): void {
  if (on) {
    worker.ref();
    worker.channel?.ref();
  } else {
    worker.unref();
    worker.channel?.unref();
  }
}

/**
 * The worker module next to this one: .js in tsc output (dist/src), .mjs beside the bundle
 * (dist/), and from TypeScript source through a loader that registers tsx first.
 */
function defaultWorkerUrl(): URL {
  for (const name of ['process-host-worker.js', 'process-host-worker.mjs', 'process-host-worker-tsx.mjs']) {
    const url = new URL(`./${name}`, import.meta.url);
    if (existsSync(url)) return url;
  }
  throw new Error(`process-host-worker not found next to ${import.meta.url}`);
}
