// The process host's worker process: starts the server's child processes (git, terraform, run
// steps) with execa and reports their pid, output and exit to the server over the IPC channel.
// Why a process of its own: a spawn forks the process that calls it. Forking the (large)
// server from its event loop blocks the loop for each child; from a worker thread it still
// stalls it, because fork copies the page tables while holding the address-space lock that
// the main thread's page faults and garbage collector wait for. This process is small, so its
// forks are cheaper, and they touch nothing of the server's memory. Signals are sent by the
// server itself (it knows the pids).
import { writeFileSync } from 'node:fs';
import { getPriority, setPriority } from 'node:os';
import { makeNonDumpable } from '../secrets/non-dumpable.js';
import type { FromWorker, SpawnExit, SpawnSpec, ToWorker } from './process-host-protocol.js';

const send = process.send?.bind(process);
if (!send) throw new Error('process-host-worker must run as a child process with an IPC channel (see process-host.ts)');
const post = (m: FromWorker, then?: () => void): void => void send(m, undefined, {}, then);

// This process runs at nice 10, and so do the children it forks (inherited): under a full CPU
// the server's event loop (webhook intake, /status, probes) goes before forking and terraform.
// Nicing only the children is not enough: the forks themselves would still compete with it.
// Set before anything else loads: the server forks this process on its first command, often
// in the middle of a burst of webhooks, and loading modules is most of what it does at start.
// Only ever lowered: a container may start at a higher nice already (a niced runtime), and an
// unprivileged process may not raise its priority again (EACCES would end this worker).
const NICE = 10;
try {
  if (getPriority() < NICE) setPriority(NICE);
} catch {
  // keeps the priority it has
}
// The spawn requests hold git's token (in git's environment): like the server, this process
// is made non-dumpable so that terraform cannot read its memory (secrets/non-dumpable.ts).
// Its environment is already clean. Best effort: the server has said at start if it cannot.
makeNonDumpable();
const { execa } = await import('execa');

// A signal meant for the server's process group (Ctrl-C in a terminal) is the server's to act
// on: it interrupts terraform through us or by pid. We stay until the server goes.
process.on('SIGINT', () => {});
process.on('SIGTERM', () => {});
// The server has exited, however it ended: nobody reads our messages any more. Children are
// left as they would be had the server spawned them itself: a detached terraform runs on
// and its output pipe closes with us.
process.on('disconnect', () => process.exit(0));
// A bug of ours: tell the server what it was, then exit; the server fails what we ran.
process.on('uncaughtException', (e) => {
  setTimeout(() => process.exit(1), 1000); // in case the message cannot be sent
  post({ type: 'fatal', error: e.message }, () => process.exit(1));
});

process.on('message', (m: ToWorker) => {
  if (m.type === 'spawn') void run(m.id, m.spec);
});

async function run(id: number, spec: SpawnSpec): Promise<void> {
  let exit: SpawnExit;
  try {
    exit = await spawn(id, spec);
  } catch (e) {
    // execa reports spawn failures in its result; this is anything unexpected on our side.
    exit = {
      exitCode: null,
      signal: null,
      durationMs: 0,
      error: `Could not run ${spec.command}: ${e instanceof Error ? e.message : String(e)}`,
    };
  }
  post({ type: 'exit', id, exit });
}

async function spawn(id: number, spec: SpawnSpec): Promise<SpawnExit> {
  const stream = spec.output === 'stream';
  const child = execa(spec.command, spec.args, {
    // extendEnv: on top of this process's environment, which the server made clean (no secrets).
    cwd: spec.cwd,
    env: spec.env,
    extendEnv: true,
    detached: spec.detached ?? false,
    stdin: spec.stdin ?? 'pipe',
    reject: false,
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
 * The session's group gets our nice instead, so that terraform cannot crowd out the event loop.
 * Best effort: the file is absent without autogroup support.
 */
function niceSession(pid: number): void {
  try {
    writeFileSync(`/proc/${pid}/autogroup`, String(NICE));
  } catch {
    /* no autogroup here, or the child is gone */
  }
}

/** execa's message when the process never ran (no exit code, no signal: e.g. ENOENT). */
function spawnError(r: { failed: boolean; exitCode?: number; signal?: string; message?: string }): string | undefined {
  return r.failed && r.exitCode === undefined && !r.signal ? r.message : undefined;
}
