// The pid file in the data dir lets `atlantis-operator drain` (e.g. a preStop hook in the
// same container) find the server: which process to signal and which URL to poll. Pids are
// reused, so the file also records who the process is (its start time and a hash of its
// command line, from /proc), and drain signals only a process that still matches.
import { createHash } from 'node:crypto';
import { readFileSync, rmSync, writeFileSync, renameSync } from 'node:fs';
import path from 'node:path';

export const PID_FILE_NAME = 'atlantis-operator.pid';

/** Who a process is, beyond its reusable pid. */
export interface ProcessIdentity {
  /** Field 22 of /proc/<pid>/stat: start time in clock ticks since boot. */
  startTicks: string;
  /** sha256 of /proc/<pid>/cmdline; a hash, since the command line may hold a token. */
  cmdlineSha256: string;
  /** Exited, not yet reaped: its command line reads empty. Never recorded. */
  zombie?: boolean;
}

export interface PidFileContent {
  pid: number;
  url: string;
  startedAt: string;
  identity?: ProcessIdentity;
}

export function pidFilePath(dataDir: string): string {
  return path.join(dataDir, PID_FILE_NAME);
}

/** The identity of a live process, or undefined (gone, or no /proc). */
export function processIdentity(pid: number): ProcessIdentity | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name (field 2) may hold spaces and parentheses: count from the last ')'.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const startTicks = fields[19];
    if (!startTicks) return undefined;
    const cmdlineSha256 = createHash('sha256')
      .update(readFileSync(`/proc/${pid}/cmdline`))
      .digest('hex');
    return fields[0] === 'Z' ? { startTicks, cmdlineSha256, zombie: true } : { startTicks, cmdlineSha256 };
  } catch {
    return undefined;
  }
}

export function writePidFile(dataDir: string, content: PidFileContent): void {
  const file = pidFilePath(dataDir);
  // Write then rename, so a reader never sees half a file.
  writeFileSync(`${file}.tmp`, JSON.stringify(content));
  renameSync(`${file}.tmp`, file);
}

export function readPidFile(dataDir: string): PidFileContent | undefined {
  try {
    const parsed = JSON.parse(readFileSync(pidFilePath(dataDir), 'utf8')) as Partial<PidFileContent>;
    if (typeof parsed.pid !== 'number' || typeof parsed.url !== 'string') return undefined;
    const out: PidFileContent = { pid: parsed.pid, url: parsed.url, startedAt: String(parsed.startedAt ?? '') };
    const id = parsed.identity;
    if (id && typeof id.startTicks === 'string' && typeof id.cmdlineSha256 === 'string')
      out.identity = { startTicks: id.startTicks, cmdlineSha256: id.cmdlineSha256 };
    return out;
  } catch {
    return undefined;
  }
}

/** Pure: whether the live process `now` is the one the pid file recorded. */
export function isRecordedProcess(recorded: ProcessIdentity | undefined, now: ProcessIdentity | undefined): boolean {
  if (recorded === undefined || now === undefined || recorded.startTicks !== now.startTicks) return false;
  return now.zombie === true || recorded.cmdlineSha256 === now.cmdlineSha256;
}

/** Removes the pid file only if it is still ours (a newer server may have replaced it). */
export function removePidFile(dataDir: string, pid: number): void {
  if (readPidFile(dataDir)?.pid === pid) rmSync(pidFilePath(dataDir), { force: true });
}
