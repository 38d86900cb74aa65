// Peak memory of a server's whole process tree, sampled from a worker thread (so the bench's
// own work, the GitHub stand-in and the provider mirror, never delays a sample): every
// process in the server's cgroup, its VmRSS from /proc, summed by kind. The server process
// itself (and our process host's worker, a node child of it) is "server"; terraform, its
// providers, git and the rest are the children. Sums of RSS count shared pages (terraform's
// and the provider's text) once per process, the same way for both servers.
import { Worker } from 'node:worker_threads';

export interface TreePeaks {
  /** Peak of the server's own processes' RSS summed (the server; ours also its process host worker), MiB. */
  serverMiB: number;
  /** Peak of the whole tree's RSS summed, MiB. */
  treeMiB: number;
  /** Peak RSS of all terraform processes together, and of all provider plugin processes, MiB. */
  terraformMiB: number;
  providerMiB: number;
  /** Most processes alive at once in the tree. */
  maxProcesses: number;
  samples: number;
}

const SAMPLER = `
const { parentPort, workerData } = require('node:worker_threads');
const fs = require('node:fs');
const { procsFile, serverPid, intervalMs } = workerData;
let peaks;
const reset = () => (peaks = { serverMiB: 0, treeMiB: 0, terraformMiB: 0, providerMiB: 0, maxProcesses: 0, samples: 0 });
reset();
// Read afresh at every sample: a child between fork and exec still shows its parent's name,
// and a terraform that execs its provider changes name.
function kind(pid) {
  if (pid === serverPid) return 'server';
  let stat;
  try { stat = fs.readFileSync('/proc/' + pid + '/stat', 'utf8'); } catch { return undefined; }
  const comm = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
  const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
  // Our process host worker: a node process the server forked.
  if (ppid === serverPid && comm === 'node') return 'server';
  if (comm.startsWith('terraform-prov')) return 'provider';
  if (comm === 'terraform') return 'terraform';
  return 'other';
}
function sample() {
  let pids;
  try { pids = fs.readFileSync(procsFile, 'utf8').split('\\n').filter(Boolean).map(Number); } catch { return; }
  const sum = { server: 0, terraform: 0, provider: 0, other: 0 };
  let n = 0;
  for (const pid of pids) {
    let s;
    try { s = fs.readFileSync('/proc/' + pid + '/status', 'utf8'); } catch { continue; }
    const m = /VmRSS:\\s+(\\d+) kB/.exec(s);
    if (!m) continue;
    const k = kind(pid);
    if (!k) continue;
    sum[k] += Number(m[1]) / 1024;
    n++;
  }
  const total = sum.server + sum.terraform + sum.provider + sum.other;
  peaks.serverMiB = Math.max(peaks.serverMiB, sum.server);
  peaks.treeMiB = Math.max(peaks.treeMiB, total);
  peaks.terraformMiB = Math.max(peaks.terraformMiB, sum.terraform);
  peaks.providerMiB = Math.max(peaks.providerMiB, sum.provider);
  peaks.maxProcesses = Math.max(peaks.maxProcesses, n);
  peaks.samples++;
}
const timer = setInterval(sample, intervalMs);
parentPort.on('message', (m) => {
  if (m === 'take' || m === 'stop') {
    sample();
    parentPort.postMessage({ ...peaks });
    reset();
    if (m === 'stop') clearInterval(timer);
  }
});
`;

export class TreeSampler {
  private readonly worker: Worker;

  constructor(procsFile: string, serverPid: number, intervalMs = 50) {
    this.worker = new Worker(SAMPLER, { eval: true, workerData: { procsFile, serverPid, intervalMs } });
  }

  /** Peaks since the last take (or the start); starts a new window. */
  take(): Promise<TreePeaks> {
    return this.ask('take');
  }

  async stop(): Promise<TreePeaks> {
    const p = await this.ask('stop');
    await this.worker.terminate();
    return p;
  }

  private ask(m: 'take' | 'stop'): Promise<TreePeaks> {
    return new Promise((resolve, reject) => {
      this.worker.once('message', resolve);
      this.worker.once('error', reject);
      this.worker.postMessage(m);
    });
  }
}
