// The webhook burst of webhook-burst (same mix, same PRs, same pace; bench/burst-core.ts) on
// servers sharing one real redis-server (`--locking-db-type redis`), twice in one run:
//   (a) 1 replica,
//   (b) 3 replicas (127.0.91.1-3:4141, --replica-id r1..r3, each its own data dir) on the same
//       Redis, FLUSHALLed between (a) and (b), the webhooks spread round-robin over them (hook
//       i to replica i mod 3: a PR's webhooks land on every replica; nothing routes them yet).
// Each round has a GitHub stand-in of its own. Per round:
// - nothing lost: every webhook answered within 10 s with its expected status and body, every
//   replica counts what it got, and every command answered once on its own PR (plan, unlock,
//   help and did-you-mean comments per PR, final statuses on its head, :eyes: reactions);
// - commands (accepted operations) per second, first webhook to last operation; ratio b/a;
// - Redis work per command: `INFO stats` total_commands_processed (every command, including
//   those a Lua script or a MULTI runs) and total_reads_processed (socket reads by Redis: about
//   one per round trip, a pipeline read at once counts once) before and after the burst, minus
//   the bench's own INFO; the idle rate (5 s before the burst) beside it; the top commands
//   (`INFO commandstats`);
// - /status p50/p99 per replica over the burst (target p99 < 50 ms: missed fails the bench);
// - peak RSS per replica (VmHWM of the server plus its process host worker's).
// Env: as webhook-burst (BENCH_WEBHOOKS, BENCH_PRS, BENCH_POOL per replica, BENCH_CONCURRENCY,
// BENCH_TIMEOUT_S, BENCH_KEEPALIVE, BENCH_SERVER_CLI); BENCH_REPLICAS (3: the replicas of (b)).
// Every process it starts (redis-server, servers, probe workers) is stopped at the end, also
// on error; the servers' logs are kept in one directory it prints.
import { copyFileSync, rmSync } from 'node:fs';
import { loadavg } from 'node:os';
import path from 'node:path';
import { Redis } from 'ioredis';
import { type CliProcess, waitForHttp } from '../test/support/cli.js';
import { type RedisServer, replicaArgs, startRedisServer } from '../test/support/redis-server.js';
import { assertTerraform } from '../test/support/terraform.js';
import { type WorkflowEnv, createWorkflowEnv } from '../test/support/workflow-env.js';
import {
  GITHUB_TIMEOUT_MS,
  burstParams,
  countAnswers,
  createBurst,
  expected,
  printMix,
  running,
  sendBurst,
  startServer,
  waitForAnswers,
} from './burst-core.js';
import { metricSum, procStatusKiB, processHostPid, terraformFromLog } from './proc-stats.js';
import { type ProbeSamples, startProbe, window } from './status-probe.js';
import { type LatencySummary, benchTempDir, fmtMs, printTable } from './support.js';
import type { Hook, Pr } from './webhook-mix.js';

const GH_HOST = '127.0.91.100'; // the GitHub stand-in
const replicaHost = (k: number) => `127.0.91.${k + 1}`;
const GAP_MS = 10; // /status probe pace, as webhook-burst's
const STATUS_P99_TARGET_MS = 50;

interface Replica {
  id: string;
  url: string;
  dataDir: string;
  p: CliProcess;
}

/** Redis's counters, one INFO (one command, one read, one write). */
async function redisCounters(r: Redis): Promise<{ commands: number; reads: number; byCommand: Map<string, number> }> {
  const text = await r.info('stats', 'commandstats');
  const field = (name: string) => Number(new RegExp(`^${name}:(\\d+)`, 'm').exec(text)?.[1] ?? NaN);
  const byCommand = new Map<string, number>();
  for (const m of text.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) byCommand.set(m[1]!, Number(m[2]));
  return { commands: field('total_commands_processed'), reads: field('total_reads_processed'), byCommand };
}

async function stopAll(replicas: Replica[]): Promise<void> {
  await Promise.all(
    replicas.map(async ({ p }) => {
      if (!running(p)) return;
      p.child.kill('SIGTERM');
      const t = setTimeout(() => p.child.kill('SIGKILL'), 30_000);
      await p.exited;
      clearTimeout(t);
    }),
  );
}

/** Per PR: the bot comments of each kind on it against what its own webhooks ask for. */
function perPrMismatches(env: WorkflowEnv, hooks: Hook[], prs: Pr[]): string[] {
  const kinds: Array<[string, RegExp]> = [
    ['plan', /^Ran Plan for dir: `burst\d+` workspace: `default`[\s\S]*To \*\*apply\*\* all unapplied plans/],
    ['unlock', /^All Atlantis locks for this PR have been unlocked/],
    ['help', /^```cmake\natlantis\nTerraform Pull Request Automation/],
    ['did-you-mean', /^Did you mean to use `atlantis` instead of `terraform`\?/],
  ];
  const out: string[] = [];
  for (const pr of prs) {
    const on = env.gh.comments(env.repo.fullName, pr.number).filter((c) => c.user === 'atlantis-bot');
    for (const [kind, re] of kinds) {
      const want = hooks.filter((h) => h.pull === pr.number && h.expect.comment === kind).length;
      const got = on.filter((c) => re.test(c.body)).length;
      if (got !== want) out.push(`#${pr.number} ${kind}: ${got} of ${want}`);
    }
  }
  return out;
}

interface RoundResult {
  name: string;
  replicas: number;
  ok: boolean;
  late: number;
  lost: number;
  commands: number;
  burstS: number;
  cmdPerS: number;
  redisCmdPerCmd: number;
  readsPerCmd: number;
  idleRedisPerS: number;
  perReplica: Array<{ id: string; p99: number; peakKiB: number }>;
}

async function round(name: string, n: number, redis: RedisServer, admin: Redis, logDir: string): Promise<RoundResult> {
  const { WEBHOOKS, PRS, POOL, CONCURRENCY, TIMEOUT_MS, KEEPALIVE } = burstParams();
  console.log(`\n## ${name}: ${n} replica${n > 1 ? 's' : ''} on one Redis (${redis.host}:${redis.port})`);
  await admin.flushall();
  const env = await createWorkflowEnv({ ghHost: GH_HOST });
  const replicas: Replica[] = [];
  const probes: Array<{ stop: () => Promise<ProbeSamples> }> = [];
  try {
    const { prs, hooks } = await createBurst(env, PRS, WEBHOOKS);
    printMix(hooks, PRS, CONCURRENCY, KEEPALIVE, n > 1 ? `, round-robin over ${n} replicas` : '');
    for (let k = 0; k < n; k++) {
      const id = `r${k + 1}`;
      const dataDir = benchTempDir('ato-data-');
      // --emoji-reaction eyes: off by default (as Atlantis); with it, command and help/did-you-mean comments get :eyes:.
      const extra = ['--parallel-pool-size', String(POOL), '--log-level', 'debug', '--emoji-reaction', 'eyes', ...replicaArgs(redis, id)];
      const p = startServer(env.serverArgs(dataDir, replicaHost(k), extra), {}, `${dataDir}/server.log`);
      replicas.push({ id, url: `http://${replicaHost(k)}:4141`, dataDir, p });
    }
    for (const r of replicas)
      await Promise.race([
        waitForHttp(`${r.url}/healthz`, 60_000),
        r.p.exited.then((x) => Promise.reject(new Error(`exited before answering (code ${x.code}, signal ${x.signal})`))),
      ]).catch((e: Error) => {
        throw new Error(`${r.id}: ${e.message}\n${r.p.output().slice(-3000)}`);
      });
    const alive = () => replicas.every((r) => running(r.p));

    // Idle: /status on every replica and Redis's background rate, 5 s.
    const idleProbes = replicas.map((r) => startProbe(`${r.url}/status`, { maxCount: 1000, maxMs: 30_000, gapMs: GAP_MS }));
    probes.push(...idleProbes);
    const idle0 = await redisCounters(admin);
    const idleStart = Date.now();
    await new Promise((r) => setTimeout(r, 5_000));
    const idle1 = await redisCounters(admin);
    const idleRedisPerS = (idle1.commands - idle0.commands - 1) / ((Date.now() - idleStart) / 1000);
    const idle = await Promise.all(idleProbes.map(async (p) => window(await p.stop(), 0, Infinity)));
    probes.length = 0;

    // ---- the burst, hook i to replica i mod n ---------------------------------------------
    const burstProbes = replicas.map((r) =>
      startProbe(`${r.url}/status`, { maxCount: 500_000, maxMs: TIMEOUT_MS + 120_000, gapMs: GAP_MS }),
    );
    probes.push(...burstProbes);
    const before = await redisCounters(admin);
    const sendStart = Date.now();
    const results = await sendBurst(hooks, (i) => replicas[i % n]!.url, CONCURRENCY, KEEPALIVE, sendStart);
    const sendEnd = Date.now();
    const want = expected(hooks);
    want.reactions += want.help + want['did-you-mean']; // a reply reacts too (plugin.ts)
    await waitForAnswers(
      env,
      want,
      replicas.map((r) => r.url),
      sendEnd + TIMEOUT_MS,
      alive,
    );
    const doneAt = Date.now();
    const after = await redisCounters(admin);
    await new Promise((r) => setTimeout(r, 1_000)); // anything late or extra shows up here
    const samples = await Promise.all(burstProbes.map((p) => p.stop()));
    probes.length = 0;

    // The burst ends with its last operation on any replica.
    const lastBusy = Math.max(sendEnd, ...samples.flatMap((s) => s.at.filter((_t, i) => s.ops[i]! > 0))) + 1;
    const burstEnd = Math.min(doneAt, lastBusy);
    const burstS = (burstEnd - sendStart) / 1000;

    // ---- per replica: what it got, did, and cost ------------------------------------------
    const rows = await Promise.all(
      replicas.map(async (r, k) => {
        const pid = r.p.child.pid!;
        const hostPid = processHostPid(pid);
        const serverKiB = procStatusKiB(pid, 'VmHWM');
        const hostKiB = hostPid ? procStatusKiB(hostPid, 'VmHWM') : 0;
        const tf = terraformFromLog(r.p.output(), POOL);
        return {
          r,
          sent: hooks.filter((_h, i) => i % n === k).length,
          counted: await metricSum(r.url, 'atlantis_webhooks_total'),
          // A webhook handed to its PR's owner is counted where it landed and again by the owner.
          forwarded: await metricSum(r.url, 'atlantis_webhooks_forwarded_total'),
          commands: await metricSum(r.url, 'atlantis_commands_total'),
          tf,
          lat: window(samples[k]!, sendStart, burstEnd),
          idle: idle[k]!,
          serverKiB,
          hostKiB,
        };
      }),
    );

    // ---- compare ---------------------------------------------------------------------------
    const connErrors = results.filter((x) => x.status === -1);
    const fiveXx = results.filter((x) => x.status >= 500);
    const late = results.filter((x) => x.status === -1 && x.error?.startsWith('no answer within')).length;
    const mismatched = results
      .map((x, i) => ({ x, h: hooks[i]! }))
      .filter(({ x, h }) => x.status !== h.expect.status || !x.body.startsWith(h.expect.body));
    const { comments, got, misplaced, pending, success, eyes } = countAnswers(env, hooks, prs);
    const perPr = perPrMismatches(env, hooks, prs);
    const counted = rows.reduce((s, x) => s + x.counted, 0);
    const forwarded = rows.reduce((s, x) => s + x.forwarded, 0);
    const commandsAll = rows.reduce((s, x) => s + x.commands, 0);
    const jobs = rows.reduce((s, x) => s + x.tf.jobs, 0);
    const lost =
      mismatched.length -
      late +
      fiveXx.length +
      Math.abs(want.comments - comments.length) +
      Math.abs(want.plan - got.plan) +
      Math.abs(want.unlock - got.unlock) +
      Math.abs(want.help - got.help) +
      Math.abs(want['did-you-mean'] - got['did-you-mean']) +
      Math.abs(want.planStatuses - success) +
      Math.abs(want.planStatuses - pending) +
      Math.abs(want.reactions - eyes) +
      Math.abs(hooks.length + forwarded - counted) +
      Math.abs(want.commands - commandsAll) +
      Math.abs(want.runs - jobs) +
      misplaced +
      perPr.length;
    const chk = (ok: boolean) => (ok ? 'OK' : 'MISSED');
    printTable(`${name}: no request lost, expected vs recorded`, [
      {
        what: `webhooks answered within ${GITHUB_TIMEOUT_MS / 1000} s with the expected status and body (5xx / no answer or connection error)`,
        expected: hooks.length,
        recorded: `${hooks.length - mismatched.length} (${fiveXx.length} / ${connErrors.length})`,
        check: chk(mismatched.length === 0),
      },
      {
        what: 'webhooks counted by the replicas (atlantis_webhooks_total), handed to the owner ones twice',
        expected: `${hooks.length} + ${forwarded}`,
        recorded: counted,
        check: chk(counted === hooks.length + forwarded),
      },
      {
        what: 'commands finished (atlantis_commands_total) / terraform project runs (debug logs)',
        expected: `${want.commands} / ${want.runs}`,
        recorded: `${commandsAll} / ${jobs}`,
        check: chk(commandsAll === want.commands && jobs === want.runs),
      },
      {
        what: 'plan (failed) / unlock / help / did-you-mean comments',
        expected: `${want.plan} (0) / ${want.unlock} / ${want.help} / ${want['did-you-mean']}`,
        recorded: `${got.plan} (${got.planFailed}) / ${got.unlock} / ${got.help} / ${got['did-you-mean']}`,
        check: chk(
          got.plan === want.plan && got.unlock === want.unlock && got.help === want.help && got['did-you-mean'] === want['did-you-mean'],
        ),
      },
      {
        what: 'PRs with every answer once, on the PR and its head commit (comments by kind, statuses)',
        expected: prs.length,
        recorded: prs.length - new Set([...perPr.map((m) => m.split(' ')[0])]).size - misplaced,
        check: chk(perPr.length === 0 && misplaced === 0),
      },
      {
        what: 'bot comments in all / final statuses (success) and pending / :eyes: reactions',
        expected: `${want.comments} / ${want.planStatuses} and ${want.planStatuses} / ${want.reactions}`,
        recorded: `${comments.length} / ${success} and ${pending} / ${eyes}`,
        check: chk(
          comments.length === want.comments && success === want.planStatuses && pending === want.planStatuses && eyes === want.reactions,
        ),
      },
    ]);
    for (const m of mismatched.slice(0, 5))
      console.log(
        `  mismatch: ${m.h.kind} on #${m.h.pull} to ${replicas[hooks.indexOf(m.h) % n]!.id}: got ${m.x.status} ${JSON.stringify(m.x.body.slice(0, 120))}${m.x.error ? ` (${m.x.error})` : ''}, expected ${m.h.expect.status} ${JSON.stringify(m.h.expect.body)}`,
      );
    for (const m of perPr.slice(0, 10)) console.log(`  per PR: ${m}`);

    const mib = (k: number) => `${(k / 1024).toFixed(1)} MiB`;
    const lat = (s: LatencySummary) => `${fmtMs(s.p50)} / ${fmtMs(s.p99)} / ${fmtMs(s.max)}`;
    printTable(`${name}: per replica (/status: sequential GETs from a worker thread, ${GAP_MS} ms apart)`, [
      ...rows.map((x) => ({
        replica: `${x.r.id} ${x.r.url}`,
        'webhooks sent / counted': `${x.sent} / ${x.counted}`,
        'commands / terraform runs': `${x.commands} / ${x.tf.jobs}`,
        'tf at once (pool)': `${x.tf.maxRunning} (${POOL})`,
        '/status idle p99': fmtMs(x.idle.p99),
        '/status burst p50 / p99 / max': lat(x.lat),
        'n (errors)': `${x.lat.n} (${x.lat.errors})`,
        'peak RSS server + host': `${mib(x.serverKiB + x.hostKiB)} (${mib(x.serverKiB)} + ${mib(x.hostKiB)})`,
        check: chk(x.lat.p99 < STATUS_P99_TARGET_MS && x.lat.errors === 0),
      })),
    ]);

    // Redis: the counters moved by the burst, less the bench's own INFO.
    const redisCmds = after.commands - before.commands - 1;
    const reads = after.reads - before.reads - 1;
    const top = [...after.byCommand]
      .map(([c, v]) => [c, v - (before.byCommand.get(c) ?? 0) - (c === 'info' ? 1 : 0)] as const)
      .filter(([, v]) => v > 0)
      .sort((x, y) => y[1] - x[1])
      .slice(0, 8)
      .map(([c, v]) => `${c} ${v} (${(v / want.commands).toFixed(1)})`)
      .join(', ');
    const waitS = (doneAt - sendStart) / 1000;
    console.log(
      `${name}: ${want.commands} commands (${want.runs} terraform runs) in ${burstS.toFixed(1)} s, first webhook to last operation: ${(want.commands / burstS).toFixed(2)} commands/s; ` +
        `webhooks sent in ${((sendEnd - sendStart) / 1000).toFixed(2)} s (${(hooks.length / ((sendEnd - sendStart) / 1000)).toFixed(0)}/s)`,
    );
    console.log(
      `${name}: Redis over ${waitS.toFixed(1)} s: ${redisCmds} commands processed (${(redisCmds / want.commands).toFixed(1)} per command), ` +
        `${reads} socket reads (~round trips; ${(reads / want.commands).toFixed(1)} per command); idle background ${idleRedisPerS.toFixed(1)} commands/s ` +
        `(~${((idleRedisPerS * waitS) / want.commands).toFixed(1)} per command of it over the burst); top (per command): ${top}`,
    );
    const latOk = rows.every((x) => x.lat.p99 < STATUS_P99_TARGET_MS && x.lat.errors === 0);
    if (!alive())
      for (const r of replicas.filter((x) => !running(x.p)))
        console.log(
          `${r.id} exited during the burst (code ${r.p.child.exitCode}, signal ${r.p.child.signalCode}):\n${r.p.output().slice(-3000)}`,
        );
    return {
      name,
      replicas: n,
      ok: late === 0 && lost === 0 && latOk && alive(),
      late,
      lost,
      commands: want.commands,
      burstS,
      cmdPerS: want.commands / burstS,
      redisCmdPerCmd: redisCmds / want.commands,
      readsPerCmd: reads / want.commands,
      idleRedisPerS,
      perReplica: rows.map((x) => ({ id: x.r.id, p99: x.lat.p99, peakKiB: x.serverKiB + x.hostKiB })),
    };
  } finally {
    await Promise.allSettled(probes.map((p) => p.stop()));
    await stopAll(replicas);
    await env.close();
    for (const r of replicas) {
      try {
        copyFileSync(`${r.dataDir}/server.log`, path.join(logDir, `${name}-${r.id}.log`));
      } catch {
        /* no log: it did not start */
      }
      rmSync(r.dataDir, { recursive: true, force: true });
    }
  }
}

export async function benchReplicasBurst(): Promise<{ ok: boolean }> {
  assertTerraform();
  burstParams(); // fail fast on bad BENCH_* values
  const N = Number(process.env.BENCH_REPLICAS ?? 3);
  if (!(N >= 2 && N <= 250)) throw new Error('need 2 <= BENCH_REPLICAS <= 250');
  const benchStart = Date.now();
  const loadBefore = loadavg();
  const logDir = benchTempDir('ato-replicas-burst-');
  const redis = await startRedisServer();
  const admin = new Redis({ host: redis.host, port: redis.port, lazyConnect: true, maxRetriesPerRequest: 1 });
  try {
    await admin.connect();
    const a = await round('(a)', 1, redis, admin, logDir);
    const b = await round('(b)', N, redis, admin, logDir);
    const mib = (k: number) => `${(k / 1024).toFixed(1)} MiB`;
    printTable('shared state (Redis): 1 replica against 3', [
      ...[a, b].map((x) => ({
        round: `${x.name} ${x.replicas} replica${x.replicas > 1 ? 's' : ''}`,
        'late / lost': `${x.late} / ${x.lost}`,
        'commands/s': `${x.cmdPerS.toFixed(2)} (${x.commands} in ${x.burstS.toFixed(1)} s)`,
        'vs (a)': `${(x.cmdPerS / a.cmdPerS).toFixed(2)}x`,
        'Redis commands / round trips per command': `${x.redisCmdPerCmd.toFixed(1)} / ${x.readsPerCmd.toFixed(1)}`,
        '/status p99 per replica': x.perReplica.map((r) => `${r.id} ${fmtMs(r.p99)}`).join(', '),
        'peak RSS per replica (with host)': x.perReplica.map((r) => `${r.id} ${mib(r.peakKiB)}`).join(', '),
        check: x.ok ? 'OK' : 'MISSED',
      })),
    ]);
    const loadAfter = loadavg();
    console.log(
      `commands/s ratio (b)/(a): ${(b.cmdPerS / a.cmdPerS).toFixed(2)}x; /status p99 target < ${STATUS_P99_TARGET_MS} ms on every replica: ${a.ok && b.ok ? 'OK' : 'MISSED'}; ` +
        `load average before ${loadBefore.map((x) => x.toFixed(2)).join(' ')}, after ${loadAfter.map((x) => x.toFixed(2)).join(' ')}; bench took ${((Date.now() - benchStart) / 1000).toFixed(0)} s`,
    );
    console.log(`server logs: ${logDir}`);
    return { ok: a.ok && b.ok };
  } finally {
    admin.disconnect();
    await redis.cleanup();
  }
}
