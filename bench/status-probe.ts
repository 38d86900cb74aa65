// The /status latency probe of the webhook-burst bench: a worker thread that asks /status at a steady pace, so the busy bench loop does not delay its samples.
import { Worker } from 'node:worker_threads';
import { type LatencySummary, summarize } from './support.js';

const PROBE = `
const { parentPort, workerData } = require('node:worker_threads');
let stop = false;
parentPort.on('message', (m) => { if (m === 'stop') stop = true; });
(async () => {
  const at = [], ms = [], ops = [], err = [];
  const end = Date.now() + workerData.maxMs;
  while (!stop && at.length < workerData.maxCount && Date.now() < end) {
    const startedAt = Date.now();
    const t0 = performance.now();
    let body, status = 0;
    try {
      const res = await fetch(workerData.url, { signal: AbortSignal.timeout(5000) });
      body = await res.arrayBuffer();
      status = res.status;
    } catch {}
    ms.push(performance.now() - t0);
    at.push(startedAt);
    let n = -1;
    if (status === 200) { try { n = JSON.parse(Buffer.from(body).toString()).in_progress_operations; } catch {} }
    ops.push(n); err.push(status === 200 ? 0 : 1);
    if (workerData.gapMs) await new Promise((r) => setTimeout(r, workerData.gapMs));
  }
  parentPort.postMessage({ at, ms, ops, err });
})();
`;

export interface ProbeSamples {
  at: number[];
  ms: number[];
  ops: number[];
  err: number[];
}

export function startProbe(url: string, opts: { maxCount: number; maxMs: number; gapMs: number }): { stop: () => Promise<ProbeSamples> } {
  const w = new Worker(PROBE, { eval: true, workerData: { url, ...opts } });
  const done = new Promise<ProbeSamples>((resolve, reject) => {
    w.once('message', (m: ProbeSamples) => {
      resolve(m);
      void w.terminate();
    });
    w.once('error', reject);
  });
  return {
    stop: () => {
      w.postMessage('stop');
      return done;
    },
  };
}

export function window(s: ProbeSamples, from: number, to: number): LatencySummary {
  const ms: number[] = [];
  let errors = 0;
  s.at.forEach((t, i) => {
    if (t >= from && t < to) {
      ms.push(s.ms[i]!);
      errors += s.err[i]!;
    }
  });
  return summarize(ms, errors);
}
