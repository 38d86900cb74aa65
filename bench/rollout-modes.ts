// Zero-downtime rollout, three modes on the same scenario (dev/demo/scenario.ts: a long apply
// in flight, the image changed, webhooks through the Service every 200 ms for the whole
// rollout), each in its own namespace with its own controller and Service proxy:
// - embedded: the embedded store, 1 replica, maxSurge 0, no queueing: the draining pod leaves
//   the Service, so deliveries fail until its successor is Ready (the baseline);
// - embedded-queue: the same with --queue-during-drain: the draining pod stays Ready and
//   queues commands for its successor; a gap remains between its exit and the successor's
//   readiness (the successor needs its volume);
// - redis-surge: 2 replicas on a real redis-server, maxSurge 1: the new pod is Ready before
//   the old one drains, and the draining one hands webhooks to the others.
// Figures: failed deliveries, rollout duration, longest webhook answer, longest command wait
// (from the delivery to the answer comment), each also as a ratio to the embedded baseline.
// The apply runs BENCH_ROLLOUT_APPLY_SECONDS (25; the demo's is 60) to keep `make bench` short.
// Target: no terraform run killed in any mode; with Redis and surge, 0 failed deliveries and 0
// lost commands.
import os from 'node:os';
import path from 'node:path';
import { startServiceProxy } from '../dev/service-proxy/index.js';
import { type Mode, runScenario, type ScenarioResult } from '../dev/demo/scenario.js';
import { fmtMs } from '../dev/demo/figures.js';
import { startCli } from '../test/support/cli.js';
import { createVcsSecret, ensureCrd, createSharedStateKeySecret } from '../test/support/controller.js';
import { freshNamespace, getCluster, getLocalNode } from '../test/support/k8s.js';
import { startRedisServer } from '../test/support/redis-server.js';
import { WEBHOOK_SECRET, createWorkflowEnv } from '../test/support/workflow-env.js';
import { machineBusySeconds, printTable } from './support.js';

const APPLY_SECONDS = Number(process.env.BENCH_ROLLOUT_APPLY_SECONDS ?? 25);
const MODES: Array<{ mode: Mode; replicas: number; label: string }> = [
  { mode: 'embedded', replicas: 1, label: 'embedded, no queueing (baseline)' },
  { mode: 'embedded-queue', replicas: 1, label: 'embedded, --queue-during-drain' },
  { mode: 'redis-surge', replicas: 2, label: 'Redis, maxSurge 1' },
];

const ratio = (v: number, base: number): string => (base === 0 ? (v === 0 ? '1.00x' : 'n/a') : `${(v / base).toFixed(2)}x`);

export async function benchRolloutModes(): Promise<{ ok: boolean }> {
  const cluster = await getCluster();
  await ensureCrd(cluster);
  const node = await getLocalNode();
  const redis = await startRedisServer();
  const results: ScenarioResult[] = [];
  const busy0 = machineBusySeconds();
  const t0 = Date.now();
  try {
    for (const [i, m] of MODES.entries()) {
      const ns = await freshNamespace(`rollout-${m.mode}`);
      const env = await createWorkflowEnv();
      await createVcsSecret(cluster.kc, ns, env.gh.token, WEBHOOK_SECRET);
      const { ref: sharedStateKeySecretRef } = await createSharedStateKeySecret(cluster.kc, ns);
      const logPath = path.join(os.tmpdir(), `bench-rollout-${m.mode}-${process.pid}`);
      const proxy = await startServiceProxy({ kubeconfigPath: cluster.kubeconfigPath, namespace: ns, logPath: `${logPath}-proxy.log` });
      const ctrl = startCli(
        ['controller', '--kubeconfig', cluster.kubeconfigPath, '--namespace', ns, '--metrics-bind-address', `127.0.97.${i + 1}:8080`],
        {},
        { logFile: `${logPath}-controller.log` },
      );
      try {
        const r = await runScenario(
          {
            kc: cluster.kc,
            node,
            proxy,
            env,
            ns,
            redis: { host: redis.host, port: redis.port, sharedStateKeySecretRef },
            say: (msg) => console.log(`  [${m.mode}] ${msg}`),
          },
          { mode: m.mode, replicas: m.replicas, applySeconds: APPLY_SECONDS },
        );
        results.push(r);
        console.log(`  [${m.mode}] ${r.failed} failed of ${r.deliveries}, ${r.lost} lost, rollout ${r.rolloutSeconds.toFixed(1)} s`);
      } finally {
        ctrl.child.kill('SIGTERM');
        await Promise.race([ctrl.exited, new Promise((r) => setTimeout(r, 15_000))]);
        await proxy.stop();
        await env.close();
      }
    }
  } finally {
    await redis.cleanup();
  }
  const base = results[0]!;
  printTable(
    `rollout modes (apply ${APPLY_SECONDS} s, webhooks every 200 ms through the Service; ratios to the embedded baseline)`,
    results.map((r, i) => ({
      mode: MODES[i]!.label,
      replicas: r.replicas,
      deliveries: r.deliveries,
      failed: `${r.failed} (${ratio(r.failed, base.failed)})`,
      lost: r.lost,
      rollout: `${r.rolloutSeconds.toFixed(1)} s (${ratio(r.rolloutSeconds, base.rolloutSeconds)})`,
      'longest answer': `${fmtMs(r.longestAnswerMs)} (${ratio(r.longestAnswerMs, base.longestAnswerMs)})`,
      'longest command wait': `${fmtMs(r.longestCommandWaitMs)} (${ratio(r.longestCommandWaitMs, base.longestCommandWaitMs)})`,
      'tf killed': r.terraformKilled ? r.killReasons.join('; ') : 'no',
    })),
  );
  const busyS = machineBusySeconds() - busy0;
  const wallS = (Date.now() - t0) / 1000;
  console.log(
    `machine: ${os.availableParallelism()} cores, ${((busyS / wallS) * 100).toFixed(0)}% of one core busy on average (all processes), load ${os
      .loadavg()
      .map((l) => l.toFixed(1))
      .join(' ')}; ${wallS.toFixed(0)} s`,
  );
  for (const r of results) console.log(`ROLLOUT_MODE ${JSON.stringify({ ...r, timeline: undefined })}`);
  const surge = results.find((r) => r.mode === 'redis-surge')!;
  const ok = results.every((r) => !r.terraformKilled) && surge.failed === 0 && surge.lost === 0;
  return { ok };
}
