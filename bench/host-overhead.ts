// Webhook → plan overhead per code host, side by side with GitHub's (issue 34). For each host
// (GitHub and GitLab through their stand-ins, the real Gitea) our server runs as a real process
// (bench/host-rigs.ts); RUNS times per host, the hosts in turn (the order rotating each round,
// the direct run before or after the server's by turns, so the machine's other load weighs on
// them alike), a pull request adds one terraform project (terraform_data, no provider) and
// `atlantis plan -d <dir>` is sent as the host's comment webhook. Measured per run:
// - (a) webhook sent → terraform plan process started (the server's debug log, as in
//   workflow-overhead.ts);
// - (b) webhook sent → the plan comment taken by the host (the host's own time of it);
// - (c) overhead: (b) minus `terraform init` + `terraform plan` run directly on a clone of the
//   same commit, started as the server starts terraform (a session of its own at nice 10).
// Figures, not a target: the bench fails only when a plan comment never comes or is wrong.
import { execFile, spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { sleep } from '../src/async.js';
import { TERRAFORM } from '../test/support/terraform.js';
import { type HostName, type HostRig, type RigPull, githubRig, giteaRig, gitlabRig } from './host-rigs.js';
import { percentile, printTable } from './support.js';

const RUNS = Number(process.env.BENCH_HOST_RUNS ?? 7);
const ANSWER_TIMEOUT_MS = 120_000;

interface Sample {
  toPlanStart: number;
  toComment: number;
  direct: number;
}

const run = promisify(execFile);

/**
 * terraform as the server's process host starts it (native/process-host.c): a session of its
 * own whose autogroup gets nice 10, so that on a busy machine the direct run and the server's
 * get the same share of the CPU.
 */
function terraformLikeServer(args: string[], cwd: string, env: NodeJS.ProcessEnv): Promise<void> {
  return new Promise((resolve, reject) => {
    const c = spawn(TERRAFORM, args, { cwd, env, stdio: 'ignore', detached: true });
    try {
      if (c.pid) writeFileSync(`/proc/${c.pid}/autogroup`, '10');
    } catch {
      // no autogroup here, or the child is gone
    }
    c.once('error', reject);
    c.once('exit', (code) => (code === 0 ? resolve() : reject(new Error(`terraform ${args[0]} exited ${code}`))));
  });
}

/** terraform init + plan on a fresh clone of `branch`; ms (the clone not counted). */
async function directPlan(cloneUrl: string, branch: string, dir: string): Promise<number> {
  const work = mkdtempSync(path.join(tmpdir(), 'bench-host-direct-'));
  const env = { PATH: process.env.PATH, HOME: work, CHECKPOINT_DISABLE: '1', TF_IN_AUTOMATION: 'true' };
  try {
    // Not a sync call: the stand-ins that serve the clones run in this process.
    await run('git', ['clone', '-q', '--branch', branch, '--single-branch', cloneUrl, path.join(work, 'repo')], { env });
    const cwd = path.join(work, 'repo', dir);
    const t0 = performance.now();
    await terraformLikeServer(['init', '-no-color', '-input=false'], cwd, env);
    await terraformLikeServer(['plan', '-no-color', '-input=false', '-out=direct.tfplan'], cwd, env);
    return performance.now() - t0;
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

/** When the server's log says the terraform plan process of this command started (epoch ms), after `logOffset`. */
function planStartedAt(rig: HostRig, logOffset: number): number {
  const line = rig.server
    .output()
    .slice(logOffset)
    .split('\n')
    .find((l) => l.includes('"msg":"Process started"') && l.includes('"plan"'));
  if (!line) throw new Error(`${rig.name}: no 'Process started' line of a terraform plan in the server's log`);
  return Date.parse((JSON.parse(line) as { time: string }).time);
}

/** One plan through the server on `rig`, checked: the host has the plan comment of `dir` with the plan of its one resource. */
async function planThroughServer(rig: HostRig, p: RigPull): Promise<{ toPlanStart: number; toComment: number }> {
  // Whatever the opened webhook set going ends before the measured command.
  await sleep(300);
  const logOffset = rig.server.output().length;
  const sentAt = await rig.sendComment(p, `atlantis plan -d ${p.dir}`);
  const c = await rig.answer(p, ANSWER_TIMEOUT_MS).catch((e: Error) => {
    throw new Error(`${e.message}; server log tail:\n${rig.server.output().slice(-3000)}`);
  });
  const want = new RegExp(`^Ran Plan for dir: \`${p.dir}\` workspace: \`default\``);
  if (!want.test(c.body) || !c.body.includes('Plan: 1 to add, 0 to change, 0 to destroy.'))
    throw new Error(`${rig.name}: the server's comment on #${p.number} is not the plan of ${p.dir}:\n${c.body.slice(0, 2000)}`);
  return { toPlanStart: planStartedAt(rig, logOffset) - sentAt, toComment: c.postedAt - sentAt };
}

const sorted = (xs: number[]): number[] => [...xs].sort((a, b) => a - b);
const med = (xs: number[]): number => percentile(sorted(xs), 50);
const p90 = (xs: number[]): number => percentile(sorted(xs), 90);

export async function benchHostOverhead(): Promise<{ ok: boolean }> {
  const rigs: HostRig[] = [];
  const samples = new Map<HostName, Sample[]>();
  try {
    for (const start of [githubRig, gitlabRig, giteaRig]) {
      const rig = await start();
      rigs.push(rig);
      samples.set(rig.name, []);
    }
    // Round 0 warms each server up (its process host worker starts on the first command) and is not counted.
    for (let i = 0; i <= RUNS; i++) {
      for (let k = 0; k < rigs.length; k++) {
        const rig = rigs[(i + k) % rigs.length]!;
        const p = await rig.open(i);
        const directFirst = (i + k) % 2 === 1;
        let direct = directFirst ? await directPlan(rig.cloneUrl, p.branch, p.dir) : NaN;
        const s = await planThroughServer(rig, p);
        if (!directFirst) direct = await directPlan(rig.cloneUrl, p.branch, p.dir);
        if (i > 0) samples.get(rig.name)!.push({ toPlanStart: s.toPlanStart, toComment: s.toComment, direct });
        console.log(
          `${i === 0 ? 'warm-up' : `run ${i}`} ${rig.name}: webhook->plan started ${s.toPlanStart.toFixed(0)} ms, webhook->comment ${s.toComment.toFixed(0)} ms, direct ${direct.toFixed(0)} ms`,
        );
      }
    }
  } catch (e) {
    console.log(`host-overhead FAILED: ${(e as Error).message}`);
    return { ok: false };
  } finally {
    for (const rig of rigs.reverse()) await rig.stop().catch((e: Error) => console.log(`${rig.name}: stop: ${e.message}`));
  }
  report(samples);
  return { ok: true };
}

function report(samples: Map<HostName, Sample[]>): void {
  const fig = (name: HostName) => {
    const s = samples.get(name)!;
    const a = s.map((x) => x.toPlanStart);
    const b = s.map((x) => x.toComment);
    const d = s.map((x) => x.direct);
    const o = s.map((x) => x.toComment - x.direct);
    const ab = s.map((x) => x.toComment - x.toPlanStart);
    return { a, b, d, o, ab };
  };
  const gh = fig('GitHub');
  printTable(
    `webhook -> plan per host, ${RUNS} runs each, hosts in turn (ms: median / p90; ratio: median to GitHub's in this run)`,
    [...samples.keys()].map((name) => {
      const f = fig(name);
      return {
        host: name,
        '(a) webhook->plan started': `${med(f.a).toFixed(0)} / ${p90(f.a).toFixed(0)}`,
        '(b) webhook->plan comment': `${med(f.b).toFixed(0)} / ${p90(f.b).toFixed(0)}`,
        'plan started->comment (b - a)': `${med(f.ab).toFixed(0)} / ${p90(f.ab).toFixed(0)}`,
        'direct init+plan': `${med(f.d).toFixed(0)} / ${p90(f.d).toFixed(0)}`,
        '(c) overhead (b - direct)': `${med(f.o).toFixed(0)} / ${p90(f.o).toFixed(0)}`,
        '(a) vs GitHub': `${(med(f.a) / med(gh.a)).toFixed(2)}x`,
        '(b) vs GitHub': `${(med(f.b) / med(gh.b)).toFixed(2)}x`,
        '(c) vs GitHub': `${(med(f.o) / med(gh.o)).toFixed(2)}x`,
      };
    }),
  );
}
