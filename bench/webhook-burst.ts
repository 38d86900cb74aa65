// A burst of signed webhooks against one real server process (dist/ CLI), GitHub stand-in,
// a real git repository and real terraform (terraform_data only, no provider):
// - no request lost: every webhook gets its expected HTTP status and body within GitHub's
//   10 s delivery timeout (later counts as "late": a failed delivery on GitHub's side; no
//   5xx, no connection error), the server counts every one (atlantis_webhooks_total), and every
//   accepted command gets its answer on the PR through the stand-in (result comment, final
//   commit status, :eyes: reaction), no more and no less;
// - memory: the server's peak RSS (VmHWM, plus its process host worker's) against its idle RSS
//   in the same run;
// - concurrency: terraform processes running at once, exactly from the server's own debug
//   log (Process started/finished, in event-loop order) and sampled from /proc (the
//   server's live children): never above --parallel-pool-size, and reaching it;
// - /status latency p50/p99 while the webhooks arrive and while the queued commands run,
//   against the idle baseline; target p99 under 50 ms.
//
// The mix, per PR (20 webhooks per PR for 1,000 over 50 PRs; with another ratio the list
// is cut from the end, or its no-op part is repeated):
//   command (an operation)       : pull_request opened (autoplan), `atlantis plan -d burstN`
//                                  twice, `atlantis plan` (modified projects), `atlantis unlock`
//   reply only (a comment)       : `atlantis help`, `terraform plan` (did-you-mean)
//   ignored (nothing happens)    : 2 review comments, a multi-line comment starting with
//                                  `atlantis plan`, 2 comments by the bot user itself (one is
//                                  `atlantis plan`), issue_comment edited and deleted,
//                                  pull_request labeled and edited, pull_request_review,
//                                  status, and a comment on a plain issue
// so 4 terraform project runs (init + plan) per PR: 200 runs, 400 terraform processes for
// the default 50 PRs, queued behind --parallel-pool-size 4.
// Each webhook goes on a connection of its own, as GitHub delivers them (BENCH_KEEPALIVE=1:
// over kept-alive connections instead), and counts as late without an answer within 10 s.
// Env: BENCH_WEBHOOKS (1000), BENCH_PRS (50), BENCH_POOL (4), BENCH_CONCURRENCY (50 webhooks
// in flight), BENCH_TIMEOUT_S (600: how long the commands may take after the last webhook),
// BENCH_SERVER_NODE_OPTIONS (NODE_OPTIONS of the server, e.g. a --require'd CPU profiler),
// BENCH_SERVER_CLI (another build of dist/atlantis-operator.cjs, to compare two versions).
// The server runs with --log-level debug (the exact concurrency comes from its log); its log
// is kept as <data dir>/server.log.
import { loadavg } from 'node:os';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { EVENT_LOOP_MONITORING_PRECISION_MS } from '../src/process-metrics.js';
import { type CliProcess, waitForHttp } from '../test/support/cli.js';
import { assertTerraform } from '../test/support/terraform.js';
import { createWorkflowEnv } from '../test/support/workflow-env.js';
import { type LatencySummary, benchTempDir, fmtMs, printTable, summarize } from './support.js';
import { cpuTicks, liveChildren, metricSum, procStatusKiB, processHostPid, terraformFromLog } from './proc-stats.js';
import { startProbe, window } from './status-probe.js';
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

const HOST = '127.0.203.1';
const GH_HOST = '127.0.203.2'; // the GitHub stand-in

// ---- the benchmark ---------------------------------------------------------------------------

export async function benchWebhookBurst(): Promise<{ ok: boolean }> {
  assertTerraform();
  const { WEBHOOKS, PRS, POOL, CONCURRENCY, TIMEOUT_MS, KEEPALIVE } = burstParams();
  const benchStart = Date.now();
  const loadBefore = loadavg();

  const env = await createWorkflowEnv({ ghHost: GH_HOST });
  let server: CliProcess | undefined;
  try {
    const { prs, hooks } = await createBurst(env, PRS, WEBHOOKS);
    printMix(hooks, PRS, CONCURRENCY, KEEPALIVE);

    const dataDir = benchTempDir('ato-data-');
    // startWorkflowServer's way, with more time to come up on a loaded machine.
    // BENCH_SERVER_NODE_OPTIONS: NODE_OPTIONS of the server process (e.g. a --require'd profiler).
    const nodeOptions = process.env.BENCH_SERVER_NODE_OPTIONS ? { NODE_OPTIONS: process.env.BENCH_SERVER_NODE_OPTIONS } : {};
    server = startServer(
      // --emoji-reaction eyes: off by default (as Atlantis); with it, command and help/did-you-mean comments get :eyes:.
      env.serverArgs(dataDir, HOST, ['--parallel-pool-size', String(POOL), '--log-level', 'debug', '--emoji-reaction', 'eyes']),
      nodeOptions,
      `${dataDir}/server.log`,
    );
    const url = `http://${HOST}:4141`;
    await waitForHttp(`${url}/healthz`, 60_000).catch((e: Error) => {
      throw new Error(`${e.message}\n${server!.output()}`);
    });
    const pid = server.child.pid!;

    // Idle baseline, same process, same probe settings as during the burst.
    const GAP_MS = 10; // up to ~100 GETs/s: a busy poller, without the probe becoming the load
    const warm = startProbe(`${url}/status`, { maxCount: 200, maxMs: 10_000, gapMs: GAP_MS });
    await new Promise((r) => setTimeout(r, 1_500));
    await warm.stop();
    const idleProbe = startProbe(`${url}/status`, { maxCount: 1000, maxMs: 30_000, gapMs: GAP_MS });
    await new Promise((r) => setTimeout(r, 5_000));
    const idleSamples = await idleProbe.stop();
    const idle = window(idleSamples, 0, Infinity);
    const idleRssKiB = procStatusKiB(pid, 'VmRSS');

    // Samplers: RSS every 100 ms, live children every 20 ms.
    let rssMaxKiB = 0;
    let tfMaxSampled = 0;
    let gitMaxSampled = 0;
    let childSamples = 0;
    const rssTimer = setInterval(() => {
      const v = procStatusKiB(pid, 'VmRSS');
      if (v > rssMaxKiB) rssMaxKiB = v;
    }, 100);
    let hostPid: number | undefined;
    const childTimer = setInterval(() => {
      hostPid ??= processHostPid(pid); // found once: it lives as long as the server
      const c = liveChildren(pid, hostPid);
      childSamples++;
      tfMaxSampled = Math.max(tfMaxSampled, c.get('terraform') ?? 0);
      gitMaxSampled = Math.max(gitMaxSampled, c.get('git') ?? 0);
    }, 20);

    const probe = startProbe(`${url}/status`, { maxCount: 500_000, maxMs: TIMEOUT_MS + 120_000, gapMs: GAP_MS });
    // ---- the burst: every webhook, as fast as CONCURRENCY allows --------------------------
    await metricSum(url, 'nodejs_eventloop_lag_max_seconds'); // prom-client resets the lag histogram on each scrape
    const cpu0 = cpuTicks(pid);
    const ownCpu0 = process.cpuUsage();
    const ownLag = monitorEventLoopDelay({ resolution: 10 });
    ownLag.enable();
    const sendStart = Date.now();
    const results = await sendBurst(hooks, () => url, CONCURRENCY, KEEPALIVE, sendStart);
    const sendEnd = Date.now();
    // The histogram's values include its sampling interval: what is past it is the delay.
    const intakeLagMax = (await metricSum(url, 'nodejs_eventloop_lag_max_seconds')) - EVENT_LOOP_MONITORING_PRECISION_MS / 1000;
    const intakeCpu = (cpuTicks(pid) - cpu0) / 100;
    const ownCpu = process.cpuUsage(ownCpu0);
    const ownLagMax = ownLag.max / 1e6;
    ownLag.disable();
    const rssAfterIntakeKiB = procStatusKiB(pid, 'VmRSS');

    // ---- expected answers, then wait for them (bounded) ------------------------------------
    const want = expected(hooks);
    want.reactions += want.help + want['did-you-mean']; // a reply reacts too (plugin.ts)
    const wantComments = want.comments;
    await waitForAnswers(env, want, [url], sendEnd + TIMEOUT_MS, () => running(server!));
    const doneAt = Date.now();
    const processingLagMax = (await metricSum(url, 'nodejs_eventloop_lag_max_seconds')) - EVENT_LOOP_MONITORING_PRECISION_MS / 1000;
    const burstCpu = (cpuTicks(pid) - cpu0) / 100;
    await new Promise((r) => setTimeout(r, 1_000)); // anything late or extra shows up here
    const burstSamples = await probe.stop();
    clearInterval(rssTimer);
    clearInterval(childTimer);
    hostPid ??= processHostPid(pid);
    const hostPeakKiB = hostPid ? procStatusKiB(hostPid, 'VmHWM') : 0;
    const serverPeakKiB = procStatusKiB(pid, 'VmHWM');
    const peakKiB = serverPeakKiB + hostPeakKiB;
    const endRssKiB = procStatusKiB(pid, 'VmRSS');
    const webhooksCounted = await metricSum(url, 'atlantis_webhooks_total');
    const countedByCode = (
      await Promise.all(
        ['200', '400', '500', '503'].map(async (code) => `${code}: ${await metricSum(url, 'atlantis_webhooks_total', { code })}`),
      )
    ).join(', ');
    const planOk = await metricSum(url, 'atlantis_commands_total', { command: 'plan', result: 'success' });
    const unlockOk = await metricSum(url, 'atlantis_commands_total', { command: 'unlock', result: 'success' });
    const commandsAll = await metricSum(url, 'atlantis_commands_total');
    const ghFailures = await metricSum(url, 'atlantis_github_request_failures_total');

    // ---- compare ------------------------------------------------------------------------------
    const connErrors = results.filter((r) => r.status === -1);
    const fiveXx = results.filter((r) => r.status >= 500);
    const mismatched = results
      .map((r, i) => ({ r, h: hooks[i]! }))
      .filter(({ r, h }) => r.status !== h.expect.status || !r.body.startsWith(h.expect.body));
    const { comments, got, misplaced, pending, success, eyes } = countAnswers(env, hooks, prs);
    const tf = terraformFromLog(server.output(), POOL);
    const logErrors = server
      .output()
      .split('\n')
      .filter((l) => l.startsWith('{') && /"level":"(error|warn)"/.test(l));
    // Late: no answer within GitHub's timeout (a failed delivery on GitHub, even if the server
    // did the work afterwards). Lost: anything else missing, wrong or extra.
    const late = results.filter((r) => r.status === -1 && r.error?.startsWith('no answer within')).length;
    const lost =
      mismatched.length -
      late +
      fiveXx.length +
      Math.abs(wantComments - comments.length) +
      Math.abs(want.plan - got.plan) +
      Math.abs(want.unlock - got.unlock) +
      Math.abs(want.help - got.help) +
      Math.abs(want['did-you-mean'] - got['did-you-mean']) +
      Math.abs(want.planStatuses - success) +
      Math.abs(want.planStatuses - pending) +
      Math.abs(want.reactions - eyes) +
      Math.abs(hooks.length - webhooksCounted) +
      Math.abs(want.plan - planOk) +
      Math.abs(want.unlock - unlockOk) +
      Math.abs(want.commands - commandsAll) +
      Math.abs(want.runs - tf.jobs) +
      misplaced;

    const sendMs = sendEnd - sendStart;
    const answerMs = results.map((r) => r.ms).sort((a, b) => a - b);
    const answers = summarize(answerMs, connErrors.length);
    const chk = (ok: boolean) => (ok ? 'OK' : 'MISSED');
    printTable('no request lost: expected vs recorded', [
      {
        what: `webhooks answered within ${GITHUB_TIMEOUT_MS / 1000} s (GitHub's delivery timeout) with the expected status and body`,
        expected: hooks.length,
        recorded: hooks.length - mismatched.length,
        check: chk(mismatched.length === 0),
      },
      {
        what: '5xx answers / timeouts or connection errors',
        expected: 0,
        recorded: `${fiveXx.length} / ${connErrors.length}`,
        check: chk(fiveXx.length + connErrors.length === 0),
      },
      {
        what: `webhooks counted by the server (atlantis_webhooks_total; by code ${countedByCode})`,
        expected: hooks.length,
        recorded: webhooksCounted,
        check: chk(webhooksCounted === hooks.length),
      },
      {
        what: 'commands accepted and finished (atlantis_commands_total)',
        expected: want.commands,
        recorded: commandsAll,
        check: chk(commandsAll === want.commands),
      },
      { what: 'terraform project runs (jobs in the debug log)', expected: want.runs, recorded: tf.jobs, check: chk(tf.jobs === want.runs) },
      {
        what: 'plan result comments (success)',
        expected: want.plan,
        recorded: `${got.plan} (failed: ${got.planFailed})`,
        check: chk(got.plan === want.plan),
      },
      {
        what: 'final atlantis/plan statuses (success) / pending',
        expected: `${want.planStatuses} / ${want.planStatuses}`,
        recorded: `${success} / ${pending}`,
        check: chk(success === want.planStatuses && pending === want.planStatuses),
      },
      {
        what: 'PRs whose plan comments and statuses match their own commands',
        expected: prs.length,
        recorded: prs.length - misplaced,
        check: chk(misplaced === 0),
      },
      { what: 'unlock comments', expected: want.unlock, recorded: got.unlock, check: chk(got.unlock === want.unlock) },
      {
        what: 'help / did-you-mean replies',
        expected: `${want.help} / ${want['did-you-mean']}`,
        recorded: `${got.help} / ${got['did-you-mean']}`,
        check: chk(got.help === want.help && got['did-you-mean'] === want['did-you-mean']),
      },
      {
        what: 'bot comments in all (none extra)',
        expected: wantComments,
        recorded: comments.length,
        check: chk(comments.length === wantComments),
      },
      { what: ':eyes: reactions on command comments', expected: want.reactions, recorded: eyes, check: chk(eyes === want.reactions) },
      {
        what: 'GitHub calls failed after retries / warn+error log lines',
        expected: '0 / 0',
        recorded: `${ghFailures} / ${logErrors.length}`,
        check: ghFailures + logErrors.length === 0 ? 'OK' : 'note',
      },
    ]);
    if (late > 0)
      console.log(
        `  late webhooks were sent at (s after the first): ${results
          .map((r, i) => ({ r, i }))
          .filter(({ r }) => r.status === -1)
          .map(({ r, i }) => `burst-${i}@+${(r.at / 1000).toFixed(1)}`)
          .slice(0, 40)
          .join(' ')}`,
      );
    for (const m of mismatched.slice(0, 5))
      console.log(
        `  mismatch: ${m.h.kind} on #${m.h.pull}, sent at +${(m.r.at / 1000).toFixed(1)} s: got ${m.r.status} ${JSON.stringify(m.r.body.slice(0, 120))}${m.r.error ? ` (${m.r.error})` : ''}, expected ${m.h.expect.status} ${JSON.stringify(m.h.expect.body)}`,
      );
    for (const l of logErrors.slice(0, 5)) console.log(`  server log: ${l.slice(0, 300)}`);

    const poolOk = tf.maxRunning <= POOL && tfMaxSampled <= POOL;
    const poolReached = tf.maxRunning === POOL;
    const maxOps = Math.max(0, ...burstSamples.ops);
    printTable(`concurrency (--parallel-pool-size ${POOL})`, [
      {
        measure: 'terraform processes at once, exact (server debug log, event order)',
        max: tf.maxRunning,
        pool: POOL,
        check: chk(tf.maxRunning <= POOL && poolReached),
      },
      {
        measure: `terraform processes at once, sampled (/proc children, ${childSamples} samples)`,
        max: tfMaxSampled,
        pool: POOL,
        check: chk(tfMaxSampled <= POOL),
      },
      { measure: 'git processes at once, sampled (checkouts; not pool-bound)', max: gitMaxSampled, pool: '-', check: '-' },
      { measure: 'operations in progress (/status: accepted, running or queued)', max: maxOps, pool: '-', check: '-' },
      {
        measure: `terraform processes started (init + plan per run) / time with the pool full`,
        max: `${tf.processes} / ${(tf.fullMs / 1000).toFixed(1)} s`,
        pool: '-',
        check: '-',
      },
    ]);

    const intake = window(burstSamples, sendStart, sendEnd);
    // The burst ends with its last operation (not with the wait for answers that never came).
    const lastBusy = Math.max(sendEnd, ...burstSamples.at.filter((_t, i) => burstSamples.ops[i]! > 0)) + 1;
    const burstEnd = Math.min(doneAt, lastBusy);
    const processing = window(burstSamples, sendEnd, burstEnd);
    const whole = window(burstSamples, sendStart, burstEnd);
    const lat = (c: string, s: LatencySummary) => ({
      case: c,
      n: s.n,
      errors: s.errors,
      p50: fmtMs(s.p50),
      p99: fmtMs(s.p99),
      max: fmtMs(s.max),
      'p99 vs idle': `${(s.p99 / idle.p99).toFixed(2)}x`,
    });
    printTable(`/status latency (sequential GETs from a worker thread, ${GAP_MS} ms apart)`, [
      lat('idle (before the burst)', idle),
      lat(`webhooks arriving (${(sendMs / 1000).toFixed(1)} s)`, intake),
      lat(`queued commands running (${((burstEnd - sendEnd) / 1000).toFixed(1)} s)`, processing),
      lat('whole burst', whole),
    ]);

    const mib = (k: number) => `${(k / 1024).toFixed(1)} MiB`;
    printTable('server memory (/proc/<pid>/status)', [
      { what: 'idle RSS (before the burst)', value: mib(idleRssKiB), 'vs idle': '1.00x' },
      {
        what: 'RSS when the last webhook was answered',
        value: mib(rssAfterIntakeKiB),
        'vs idle': `${(rssAfterIntakeKiB / idleRssKiB).toFixed(2)}x`,
      },
      { what: 'peak RSS (VmHWM)', value: mib(serverPeakKiB), 'vs idle': `${(serverPeakKiB / idleRssKiB).toFixed(2)}x` },
      { what: 'process host worker peak RSS (VmHWM; starts with the first child process)', value: mib(hostPeakKiB), 'vs idle': '-' },
      { what: 'peak RSS, server + process host worker', value: mib(peakKiB), 'vs idle': `${(peakKiB / idleRssKiB).toFixed(2)}x` },
      { what: 'max sampled RSS (every 100 ms)', value: mib(rssMaxKiB), 'vs idle': `${(rssMaxKiB / idleRssKiB).toFixed(2)}x` },
      { what: 'RSS after the burst', value: mib(endRssKiB), 'vs idle': `${(endRssKiB / idleRssKiB).toFixed(2)}x` },
    ]);

    console.log(
      `server event loop: max lag ${fmtMs(intakeLagMax * 1000)} while webhooks arrived, ${fmtMs(processingLagMax * 1000)} after; server CPU ${intakeCpu.toFixed(1)} s while webhooks arrived (${(sendMs / 1000).toFixed(1)} s), ${burstCpu.toFixed(1)} s for the whole burst; ` +
        `bench process (client + GitHub stand-in): CPU ${((ownCpu.user + ownCpu.system) / 1e6).toFixed(1)} s, main-thread max lag ${fmtMs(ownLagMax)}`,
    );
    const loadAfter = loadavg();
    console.log(
      `webhooks: ${hooks.length} sent in ${(sendMs / 1000).toFixed(2)} s (${(hooks.length / (sendMs / 1000)).toFixed(0)}/s), answer p50 ${fmtMs(answers.p50)} p99 ${fmtMs(answers.p99)} max ${fmtMs(answers.max)}; ` +
        `last operation finished ${((burstEnd - sendStart) / 1000).toFixed(1)} s after the first webhook (${tf.jobs} terraform runs, ${(tf.jobs / ((burstEnd - sendStart) / 1000)).toFixed(1)} runs/s)`,
    );
    console.log(
      `load average before ${loadBefore.map((x) => x.toFixed(2)).join(' ')}, after ${loadAfter.map((x) => x.toFixed(2)).join(' ')}; bench took ${((Date.now() - benchStart) / 1000).toFixed(0)} s`,
    );
    const latencyOk = whole.p99 < 50 && whole.errors === 0 && idle.errors === 0;
    console.log(
      `late (no answer within ${GITHUB_TIMEOUT_MS / 1000} s): ${late} (${chk(late === 0)}); lost: ${lost === 0 ? 'none' : `${lost} discrepancies`} (${chk(lost === 0)}); pool: max ${tf.maxRunning} exact / ${tfMaxSampled} sampled of ${POOL} (${chk(poolOk && poolReached)}); ` +
        `/status p99 during the burst ${fmtMs(whole.p99)} (target < 50 ms, ${(whole.p99 / idle.p99).toFixed(2)}x idle): ${chk(latencyOk)}; peak RSS with the process host ${mib(peakKiB)} (${(peakKiB / idleRssKiB).toFixed(2)}x idle)`,
    );
    console.log(`server log: ${dataDir}/server.log`);
    if (!running(server))
      console.log(
        `server exited during the burst (code ${server.child.exitCode}, signal ${server.child.signalCode}):\n${server.output().slice(-3000)}`,
      );
    return { ok: late === 0 && lost === 0 && poolOk && poolReached && latencyOk && running(server) };
  } finally {
    if (server && running(server)) {
      server.child.kill('SIGTERM');
      const t = setTimeout(() => server!.child.kill('SIGKILL'), 30_000);
      await server.exited;
      clearTimeout(t);
    }
    await env.close();
  }
}
