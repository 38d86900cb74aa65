// The serviceProxy option of dev/stack.ts: a stack of its own (not the shared one) that starts
// the Service proxy with the node, logs it to the cluster dir, and stops it with the rest.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { kubeRequestOk } from '../src/k8s/client.js';
import { kubeConfigFromFile } from '../src/k8s/kubeconfig.js';
import { type Stack, startStack } from '../dev/stack.js';
import { waitFor } from './support/k8s.js';

const STAND_IN = path.join(path.dirname(fileURLToPath(import.meta.url)), 'fixtures/local-node/stand-in.mjs');
const NS = 'web';

let stack: Stack | undefined;
after(async () => {
  await stack?.stop();
});

test("startStack({ serviceProxy }) proxies the namespace's Services and stops the proxy with the stack", async () => {
  stack = await startStack({ node: { crashBackoffBaseMs: 1_000 }, serviceProxy: { namespace: NS, listenPorts: 'free' } });
  const proxy = stack.serviceProxy;
  assert.ok(proxy);
  assert.equal(stack.serviceProxyLog, path.join(stack.cluster.dir, 'logs', 'service-proxy.log'));
  const kc = kubeConfigFromFile(stack.cluster.kubeconfigPath);
  // The namespace is created after the proxy started watching it.
  await kubeRequestOk(kc, 'POST', '/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: NS } });
  await waitFor('the default ServiceAccount', () => kubeRequestOk(kc, 'GET', `/api/v1/namespaces/${NS}/serviceaccounts/default`), {
    timeoutMs: 20_000,
  });
  await kubeRequestOk(kc, 'POST', `/api/v1/namespaces/${NS}/services`, {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name: 'web' },
    spec: { selector: { app: 'web' }, ports: [{ name: 'http', port: 80, targetPort: 18080 }] },
  });
  await kubeRequestOk(kc, 'POST', `/api/v1/namespaces/${NS}/pods`, {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: 'web-0', labels: { app: 'web' } },
    spec: {
      containers: [
        {
          name: 'main',
          image: 'atlantis-operator:dev',
          command: ['node', STAND_IN],
          args: ['--port', '18080'],
          readinessProbe: { httpGet: { path: '/readyz', port: 18080 }, periodSeconds: 1 },
        },
      ],
    },
  });
  await waitFor('web-0 an endpoint of web', () => proxy.endpoints('web').length === 1, { timeoutMs: 30_000, intervalMs: 50 });
  const addr = proxy.addressOf('web', 80);
  assert.ok(addr, 'listening');
  assert.notEqual(addr.port, 80, "listenPorts 'free': a free port");
  const res = await fetch(`http://${addr.host}:${addr.port}/status`, {
    signal: AbortSignal.timeout(5_000),
    headers: { connection: 'close' },
  });
  assert.equal(((await res.json()) as { version: string }).version, 'stand-in');
  assert.deepEqual(proxy.stats('web'), { forwarded: 1, refused: 0, failed: 0, perPod: { 'web-0': 1 } });

  // keepDir: the log is read after the stop (the dir is removed below)
  await stack.stop({ keepDir: true });
  // written asynchronously: wait for the last line
  const log = await waitFor('the proxy stopped line', () => {
    const text = fs.readFileSync(stack!.serviceProxyLog, 'utf8');
    return text.includes('"msg":"Service proxy stopped"') ? text : undefined;
  });
  assert.match(log, /"msg":"Service endpoints changed".*"podName":"web-0"/);
  const probe = net.connect(addr);
  const code = await new Promise<string>((r) => {
    probe.on('error', (e: NodeJS.ErrnoException) => r(e.code ?? ''));
    probe.on('connect', () => r('connected'));
  });
  probe.destroy();
  assert.equal(code, 'ECONNREFUSED', 'stopped with the stack');
  fs.rmSync(stack.cluster.dir, { recursive: true, force: true });
});
