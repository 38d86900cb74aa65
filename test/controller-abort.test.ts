// Stopping the controller (SIGTERM, a lost Lease) aborts its API requests in flight: a
// reconcile stuck on an API server that stopped answering returns at once, rather than after
// each request's 30 s timeout, so the process hands over and exits in time. The controller
// reaches the real API server through a loopback TCP proxy that the test turns into a black
// hole (test/support/tcp-proxy.ts).
import assert from 'node:assert/strict';
import { after, before, it } from 'node:test';
import { KubeConfig } from '@kubernetes/client-node';
import { atlantisDeployment, createAd, createVcsSecret, ensureCrd, startController, type TestController } from './support/controller.js';
import { deleteNamespace, freshNamespace, getCluster, waitFor, type TestCluster } from './support/k8s.js';
import { TcpProxy } from './support/tcp-proxy.js';

const NAME = 'stuck';
let cluster: TestCluster;
let ns: string;
let proxy: TcpProxy;
let ctrl: TestController | undefined;

/** The admin kubeconfig with the proxy as server (the API server's certificate names kubernetes.default.svc). */
function viaProxy(): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ ...cluster.full.getCurrentCluster()!, name: 'via-proxy', server: `https://${proxy.address}`, tlsServerName: 'kubernetes.default.svc' }],
    users: [cluster.full.getCurrentUser()!],
    contexts: [{ name: 'via-proxy', cluster: 'via-proxy', user: cluster.full.getCurrentUser()!.name }],
    currentContext: 'via-proxy',
  });
  return kc;
}

before(async () => {
  cluster = await getCluster();
  await ensureCrd(cluster);
  ns = await freshNamespace('ctrl-abort');
  await createVcsSecret(cluster.kc, ns);
  const target = new URL(cluster.server);
  proxy = new TcpProxy({ host: '127.0.203.7', target: { host: target.hostname, port: Number(target.port) } });
  await proxy.listen();
});
after(async () => {
  await ctrl?.stop();
  await proxy?.close();
  if (ns) await deleteNamespace(ns);
});

it('stop() while a reconcile waits on an API server that no longer answers: the request is aborted, stop returns at once', { timeout: 60_000 }, async () => {
  ctrl = await startController(viaProxy(), ns);
  const logs = ctrl.logs;
  // The proxy goes silent the moment the controller logs that its reconcile of the new object
  // begins (in this process, before the reconcile sends anything): its first request, and
  // every one after it, is never answered.
  const push = logs.push.bind(logs);
  logs.push = (...lines) => {
    if (lines.some((l) => l.msg === 'Reconcile started' && (l.fields.atlantisDeployment as { name?: string } | undefined)?.name === NAME)) proxy.silence();
    return push(...lines);
  };
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
  assert.ok(logs.some((l) => l.at >= stopStarted && l.msg === 'Reconcile failed' && /abort/i.test(String(l.fields.error))), `a reconcile was waiting and was aborted: ${JSON.stringify(logs.filter((l) => l.level !== 'debug').slice(-8).map((l) => [l.msg, l.fields.error]))}`);
});
