// A measured server runs as a pod would: its whole process tree in a cgroup v1 `memory` cgroup
// (optionally with a limit, as a pod's memory limit) and a `cpu` cgroup of its own (weight
// 1024, one CPU's request), plus a `cpuacct` one to read the CPU time of the tree. Within the
// cpu cgroup nice values weigh the server's processes against each other only, as in a
// container; the machine's session autogroups (which a process outside any CPU cgroup falls
// into) play no part, so both servers compare on equal terms with whatever else runs.
// Made directly under /sys/fs/cgroup/<controller>; works as root and in a user namespace of
// the same root (`unshare -r`).
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { sleep } from '../src/async.js';

const ROOT = '/sys/fs/cgroup';
const CONTROLLERS = ['memory', 'cpu', 'cpuacct'] as const;

export interface PodCgroupOptions {
  /** memory.limit_in_bytes; unset: no limit. */
  memoryBytes?: number;
  /** cpu.shares (default 1024). */
  cpuShares?: number;
}

export class PodCgroup {
  private constructor(private readonly dirs: Record<(typeof CONTROLLERS)[number], string>) {}

  /** Creates the three cgroups; throws with the reason when the machine does not allow it. */
  static create(name: string, o: PodCgroupOptions = {}): PodCgroup {
    const leaf = `atlantis-bench-${process.pid}-${name}`;
    const dirs = Object.fromEntries(CONTROLLERS.map((c) => [c, path.join(ROOT, c, leaf)])) as PodCgroup['dirs'];
    for (const d of Object.values(dirs)) mkdirSync(d, { recursive: true });
    if (o.memoryBytes !== undefined) writeFileSync(path.join(dirs.memory, 'memory.limit_in_bytes'), String(o.memoryBytes));
    writeFileSync(path.join(dirs.cpu, 'cpu.shares'), String(o.cpuShares ?? 1024));
    return new PodCgroup(dirs);
  }

  /** Whether cgroups can be made here (cgroup v1 controllers mounted and writable). */
  static available(): string | undefined {
    for (const c of CONTROLLERS) if (!existsSync(path.join(ROOT, c, 'cgroup.procs'))) return `no cgroup v1 ${c} controller at ${ROOT}/${c}`;
    try {
      PodCgroup.create('probe').remove();
    } catch (e) {
      return `cannot make a cgroup: ${(e as Error).message}`;
    }
    return undefined;
  }

  /** A command line that enters the cgroups, then execs `command` (so its pid is the server's). */
  wrap(command: string, args: string[]): { command: string; args: string[] } {
    const procs = CONTROLLERS.map((c) => path.join(this.dirs[c], 'cgroup.procs'));
    const script = 'for f in "$1" "$2" "$3"; do echo $$ > "$f" || exit 97; done; shift 3; exec "$@"';
    return { command: 'sh', args: ['-c', script, 'sh', ...procs, command, ...args] };
  }

  /** Runs `command` in the cgroups, its output ignored; rejects unless it exits 0. */
  run(command: string, args: string[], o: { cwd: string; env: NodeJS.ProcessEnv }): Promise<void> {
    const w = this.wrap(command, args);
    return new Promise((resolve, reject) => {
      const c = spawn(w.command, w.args, { cwd: o.cwd, env: o.env, stdio: 'ignore' });
      c.once('error', reject);
      c.once('exit', (code) => (code === 0 ? resolve() : reject(new Error(`${command} ${args[0] ?? ''} in ${o.cwd} exited ${code}`))));
    });
  }

  /** The memory cgroup's cgroup.procs (every process of the tree), for the sampler. */
  get procsFile(): string {
    return path.join(this.dirs.memory, 'cgroup.procs');
  }

  pids(): number[] {
    return readFileSync(this.procsFile, 'utf8').split('\n').filter(Boolean).map(Number);
  }

  /** Processes the kernel's OOM killer killed in this cgroup since it was made. */
  oomKills(): number {
    const m = /^oom_kill (\d+)$/m.exec(readFileSync(path.join(this.dirs.memory, 'memory.oom_control'), 'utf8'));
    return m ? Number(m[1]) : 0;
  }

  /** memory.max_usage_in_bytes: the cgroup's peak charge, page cache included. */
  maxUsageBytes(): number {
    return Number(readFileSync(path.join(this.dirs.memory, 'memory.max_usage_in_bytes'), 'utf8'));
  }

  /** CPU seconds used by every process that ran in the cgroup. */
  cpuSeconds(): number {
    return Number(readFileSync(path.join(this.dirs.cpuacct, 'cpuacct.usage'), 'utf8')) / 1e9;
  }

  /** Removes the cgroups once their processes are gone (waits up to 10 s for stragglers). */
  remove(): void {
    for (const d of Object.values(this.dirs)) {
      try {
        rmdirSync(d);
      } catch {
        // still has processes: left for removeWhenEmpty
      }
    }
  }

  async removeWhenEmpty(timeoutMs = 10_000): Promise<void> {
    const end = Date.now() + timeoutMs;
    while (Date.now() < end && existsSync(this.procsFile) && this.pids().length > 0) await sleep(50);
    this.remove();
  }
}
