// Controller at scale, on the real local control plane with real server processes:
// - 100 AtlantisDeployments of one replica (100 server processes on the local node): time
//   until all are Available, the controller's peak RSS, its reconcile rate;
// - a rollout of all 100 at once: per pod, the time from the moment it had no operation left
//   (its drain began on an idle server: `since` of the server's "Drain started" line) to the
//   controller's delete request (from the controller's log); target p99 under 1 s;
// - 3 idle pods: total rollout time through the drain protocol vs the same 3 pods replaced
//   by plain deletes (one at a time, each waiting for its replacement to be Ready).
// Env: BENCH_ADS (100), BENCH_CONTROLLER_LOG_LEVEL (e.g. debug: each reconcile's steps in the
// kept controller log), BENCH_POD_CPU_REQUEST (a CPU request for every server pod, e.g. 10m;
// the local node turns it into the pod cgroup's cpu.shares as kubelet does; none by default),
// BENCH_CONTROLLER_NODE_OPTIONS (NODE_OPTIONS of the controller, e.g. --cpu-prof).
import { readFileSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import path from 'node:path';
import type { V1Pod } from '@kubernetes/client-node';
import { apiPath, kubeRequestOk } from '../src/k8s/client.js';
import { EVENT_LOOP_MONITORING_PRECISION_MS } from '../src/process-metrics.js';
import { API_VERSION, type AtlantisDeployment, PLURAL } from '../src/controller/types.js';
import { startCli } from '../test/support/cli.js';
import { atlantisDeployment, createVcsSecret, ensureCrd, isReady, listPods, patchAdSpec } from '../test/support/controller.js';
import { freshNamespace, getCluster, getLocalNode, waitFor } from '../test/support/k8s.js';
import { parseJsonLog, serverLog } from '../test/support/controller-asserts.js';
import { histogramQuantile, machineBusySeconds, parseScrape, percentile, printTable, scrape, sumSeries, topIncreases } from './support.js';

const N = Number(process.env.BENCH_ADS ?? 100);
/** CPU request of each server pod (BENCH_POD_CPU_REQUEST, e.g. 10m; none by default). */
const POD_CPU = process.env.BENCH_POD_CPU_REQUEST;
const podTemplate = POD_CPU ? { podTemplate: { spec: { resources: { requests: { cpu: POD_CPU } } } } } : {};

function peakRssMiB(pid: number): number {
  const m = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) / 1024 : NaN;
}

const fmtS = (s: number) => (Number.isFinite(s) ? `${(s * 1000).toFixed(0)} ms` : s === Infinity ? '> 10 s' : 'n/a');

export async function benchControllerScale(): Promise<{ ok: boolean }> {
  const cluster = await getCluster();
  await ensureCrd(cluster);
  const node = await getLocalNode();
  const ns = await freshNamespace('bench');
  await createVcsSecret(cluster.kc, ns);
  // BENCH_CONTROLLER_LOG_LEVEL=debug: every reconcile's steps in the saved controller log.
  const logLevel = process.env.BENCH_CONTROLLER_LOG_LEVEL ? ['--log-level', process.env.BENCH_CONTROLLER_LOG_LEVEL] : [];
  const nodeOptions = process.env.BENCH_CONTROLLER_NODE_OPTIONS ? { NODE_OPTIONS: process.env.BENCH_CONTROLLER_NODE_OPTIONS } : {};
  // Its output goes to a file, not a pipe to this process: see startCli.
  const logFile = path.join(tmpdir(), `bench-controller-scale-${process.pid}.log`);
  const ctrl = startCli(
    [
      'controller',
      '--kubeconfig',
      cluster.kubeconfigPath,
      '--namespace',
      ns,
      '--metrics-bind-address',
      '127.0.98.1:8080',
      '--max-concurrent-reconciles',
      '50',
      ...logLevel,
    ],
    nodeOptions,
    { logFile },
  );
  const metricsUrl = 'http://127.0.98.1:8080/metrics';
  let maxRss = 0;
  const rssTimer = setInterval(() => {
    try {
      maxRss = Math.max(maxRss, peakRssMiB(ctrl.child.pid!));
    } catch {
      /* exited */
    }
  }, 500);
  try {
    await waitFor('controller metrics', async () => (await fetch(metricsUrl)).ok, { timeoutMs: 30_000 });
    const names = Array.from({ length: N }, (_, i) => `a${String(i).padStart(3, '0')}`);
    const t0 = Date.now();
    for (const name of names)
      await kubeRequestOk(
        cluster.kc,
        'POST',
        apiPath(API_VERSION, PLURAL, ns),
        atlantisDeployment(ns, name, { replicas: 1, ...podTemplate }),
      );
    const available = async () => {
      const list = await kubeRequestOk<{ items: AtlantisDeployment[] }>(cluster.kc, 'GET', apiPath(API_VERSION, PLURAL, ns));
      return list.items.filter(
        (a) => a.status?.conditions.some((c) => c.type === 'Available' && c.status === 'True') && a.status.readyReplicas === 1,
      );
    };
    await waitFor(`${N} AtlantisDeployments Available`, async () => (await available()).length === N, {
      timeoutMs: 900_000,
      intervalMs: 1000,
    });
    const availableS = (Date.now() - t0) / 1000;
    const reconciles = sumSeries(await scrape(metricsUrl), 'atlantis_operator_reconcile_total');

    // Roll all of them at once.
    const before = await kubeRequestOk<{ items: V1Pod[] }>(cluster.kc, 'GET', apiPath('v1', 'pods', ns));
    const oldPods = new Map(before.items.map((p) => [p.metadata!.uid!, p]));
    const logOffset = ctrl.output().length;
    const m1 = await scrape(metricsUrl);
    // Where the CPU goes: the API server shares the machine's cores with every pod here.
    const apiMetrics = async () => parseScrape(String(await kubeRequestOk(cluster.kc, 'GET', '/metrics')));
    const api1 = await apiMetrics();
    const busy1 = machineBusySeconds();
    const t1 = Date.now();
    await Promise.all(names.map((name) => patchAdSpec(cluster.kc, ns, name, { image: 'atlantis-operator:v2' })));
    await waitFor(
      'all rolled',
      async () => {
        const ps = await kubeRequestOk<{ items: V1Pod[] }>(cluster.kc, 'GET', apiPath('v1', 'pods', ns));
        return ps.items.length === N && ps.items.every((p) => !oldPods.has(p.metadata!.uid!) && isReady(p));
      },
      { timeoutMs: 900_000, intervalMs: 1000 },
    );
    const rolloutS = (Date.now() - t1) / 1000;
    const busyS = machineBusySeconds() - busy1;
    const m2 = await scrape(metricsUrl);
    const api2 = await apiMetrics();
    const apiCpuS = sumSeries(api2, 'process_cpu_seconds_total') - sumSeries(api1, 'process_cpu_seconds_total');
    const apiTop = topIncreases(api1, api2, 'apiserver_request_total', ['verb', 'resource', 'subresource'], 5);
    const requests = (m: typeof m1, ...match: string[]) =>
      sumSeries(m2, 'atlantis_operator_kube_api_requests_total', ...match) -
      sumSeries(m, 'atlantis_operator_kube_api_requests_total', ...match);
    const apiRequests = requests(m1);
    // The event-loop delay gauges cover the time since the previous scrape (m1): the rollout.
    const gc = (a: typeof m1, b: typeof m1, ...match: string[]) =>
      sumSeries(b, 'nodejs_gc_duration_seconds_sum', ...match) - sumSeries(a, 'nodejs_gc_duration_seconds_sum', ...match);
    const controllerCpuS = sumSeries(m2, 'process_cpu_seconds_total') - sumSeries(m1, 'process_cpu_seconds_total');
    const api429 = requests(m1, 'code="429"');
    const apiErrors = requests(m1, 'code="<error>"') + requests(m1, 'code="5');
    const q = (name: string, p: number, ...match: string[]) => fmtS(histogramQuantile(m1, m2, name, p, ...match));
    const deletes = new Map<string, number>();
    for (const l of parseJsonLog(ctrl.output().slice(logOffset))) {
      if (l.msg === 'Deleting pod' && typeof l.uid === 'string' && !deletes.has(l.uid)) deletes.set(l.uid, l.at);
    }
    const latencies: number[] = [];
    // Where the time goes, from the server's side: its drain's start to its "Drained" line
    // (when it answers the held /status requests), and whether the controller's request was
    // already held then.
    const toDrained: number[] = [];
    let heldAtDrain = 0;
    for (const [uid, p] of oldPods) {
      const lines = serverLog(node, ns, p.metadata!.name!, uid);
      // The last annotation drain: a container restarted by its liveness probe under load
      // leaves the earlier instance's lines (and its SIGTERM drain) in the same log.
      const i = lines.findLastIndex((l) => l.msg === 'Drain started' && l.reason === 'annotation');
      if (i < 0) continue;
      // When the drain took effect (the line itself is written after the held answer).
      const started = Date.parse(String(lines[i]!.since));
      const del = deletes.get(uid);
      if (del) latencies.push(del - started);
      const drained = lines.slice(i).find((l) => l.msg === 'Drained');
      if (drained) {
        toDrained.push(drained.at - started);
        if (Number(drained.heldStatusRequests) > 0) heldAtDrain++;
      }
    }
    latencies.sort((a, b) => a - b);
    toDrained.sort((a, b) => a - b);
    const restarted = [...oldPods.values()].filter((p) => (p.status?.containerStatuses?.[0]?.restartCount ?? 0) > 0).length;

    // 3 idle pods: drain protocol vs plain deletes.
    await kubeRequestOk(cluster.kc, 'POST', apiPath(API_VERSION, PLURAL, ns), atlantisDeployment(ns, 'three', { replicas: 3 }));
    const readyThree = async () => {
      const ps = await listPods(cluster.kc, ns, 'three');
      return ps.length === 3 && ps.every(isReady) ? ps : undefined;
    };
    await waitFor('3 pods Ready', readyThree, { timeoutMs: 120_000 });
    const t2 = Date.now();
    const three = (await listPods(cluster.kc, ns, 'three')).map((p) => p.metadata!.uid!);
    await patchAdSpec(cluster.kc, ns, 'three', { image: 'atlantis-operator:v2' });
    await waitFor(
      '3 pods rolled',
      async () => {
        const ps = await readyThree();
        return ps?.every((p) => !three.includes(p.metadata!.uid!));
      },
      { timeoutMs: 300_000, intervalMs: 100 },
    );
    const drainRolloutS = (Date.now() - t2) / 1000;
    const t3 = Date.now();
    for (const ord of [2, 1, 0]) {
      const old = (await listPods(cluster.kc, ns, 'three')).find((p) => p.metadata!.name === `three-${ord}`)!;
      await kubeRequestOk(cluster.kc, 'DELETE', apiPath('v1', 'pods', ns, `three-${ord}`));
      await waitFor(
        `three-${ord} replaced`,
        async () =>
          (await listPods(cluster.kc, ns, 'three')).some(
            (p) => p.metadata!.name === `three-${ord}` && p.metadata!.uid !== old.metadata!.uid && isReady(p),
          ),
        { timeoutMs: 120_000, intervalMs: 100 },
      );
    }
    const plainS = (Date.now() - t3) / 1000;

    const p50 = percentile(latencies, 50);
    const p99 = percentile(latencies, 99);
    printTable(`controller with ${N} AtlantisDeployments (1 replica each, real server processes)`, [
      { figure: `time until all ${N} Available`, value: `${availableS.toFixed(1)} s` },
      { figure: 'controller peak RSS', value: `${maxRss.toFixed(0)} MiB` },
      { figure: 'reconciles until Available / rate', value: `${reconciles} / ${(reconciles / availableS).toFixed(1)} per s` },
      { figure: `rollout of all ${N} at once`, value: `${rolloutS.toFixed(1)} s` },
      {
        figure: `idle drain -> delete request (n=${latencies.length})`,
        value: `p50 ${p50.toFixed(0)} ms, p99 ${p99.toFixed(0)} ms (target p99 < 1000 ms)`,
      },
      {
        figure: `  server side: drain start -> "Drained" answer (n=${toDrained.length})`,
        value: `p50 ${percentile(toDrained, 50).toFixed(0)} ms, p99 ${percentile(toDrained, 99).toFixed(0)} ms; controller's request already held: ${heldAtDrain} of ${toDrained.length}`,
      },
      {
        figure: 'rollout: /status probe duration (ok) p50 / p99',
        value: `${q('atlantis_operator_status_probe_duration_seconds', 0.5, 'result="ok"')} / ${q('atlantis_operator_status_probe_duration_seconds', 0.99, 'result="ok"')}, failed probes ${sumSeries(m2, 'atlantis_operator_status_probe_duration_seconds_count', 'result="error"') - sumSeries(m1, 'atlantis_operator_status_probe_duration_seconds_count', 'result="error"')}`,
      },
      {
        figure: 'rollout: work queue wait p50 / p99',
        value: `${q('atlantis_operator_workqueue_queue_duration_seconds', 0.5)} / ${q('atlantis_operator_workqueue_queue_duration_seconds', 0.99)}`,
      },
      {
        figure: 'rollout: reconcile duration p50 / p99',
        value: `${q('atlantis_operator_reconcile_duration_seconds', 0.5)} / ${q('atlantis_operator_reconcile_duration_seconds', 0.99)}`,
      },
      {
        figure: 'rollout: Kubernetes API requests',
        value: `${apiRequests} in ${rolloutS.toFixed(0)} s = ${(apiRequests / rolloutS).toFixed(1)} per s; 429: ${api429}; 5xx/no answer: ${apiErrors}`,
      },
      {
        figure: 'rollout: controller CPU; its event-loop delay p99 / max',
        value: `${controllerCpuS.toFixed(1)} s (${((controllerCpuS / rolloutS) * 100).toFixed(0)}% of one core); ${(sumSeries(m2, 'nodejs_eventloop_lag_p99_seconds') * 1000 - EVENT_LOOP_MONITORING_PRECISION_MS).toFixed(0)} ms / ${(sumSeries(m2, 'nodejs_eventloop_lag_max_seconds') * 1000 - EVENT_LOOP_MONITORING_PRECISION_MS).toFixed(0)} ms`,
      },
      {
        figure: 'rollout: controller GC time (all / major)',
        value: `${(gc(m1, m2) * 1000).toFixed(0)} ms / ${(gc(m1, m2, 'kind="major"') * 1000).toFixed(0)} ms`,
      },
      {
        figure: 'rollout: machine CPU busy; of it the API server',
        value: `${busyS.toFixed(1)} s of ${(rolloutS * availableParallelism()).toFixed(0)} s (${availableParallelism()} cores); ${apiCpuS.toFixed(1)} s`,
      },
      { figure: 'rollout: API server requests, most frequent', value: apiTop.map(([k, v]) => `${k.trim()} ${v}`).join('; ') },
      {
        figure: 'rollout: API request duration p50 / p99',
        value: `${q('atlantis_operator_kube_api_request_duration_seconds', 0.5)} / ${q('atlantis_operator_kube_api_request_duration_seconds', 0.99)}`,
      },
      { figure: 'rollout: server containers restarted (liveness) before the rollout', value: String(restarted) },
      { figure: '3 idle pods: drain protocol rollout', value: `${drainRolloutS.toFixed(1)} s` },
      { figure: '3 idle pods: plain deletes', value: `${plainS.toFixed(1)} s (ratio drain/plain ${(drainRolloutS / plainS).toFixed(2)}x)` },
    ]);
    return { ok: latencies.length === N && p99 < 1000 };
  } finally {
    clearInterval(rssTimer);
    ctrl.child.kill('SIGTERM');
    await ctrl.exited;
    console.log(`controller log: ${logFile}`);
    await kubeRequestOk(cluster.kc, 'DELETE', `/api/v1/namespaces/${ns}`).catch(() => undefined);
  }
}
