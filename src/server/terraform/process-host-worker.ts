// The process host's worker thread: starts the server's child processes (git, terraform, run
// steps) with execa and reports their pid, output and exit to the main thread.
// Why a thread: spawning forks the whole server process, which blocks the calling thread for
// 5-40 ms per child on a busy machine; here it blocks this thread, not the event loop that
// answers /status and webhooks. Signals are sent from the main thread (it knows the pid).
import { writeFileSync } from 'node:fs';
import { setPriority } from 'node:os';
import { parentPort } from 'node:worker_threads';
import { execa } from 'execa';
import type { FromWorker, SpawnExit, SpawnSpec, ToWorker } from './process-host-protocol.js';

const port = parentPort;
if (!port) throw new Error('process-host-worker must run as a worker thread');
const post = (m: FromWorker): void => port.postMessage(m);

// This thread runs at nice 10 (on Linux a thread's own setting), and so do the children it
// forks (inherited): under a full CPU the event loop (webhook intake, /status, probes) goes
// before forking and terraform. Measured in the webhook-burst bench: with the thread at nice 0
// and only the children niced (nice -n 10 wrapper), intake stayed at 9/s; with this, 68/s.
const NICE = 10;
setPriority(NICE);

port.on('message', (m: ToWorker) => {
  if (m.type === 'spawn') void run(m.id, m.spec);
});

async function run(id: number, spec: SpawnSpec): Promise<void> {
  let exit: SpawnExit;
  try {
    exit = await spawn(id, spec);
  } catch (e) {
    // execa reports spawn failures in its result; this is anything unexpected on our side.
    exit = { exitCode: null, signal: null, durationMs: 0, error: `Could not run ${spec.command}: ${e instanceof Error ? e.message : String(e)}` };
  }
  post({ type: 'exit', id, exit });
}

async function spawn(id: number, spec: SpawnSpec): Promise<SpawnExit> {
  const stream = spec.output === 'stream';
  const child = execa(spec.command, spec.args, {
    cwd: spec.cwd, env: spec.env, extendEnv: true, detached: spec.detached ?? false, stdin: spec.stdin ?? 'pipe', reject: false,
    // 'stream': combined output passed on as it comes, nothing kept; 'capture': kept for the exit.
    ...(stream ? { all: true, buffer: false, stripFinalNewline: false } : {}),
  });
  if (child.pid !== undefined && spec.detached) niceSession(child.pid);
  // Posted before any output: messages from one port arrive in order.
  if (child.pid !== undefined) post({ type: 'started', id, pid: child.pid });
  if (stream) {
    child.all?.setEncoding('utf8');
    child.all?.on('data', (chunk: string) => post({ type: 'output', id, chunk }));
  }
  const r = await child;
  const exit: SpawnExit = { exitCode: r.exitCode ?? null, signal: r.signal ?? null, durationMs: r.durationMs, error: spawnError(r) };
  const text = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined);
  return stream ? exit : { ...exit, stdout: text(r.stdout), stderr: text(r.stderr) };
}

/**
 * A detached child leads a new session. Where the kernel schedules by session ("autogroup":
 * processes outside any CPU cgroup, e.g. a server run on a plain Linux host; not in a
 * container), each session is a group that gets an equal share of the CPU whatever the nice
 * of its processes, so four terraform runs would take four shares against the server's one.
 * The session's group gets our nice instead. Measured in the webhook-burst bench: the event
 * loop had waited 43 s on the run queue against 17 s of running before this.
 * Best effort: the file is absent without autogroup support.
 */
function niceSession(pid: number): void {
  try { writeFileSync(`/proc/${pid}/autogroup`, String(NICE)); } catch { /* no autogroup here, or the child is gone */ }
}

/** execa's message when the process never ran (no exit code, no signal: e.g. ENOENT). */
function spawnError(r: { failed: boolean; exitCode?: number; signal?: string; message?: string }): string | undefined {
  return r.failed && r.exitCode === undefined && !r.signal ? r.message : undefined;
}

