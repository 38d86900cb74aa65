// `atlantis-operator drain`: starts the drain of the server on this host and waits until it
// has no operation left. Meant for a preStop hook when the server runs without the
// controller. The server is found through the pid file in its data dir; the drain is
// started with SIGUSR2 (reported as drain_reason "cli"), never through HTTP.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { clampTimerDelay } from '../async.js';
import { STATUS_PATH, type StatusBody } from '../contract/drain-protocol.js';
import { formatDuration } from '../config/duration.js';
import { isRecordedProcess, processIdentity, readPidFile } from '../server/drain/pid-file.js';

export const LAST_EXIT_FILE = 'last-exit.json';

export interface DrainCommandOptions {
  dataDir: string;
  url?: string;
  timeoutMs: number;
  pollIntervalMs: number;
  out: (line: string) => void;
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  // An exited process not yet reaped by its parent (a zombie) still accepts signal 0.
  try {
    return !/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return true;
  }
}

async function fetchStatus(url: string): Promise<StatusBody | undefined> {
  try {
    const res = await fetch(`${url}${STATUS_PATH}`, { signal: AbortSignal.timeout(2000) });
    return res.ok ? ((await res.json()) as StatusBody) : undefined;
  } catch {
    return undefined;
  }
}

function lastExitCode(dataDir: string, pid: number): number | undefined {
  try {
    const rec = JSON.parse(readFileSync(path.join(dataDir, LAST_EXIT_FILE), 'utf8')) as { pid?: number; code?: number };
    return rec.pid === pid && typeof rec.code === 'number' ? rec.code : undefined;
  } catch {
    return undefined;
  }
}

/** Returns the process exit code: 0 drained, 1 timeout or no server. */
export async function runDrainCommand(o: DrainCommandOptions): Promise<number> {
  const pidFile = readPidFile(o.dataDir);
  if (!pidFile) {
    o.out(`error: no running server found: no pid file in ${o.dataDir}`);
    return 1;
  }
  const url = (o.url ?? pidFile.url).replace(/\/+$/, '');
  // A pid file left by a server killed with -9 may name a pid now reused by another process.
  const now = processIdentity(pidFile.pid);
  if (now === undefined) {
    o.out(`error: the server process ${pidFile.pid} recorded in ${o.dataDir} is not running`);
    return 1;
  }
  if (!isRecordedProcess(pidFile.identity, now)) {
    o.out(
      `error: process ${pidFile.pid} named by the pid file in ${o.dataDir} is not the server that wrote it (start time or command line differ); not signalling it`,
    );
    return 1;
  }
  try {
    process.kill(pidFile.pid, 'SIGUSR2');
  } catch {
    o.out(`error: the server process ${pidFile.pid} recorded in ${o.dataDir} is not running`);
    return 1;
  }
  o.out(`drain started: server pid ${pidFile.pid}, polling ${url}/status`);
  const started = Date.now();
  let lastLine = '';
  for (;;) {
    const st = await fetchStatus(url);
    if (st?.shutting_down && st.in_progress_operations === 0) {
      o.out('drained: no operation in progress');
      return 0;
    }
    if (!st && !alive(pidFile.pid)) {
      const code = lastExitCode(o.dataDir, pidFile.pid);
      o.out(
        code === 0 || code === undefined ? 'drained: the server has exited' : `the server exited with code ${code} (runs were interrupted)`,
      );
      return code === 0 || code === undefined ? 0 : 1;
    }
    const line = st
      ? `draining: ${st.in_progress_operations} operation(s) in progress${st.operations.length ? ': ' + st.operations.map((op) => `${op.command} ${op.repo}${op.pull ? '#' + op.pull : ''}${op.project ? ' ' + op.project : ''}`).join(', ') : ''}`
      : 'waiting: /status did not answer';
    if (line !== lastLine) {
      o.out(line);
      lastLine = line;
    }
    if (o.timeoutMs > 0 && Date.now() - started >= o.timeoutMs) {
      o.out(
        `timeout: still ${st ? st.in_progress_operations : 'unknown'} operation(s) in progress after ${formatDuration(o.timeoutMs)}; the server keeps draining`,
      );
      return 1;
    }
    await sleep(clampTimerDelay(o.pollIntervalMs));
  }
}
