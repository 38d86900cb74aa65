// The process host: every child process of the server is started by one worker thread
// (process-host-worker), never by the main event loop. A spawn forks the whole server
// (~200 MB) and blocks the calling thread until the child has exec'd, 5-40 ms each on a
// busy machine; ~950 of them in a webhook burst held /status and webhook intake for seconds.
// The main thread keeps everything else: it learns the pid, gets output and exit as messages,
// and sends signals itself (process.kill works on any pid of this process's children).
//
// The worker starts on the first spawn, keeps the process alive only while a child runs,
// and is replaced when it dies: children in flight then are killed (their output pipes are
// gone, nobody would supervise them) and reported as failed with a message saying so.
import { existsSync } from 'node:fs';
import { SHARE_ENV, Worker } from 'node:worker_threads';
import type { Logger } from '../../log.js';
import type { FromWorker, SpawnExit, SpawnSpec, ToWorker } from './process-host-protocol.js';

export type { SpawnExit, SpawnSpec } from './process-host-protocol.js';

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
}

export class ProcessHost {
  private worker?: Worker;
  private nextId = 1;
  private readonly inFlight = new Map<number, InFlight>();

  constructor(private readonly opts: ProcessHostOptions) {}

  /** Starts a child process in the worker; resolves when it has exited (never rejects). */
  spawn(spec: SpawnSpec, listeners: SpawnListeners = {}): Promise<SpawnExit> {
    const id = this.nextId++;
    return new Promise<SpawnExit>((resolve) => {
      let worker: Worker;
      try {
        worker = this.ensureWorker();
      } catch (e) {
        resolve({ exitCode: null, signal: null, durationMs: 0, error: `Could not start the process host thread: ${(e as Error).message}` });
        return;
      }
      this.inFlight.set(id, { ...listeners, spec, startedAt: performance.now(), resolve });
      if (this.inFlight.size === 1) worker.ref(); // a running child keeps the server alive, as before
      worker.postMessage({ type: 'spawn', id, spec } satisfies ToWorker);
    });
  }

  /** Thread id of the current worker (0 would be the main thread); undefined before the first spawn. */
  get threadId(): number | undefined {
    return this.worker?.threadId;
  }

  private ensureWorker(): Worker {
    if (this.worker) return this.worker;
    // SHARE_ENV: children see the server's environment as it is now, as when main spawned them.
    const worker = new Worker(this.opts.workerUrl ?? defaultWorkerUrl(), { env: SHARE_ENV, name: 'process-host' });
    worker.unref();
    worker.on('message', (m: FromWorker) => this.onMessage(m));
    worker.on('error', (e) => this.opts.logger.error('Process host thread failed', { error: e.message }));
    worker.on('exit', (code) => this.onWorkerExit(worker, code));
    this.worker = worker;
    return worker;
  }

  private onMessage(m: FromWorker): void {
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
    if (this.inFlight.size === 0) this.worker?.unref();
    f.resolve(exit);
  }

  private onWorkerExit(worker: Worker, code: number): void {
    if (this.worker !== worker) return;
    this.worker = undefined; // the next spawn starts a new one
    if (this.inFlight.size === 0) return;
    this.opts.logger.error('Process host thread stopped; failing the processes it supervised', { exitCode: code, processes: this.inFlight.size });
    for (const [id, f] of [...this.inFlight]) {
      let what = 'it did not start';
      if (f.pid !== undefined) {
        what = `process ${f.pid} was killed`;
        try {
          process.kill(f.spec.detached ? -f.pid : f.pid, 'SIGKILL');
        } catch (e) {
          if ((e as NodeJS.ErrnoException).code !== 'ESRCH') this.opts.logger.error('Could not kill process', { pid: f.pid, error: (e as Error).message });
        }
      }
      this.settle(id, {
        exitCode: null, signal: null, durationMs: Math.round(performance.now() - f.startedAt),
        error: `The server's process host thread stopped unexpectedly (exit code ${code}) while running ${f.spec.command}; ${what}.`,
      });
    }
  }
}

/**
 * The worker module next to this one: .js in tsc output (dist/src), .mjs beside the bundle
 * (dist/), and from TypeScript source through a loader that registers tsx in the worker.
 */
function defaultWorkerUrl(): URL {
  for (const name of ['process-host-worker.js', 'process-host-worker.mjs', 'process-host-worker-tsx.mjs']) {
    const url = new URL(`./${name}`, import.meta.url);
    if (existsSync(url)) return url;
  }
  throw new Error(`process-host-worker not found next to ${import.meta.url}`);
}
