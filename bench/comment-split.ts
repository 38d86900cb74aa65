// Splitting a plan's output over the comment limit grows with the output, not faster: a 6 MB
// output against a 600 kB one, each the least CPU time of 7 splits in one run (CPU time, not
// wall time: on a busy machine a long task is preempted more often than a short one).
// Target: at most 20× the time for 10× the output (linear is 10× plus cache effects; a split
// that rescanned the output per part would take about 100×).
import { splitComment } from '../src/server/vcs/comment-split.js';
import { fmtMs, printTable } from './support.js';

function planOutput(lines: number): string {
  return `<details><summary>Show Output</summary>\n\n\`\`\`diff\n${'+ resource "x" `y` {}\n'.repeat(lines)}\`\`\`\n</details>`;
}

function fastestSplitMs(body: string): { ms: number; parts: number } {
  const times: number[] = [];
  let parts = 0;
  for (let i = 0; i < 7; i++) {
    const t0 = process.cpuUsage();
    parts = splitComment(body, { command: 'plan', maxComments: 0 }).length;
    const used = process.cpuUsage(t0);
    times.push((used.user + used.system) / 1000);
  }
  return { ms: Math.min(...times), parts };
}

export async function benchCommentSplit(): Promise<{ ok: boolean }> {
  fastestSplitMs(planOutput(30_000)); // warm-up
  const small = fastestSplitMs(planOutput(30_000));
  const large = fastestSplitMs(planOutput(300_000));
  const ratio = large.ms / small.ms;
  printTable('comment split (CPU time, least of 7)', [
    { output: '600 kB', parts: small.parts, time: fmtMs(small.ms) },
    { output: '6 MB', parts: large.parts, time: fmtMs(large.ms), 'vs 600 kB': `${ratio.toFixed(1)}×` },
  ]);
  return { ok: ratio <= 20 };
}
