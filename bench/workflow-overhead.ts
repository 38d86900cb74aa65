// The server's own cost per command, measured in one run against a real server process:
// - webhook-to-plan-started: from sending `atlantis plan` to the terraform plan process start
//   (from the server's debug log);
// - overhead: wall time of the plan through the server (webhook sent -> result comment
//   posted) minus the same `terraform init` + `terraform plan` run directly on a checkout of
//   the same commit. Target: overhead under 300 ms.
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { startCli, waitForHttp } from '../test/support/cli.js';
import { terraformConfig } from '../test/support/git-repos.js';
import { TERRAFORM } from '../test/support/terraform.js';
import { createWorkflowEnv } from '../test/support/workflow-env.js';
import { benchTempDir, percentile, printTable } from './support.js';

const RUNS = 7;

function timeDirectPlan(cloneUrl: string, branch: string, dir: string): number {
  const work = benchTempDir('bench-direct-');
  execFileSync('git', ['clone', '-q', '--branch', branch, '--single-branch', cloneUrl, work]);
  const cwd = path.join(work, dir);
  const t0 = performance.now();
  execFileSync(TERRAFORM, ['init', '-no-color', '-input=false'], { cwd, stdio: 'pipe', env: { ...process.env, TF_IN_AUTOMATION: 'true' } });
  execFileSync(TERRAFORM, ['plan', '-no-color', '-input=false', '-out=direct.tfplan'], {
    cwd,
    stdio: 'pipe',
    env: { ...process.env, TF_IN_AUTOMATION: 'true' },
  });
  return performance.now() - t0;
}

export async function benchWorkflowOverhead(): Promise<{ ok: boolean }> {
  const env = await createWorkflowEnv();
  const dataDir = benchTempDir('ato-data-');
  const host = '127.0.77.1';
  const url = `http://${host}:4141`;
  const server = startCli(env.serverArgs(dataDir, host, ['--disable-autoplan', '--log-level', 'debug']));
  try {
    await waitForHttp(`${url}/healthz`);
    const rows: Array<{ toPlanStart: number; server: number; direct: number }> = [];
    for (let i = 0; i < RUNS; i++) {
      const pull = 900 + i;
      const dir = `bench${i}`;
      const branch = `bench-${i}`;
      await env.openPull(url, pull, branch, { [`${dir}/main.tf`]: terraformConfig({ marker: `b${i}` }) });
      const direct = timeDirectPlan(env.repo.cloneUrl, branch, dir);
      const logOffset = server.output().length;
      const sentAt = Date.now();
      const t0 = performance.now();
      await env.comment(url, pull, `atlantis plan -d ${dir}`);
      await env.waitForComment(pull, /^Ran Plan for dir/, { timeoutMs: 60_000, pollMs: 5 });
      const serverMs = performance.now() - t0;
      const planLine = server
        .output()
        .slice(logOffset)
        .split('\n')
        .find((l) => l.includes('"msg":"Process started"') && l.includes('"plan"'));
      const planStartedAt = planLine ? Date.parse((JSON.parse(planLine) as { time: string }).time) : NaN;
      rows.push({ toPlanStart: planStartedAt - sentAt, server: serverMs, direct });
    }
    const med = (xs: number[]) =>
      percentile(
        [...xs].sort((a, b) => a - b),
        50,
      );
    const overhead = rows.map((r) => r.server - r.direct);
    printTable(
      'plan through the server vs terraform run directly (ms)',
      rows.map((r, i) => ({
        run: i + 1,
        'webhook->plan started': r.toPlanStart.toFixed(0),
        'server wall': r.server.toFixed(0),
        'direct init+plan': r.direct.toFixed(0),
        overhead: (r.server - r.direct).toFixed(0),
      })),
    );
    const medOverhead = med(overhead);
    console.log(
      `median webhook->plan started: ${med(rows.map((r) => r.toPlanStart)).toFixed(0)} ms; median overhead: ${medOverhead.toFixed(0)} ms (target < 300 ms): ${medOverhead < 300 ? 'OK' : 'MISSED'}; ratio server/direct: ${(med(rows.map((r) => r.server)) / med(rows.map((r) => r.direct))).toFixed(2)}x`,
    );
    return { ok: medOverhead < 300 };
  } finally {
    server.child.kill('SIGTERM');
    await server.exited;
    await env.close();
  }
}
