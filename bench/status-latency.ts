// /status latency with 0 and with 20 running terraform processes, measured in one run.
// Target (SPEC section 3): p99 under 50 ms while terraform runs.
import { existsSync } from 'node:fs';
import { TERRAFORM, makeTerraformDir } from '../test/support/terraform.js';
import { startTestServer, waitFor } from '../test/support/server.js';
import { fmtMs, printTable, probeLatency } from './support.js';

export async function benchStatusLatency(): Promise<{ ok: boolean }> {
  if (!existsSync(TERRAFORM)) throw new Error(`terraform not found at ${TERRAFORM}`);
  const { server, url } = await startTestServer(['--terraform-interrupt-grace', '5s']);
  const N = 2000;
  await probeLatency(`${url}/status`, 200); // warm-up
  const idle = await probeLatency(`${url}/status`, N);

  const dirs = Array.from({ length: 20 }, () => makeTerraformDir(120, 1));
  const runs = dirs.map((dir, i) =>
    server.runOperation({ command: 'apply', repo: 'acme/bench', pull: i + 1, project: `p${i}` }, (op) =>
      server.runner.run({
        jobId: op.id,
        args: ['apply', '-auto-approve', '-input=false', '-no-color'],
        cwd: dir,
        logFile: server.jobLogPath(op.id),
      }),
    ),
  );
  // Measure while the 20 processes start (CPU-heavy) and then while they run.
  const starting = probeLatency(`${url}/status`, N, 60_000, 1);
  await waitFor('20 terraform processes', () => server.runner.running().length === 20, 60_000);
  const startingResult = await starting;
  const busy = await probeLatency(`${url}/status`, N);
  const running = server.runner.running().length;

  server.requestDrain('signal');
  server.requestDrain('signal'); // deadline now: interrupt them all
  await Promise.all(runs);
  await server.close();

  printTable('/status latency (sequential GETs from a worker thread)', [
    { case: 'idle', n: idle.n, errors: idle.errors, p50: fmtMs(idle.p50), p99: fmtMs(idle.p99), max: fmtMs(idle.max) },
    {
      case: '20 terraform starting',
      n: startingResult.n,
      errors: startingResult.errors,
      p50: fmtMs(startingResult.p50),
      p99: fmtMs(startingResult.p99),
      max: fmtMs(startingResult.max),
    },
    {
      case: `${running} terraform running`,
      n: busy.n,
      errors: busy.errors,
      p50: fmtMs(busy.p50),
      p99: fmtMs(busy.p99),
      max: fmtMs(busy.max),
    },
  ]);
  const ratio = busy.p99 / idle.p99;
  const worst = Math.max(busy.p99, startingResult.p99);
  console.log(`p99 ratio running/idle: ${ratio.toFixed(2)}x; worst p99 ${fmtMs(worst)} (target < 50 ms): ${worst < 50 ? 'OK' : 'MISSED'}`);
  return { ok: worst < 50 && busy.errors === 0 && idle.errors === 0 };
}
