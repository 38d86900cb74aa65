// A pod's death for tests: every process of a server (the server, its process host, the
// terraform it runs in sessions of their own, their shells and sleeps) killed at once, as the
// kubelet or the OOM killer kills a container. A SIGKILL of the server alone would leave
// terraform running as an orphan, which no pod can have.
import { readFileSync, readdirSync } from 'node:fs';

/** Parent pid of every process readable in /proc. */
function parents(): Map<number, number> {
  const out = new Map<number, number>();
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
      // After the command name, which may hold spaces: state, ppid, ...
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      out.set(Number(name), ppid);
    } catch {
      /* exited meanwhile */
    }
  }
  return out;
}

function signal(pid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(pid, sig);
  } catch {
    /* already gone */
  }
}

/**
 * SIGKILLs `pid` and all its descendants. They are frozen first (SIGSTOP, again until no new
 * descendant appears), so none can react to another's death or start a child meanwhile; the
 * root goes first, so it never sees a child die. Returns the pids killed, root first.
 */
export function killTree(pid: number): number[] {
  const frozen = new Set<number>([pid]);
  signal(pid, 'SIGSTOP');
  for (let round = 0; round < 20; round++) {
    const ppid = parents();
    const more = [...ppid].filter(([p, parent]) => frozen.has(parent) && !frozen.has(p)).map(([p]) => p);
    if (more.length === 0) break;
    for (const p of more) {
      frozen.add(p);
      signal(p, 'SIGSTOP');
    }
  }
  const all = [...frozen];
  for (const p of all) signal(p, 'SIGKILL');
  return all;
}
