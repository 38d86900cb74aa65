// Child processes of the local cluster and local node, each in its own process group, so
// that a signal reaches exactly that process (and its children) and that nothing is left
// behind:
//   - stop paths kill the group (SIGTERM, then SIGKILL after a grace period);
//   - on 'exit' of this process every group still alive gets SIGKILL (synchronously);
//   - a detached reaper (dev/reaper.mjs) holds an IPC channel to this process and kills the
//     groups when the channel closes, which also covers SIGKILL of this process and crashes.
//     The groups are registered in a file written synchronously, so a group spawned a
//     moment before this process dies is still known to the reaper.
import { spawn, type ChildProcess, type SpawnOptions } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const live = new Map<number, ChildProcess>();
let reaper: ChildProcess | undefined;
let exitHookInstalled = false;

let registry = '';

function ensureReaper(): void {
  if (reaper?.connected) return;
  registry = path.join(os.tmpdir(), `atlantis-reaper-${process.pid}-${Date.now()}.groups`);
  fs.writeFileSync(registry, [...live.keys()].map((p) => `+${p}\n`).join(''));
  const r = spawn(process.execPath, [path.join(here, 'reaper.mjs'), registry], {
    detached: true,
    stdio: ['ignore', 'ignore', 'ignore', 'ipc'],
  });
  r.unref();
  // The IPC channel must not keep this process alive.
  (r.channel as unknown as { unref?: () => void } | undefined)?.unref?.();
  r.on('error', () => {});
  reaper = r;
  if (!exitHookInstalled) {
    exitHookInstalled = true;
    process.on('exit', () => killAllGroupsSync('SIGKILL'));
  }
}

function note(line: string): void {
  try {
    if (registry) fs.appendFileSync(registry, `${line}\n`);
  } catch {
    // the registry is gone; the exit hook still covers a normal exit
  }
}

export interface GroupProcess {
  child: ChildProcess;
  pid: number;
  /** resolves with the exit code (or null) and the signal that ended the process */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** signals the whole process group; false when it is already gone */
  signal(sig: NodeJS.Signals): boolean;
  /** SIGTERM, wait up to graceMs for the exit, then SIGKILL; resolves once it exited */
  stop(graceMs: number): Promise<void>;
  isRunning(): boolean;
}

/** Spawns `cmd args` as the leader of a new process group and registers it for cleanup. */
export function spawnGroup(cmd: string, args: string[], opts: SpawnOptions = {}): GroupProcess {
  ensureReaper();
  const child = spawn(cmd, args, { ...opts, detached: true });
  let running = true;
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    child.once('error', (err) => {
      running = false;
      resolve({ code: 127, signal: null });
      void err;
    });
    child.once('exit', (code, signal) => {
      running = false;
      if (child.pid !== undefined) {
        live.delete(child.pid);
        note(`-${child.pid}`);
      }
      resolve({ code, signal });
    });
  });
  const pid = child.pid ?? -1;
  if (pid > 0) {
    live.set(pid, child);
    note(`+${pid}`);
  } else {
    running = false;
  }
  const signal = (sig: NodeJS.Signals): boolean => {
    if (pid <= 0) return false;
    try {
      process.kill(-pid, sig);
      return true;
    } catch {
      return false;
    }
  };
  const stop = async (graceMs: number): Promise<void> => {
    if (!running) return;
    signal('SIGTERM');
    const t = setTimeout(() => signal('SIGKILL'), graceMs);
    await exited;
    clearTimeout(t);
    // the leader exited; make sure nothing else of its group survives
    signal('SIGKILL');
  };
  return { child, pid, exited, signal, stop, isRunning: () => running };
}

/** Sends `sig` to every process group still registered (synchronous; used at exit). */
export function killAllGroupsSync(sig: NodeJS.Signals = 'SIGKILL'): void {
  for (const pid of live.keys()) {
    try {
      process.kill(-pid, sig);
    } catch {
      live.delete(pid);
    }
  }
}

/** Number of live child process groups (for tests). */
export function liveGroupCount(): number {
  return live.size;
}
