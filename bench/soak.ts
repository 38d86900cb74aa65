// The bounded soak (issue 36): SOAK_MINUTES (default 10) of mixed commands on 2 replicas
// sharing one real redis-server, webhooks spread round-robin over them (a replica hands a PR's
// webhooks to the PR's owner). LANES pull requests at a time, each going through a life of
// its own: opened (autoplan), then a random mix of `atlantis plan`, `atlantis apply` and
// `atlantis unlock`, then closed, and a new one opened in its lane. Every SAMPLE_MS, per
// replica: RSS of the server and its process host worker, their open file descriptors, the
// job-log files and working copies in its data dir; and Redis's keys by pattern. After the
// warm-up (the first WARMUP_SHARE of the run), each figure's least-squares slope per 1,000
// commands: flat means within the bounds below. Job logs are kept under a count and an age
// small enough for the pruner to act within the run (--job-log-max-count, --job-log-retention).
// Delivery records (replay protection) are Redis keys with a 72-hour expiry: they grow with
// every webhook until their expiry by design, so they are reported apart and not judged.
import { readFileSync, readdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Redis } from 'ioredis';
import { sleep } from '../src/async.js';
import { type CliProcess, waitForHttp } from '../test/support/cli.js';
import { terraformConfig } from '../test/support/git-repos.js';
import { pullRequestPayload, sendWebhook } from '../test/support/github-standin.js';
import { type RedisServer, replicaArgs, startRedisServer } from '../test/support/redis-server.js';
import { WEBHOOK_SECRET, type WorkflowEnv, createWorkflowEnv } from '../test/support/workflow-env.js';
import { startServer } from './burst-core.js';
import { onlyLoopback, runInLoopbackNamespace } from './netns.js';
import { procStatusKiB, processHostPid } from './proc-stats.js';
import { benchTempDir, printTable } from './support.js';

const MINUTES = Number(process.env.SOAK_MINUTES ?? 10);
const LANES = Number(process.env.SOAK_LANES ?? 4);
const SAMPLE_MS = 10_000;
const WARMUP_SHARE = 0.3;
const GH_HOST = '127.0.93.100';
const host = (i: number): string => `127.0.93.${i + 1}`;

/** Most a figure may grow per 1,000 commands after the warm-up and still be flat. */
const FLAT: Record<string, number> = { 'RSS MiB': 8, fds: 3, 'job logs': 5, 'working copies': 2, 'Redis keys': 5 };

interface Replica {
  id: string;
  url: string;
  dataDir: string;
  p: CliProcess;
}

interface Sample {
  t: number;
  commands: number;
  rssMiB: number;
  fds: number;
  jobLogs: number;
  workingCopies: number;
  redisKeys: Map<string, number>;
}

function countDir(dir: string): number {
  try {
    return readdirSync(dir).length;
  } catch {
    return 0;
  }
}

function fdCount(pid: number | undefined): number {
  return pid === undefined ? 0 : countDir(`/proc/${pid}/fd`);
}

/** Keys by pattern (ids, hashes and numbers as *), and which patterns expire. */
async function redisKeys(r: Redis): Promise<{ counts: Map<string, number>; expiring: Set<string> }> {
  const counts = new Map<string, number>();
  const expiring = new Set<string>();
  let cursor = '0';
  do {
    const [next, keys] = await r.scan(cursor, 'COUNT', 1000);
    cursor = next;
    for (const k of keys) {
      const pattern = k.replace(/[0-9a-f]{8}-[0-9a-f-]{27}|[0-9a-f]{16,}|\d+/g, '*');
      counts.set(pattern, (counts.get(pattern) ?? 0) + 1);
      if (!expiring.has(pattern) && (await r.pttl(k)) > 0) expiring.add(pattern);
    }
  } while (cursor !== '0');
  return { counts, expiring };
}

/** Least-squares slope of y over x. */
function slope(xs: number[], ys: number[]): number {
  const n = xs.length;
  const mx = xs.reduce((a, b) => a + b, 0) / n;
  const my = ys.reduce((a, b) => a + b, 0) / n;
  let num = 0;
  let den = 0;
  for (let i = 0; i < n; i++) {
    num += (xs[i]! - mx) * (ys[i]! - my);
    den += (xs[i]! - mx) ** 2;
  }
  return den === 0 ? 0 : num / den;
}

/** The test repo has one author work tree: branches are made one at a time. */
let repoTurn: Promise<unknown> = Promise.resolve();
function oneAtATime<T>(fn: () => Promise<T>): Promise<T> {
  const run = repoTurn.then(fn, fn);
  repoTurn = run.catch(() => undefined);
  return run;
}

async function lane(
  env: WorkflowEnv,
  replicas: Replica[],
  lane: number,
  end: number,
  state: { pull: number; commands: number; hook: number; failures: string[] },
): Promise<void> {
  const next = (): Replica => replicas[state.hook++ % replicas.length]!;
  // One command: sent to the next replica, done once the PR gets a new comment from the bot.
  const command = async (pull: number, body: string): Promise<void> => {
    const before = env.commentsOn(pull).length;
    const r = await env.comment(next().url, pull, body);
    if (r.status !== 200) state.failures.push(`#${pull} ${body}: ${r.status} ${r.body.slice(0, 120)}`);
    await env.waitForComment(pull, /./, { after: before, timeoutMs: 180_000, pollMs: 50 });
    state.commands++;
  };
  let k = 0;
  while (Date.now() < end) {
    const pull = state.pull++;
    const dir = `soak${lane}`;
    const before = env.commentsOn(pull).length;
    const opened = await oneAtATime(() =>
      env.openPull(next().url, pull, `soak-${pull}`, { [`${dir}/main.tf`]: terraformConfig({ marker: `m${pull}` }) }),
    );
    if (opened.status !== 200) state.failures.push(`open #${pull}: ${opened.status}`);
    await env.waitForComment(pull, /./, { after: before, timeoutMs: 180_000, pollMs: 50 });
    state.commands++;
    // plan, apply and unlock in a different order each life; every life ends closed.
    const mixes = [
      ['atlantis apply'],
      ['atlantis plan', 'atlantis apply'],
      ['atlantis unlock', 'atlantis plan', 'atlantis apply'],
      ['atlantis plan', 'atlantis unlock'],
    ];
    for (const body of mixes[k++ % mixes.length]!) await command(pull, body);
    const pr = env.gh.getPull(env.repo.fullName, pull)!;
    env.gh.updatePull(env.repo.fullName, pull, { state: 'closed' });
    const payload = pullRequestPayload({
      repo: env.repo.fullName,
      cloneUrl: env.repo.cloneUrl,
      action: 'closed',
      number: pull,
      headSha: pr.headSha,
      headRef: pr.headRef,
    });
    await sendWebhook(`${next().url}/events`, 'pull_request', payload, { secret: WEBHOOK_SECRET });
  }
}

/** The soak, in this process (the namespace). Writes whether it passed to `out`. */
async function inner(out: string): Promise<void> {
  const redis: RedisServer = await startRedisServer();
  const admin = new Redis({ host: redis.host, port: redis.port, lazyConnect: true });
  await admin.connect();
  const env = await createWorkflowEnv({ ghHost: GH_HOST });
  const replicas: Replica[] = [];
  try {
    for (let i = 0; i < 2; i++) {
      const id = `r${i + 1}`;
      const dataDir = benchTempDir('ato-data-');
      const flags = [...replicaArgs(redis, id), '--job-log-max-count', '50', '--job-log-retention', '2m'];
      const p = startServer(env.serverArgs(dataDir, host(i), flags), {}, path.join(dataDir, '..', `soak-${id}-${process.pid}.log`));
      replicas.push({ id, url: `http://${host(i)}:4141`, dataDir, p });
      await waitForHttp(`${replicas[i]!.url}/healthz`, 30_000);
    }
    console.log(
      `${MINUTES} min, ${LANES} lanes, 2 replicas on redis ${redis.host}:${redis.port}; logs ${path.dirname(replicas[0]!.dataDir)}/soak-r*-${process.pid}.log`,
    );
    const state = { pull: 1, commands: 0, hook: 0, failures: [] as string[] };
    const t0 = Date.now();
    const end = t0 + MINUTES * 60_000;
    const samples: Sample[] = [];
    const expiring = new Set<string>();
    const sampler = (async () => {
      while (Date.now() < end + SAMPLE_MS) {
        const keys = await redisKeys(admin);
        for (const e of keys.expiring) expiring.add(e);
        let rss = 0;
        let fds = 0;
        let jobLogs = 0;
        let workingCopies = 0;
        for (const r of replicas) {
          const pid = r.p.child.pid!;
          const worker = processHostPid(pid);
          rss += (procStatusKiB(pid, 'VmRSS') + (worker ? procStatusKiB(worker, 'VmRSS') : 0)) / 1024;
          fds += fdCount(pid) + fdCount(worker);
          jobLogs += countDir(path.join(r.dataDir, 'jobs'));
          workingCopies += countDir(path.join(r.dataDir, 'repos', 'acme', 'infra'));
        }
        samples.push({ t: Date.now() - t0, commands: state.commands, rssMiB: rss, fds, jobLogs, workingCopies, redisKeys: keys.counts });
        await sleep(SAMPLE_MS);
      }
    })();
    await Promise.all(Array.from({ length: LANES }, (_, i) => lane(env, replicas, i, end, state)));
    await sampler;
    const after = samples.filter((s) => s.t >= WARMUP_SHARE * MINUTES * 60_000);
    const x = after.map((s) => s.commands);
    const patterns = [...new Set(samples.flatMap((s) => [...s.redisKeys.keys()]))].sort();
    const kept = patterns.filter((p) => !expiring.has(p));
    const figures: Array<[string, (s: Sample) => number]> = [
      ['RSS MiB', (s) => s.rssMiB],
      ['fds', (s) => s.fds],
      ['job logs', (s) => s.jobLogs],
      ['working copies', (s) => s.workingCopies],
      ['Redis keys', (s) => kept.reduce((n, p) => n + (s.redisKeys.get(p) ?? 0), 0)],
    ];
    const rows = figures.map(([name, f]) => {
      const per1000 = slope(x, after.map(f)) * 1000;
      return {
        figure: name,
        'at warm-up end': f(after[0]!).toFixed(0),
        'at end': f(after.at(-1)!).toFixed(0),
        'slope per 1,000 commands': per1000.toFixed(2),
        bound: FLAT[name]!,
        flat: per1000 <= FLAT[name]! ? 'yes' : 'NO',
      };
    });
    printTable(
      `soak: ${state.commands} commands in ${MINUTES} min (${(state.commands / MINUTES) | 0}/min), ${samples.length} samples, slopes after the first ${WARMUP_SHARE * 100}%`,
      rows,
    );
    printTable(
      'Redis keys by pattern (first sample after the warm-up, last sample)',
      patterns.map((p) => ({
        pattern: p,
        expires: expiring.has(p) ? 'yes (not judged)' : 'no',
        from: after[0]!.redisKeys.get(p) ?? 0,
        to: after.at(-1)!.redisKeys.get(p) ?? 0,
      })),
    );
    if (state.failures.length) console.log(`webhooks not answered 200:\n${state.failures.slice(0, 20).join('\n')}`);
    writeFileSync(out, JSON.stringify({ ok: state.failures.length === 0 && rows.every((r) => r.flat === 'yes'), rows }, null, 2));
  } finally {
    for (const r of replicas) r.p.child.kill('SIGTERM');
    await Promise.all(replicas.map((r) => r.p.exited));
    admin.disconnect();
    await env.close();
    await redis.cleanup();
  }
}

/** `make bench` entry: the soak in a loopback-only namespace (its addresses collide with no test's). */
export async function benchSoak(): Promise<{ ok: boolean }> {
  const out = path.join(benchTempDir('bench-soak-'), 'result.json');
  if (onlyLoopback()) await inner(out);
  else if ((await runInLoopbackNamespace(fileURLToPath(import.meta.url), ['--inner', out])) !== 0) return { ok: false };
  return { ok: (JSON.parse(readFileSync(out, 'utf8')) as { ok: boolean }).ok };
}

if (process.argv[2] === '--inner') {
  await inner(process.argv[3]!);
  process.exit(0);
}
