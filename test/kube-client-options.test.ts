// The Kubernetes client's optional client-side rate limit (a token bucket, driven here by a
// fake clock) and its per-request hook, against a real HTTP server on loopback.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { KubeConfig } from '@kubernetes/client-node';
import { TokenBucket, configureKubeClient, kubeRequest } from '../src/k8s/client.js';

/** A kubeconfig for a plain-HTTP server on loopback, no credentials. */
function loopbackKubeConfig(server: string): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: 'c', server, skipTLSVerify: true }],
    users: [{ name: 'u' }],
    contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
    currentContext: 'x',
  });
  return kc;
}

class FakeTime {
  t = 0;
  slept: number[] = [];
  now = (): number => this.t;
  sleep = async (ms: number): Promise<void> => {
    this.slept.push(ms);
    this.t += ms;
  };
}

test('token bucket: burst at once, then qps per second, in order', async () => {
  const time = new FakeTime();
  const b = new TokenBucket(10, 3, time);
  const order: number[] = [];
  await Promise.all([0, 1, 2, 3, 4].map((i) => b.take().then(() => order.push(i))));
  assert.deepEqual(order, [0, 1, 2, 3, 4], 'waiters are served first come, first served');
  // 3 from the burst, then one every 100 ms.
  assert.deepEqual(time.slept, [100, 100]);
  assert.equal(time.t, 200);
  // Idle time refills, up to the burst and no more.
  time.t += 10_000;
  time.slept = [];
  for (let i = 0; i < 3; i++) await b.take();
  assert.deepEqual(time.slept, []);
  await b.take();
  assert.deepEqual(time.slept, [100]);
});

test('configureKubeClient: every request reaches the hook with its method, status and duration; qps limits them', async () => {
  const server = http.createServer((req, res) => {
    res.statusCode = req.url?.includes('missing') ? 404 : req.url?.includes('busy') ? 429 : 200;
    res.setHeader('content-type', 'application/json');
    res.end('{}');
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  try {
    const kc = loopbackKubeConfig(`http://127.0.0.1:${(server.address() as AddressInfo).port}`);
    const seen: Array<{ method: string; status: number; seconds: number }> = [];
    configureKubeClient(kc, { qps: 1000, burst: 2, onResponse: (r) => seen.push(r) });
    await kubeRequest(kc, 'GET', '/api/v1/pods');
    await kubeRequest(kc, 'DELETE', '/api/v1/namespaces/a/pods/missing');
    await kubeRequest(kc, 'PATCH', '/api/v1/namespaces/a/pods/busy', { metadata: {} });
    assert.deepEqual(seen.map((s) => [s.method, s.status]), [['GET', 200], ['DELETE', 404], ['PATCH', 429]]);
    assert.ok(seen.every((s) => s.seconds >= 0 && s.seconds < 30));
    // No answer at all (connection refused) is reported as status 0.
    const closed = loopbackKubeConfig('http://127.0.0.1:1');
    const failed: number[] = [];
    configureKubeClient(closed, { onResponse: (r) => failed.push(r.status) });
    await assert.rejects(kubeRequest(closed, 'GET', '/api/v1/pods'));
    assert.deepEqual(failed, [0]);
  } finally {
    // The client's keep-alive sockets would hold the server (and this process) open.
    server.closeAllConnections();
    server.close();
  }
});
