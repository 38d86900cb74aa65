// The Service proxy (dev/service-proxy/) on the real local cluster: a Service over two pods of
// the local node, each a small HTTP server answering its own name. Requests through the proxy
// reach both; one pod made unready -> new connections reach only the other while an open one
// stays with it; the other deleted -> a connection fails at once with a reset; the Service
// deleted -> nothing listens. Order is judged from the proxy's own log (its endpoint-change
// lines and, at debug level, one line per connection) and from the pods' answers.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import type { V1Pod } from '@kubernetes/client-node';
import { kubeRequestOk } from '../src/k8s/client.js';
import { type ServiceProxy, startServiceProxy } from '../dev/service-proxy/index.js';
import { deleteNamespace, freshNamespace, getCluster, waitFor } from './support/k8s.js';

const POD_PORT = 18081;
const SVC_PORT = 8080;
const RAW_PORT = 8081;

// The pod's program: its name on every path but /readyz (200 until /unready is asked for);
// on SIGTERM it keeps serving 1.5 s, so the pod is terminating while still Ready.
const SERVER = `
const http = require('node:http');
let ready = true;
const srv = http.createServer((req, res) => {
  if (req.url === '/readyz') { res.writeHead(ready ? 200 : 503); res.end(); return; }
  if (req.url === '/unready') { ready = false; res.end('ok'); return; }
  res.end(process.env.POD_NAME);
});
srv.keepAliveTimeout = 0;
srv.listen(${POD_PORT}, process.env.ATLANTIS_BIND_ADDRESS);
process.on('SIGTERM', () => setTimeout(() => process.exit(0), 1500));
`;

function podSpec(name: string): V1Pod {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, labels: { app: 'web' } },
    spec: {
      terminationGracePeriodSeconds: 10,
      containers: [
        {
          name: 'main',
          image: 'atlantis-operator:dev',
          command: ['node', '-e', SERVER],
          env: [{ name: 'POD_NAME', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } }],
          ports: [{ name: 'http', containerPort: POD_PORT }],
          readinessProbe: { httpGet: { path: '/readyz', port: 'http' }, periodSeconds: 1, failureThreshold: 1 },
        },
      ],
    },
  };
}

type Answer = { ok: true; body: string } | { ok: false; kind: string };

/**
 * One HTTP/1.1 request on `sock` (a new connection when not given): the body, or how it
 * failed: the socket error's code (e.g. ECONNRESET), 'closed', or 'timeout' after timeoutMs.
 */
function ask(to: { host: string; port: number } | net.Socket, timeoutMs = 1_000): Promise<Answer> {
  const sock = to instanceof net.Socket ? to : net.connect(to);
  return new Promise<Answer>((resolve) => {
    let buf = '';
    const done = (a: Answer) => {
      clearTimeout(timer);
      sock.off('data', onData);
      sock.off('error', onError);
      sock.off('close', onClose);
      resolve(a);
    };
    const timer = setTimeout(() => done({ ok: false, kind: 'timeout' }), timeoutMs);
    const onData = (d: Buffer) => {
      buf += d.toString();
      const head = buf.indexOf('\r\n\r\n');
      const len = /content-length: *(\d+)/i.exec(buf.slice(0, head));
      if (head >= 0 && len && buf.length >= head + 4 + Number(len[1]))
        done({ ok: true, body: buf.slice(head + 4, head + 4 + Number(len[1])) });
    };
    const onError = (e: NodeJS.ErrnoException) => done({ ok: false, kind: e.code ?? e.message });
    const onClose = () => done({ ok: false, kind: 'closed' });
    sock.on('data', onData);
    sock.on('error', onError);
    sock.on('close', onClose);
    sock.write(`GET / HTTP/1.1\r\nHost: web\r\n\r\n`);
  });
}

/** A new connection per request, as GitHub's deliveries come. */
async function askOnce(to: { host: string; port: number }): Promise<Answer> {
  const sock = net.connect(to);
  try {
    return await ask(sock);
  } finally {
    sock.destroy();
  }
}

interface LogLine {
  msg: string;
  time: string;
  seq?: number;
  service?: string;
  endpoint?: string;
  endpoints?: Array<{ podName: string; servicePort: number }>;
  removed?: Array<{ podName: string; reason: string }>;
}

let proxy: ServiceProxy | undefined;
let ns = '';
const logDir = fs.mkdtempSync(path.join(os.tmpdir(), 'svcproxy-'));
let passed = false;
after(async () => {
  await proxy?.stop();
  if (ns) await deleteNamespace(ns);
  // the proxy's log is kept for a post-mortem when the test failed
  if (passed) fs.rmSync(logDir, { recursive: true, force: true });
  else process.stderr.write(`service-proxy.test: the proxy's log is in ${logDir}\n`);
});

test('a Service through the proxy: both pods, then the Ready one only, then a reset at once, then nothing', async () => {
  const c = await getCluster();
  ns = await freshNamespace('svcproxy');
  const logPath = path.join(logDir, 'service-proxy.log');
  /** the complete lines of the proxy's log so far (a line still being written is left for the next read) */
  const lines = (): LogLine[] =>
    fs
      .readFileSync(logPath, 'utf8')
      .split('\n')
      .slice(0, -1)
      .map((l) => JSON.parse(l) as LogLine);
  const changes = () => lines().filter((l) => l.msg === 'Service endpoints changed' && l.service === 'web');
  const names = (l: LogLine) => [...new Set((l.endpoints ?? []).map((e) => e.podName))].sort();
  /** waits for the first change line after `afterSeq` that satisfies `pred` */
  const change = (what: string, afterSeq: number, pred: (l: LogLine) => boolean) =>
    waitFor(what, () => changes().find((l) => (l.seq ?? 0) > afterSeq && pred(l)), { timeoutMs: 30_000, intervalMs: 50 });

  proxy = await startServiceProxy({ client: c.kc, namespace: ns, logPath, logLevel: 'debug' });
  await kubeRequestOk(c.kc, 'POST', `/api/v1/namespaces/${ns}/services`, {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name: 'web' },
    spec: {
      selector: { app: 'web' },
      ports: [
        { name: 'http', port: SVC_PORT, targetPort: 'http' },
        { name: 'raw', port: RAW_PORT, targetPort: POD_PORT },
      ],
    },
  });
  const svc = await waitFor('the proxy listening for web:http', () => proxy!.addressOf('web', 'http'), {
    timeoutMs: 10_000,
    intervalMs: 20,
  });
  assert.match(svc.host, /^127\.2\.\d+\.\d+$/, 'an address of the proxy range');
  assert.equal(svc.port, SVC_PORT);
  assert.deepEqual(await askOnce(svc), { ok: false, kind: 'ECONNRESET' }, 'no pods yet: reset');

  for (const name of ['web-a', 'web-b']) await kubeRequestOk(c.kc, 'POST', `/api/v1/namespaces/${ns}/pods`, podSpec(name));
  const both = await change('web-a and web-b as endpoints', 0, (l) => names(l).join() === 'web-a,web-b');
  assert.deepEqual(
    proxy.endpoints('web').map((e) => `${e.servicePort}->${e.podName}:${e.port}`),
    ['8080->web-a:18081', '8080->web-b:18081', '8081->web-a:18081', '8081->web-b:18081'],
  );

  // Both reach: random picks, so up to 40 new connections (both seen long before, but for 2^-39).
  const seen = new Set<string>();
  for (let i = 0; i < 40 && seen.size < 2; i++) {
    const a = await askOnce(svc);
    assert.equal(a.ok, true, JSON.stringify(a));
    if (a.ok) seen.add(a.body);
  }
  assert.deepEqual([...seen].sort(), ['web-a', 'web-b']);
  const raw = await askOnce(proxy.addressOf('web', RAW_PORT)!);
  assert.ok(raw.ok && ['web-a', 'web-b'].includes(raw.body), `the numeric-targetPort port answers: ${JSON.stringify(raw)}`);

  // An open connection that web-a serves (up to 40 tries to land one there).
  let kept: net.Socket | undefined;
  for (let i = 0; i < 40 && !kept; i++) {
    const s = net.connect(svc);
    const a = await ask(s);
    if (a.ok && a.body === 'web-a') kept = s;
    else s.destroy();
  }
  assert.ok(kept, 'a connection landed on web-a');
  kept.on('error', () => {}); // reset by stop() at the end

  // web-a goes unready (its readiness probe fails): the proxy drops it from the endpoints.
  const podA = await kubeRequestOk<V1Pod>(c.kc, 'GET', `/api/v1/namespaces/${ns}/pods/web-a`);
  const r = await fetch(`http://${podA.status!.podIP}:${POD_PORT}/unready`, { signal: AbortSignal.timeout(5_000) });
  assert.equal(r.status, 200);
  const onlyB = await change('web-a removed as not ready', both.seq!, (l) => names(l).join() === 'web-b');
  assert.deepEqual(
    onlyB.removed?.map((x) => `${x.podName}:${x.reason}`),
    ['web-a:not ready', 'web-a:not ready'],
  );

  // Connections opened after that line go to web-b only; the open one stays with web-a.
  const after1: string[] = [];
  for (let i = 0; i < 20; i++) {
    const a = await askOnce(svc);
    after1.push(a.ok ? a.body : `failed: ${a.kind}`);
  }
  assert.deepEqual(new Set(after1), new Set(['web-b']), after1.join());
  assert.deepEqual(await ask(kept), { ok: true, body: 'web-a' }, 'the open connection carries on');
  // The log is written asynchronously: wait for the 20 connection lines after the change line.
  const forwardedAfter = await waitFor(
    '20 connection lines after the change line',
    () => {
      const l = lines();
      const later = l.slice(l.findIndex((x) => x.seq === onlyB.seq) + 1).filter((x) => x.msg === 'Connection forwarded');
      return later.length >= 20 ? later : undefined;
    },
    { timeoutMs: 5_000, intervalMs: 20 },
  );
  assert.equal(forwardedAfter.length, 20, 'one log line per new connection, after the change line');
  for (const l of forwardedAfter) assert.match(l.endpoint ?? '', /^web-b@/);
  const log1 = lines();
  const at = log1.findIndex((l) => l.seq === onlyB.seq);
  const beforeLines = log1.slice(0, at).filter((l) => l.msg === 'Connection forwarded' && /^web-a@/.test(l.endpoint ?? ''));
  assert.ok(beforeLines.length > 0, 'web-a got connections before the change line');

  // web-b deleted: terminating (still Ready, still serving for 1.5 s), it leaves the endpoints at once.
  await kubeRequestOk(c.kc, 'DELETE', `/api/v1/namespaces/${ns}/pods/web-b`);
  const none = await change('web-b removed as terminating', onlyB.seq!, (l) => names(l).length === 0);
  assert.deepEqual(
    none.removed?.map((x) => `${x.podName}:${x.reason}`),
    ['web-b:terminating', 'web-b:terminating'],
  );
  const failed = await askOnce(svc);
  // A reset, not the 1 s timeout of the client: no Ready endpoint fails at once.
  assert.deepEqual(failed, { ok: false, kind: 'ECONNRESET' });
  const stats = proxy.stats('web');
  assert.ok(stats.refused >= 2, JSON.stringify(stats));
  assert.equal(stats.failed, 0, JSON.stringify(stats));
  assert.equal(stats.forwarded, (stats.perPod['web-a'] ?? 0) + (stats.perPod['web-b'] ?? 0));
  assert.ok((stats.perPod['web-b'] ?? 0) >= 20, JSON.stringify(stats));
  await waitFor(
    'the reset logged after the change line',
    () => lines().some((l) => l.msg === 'Connection reset: no Ready endpoint' && (l.seq ?? 0) > none.seq!),
    { timeoutMs: 5_000, intervalMs: 20 },
  );

  // The Service deleted: its listeners close, nothing answers on its address any more.
  await kubeRequestOk(c.kc, 'DELETE', `/api/v1/namespaces/${ns}/services/web`);
  await waitFor('web gone from the proxy', () => proxy!.addressOf('web', 'http') === undefined, { timeoutMs: 10_000, intervalMs: 20 });
  await waitFor('the Service removed line', () => lines().some((l) => l.msg === 'Service removed' && l.service === 'web'), {
    timeoutMs: 5_000,
    intervalMs: 20,
  });
  const gone = await waitFor(
    'the listener closed',
    async () => {
      const a = await askOnce(svc);
      return !a.ok && a.kind === 'ECONNREFUSED' ? a : undefined;
    },
    { timeoutMs: 5_000, intervalMs: 20 },
  );
  assert.equal(gone.ok, false);

  // web-a still runs (unready): the connection opened to it outlives the Service, until the proxy stops.
  assert.deepEqual(await ask(kept), { ok: true, body: 'web-a' }, 'an open connection outlives its Service');
  const keptClosed = new Promise<string>((r) => kept.once('close', () => r('closed')));
  await proxy.stop();
  const bound = new Promise<string>((r) => setTimeout(() => r('still open 5 s after stop()'), 5_000).unref());
  assert.equal(await Promise.race([keptClosed, bound]), 'closed', 'stop() cuts it');

  // The change lines carry a time, in the order of their seq.
  const all = changes();
  assert.ok(all.length >= 4, JSON.stringify(all));
  for (let i = 1; i < all.length; i++) {
    assert.ok(all[i]!.seq! > all[i - 1]!.seq!);
    assert.ok(Date.parse(all[i]!.time) >= Date.parse(all[i - 1]!.time));
  }
  passed = true;
});
