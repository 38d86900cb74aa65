// Shared bits of the benchmarks: percentiles and a fixed-size latency probe run in a worker
// thread, so the client's own work does not sit on the server's event loop.
import { Worker } from 'node:worker_threads';

export function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return NaN;
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[i]!;
}

export interface LatencySummary { n: number; errors: number; p50: number; p90: number; p99: number; max: number }

export function summarize(samples: number[], errors: number): LatencySummary {
  const s = [...samples].sort((a, b) => a - b);
  return { n: s.length, errors, p50: percentile(s, 50), p90: percentile(s, 90), p99: percentile(s, 99), max: s[s.length - 1] ?? NaN };
}

const PROBE = `
const { parentPort, workerData } = require('node:worker_threads');
(async () => {
  const samples = []; let errors = 0;
  const end = Date.now() + workerData.maxMs;
  for (let i = 0; i < workerData.count && Date.now() < end; i++) {
    const t0 = performance.now();
    try {
      const res = await fetch(workerData.url, { signal: AbortSignal.timeout(5000) });
      await res.arrayBuffer();
      if (res.status !== 200) errors++;
    } catch { errors++; }
    samples.push(performance.now() - t0);
    if (workerData.gapMs) await new Promise((r) => setTimeout(r, workerData.gapMs));
  }
  parentPort.postMessage({ samples, errors });
})();
`;

/** Sends up to `count` sequential GETs (bounded by maxMs) from a worker thread. */
export function probeLatency(url: string, count: number, maxMs = 60_000, gapMs = 0): Promise<LatencySummary> {
  return new Promise((resolve, reject) => {
    const w = new Worker(PROBE, { eval: true, workerData: { url, count, maxMs, gapMs } });
    w.once('message', (m: { samples: number[]; errors: number }) => { resolve(summarize(m.samples, m.errors)); void w.terminate(); });
    w.once('error', reject);
  });
}

export function fmtMs(n: number): string { return `${n.toFixed(2)} ms`; }

export function printTable(title: string, rows: Array<Record<string, string | number>>): void {
  console.log(`\n## ${title}`);
  console.table(rows);
}
