// What the webhook-burst bench reads of a server process from /proc and its log and metrics.
import { readFileSync, readdirSync } from 'node:fs';
import { TERRAFORM } from '../test/support/terraform.js';
/** A field of /proc/<pid>/status in KiB; NaN once the process is gone. */
export function procStatusKiB(pid: number, field: 'VmRSS' | 'VmHWM'): number {
  let text: string;
  try {
    text = readFileSync(`/proc/${pid}/status`, 'utf8');
  } catch {
    return NaN;
  }
  const m = new RegExp(`${field}:\\s+(\\d+) kB`).exec(text);
  return m ? Number(m[1]) : NaN;
}

/** Direct children of `pid` (all its threads), from /proc. */
export function childPids(pid: number): number[] {
  let tasks: string[];
  try {
    tasks = readdirSync(`/proc/${pid}/task`);
  } catch {
    return [];
  }
  return tasks.flatMap((tid) => {
    try {
      return readFileSync(`/proc/${pid}/task/${tid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
    } catch {
      return [];
    }
  });
}

/** Command name and state of a process; undefined once it is gone. */
export function procState(pid: number): { comm: string; state: string } | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return {
      comm: stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')')),
      state: stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3),
    };
  } catch {
    return undefined;
  }
}

/** The server's process host worker (dist/native/process-host, a child of the server), once it has started. */
export function processHostPid(serverPid: number): number | undefined {
  return childPids(serverPid).find((k) => procState(k)?.comm === 'process-host');
}

/** Live (non-zombie) processes the server runs (children of its process host worker `host`) by command name. */
export function liveChildren(serverPid: number, host: number | undefined): Map<string, number> {
  const counts = new Map<string, number>();
  for (const k of [...childPids(serverPid), ...(host ? childPids(host) : [])]) {
    const s = procState(k);
    if (s && s.state !== 'Z' && k !== host) counts.set(s.comm, (counts.get(s.comm) ?? 0) + 1);
  }
  return counts;
}

/**
 * Exact terraform concurrency from the server's debug log ("Process started/finished", written
 * in event-loop order), and how long `pool` of them ran at once (from the log timestamps).
 */
export function terraformFromLog(output: string, pool: number): { maxRunning: number; processes: number; jobs: number; fullMs: number } {
  const running = new Set<number>();
  const jobs = new Set<string>();
  let max = 0;
  let processes = 0;
  let fullMs = 0;
  let lastT = NaN;
  for (const line of output.split('\n')) {
    if (!line.includes('"msg":"Process ')) continue;
    let l: { msg: string; pid?: number; command?: string; jobId?: string; time?: string };
    try {
      l = JSON.parse(line) as typeof l;
    } catch {
      continue;
    }
    const t = Date.parse(l.time ?? '');
    if (running.size >= pool && Number.isFinite(lastT)) fullMs += t - lastT;
    lastT = t;
    if (l.msg === 'Process started' && l.command === TERRAFORM && l.pid !== undefined) {
      running.add(l.pid);
      processes++;
      if (l.jobId) jobs.add(l.jobId);
    } else if (l.msg === 'Process finished' && l.pid !== undefined) {
      running.delete(l.pid);
    }
    max = Math.max(max, running.size);
  }
  return { maxRunning: max, processes, jobs: jobs.size, fullMs };
}

/** utime + stime of a process, in clock ticks (1/100 s). */
export function cpuTicks(pid: number): number {
  let st: string;
  try {
    st = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return NaN;
  }
  const f = st.slice(st.lastIndexOf(')') + 2).split(' ');
  return Number(f[11]) + Number(f[12]);
}

/** Sum of a metric's series whose labels include `labels`; NaN when /metrics does not answer in 30 s. */
export async function metricSum(url: string, name: string, labels: Record<string, string> = {}): Promise<number> {
  let text: string;
  try {
    text = await (await fetch(`${url}/metrics`, { signal: AbortSignal.timeout(30_000) })).text();
  } catch {
    return NaN;
  }
  return text
    .split('\n')
    .filter(
      (l) => (l.startsWith(`${name}{`) || l.startsWith(`${name} `)) && Object.entries(labels).every(([k, v]) => l.includes(`${k}="${v}"`)),
    )
    .reduce((s, l) => s + Number(l.split(' ').pop()), 0);
}

// ---- /status probe in a worker thread, until told to stop ---------------------------------
