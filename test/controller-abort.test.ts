// Stopping the controller (SIGTERM, a lost Lease) aborts its API requests in flight: a
// reconcile stuck on an API server that stopped answering returns at once, rather than after
// each request's 30 s timeout, so the process hands over and exits in time. The controller
// reaches the real API server through a loopback TCP proxy that the test turns into a black
// hole (test/support/tcp-proxy.ts).
import assert from 'node:assert/strict';
import { after, before, it } from 'node:test';
import { KubeConfig } from '@kubernetes/client-node';
import { AtlantisController } from '../src/controller/reconcile/controller.js';
import { createControllerMetrics } from '../src/controller/metrics.js';
import {
  type CapturedLog,
  atlantisDeployment,
  captureLogger,
  createAd,
  startController,
  type TestController,
} from './support/controller.js';
import { controllerTestNamespace } from './support/controller-suite.js';
import { deleteNamespace, waitFor, type TestCluster } from './support/k8s.js';
import { TcpProxy } from './support/tcp-proxy.js';

const NAME = 'stuck';
let cluster: TestCluster;
let ns: string;
let ctrl: TestController | undefined;
const proxies: TcpProxy[] = [];
const controllers: AtlantisController[] = [];

async function proxyToApiServer(host: string): Promise<TcpProxy> {
  const target = new URL(cluster.server);
  const p = new TcpProxy({ host, target: { host: target.hostname, port: Number(target.port) } });
  await p.listen();
  proxies.push(p);
  return p;
}

/**
 * Silences `p` the moment `logs` shows a reconcile of `name` starting: in this process,
 * before the reconcile sends anything, so its first request, and every one after it, is
 * never answered.
 */
function silenceOnReconcile(p: TcpProxy, logs: CapturedLog[], name: string): void {
  const push = logs.push.bind(logs);
  logs.push = (...lines) => {
    if (lines.some((l) => l.msg === 'Reconcile started' && (l.fields.atlantisDeployment as { name?: string } | undefined)?.name === name))
      p.silence();
    return push(...lines);
  };
}

/** The admin kubeconfig with the proxy as server (the API server's certificate names kubernetes.default.svc). */
function viaProxy(p: TcpProxy): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [
      { ...cluster.full.getCurrentCluster()!, name: 'via-proxy', server: `https://${p.address}`, tlsServerName: 'kubernetes.default.svc' },
    ],
    users: [cluster.full.getCurrentUser()!],
    contexts: [{ name: 'via-proxy', cluster: 'via-proxy', user: cluster.full.getCurrentUser()!.name }],
    currentContext: 'via-proxy',
  });
  return kc;
}

before(async () => {
  ({ cluster, ns } = await controllerTestNamespace('ctrl-abort', { built: false }));
});
after(async () => {
  await ctrl?.stop();
  for (const c of controllers) await c.stop();
  for (const p of proxies) await p.close();
  if (ns) await deleteNamespace(ns);
});

it('stop() while a reconcile waits on an API server that no longer answers: the request is aborted, stop returns at once', {
  timeout: 60_000,
}, async () => {
  const proxy = await proxyToApiServer('127.0.203.7');
  ctrl = await startController(viaProxy(proxy), ns);
  const logs = ctrl.logs;
  silenceOnReconcile(proxy, logs, NAME);
  await createAd(cluster.kc, atlantisDeployment(ns, NAME, { replicas: 1 }));
  await waitFor('the reconcile of the new AtlantisDeployment to start', () => proxy.mode === 'silent', { timeoutMs: 20_000 });
  await new Promise((r) => setTimeout(r, 1_000));
  assert.ok(!logs.some((l) => l.msg === 'Reconcile failed'), 'nothing has timed out yet (30 s per request)');
  const stopStarted = Date.now();
  const c = ctrl;
  ctrl = undefined;
  await c.stop();
  const stopMs = Date.now() - stopStarted;
  assert.ok(stopMs < 5_000, `stop() took ${stopMs} ms: the requests in flight were aborted, not waited for`);
  const aborted = logs.filter((l) => l.at >= stopStarted && (l.msg === 'Reconcile failed' || l.msg === 'Status write failed'));
  for (const l of aborted) assert.match(String(l.fields.error), /abort/i, `${l.msg}: ${String(l.fields.error)}`);
  assert.ok(
    logs.some((l) => l.at >= stopStarted && l.msg === 'Reconcile failed' && /abort/i.test(String(l.fields.error))),
    `a reconcile was waiting and was aborted: ${JSON.stringify(
      logs
        .filter((l) => l.level !== 'debug')
        .slice(-8)
        .map((l) => [l.msg, l.fields.error]),
    )}`,
  );
});

it('a reconcile stuck longer than the reconcile timeout is aborted, and its key retried', { timeout: 60_000 }, async () => {
  const logs: CapturedLog[] = [];
  const p = await proxyToApiServer('127.0.203.8');
  silenceOnReconcile(p, logs, 'slow');
  const c = new AtlantisController({
    kc: viaProxy(p),
    namespace: ns,
    logger: captureLogger(logs),
    metrics: createControllerMetrics(),
    workers: 2,
    reconcileTimeoutMs: 1_500,
  });
  controllers.push(c);
  await c.start();
  await createAd(cluster.kc, atlantisDeployment(ns, 'slow', { replicas: 1 }));
  const ofSlow = (l: CapturedLog) => (l.fields.atlantisDeployment as { name?: string } | undefined)?.name === 'slow';
  const failed = await waitFor('the stuck reconcile to be aborted', () => logs.find((l) => l.msg === 'Reconcile failed' && ofSlow(l)), {
    timeoutMs: 20_000,
  });
  assert.match(String(failed.fields.error), /^Reconcile aborted: reconcile timed out after 1\.5 s/);
  const started = logs.find((l) => l.msg === 'Reconcile started' && ofSlow(l))!;
  const took = failed.at - started.at;
  assert.ok(took >= 1_450 && took < 5_000, `aborted ${took} ms after it started (timeout 1.5 s; a request's own timeout is 30 s)`);
  assert.ok(Number(failed.fields.retryInMs) > 0, 'the key is retried with backoff');
});
