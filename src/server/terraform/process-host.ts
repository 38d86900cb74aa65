// The process host: every child process of the server is started by one small worker process
// (native/process-host.c, built into dist/native/process-host), never by the server itself. A
// spawn forks the process that calls it: forking the (large) server blocks the calling thread
// until the child has exec'd, once for every git and terraform process; from a worker thread
// of the server it would still stall the event loop (the page-table copy holds the
// address-space lock the main thread needs; see native/process-host.c). The server keeps
// everything else: it learns the pid, gets output and exit as messages
// (process-host-protocol.ts), and sends signals itself (process.kill works on any pid of the
// same user).
//
// The worker starts on the first spawn, keeps the server alive only while a child runs, exits
// when the server does (its request pipe reaches EOF), and is replaced when it dies: children
// in flight then are killed (their output pipes are gone, nobody would supervise them) and
// reported as failed with a message saying so.
import { type ChildProcess, spawn } from 'node:child_process';
import type { Socket } from 'node:net';
import { StringDecoder } from 'node:string_decoder';
import type { Logger } from '../../log.js';
import { nativeFile } from '../../native-file.js';
import { childEnv } from '../secrets/child-env.js';
import {
  FrameReader,
  type SpawnExit,
  type SpawnSpec,
  type WorkerEvent,
  decodeEvent,
  encodeSpawn,
  toSpawnExit,
} from './process-host-protocol.js';

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
  /** Per child: a multi-byte character split between two chunks is decoded whole. */
  decoder?: StringDecoder;
  resolve: (exit: SpawnExit) => void;
}

export interface ProcessHostOptions {
  logger: Logger;
  /** The worker executable; by default dist/native/process-host (found from the bundle, tsc output or source). */
  workerPath?: string;
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
      let request: Buffer;
      try {
        request = encodeSpawn(id, spec);
      } catch (e) {
        resolve({ exitCode: null, signal: null, durationMs: 0, error: `Could not run ${spec.command}: ${(e as Error).message}` });
        return;
      }
      let worker: ChildProcess;
      try {
        worker = this.ensureWorker();
      } catch (e) {
        resolve({ exitCode: null, signal: null, durationMs: 0, error: `Could not start the process host: ${(e as Error).message}` });
        return;
      }
      this.inFlight.set(id, { ...listeners, spec, startedAt: performance.now(), resolve });
      if (this.inFlight.size === 1) keepAlive(worker, true); // a running child keeps the server alive, as before
      worker.stdin!.write(request);
    });
  }

  /** Pid of the current worker process; undefined before the first spawn. */
  get pid(): number | undefined {
    return this.worker?.pid;
  }

  /** Lets the worker go: now if no child runs, else once the last one has exited. */
  close(): void {
    this.closed = true;
    this.endIfDone();
  }

  private endIfDone(): void {
    if (!this.closed || this.inFlight.size > 0 || !this.worker) return;
    const worker = this.worker;
    this.worker = undefined; // the next spawn starts a new one
    worker.stdin!.end(); // EOF: the worker exits
  }

  private ensureWorker(): ChildProcess {
    if (this.worker) return this.worker;
    const file = this.opts.workerPath ?? defaultWorkerPath();
    // Its environment is the children's, already clean: /proc/<worker pid>/environ, which a
    // child of ours can read, holds no secret either. stdin: requests; stdout: events; stderr:
    // the server's, for what the worker says when it fails.
    const env = this.opts.env?.() ?? childEnv(process.env, []).env;
    const worker = spawn(file, [], { env, stdio: ['pipe', 'pipe', 'inherit'] });
    keepAlive(worker, false);
    const frames = new FrameReader();
    let failure: string | undefined;
    worker.stdout!.on('data', (chunk: Buffer) => {
      if (failure) return;
      try {
        for (const frame of frames.push(chunk)) this.onEvent(decodeEvent(frame));
      } catch (e) {
        // A bug on one side or the other: nothing it says can be trusted any more.
        failure = (e as Error).message;
        this.opts.logger.error('Process host failed', { error: failure });
        worker.kill('SIGKILL');
      }
    });
    worker.stdin!.on('error', () => {}); // EPIPE once it died: 'close' below handles that
    worker.on('error', (e) => {
      failure = e.message;
      this.opts.logger.error('Process host failed', { error: e.message });
    });
    // 'close', not 'exit': the events it wrote before it ended are read first.
    worker.on('close', (code, signal) => this.onWorkerExit(worker, code, signal, failure));
    this.worker = worker;
    return worker;
  }

  private onEvent(m: WorkerEvent): void {
    const f = this.inFlight.get(m.id);
    if (!f) return;
    switch (m.type) {
      case 'started':
        f.pid = m.pid;
        f.onStart?.(m.pid);
        break;
      case 'output': {
        f.decoder ??= new StringDecoder('utf8');
        const text = f.decoder.write(m.chunk);
        if (text) f.onOutput?.(text);
        break;
      }
      case 'exit': {
        const rest = f.decoder?.end();
        if (rest) f.onOutput?.(rest);
        this.settle(m.id, toSpawnExit(m, f.spec));
        break;
      }
    }
  }

  private settle(id: number, exit: SpawnExit): void {
    const f = this.inFlight.get(id);
    if (!f) return;
    this.inFlight.delete(id);
    if (this.inFlight.size === 0 && this.worker) keepAlive(this.worker, false);
    this.endIfDone();
    f.resolve(exit);
  }

  private onWorkerExit(worker: ChildProcess, code: number | null, signal: NodeJS.Signals | null, failure: string | undefined): void {
    if (this.worker !== worker) return;
    this.worker = undefined; // the next spawn starts a new one
    if (this.inFlight.size === 0) return;
    const how = failure !== undefined && code !== 0 ? failure : code !== null ? `exit code ${code}` : `signal ${signal}`;
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

/** Whether the worker (its process and its pipes) keeps the server's event loop alive. */
function keepAlive(worker: ChildProcess, on: boolean): void {
  for (const h of [worker, worker.stdin as Socket | null, worker.stdout as Socket | null]) {
    if (on) h?.ref();
    else h?.unref();
  }
}

function defaultWorkerPath(): string {
  const file = nativeFile('process-host');
  if (!file) throw new Error('dist/native/process-host was not built (make build)');
  return file;
}
