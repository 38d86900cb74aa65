// Runs terraform (or any step command) as a supervised child process:
// - in its own process group (detached), so a SIGINT/SIGTERM meant for the server, e.g. a
//   Ctrl-C in a terminal or a signal to the whole container group, never reaches it;
// - output streamed line by line to a per-job log file and to live listeners;
// - exit code, signal and duration recorded;
// - cancellation the way a person at a terminal does it: SIGINT to the group (terraform
//   stops cleanly, writes its state and releases its state lock), then SIGKILL if it is
//   still there after the interrupt grace.
// The processes are started by the process host's worker process (see process-host.ts), so a
// spawn never forks the server; signals go from here, by pid. Their output is scrubbed of the
// server's secrets (secrets/redact.ts) before anything else sees it: log file, listeners,
// the captured output that PR comments show.
import { createWriteStream, mkdirSync } from 'node:fs';
import path from 'node:path';
import { type LongTimeout, setLongTimeout } from '../../async.js';
import type { Logger } from '../../log.js';
import { type Redactor, processRedactor } from '../secrets/redact.js';
import type { ProcessHost } from './process-host.js';

export interface RunOptions {
  /** The job this process belongs to; used for logs and cancellation. */
  jobId: string;
  args: string[];
  cwd: string;
  env?: Record<string, string>;
  /** Overrides the runner's binary, e.g. `sh` for a workflow `run` step. */
  command?: string;
  /** Appends all output here. */
  logFile?: string;
  onOutput?: (chunk: string) => void;
}

export interface RunResult {
  exitCode: number | null;
  signal: string | null;
  durationMs: number;
  /** Combined stdout/stderr; the head is dropped past maxCapturedBytes. */
  output: string;
  /** SIGINT was sent (deadline or cancel). */
  interrupted: boolean;
  /** SIGKILL had to be sent. */
  killed: boolean;
}

export interface RunningProcess {
  jobId: string;
  pid: number;
  command: string;
  args: string[];
  startedAt: Date;
  signalsSent: string[];
}

interface Entry extends Omit<RunningProcess, 'pid'> {
  /** Known once the host reports the child started. */
  pid?: number;
  /** An interrupt came before the pid was known: sent as soon as it is. */
  interruptPending: boolean;
  killTimer?: LongTimeout;
  done: boolean;
}

export interface RunnerOptions {
  host: ProcessHost;
  binary: string;
  interruptGraceMs: number;
  logger: Logger;
  maxCapturedBytes?: number;
  /** Default: the process's (every server's secrets). */
  redactor?: Redactor;
}

export class ProcessRunner {
  private readonly entries = new Set<Entry>();
  private readonly maxCaptured: number;
  /** Set by interruptAll: a shutdown deadline passed, so no new process may start. */
  private refusing = false;

  constructor(private readonly opts: RunnerOptions) {
    this.maxCaptured = opts.maxCapturedBytes ?? 4 * 1024 * 1024;
  }

  async run(o: RunOptions): Promise<RunResult> {
    const command = o.command ?? this.opts.binary;
    if (this.refusing) {
      // An operation that was mid-way through its steps must not start the next one.
      return {
        exitCode: null,
        signal: null,
        durationMs: 0,
        output: 'Not started: the server is shutting down.\n',
        interrupted: true,
        killed: false,
      };
    }
    const log = o.logFile ? openLog(o.logFile) : undefined;
    // Registered before the spawn request so that a cancel or interruptAll meanwhile is kept.
    const entry: Entry = {
      jobId: o.jobId,
      command,
      args: o.args,
      startedAt: new Date(),
      signalsSent: [],
      interruptPending: false,
      done: false,
    };
    this.entries.add(entry);

    const chunks: string[] = [];
    let captured = 0;
    const scrub = (this.opts.redactor ?? processRedactor).stream();
    const take = (chunk: string): void => {
      if (chunk === '') return;
      chunks.push(chunk);
      captured += chunk.length;
      while (captured > this.maxCaptured && chunks.length > 1) captured -= chunks.shift()!.length;
      log?.write(chunk);
      o.onOutput?.(chunk);
    };
    const r = await this.opts.host.spawn(
      {
        command,
        args: o.args,
        cwd: o.cwd,
        env: { TF_IN_AUTOMATION: 'true', TF_INPUT: 'false', ...o.env },
        detached: true,
        stdin: 'ignore',
        output: 'stream',
      },
      {
        onStart: (pid) => {
          entry.pid = pid;
          this.opts.logger.debug('Process started', { jobId: o.jobId, pid, command, args: o.args });
          if (entry.interruptPending) this.interrupt(entry);
        },
        onOutput: (chunk) => take(scrub.push(chunk)),
      },
    );
    take(scrub.flush());
    entry.done = true;
    entry.killTimer?.clear();
    this.entries.delete(entry);
    await new Promise<void>((resolve) => (log ? log.end(resolve) : resolve()));
    const result: RunResult = {
      exitCode: r.exitCode ?? null,
      signal: r.signal ?? null,
      durationMs: r.durationMs,
      output: chunks.join(''),
      interrupted: entry.signalsSent.includes('SIGINT'),
      killed: entry.signalsSent.includes('SIGKILL'),
    };
    // Spawn failure (binary missing) or a lost process host: make it visible in the output the user sees.
    if (r.error) result.output += (this.opts.redactor ?? processRedactor).redact(`\n${r.error}\n`);
    this.opts.logger.debug('Process finished', {
      jobId: o.jobId,
      pid: entry.pid,
      exitCode: result.exitCode,
      signal: result.signal,
      durationMs: result.durationMs,
    });
    return result;
  }

  /** Processes that have started (a pid), not those still being spawned. */
  running(): RunningProcess[] {
    return [...this.entries].flatMap(({ jobId, pid, command, args, startedAt, signalsSent }) =>
      pid === undefined ? [] : [{ jobId, pid, command, args, startedAt, signalsSent: [...signalsSent] }],
    );
  }

  /** SIGINT to every running process group, SIGKILL after the interrupt grace. */
  interruptAll(): void {
    this.refusing = true;
    for (const e of this.entries) this.interrupt(e);
  }

  /** SIGINT then SIGKILL for the processes of one job. */
  cancel(jobId: string): void {
    for (const e of this.entries) if (e.jobId === jobId) this.interrupt(e);
  }

  private interrupt(e: Entry): void {
    if (e.done || e.signalsSent.includes('SIGINT')) return;
    const pid = e.pid;
    if (pid === undefined) {
      e.interruptPending = true; // onStart sends it
      return;
    }
    this.signal(e, pid, 'SIGINT');
    e.killTimer = setLongTimeout(() => {
      if (!e.done) this.signal(e, pid, 'SIGKILL');
    }, this.opts.interruptGraceMs);
  }

  private signal(e: Entry, pid: number, sig: 'SIGINT' | 'SIGKILL'): void {
    e.signalsSent.push(sig);
    this.opts.logger.warn(sig === 'SIGKILL' ? 'Killing terraform after interrupt grace' : 'Interrupting terraform', {
      jobId: e.jobId,
      pid,
      signal: sig,
    });
    try {
      process.kill(-pid, sig); // negative pid: the whole process group
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ESRCH') throw err;
    }
  }
}

function openLog(file: string) {
  // Private whatever the umask: terraform's output can quote variables and state.
  mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
  return createWriteStream(file, { flags: 'a', mode: 0o600 });
}
