// One project, side by side with a real Atlantis v0.47 (issue 36's first three goals):
// - start-up: spawn to the first 200 from GET /status, each server started STARTS times,
//   alternating, on an empty data dir;
// - overhead per plan: webhook of `atlantis plan -d <dir>` to the plan comment, minus the same
//   `terraform init` + `terraform plan` run directly on a clone of the same commit; RUNS
//   plans, each server and the direct run in turn (the order alternating), every one in a
//   pod-like cgroup of its own (pod-cgroup.ts), so the machine's other load weighs on them alike;
//   the direct run's clone, made as a server makes it, is timed alone: the overhead's floor;
// - peak RSS of the server (ours: with its process host worker) over those plans.
// The project is one terraform_data resource (no provider), as in workflow-overhead.ts.
import { execFile } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { sleep } from '../src/async.js';
import { cloneArgs, gitAuth } from '../src/server/workflow/checkout/working-copy.js';
import { createTestRepo, terraformConfig } from '../test/support/git-repos.js';
import { GitHubStandin, issueCommentPayload, pullRequestPayload, sendWebhook } from '../test/support/github-standin.js';
import {
  type BenchServer,
  type ServerKind,
  SCENARIO_BOT,
  atlantisBinary,
  atlantisVersion,
  makeBenchWorld,
  startBenchServer,
} from './bench-servers.js';
import { onlyLoopback, runInLoopbackNamespace } from './netns.js';
import { PodCgroup } from './pod-cgroup.js';
import { benchTempDir, percentile, printTable, removeBenchTempDir } from './support.js';

const SECRET = 'single-project-bench-secret';
const REPO = 'acme/infra';
const RUNS = Number(process.env.BENCH_SINGLE_RUNS ?? 15);
const STARTS = Number(process.env.BENCH_SINGLE_STARTS ?? 7);

const median = (xs: number[]): number =>
  percentile(
    [...xs].sort((a, b) => a - b),
    50,
  );

/**
 * The direct run: the clone a server makes (from the stand-in, with our credential helper, as
 * working-copy.ts runs it), then terraform init + plan in a cgroup of their own; ms of each.
 */
async function directPlan(
  gh: GitHubStandin,
  branch: string,
  dir: string,
  env: NodeJS.ProcessEnv,
): Promise<{ cloneMs: number; planMs: number }> {
  const work = benchTempDir('bench-direct-');
  const url = gh.gitUrl(REPO);
  const auth = gitAuth(url, gh.token);
  const req = { repo: REPO, pull: 0, workspace: 'default', cloneUrl: url, headRef: branch, headSha: '' };
  const args = [...auth.args, ...cloneArgs({ strategy: 'branch', depth: 0 }, req, work)];
  const c0 = performance.now();
  // Not a sync call: the stand-in that serves the clone runs in this process.
  await promisify(execFile)('git', args, { env: { ...env, GIT_TERMINAL_PROMPT: '0', ...auth.env } });
  const cloneMs = performance.now() - c0;
  const cwd = path.join(work, dir);
  const cg = PodCgroup.create(`direct-${process.hrtime.bigint()}`);
  const run = (args: string[]): Promise<void> => cg.run('terraform', args, { cwd, env });
  try {
    const t0 = performance.now();
    await run(['init', '-input=false']);
    await run(['plan', '-input=false', '-out=direct.tfplan']);
    return { cloneMs, planMs: performance.now() - t0 };
  } finally {
    await cg.removeWhenEmpty();
    removeBenchTempDir(work);
  }
}

interface Result {
  startupMs: Record<ServerKind, number[]>;
  wallMs: Record<ServerKind, number[]>;
  directMs: number[];
  /** The clone alone, as a server makes it: the floor of the overhead per plan. */
  cloneMs: number[];
  serverMiB: Record<ServerKind, number>;
  hwmMiB: Record<ServerKind, number>;
}

async function inner(out: string): Promise<void> {
  const { bin, skipped } = atlantisBinary();
  if (skipped) console.log(skipped);
  else console.log(`reference: ${atlantisVersion(bin!)}`);
  const kinds: ServerKind[] = bin ? ['atlantis', 'ours'] : ['ours'];
  const gh = await GitHubStandin.start({ botLogin: SCENARIO_BOT, tls: true, host: '127.0.0.1' });
  const repo = await createTestRepo({ root: benchTempDir('bench-repo-'), fullName: REPO });
  gh.addRepo(REPO, { cloneUrl: gh.gitUrl(REPO), bareDir: repo.bareDir });
  const world = makeBenchWorld(gh, { webhookSecret: SECRET });
  const env: NodeJS.ProcessEnv = {
    PATH: process.env.PATH,
    HOME: benchTempDir('bench-home-'),
    CHECKPOINT_DISABLE: '1',
    TF_IN_AUTOMATION: 'true',
    GIT_SSL_CAINFO: world.caBundle,
  };
  const r: Result = {
    startupMs: { atlantis: [], ours: [] },
    wallMs: { atlantis: [], ours: [] },
    directMs: [],
    cloneMs: [],
    serverMiB: { atlantis: NaN, ours: NaN },
    hwmMiB: { atlantis: NaN, ours: NaN },
  };
  const start = (kind: ServerKind, name: string): Promise<BenchServer> =>
    startBenchServer(world, { kind, bin, host: '127.0.0.2', port: kind === 'atlantis' ? 4141 : 4242, flags: ['--disable-autoplan'], name });

  for (let i = 0; i < STARTS; i++) {
    for (const kind of i % 2 ? [...kinds].reverse() : kinds) {
      const s = await start(kind, `${kind}-start${i}`);
      r.startupMs[kind].push(s.startupMs);
      await s.stop();
    }
  }

  const servers = new Map<ServerKind, BenchServer>();
  for (const kind of kinds) servers.set(kind, await start(kind, `${kind}-plans`));
  let pull = 1;
  for (let i = 0; i < RUNS; i++) {
    const dir = `bench${i}`;
    const branch = `bench-${i}`;
    const headSha = await repo.createBranch(branch, { [`${dir}/main.tf`]: terraformConfig({ marker: `b${i}` }) });
    const files = (await repo.changedFiles(branch)).map((filename) => ({ filename }));
    const order: Array<ServerKind | 'direct'> = [...kinds, 'direct'];
    for (let k = 0; k < i % order.length; k++) order.push(order.shift()!);
    for (const who of order) {
      if (who === 'direct') {
        const d = await directPlan(gh, branch, dir, env);
        r.directMs.push(d.planMs);
        r.cloneMs.push(d.cloneMs);
        continue;
      }
      const s = servers.get(who)!;
      const number = pull++;
      gh.addPull(REPO, { number, headSha, headRef: branch, files });
      const payload = pullRequestPayload({ repo: REPO, cloneUrl: gh.gitUrl(REPO), action: 'opened', number, headSha, headRef: branch });
      await sendWebhook(`${s.url}/events`, 'pull_request', payload, { secret: SECRET });
      await sleep(300);
      const t0 = Date.now();
      const body = `atlantis plan -d ${dir}`;
      await sendWebhook(`${s.url}/events`, 'issue_comment', issueCommentPayload({ repo: REPO, cloneUrl: gh.gitUrl(REPO), number, body }), {
        secret: SECRET,
      });
      const end = Date.now() + 120_000;
      let done: number | undefined;
      while (done === undefined && Date.now() < end) {
        const c = gh.comments(REPO, number).find((x) => x.user === SCENARIO_BOT && /^Ran Plan for dir/.test(x.body));
        if (c) done = Date.parse(c.createdAt);
        else await sleep(5);
      }
      if (done === undefined) throw new Error(`${who}: no plan comment on #${number} within 120 s; log ${s.logFile}`);
      r.wallMs[who].push(done - t0);
    }
  }
  for (const [kind, s] of servers) {
    const stop = await s.stop();
    r.serverMiB[kind] = stop.peaks.serverMiB;
    r.hwmMiB[kind] = stop.hwmMiB;
  }
  writeFileSync(out, JSON.stringify(r));
  await gh.close();
}

export interface SingleProjectFigures {
  startupMs: Partial<Record<ServerKind, number>>;
  overheadMs: Partial<Record<ServerKind, number>>;
  serverMiB: Partial<Record<ServerKind, number>>;
}

export async function benchSingleProject(): Promise<{ ok: boolean; figures?: SingleProjectFigures }> {
  const out = path.join(benchTempDir('bench-single-'), 'result.json');
  if (onlyLoopback()) await inner(out);
  else if ((await runInLoopbackNamespace(fileURLToPath(import.meta.url), ['--inner', out])) !== 0) return { ok: false };
  const r = JSON.parse(readFileSync(out, 'utf8')) as Result;
  const kinds = (['atlantis', 'ours'] as const).filter((k) => r.wallMs[k].length > 0);
  const direct = median(r.directMs);
  const f: SingleProjectFigures = { startupMs: {}, overheadMs: {}, serverMiB: {} };
  for (const k of kinds) {
    f.startupMs[k] = median(r.startupMs[k]);
    f.overheadMs[k] = median(r.wallMs[k]) - direct;
    f.serverMiB[k] = r.serverMiB[k];
  }
  const clone = median(r.cloneMs);
  printTable(
    `one project, ${RUNS} plans (median), ${STARTS} starts (median); direct terraform init+plan ${direct.toFixed(0)} ms; the clone alone ${clone.toFixed(0)} ms`,
    kinds.map((k) => ({
      server: k,
      'start-up ms': f.startupMs[k]!.toFixed(0),
      'plan wall ms': median(r.wallMs[k]).toFixed(0),
      'overhead ms': f.overheadMs[k]!.toFixed(0),
      'overhead / clone alone': `${(f.overheadMs[k]! / clone).toFixed(2)}×`,
      'peak RSS server MiB': r.serverMiB[k].toFixed(0),
      'VmHWM MiB': r.hwmMiB[k].toFixed(0),
    })),
  );
  if (!kinds.includes('atlantis')) return { ok: true, figures: f };
  const ratio = (x: Partial<Record<ServerKind, number>>): number => x.ours! / x.atlantis!;
  const goals = [
    { goal: 'overhead per plan ≤ 0.3× Atlantis', ratio: ratio(f.overheadMs), max: 0.3 },
    { goal: 'peak RSS of server and worker ≤ 1.5× Atlantis', ratio: ratio(f.serverMiB), max: 1.5 },
    { goal: 'start-up ≤ 1.5× Atlantis', ratio: ratio(f.startupMs), max: 1.5 },
  ];
  printTable(
    'one-project goals (issue 36)',
    goals.map((g) => ({ goal: g.goal, measured: `${g.ratio.toFixed(2)}×`, met: g.ratio <= g.max ? 'yes' : 'NO' })),
  );
  return { ok: goals.every((g) => g.ratio <= g.max), figures: f };
}

if (process.argv[2] === '--inner') {
  await inner(process.argv[3]!);
  process.exit(0);
}
