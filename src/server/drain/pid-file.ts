// The pid file in the data dir lets `atlantis-operator drain` (e.g. a preStop hook in the
// same container) find the server: which process to signal and which URL to poll.
import { readFileSync, rmSync, writeFileSync, renameSync } from 'node:fs';
import path from 'node:path';

export const PID_FILE_NAME = 'atlantis-operator.pid';

export interface PidFileContent {
  pid: number;
  url: string;
  startedAt: string;
}

export function pidFilePath(dataDir: string): string {
  return path.join(dataDir, PID_FILE_NAME);
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
    return { pid: parsed.pid, url: parsed.url, startedAt: String(parsed.startedAt ?? '') };
  } catch {
    return undefined;
  }
}

/** Removes the pid file only if it is still ours (a newer server may have replaced it). */
export function removePidFile(dataDir: string, pid: number): void {
  if (readPidFile(dataDir)?.pid === pid) rmSync(pidFilePath(dataDir), { force: true });
}
