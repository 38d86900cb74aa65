// Starting either server for a side-by-side bench: a real Atlantis v0.47 (the binary named by
// ATLANTIS_REFERENCE_BIN, built outside this repository) or ours (dist/), with the same flags
// (Atlantis's names), the same environment and terraform, each in a pod-like cgroup of its own
// (pod-cgroup.ts) with its process tree sampled (tree-sampler.ts). Atlantis binds every
// interface, so benches that run it do so in a network namespace with only loopback
// (netns.ts). terraform is reached through a shim on PATH that notes each command (one line
// appended, then exec), so both servers' terraform runs are counted the same way.
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { sleep } from '../src/async.js';
import { SCENARIO_BOT } from '../test/support/atlantis-scenario.js';
import { NODE_ARGS } from '../src/node-args.js';
import { sharedFlags } from '../test/support/atlantis-differential.js';
import { CLI } from '../test/support/cli.js';
import type { GitHubStandin } from '../test/support/github-standin.js';
import { PodCgroup } from './pod-cgroup.js';
import { benchTempDir } from './support.js';
import { cpuTicks, procStatusKiB, processHostPid } from './proc-stats.js';
import { type TreePeaks, TreeSampler } from './tree-sampler.js';

export type ServerKind = 'atlantis' | 'ours';

/** Servers still running: killed when the bench exits, however it ends (a failed bench must not leave them). */
const live = new Set<ChildProcess>();
process.on('exit', () => {
  for (const c of live) c.kill('SIGKILL');
});
export const KINDS: readonly ServerKind[] = ['atlantis', 'ours'];

/** The reference Atlantis binary, or why there is none (the bench then runs ours alone). */
export function atlantisBinary(): { bin?: string; skipped?: string } {
  const bin = process.env.ATLANTIS_REFERENCE_BIN;
  if (!bin)
    return { skipped: 'Atlantis skipped: ATLANTIS_REFERENCE_BIN is not set (an Atlantis v0.47 binary built outside this repository)' };
  if (!existsSync(bin)) return { skipped: `Atlantis skipped: ATLANTIS_REFERENCE_BIN=${bin} does not exist` };
  return { bin };
}

export function atlantisVersion(bin: string): string {
  return spawnSync(bin, ['version'], { encoding: 'utf8', env: { PATH: process.env.PATH } }).stdout.trim();
}

/** What every server of a bench shares: the stand-in, the CA bundle, the terraform shim. */
export interface BenchWorld {
  gh: GitHubStandin;
  /** PEM bundle of the stand-in's certificate and any other loopback service's (the provider mirror). */
  caBundle: string;
  /** A directory whose `terraform` notes each command in $BENCH_TF_LOG and execs the real one. */
  shimDir: string;
  webhookSecret: string;
  /** Environment added for terraform (TF_CLI_CONFIG_FILE of the provider mirror). */
  tfEnv: Record<string, string>;
}

export function makeBenchWorld(
  gh: GitHubStandin,
  opts: { webhookSecret: string; extraCaFiles?: string[]; tfEnv?: Record<string, string> },
): BenchWorld {
  const dir = benchTempDir('bench-world-');
  const caBundle = path.join(dir, 'ca.pem');
  writeFileSync(caBundle, [gh.caFile!, ...(opts.extraCaFiles ?? [])].map((f) => readFileSync(f, 'utf8')).join('\n'));
  const shimDir = path.join(dir, 'bin');
  mkdirSync(shimDir);
  const real = realTerraform();
  writeFileSync(path.join(shimDir, 'terraform'), `#!/bin/sh\nprintf '%s %s\\n' "$PWD" "$*" >> "$BENCH_TF_LOG"\nexec ${real} "$@"\n`);
  chmodSync(path.join(shimDir, 'terraform'), 0o755);
  return { gh, caBundle, shimDir, webhookSecret: opts.webhookSecret, tfEnv: opts.tfEnv ?? {} };
}

function realTerraform(): string {
  for (const dir of (process.env.PATH ?? '').split(':')) if (dir && existsSync(`${dir}/terraform`)) return `${dir}/terraform`;
  throw new Error('terraform is required on PATH for this bench');
}

export interface StartOptions {
  kind: ServerKind;
  /** Atlantis's binary (kind atlantis). */
  bin?: string;
  /** ours: the loopback address to bind (Atlantis binds every one). */
  host: string;
  port: number;
  /** More flags for both (e.g. --parallel-pool-size, --disable-autoplan). */
  flags?: string[];
  /** A memory limit for the server's cgroup, as a pod's. */
  memoryBytes?: number;
  /** Name of this run, for the cgroup, the data dir and the terraform log. */
  name: string;
  /** ours: node's own flags after the image's (src/node-args.ts), e.g. a profiler: --cpu-prof --cpu-prof-dir=...; BENCH_OURS_NODE_ARGS by default. */
  nodeArgs?: string[];
}

export interface StopResult {
  exit: { code: number | null; signal: NodeJS.Signals | null };
  peaks: TreePeaks;
  /** VmHWM of the server process (and our process host worker, summed), MiB: exact peaks. */
  hwmMiB: number;
  oomKills: number;
  /** CPU seconds of the whole tree (cpuacct), of the server process, and of our process host worker. */
  cpuSeconds: number;
  serverCpuS: number;
  workerCpuS: number;
}

export interface BenchServer {
  kind: ServerKind;
  url: string;
  pid: number;
  dataDir: string;
  logFile: string;
  /** terraform commands run so far: `<cwd> <args>` per line. */
  tfCommands(): string[];
  /** Spawn to the first 200 from GET /status, ms. */
  startupMs: number;
  sampler: TreeSampler;
  cgroup: PodCgroup;
  stop(): Promise<StopResult>;
}

export async function startBenchServer(w: BenchWorld, o: StartOptions): Promise<BenchServer> {
  const work = benchTempDir(`bench-${o.name}-`);
  const dataDir = path.join(work, 'data');
  const home = path.join(work, 'home');
  mkdirSync(home);
  const logFile = path.join(work, 'server.log');
  const tfLog = path.join(work, 'terraform-commands.log');
  writeFileSync(tfLog, '');
  // Both servers get Atlantis's address form; ours also its bind address.
  const url = o.kind === 'atlantis' ? `http://127.0.0.1:${o.port}` : `http://${o.host}:${o.port}`;
  const flags = [...sharedFlags(w.gh, dataDir, url, o.port), ...(o.flags ?? [])];
  flags[flags.indexOf('--gh-webhook-secret') + 1] = w.webhookSecret;
  if (o.kind === 'ours') flags.push('--bind-address', o.host);
  // Profiling: more flags for ours only (e.g. --log-level debug for the timeline of a command).
  if (o.kind === 'ours') flags.push(...(process.env.BENCH_OURS_FLAGS ?? '').split(/\s+/).filter(Boolean));
  const env: NodeJS.ProcessEnv = {
    PATH: `${w.shimDir}:${process.env.PATH}`,
    HOME: home,
    CHECKPOINT_DISABLE: '1',
    SSL_CERT_FILE: w.caBundle,
    GIT_SSL_CAINFO: w.caBundle,
    NODE_EXTRA_CA_CERTS: w.caBundle,
    BENCH_TF_LOG: tfLog,
    ...w.tfEnv,
  };
  const cgroup = PodCgroup.create(o.name, o.memoryBytes !== undefined ? { memoryBytes: o.memoryBytes } : {});
  // The image's node flags, then the bench's own (a profiler).
  const nodeArgs = [...NODE_ARGS, ...(o.nodeArgs ?? (process.env.BENCH_OURS_NODE_ARGS ?? '').split(/\s+/).filter(Boolean))];
  const [command, args] = o.kind === 'atlantis' ? [o.bin!, flags] : [process.execPath, [...nodeArgs, CLI, ...flags]];
  const wrapped = cgroup.wrap(command, args);
  const { openSync, closeSync } = await import('node:fs');
  const fd = openSync(logFile, 'a');
  const t0 = performance.now();
  let child: ChildProcess;
  try {
    child = spawn(wrapped.command, wrapped.args, { env, stdio: ['ignore', fd, fd] });
  } finally {
    closeSync(fd);
  }
  live.add(child);
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => {
      live.delete(child);
      resolve({ code, signal });
    }),
  );
  let gone = false;
  void exited.then(() => (gone = true));
  // Polled every 5 ms: start-up is measured to the first answer of GET /status.
  let startupMs = NaN;
  const end = Date.now() + 60_000;
  while (Date.now() < end && !gone) {
    try {
      const r = await fetch(`${url}/status`, { signal: AbortSignal.timeout(1000) });
      await r.arrayBuffer();
      if (r.status === 200) {
        startupMs = performance.now() - t0;
        break;
      }
    } catch {
      // not listening yet
    }
    await sleep(5);
  }
  if (!Number.isFinite(startupMs)) {
    child.kill('SIGKILL');
    await exited;
    throw new Error(`${o.kind} did not answer /status within 60 s:\n${readFileSync(logFile, 'utf8').slice(-3000)}`);
  }
  const pid = child.pid!;
  const sampler = new TreeSampler(cgroup.procsFile, pid);
  return {
    kind: o.kind,
    url,
    pid,
    dataDir,
    logFile,
    startupMs,
    sampler,
    cgroup,
    tfCommands: () => readFileSync(tfLog, 'utf8').split('\n').filter(Boolean),
    async stop() {
      const worker = o.kind === 'ours' ? processHostPid(pid) : undefined;
      const hwm = (procStatusKiB(pid, 'VmHWM') + (worker ? procStatusKiB(worker, 'VmHWM') : 0)) / 1024;
      const serverCpuS = cpuTicks(pid) / 100;
      const workerCpuS = worker ? cpuTicks(worker) / 100 : 0;
      const peaks = await sampler.stop();
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
      const exit = await exited;
      clearTimeout(timer);
      const result = { exit, peaks, hwmMiB: hwm, oomKills: cgroup.oomKills(), cpuSeconds: cgroup.cpuSeconds(), serverCpuS, workerCpuS };
      await cgroup.removeWhenEmpty();
      // The data dir holds clones and plans, GBs over a monorepo run; the logs stay until the bench exits.
      if (!process.env.BENCH_KEEP_TMP) for (const d of [dataDir, home]) rmSync(d, { recursive: true, force: true });
      return result;
    },
  };
}

export { SCENARIO_BOT };
