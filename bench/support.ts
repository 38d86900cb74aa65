// Shared bits of the benchmarks: percentiles and a fixed-size latency probe run in a worker
// thread, so the client's own work does not sit on the server's event loop.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Worker } from 'node:worker_threads';

/** Temporary dirs of this bench process: removed when it exits, however it ends (a run leaves GBs of clones). */
const tempDirs = new Set<string>();
process.on('exit', () => {
  if (process.env.BENCH_KEEP_TMP) return;
  for (const d of tempDirs) rmSync(d, { recursive: true, force: true });
});

/** A new dir under the system's temp dir, removed at exit (kept with BENCH_KEEP_TMP=1, to read a failed run's logs). */
export function benchTempDir(prefix: string): string {
  const d = mkdtempSync(path.join(tmpdir(), prefix));
  tempDirs.add(d);
  return d;
}

/** Removes a dir made by benchTempDir now, when it is no longer needed (unless BENCH_KEEP_TMP). */
export function removeBenchTempDir(d: string): void {
  if (process.env.BENCH_KEEP_TMP) return;
  rmSync(d, { recursive: true, force: true });
  tempDirs.delete(d);
}

export function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return NaN;
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[i]!;
}

export interface LatencySummary {
  n: number;
  errors: number;
  p50: number;
  p90: number;
  p99: number;
  max: number;
}

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
    w.once('message', (m: { samples: number[]; errors: number }) => {
      resolve(summarize(m.samples, m.errors));
      void w.terminate();
    });
    w.once('error', reject);
  });
}

export function fmtMs(n: number): string {
  return `${n.toFixed(2)} ms`;
}

export function printTable(title: string, rows: Array<Record<string, string | number>>): void {
  console.log(`\n## ${title}`);
  console.table(rows);
}

/** A Prometheus text exposition, parsed into series name+labels -> value. */
export type Scrape = Map<string, number>;

export async function scrape(url: string): Promise<Scrape> {
  return parseScrape(await (await fetch(url)).text());
}

/** Prometheus text format: one entry per series (name and labels as written). */
export function parseScrape(text: string): Scrape {
  const out: Scrape = new Map();
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const i = line.lastIndexOf(' ');
    out.set(line.slice(0, i), Number(line.slice(i + 1)));
  }
  return out;
}

/** CPU seconds this machine has spent busy (all cores: /proc/stat minus idle and iowait). */
export function machineBusySeconds(): number {
  const f = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number);
  const total = f.slice(0, 8).reduce((a, b) => a + b, 0);
  return (total - f[3]! - f[4]!) / 100; // USER_HZ
}

/** The `n` largest increases of a counter between two scrapes, by the values of `labels`. */
export function topIncreases(before: Scrape, after: Scrape, name: string, labels: string[], n: number): Array<[string, number]> {
  const sums = new Map<string, number>();
  for (const [k, v] of after) {
    if (k.split('{')[0] !== name) continue;
    const key = labels.map((l) => new RegExp(`${l}="([^"]*)"`).exec(k)?.[1] ?? '').join(' ');
    sums.set(key, (sums.get(key) ?? 0) + v - (before.get(k) ?? 0));
  }
  return [...sums]
    .filter(([, v]) => v > 0)
    .sort((a, b) => b[1] - a[1])
    .slice(0, n);
}

/** Sum of the series of `name` whose labels contain every `match` fragment (e.g. 'code="429"'). */
export function sumSeries(s: Scrape, name: string, ...match: string[]): number {
  let total = 0;
  for (const [k, v] of s) {
    const base = k.split('{')[0];
    if (base === name && match.every((m) => k.includes(m))) total += v;
  }
  return total;
}

/**
 * Quantile of a histogram's observations between two scrapes, as the upper bound of the
 * bucket it falls in (what histogram_quantile would interpolate within).
 */
export function histogramQuantile(before: Scrape, after: Scrape, name: string, q: number, ...match: string[]): number {
  const buckets = new Map<number, number>();
  for (const [k, v] of after) {
    if (!k.startsWith(`${name}_bucket{`) || !match.every((m) => k.includes(m))) continue;
    const le = /le="([^"]+)"/.exec(k)?.[1];
    if (!le) continue;
    const bound = le === '+Inf' ? Infinity : Number(le);
    buckets.set(bound, (buckets.get(bound) ?? 0) + v - (before.get(k) ?? 0));
  }
  const sorted = [...buckets.entries()].sort((a, b) => a[0] - b[0]);
  const total = sorted.at(-1)?.[1] ?? 0;
  if (total === 0) return NaN;
  return sorted.find(([, c]) => c >= q * total)?.[0] ?? Infinity;
}
