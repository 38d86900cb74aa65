// The monorepo bench's floor: the changed projects' `terraform init` + `terraform plan`, run
// directly at the servers' pool size with no server, on a clone of the PR's branch, with a cold
// plugin cache of its own (the first init installs the provider alone, the others then only
// read the cache, as our server orders them). Its wall time is the least any server can take
// from the clone to the last plan; read beside the servers' time to all plans.
import { execFile } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import type { BenchWorld } from './bench-servers.js';
import { projectName } from './monorepo-repo.js';
import { PodCgroup } from './pod-cgroup.js';
import { benchTempDir, removeBenchTempDir } from './support.js';

export interface DirectRow {
  projects: number;
  /** Wall time from the first init to the last plan's end; CPU seconds of every terraform and provider process. */
  planMs: number;
  cpuS: number;
}

export interface DirectRun {
  world: BenchWorld;
  /** Writes a CLI config for the provider mirror with this plugin cache; returns its path. */
  cliConfig: (file: string, pluginCacheDir: string) => string;
  cloneUrl: string;
  branch: string;
  projects: number;
  pool: number;
}

export async function directPlans(o: DirectRun): Promise<DirectRow> {
  const work = benchTempDir(`bench-mono-direct-${o.projects}-`);
  const checkout = path.join(work, 'checkout');
  await promisify(execFile)('git', ['clone', '-q', '--depth=1', '--branch', o.branch, '--single-branch', o.cloneUrl, checkout]);
  const cache = path.join(work, 'plugin-cache');
  mkdirSync(cache);
  const env: NodeJS.ProcessEnv = {
    // Through the servers' terraform shim, so all three rows pay for it alike.
    PATH: `${o.world.shimDir}:${process.env.PATH}`,
    BENCH_TF_LOG: path.join(work, 'terraform-commands.log'),
    HOME: work,
    CHECKPOINT_DISABLE: '1',
    TF_IN_AUTOMATION: 'true',
    SSL_CERT_FILE: o.world.caBundle,
    TF_CLI_CONFIG_FILE: o.cliConfig(path.join(work, 'cli.tfrc'), cache),
  };
  const cg = PodCgroup.create(`direct-${o.projects}-${process.hrtime.bigint()}`);
  const terraform = (cwd: string, args: string[]): Promise<void> => cg.run('terraform', args, { cwd, env });
  const dirs = Array.from({ length: o.projects }, (_, i) => path.join(checkout, 'projects', projectName(i)));
  const init = (dir: string) => terraform(dir, ['init', '-no-color', '-input=false']);
  const plan = (dir: string) => terraform(dir, ['plan', '-no-color', '-input=false', '-out=direct.tfplan']);
  try {
    const cpu0 = cg.cpuSeconds();
    const t0 = performance.now();
    // The first init fills the cache alone; then `pool` slots take the rest, its plan first.
    await init(dirs[0]!);
    const tasks = [() => plan(dirs[0]!), ...dirs.slice(1).map((d) => () => init(d).then(() => plan(d)))];
    const slot = async (): Promise<void> => {
      for (let t = tasks.shift(); t; t = tasks.shift()) await t();
    };
    await Promise.all(Array.from({ length: o.pool }, slot));
    return { projects: o.projects, planMs: performance.now() - t0, cpuS: cg.cpuSeconds() - cpu0 };
  } finally {
    await cg.removeWhenEmpty();
    removeBenchTempDir(work);
  }
}
