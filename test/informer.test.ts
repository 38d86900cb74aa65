// Informer against the real API server, through a fault-injecting HTTPS proxy on loopback:
// connection cuts (proxy killed and restarted), 410 Gone (HTTP status and ERROR event) with a
// re-list that reports what changed during the gap, a silent watch restarted by the
// watchdog, and stop() leaving nothing behind.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import type http from 'node:http';
import https from 'node:https';
import type net from 'node:net';
import path from 'node:path';
import { KubeConfig, type V1ConfigMap } from '@kubernetes/client-node';
import { kubeRequest, kubeRequestOk, MERGE_PATCH } from '../src/k8s/client.js';
import { Informer, type WatchEventType } from '../src/k8s/informer.js';
import { freshNamespace, getCluster, waitFor, type TestCluster } from './support/k8s.js';

/** An HTTPS proxy in front of the API server that authenticates upstream as admin and can misbehave. */
class FaultProxy {
  port = 0;
  private server: https.Server | undefined;
  private readonly sockets = new Set<net.Socket>();
  private readonly silenced = new WeakSet<http.ServerResponse>();
  private readonly watches = new Set<http.ServerResponse>();
  mode: 'pass' | 'refuse' | 'blackhole' = 'pass';
  goneOnce = false;
  errorEventOnce = false;
  watchRequests = 0;

  constructor(
    private readonly upstream: URL,
    private readonly serving: { cert: Buffer; key: Buffer },
    private readonly agent: https.Agent,
  ) {}

  async listen(): Promise<void> {
    const server = https.createServer(this.serving, (req, res) => this.handle(req, res));
    server.on('connection', (s: net.Socket) => {
      this.sockets.add(s);
      s.on('close', () => this.sockets.delete(s));
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(this.port, '127.0.0.1', () => resolve());
    });
    const a = server.address();
    this.port = typeof a === 'object' && a ? a.port : 0;
    this.server = server;
  }

  /** Kills the proxy: the listener closes and every connection is cut. */
  async cut(): Promise<void> {
    const s = this.server;
    this.server = undefined;
    for (const sock of this.sockets) sock.destroy();
    this.sockets.clear();
    if (s) await new Promise<void>((r) => s.close(() => r()));
  }

  /** Cuts the open watch connections only. */
  cutWatches(): void {
    for (const w of this.watches) w.socket?.destroy();
    this.watches.clear();
  }

  /** From now on the open watches deliver nothing (the connections stay open). */
  silenceWatches(): void {
    for (const w of this.watches) this.silenced.add(w);
  }

  private handle(req: http.IncomingMessage, res: http.ServerResponse): void {
    const url = new URL(req.url ?? '/', 'https://proxy');
    const isWatch = url.searchParams.get('watch') === 'true';
    const status = (code: number, reason: string, message: string) => {
      res.writeHead(code, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ kind: 'Status', apiVersion: 'v1', status: 'Failure', code, reason, message }));
    };
    if (this.mode === 'refuse') {
      status(503, 'ServiceUnavailable', 'proxy refusing');
      return;
    }
    if (isWatch) {
      this.watchRequests++;
      this.watches.add(res);
      res.on('close', () => this.watches.delete(res));
      if (this.goneOnce) {
        this.goneOnce = false;
        status(410, 'Expired', 'too old resource version');
        return;
      }
      if (this.errorEventOnce) {
        this.errorEventOnce = false;
        res.writeHead(200, { 'content-type': 'application/json' });
        res.write(
          `${JSON.stringify({ type: 'ERROR', object: { kind: 'Status', apiVersion: 'v1', status: 'Failure', reason: 'Expired', code: 410, message: 'too old resource version' } })}\n`,
        );
        return; // and stay open, as a real server may
      }
      if (this.mode === 'blackhole') {
        this.silenced.add(res);
        return; // never answers
      }
    }
    const headers = { ...req.headers, host: this.upstream.host };
    const up = https.request(
      { host: this.upstream.hostname, port: this.upstream.port, path: req.url, method: req.method, headers, agent: this.agent },
      (ures) => {
        if (this.silenced.has(res)) return;
        res.writeHead(ures.statusCode ?? 502, ures.headers);
        ures.on('data', (d: Buffer) => {
          if (!this.silenced.has(res)) res.write(d);
        });
        ures.on('end', () => {
          if (!this.silenced.has(res)) res.end();
        });
      },
    );
    up.on('error', () => res.destroy());
    res.on('close', () => up.destroy());
    req.pipe(up);
  }
}

let cluster: TestCluster;
let proxy: FaultProxy;
let proxyKc: KubeConfig;

before(async () => {
  cluster = await getCluster();
  const kc = cluster.full;
  const cl = kc.getCurrentCluster()!;
  const user = kc.getCurrentUser()!;
  const pki = path.join(path.dirname(cluster.kubeconfigPath), 'pki');
  const agent = new https.Agent({
    keepAlive: true,
    ca: Buffer.from(cl.caData!, 'base64'),
    cert: Buffer.from(user.certData!, 'base64'),
    key: Buffer.from(user.keyData!, 'base64'),
  });
  proxy = new FaultProxy(
    new URL(cl.server),
    { cert: fs.readFileSync(path.join(pki, 'apiserver.crt')), key: fs.readFileSync(path.join(pki, 'apiserver.key')) },
    agent,
  );
  await proxy.listen();
  proxyKc = new KubeConfig();
  proxyKc.loadFromOptions({
    clusters: [{ name: 'proxy', server: `https://127.0.0.1:${proxy.port}`, caData: cl.caData }],
    users: [{ name: 'anonymous' }],
    contexts: [{ name: 'proxy', cluster: 'proxy', user: 'anonymous' }],
    currentContext: 'proxy',
  });
});

after(async () => {
  await proxy?.cut();
});

type Ev = [WatchEventType, string, string | undefined];

function recorder(inf: Informer<V1ConfigMap>): Ev[] {
  const evs: Ev[] = [];
  inf.onEvent((t, o) => evs.push([t, o.metadata?.name ?? '', o.data?.v]));
  return evs;
}

async function cm(ns: string, name: string, v: string): Promise<void> {
  await kubeRequestOk(cluster.kc, 'POST', `/api/v1/namespaces/${ns}/configmaps`, {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: { name, labels: { app: 'inf' } },
    data: { v },
  });
}
async function setCm(ns: string, name: string, v: string): Promise<void> {
  await kubeRequestOk(cluster.kc, 'PATCH', `/api/v1/namespaces/${ns}/configmaps/${name}`, { data: { v } }, { contentType: MERGE_PATCH });
}
async function delCm(ns: string, name: string): Promise<void> {
  await kubeRequestOk(cluster.kc, 'DELETE', `/api/v1/namespaces/${ns}/configmaps/${name}`);
}
const has = (evs: Ev[], t: WatchEventType, name: string, v?: string) =>
  evs.some((e) => e[0] === t && e[1] === name && (v === undefined || e[2] === v));

test('lists, then watches: ADDED, MODIFIED, DELETED; label selector honoured; the index follows', async () => {
  const ns = await freshNamespace('inf-basic');
  await cm(ns, 'a', '1');
  await cm(ns, 'b', '1');
  await kubeRequestOk(cluster.kc, 'POST', `/api/v1/namespaces/${ns}/configmaps`, {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: { name: 'other' },
  });
  const inf = new Informer<V1ConfigMap>(cluster.kc, `/api/v1/namespaces/${ns}/configmaps`, {
    labelSelector: 'app=inf',
    pageSize: 1,
    indexBy: (o) => o.data?.v,
  });
  const evs = recorder(inf);
  const indexed = (v: string) =>
    inf
      .byIndex(v)
      .map((o) => o.metadata?.name)
      .sort();
  assert.equal(inf.hasSynced(), false);
  await inf.start();
  try {
    assert.equal(inf.hasSynced(), true);
    assert.deepEqual(
      inf
        .list()
        .map((o) => o.metadata?.name)
        .sort(),
      ['a', 'b'],
      'paginated list with the selector',
    );
    assert.ok(has(evs, 'ADDED', 'a') && has(evs, 'ADDED', 'b'));
    assert.deepEqual(indexed('1'), ['a', 'b'], 'listed objects are indexed');
    await cm(ns, 'c', '1');
    await setCm(ns, 'a', '2');
    await delCm(ns, 'b');
    await waitFor('watch events', () => has(evs, 'ADDED', 'c') && has(evs, 'MODIFIED', 'a', '2') && has(evs, 'DELETED', 'b'), {
      timeoutMs: 10_000,
    });
    assert.equal(inf.get(ns, 'a')?.data?.v, '2');
    assert.equal(inf.get(ns, 'b'), undefined);
    assert.ok(!evs.some((e) => e[1] === 'other'));
    assert.deepEqual(indexed('1'), ['c'], 'added joins, deleted and changed leave');
    assert.deepEqual(indexed('2'), ['a'], 'a changed object moves to its new key');
    assert.deepEqual(indexed('3'), []);
  } finally {
    inf.stop();
  }
});

test('a cut connection (proxy killed, restarted later) resumes from the last resourceVersion without losing events', async () => {
  const ns = await freshNamespace('inf-cut');
  await cm(ns, 'a', '1');
  await cm(ns, 'b', '1');
  const inf = new Informer<V1ConfigMap>(proxyKc, `/api/v1/namespaces/${ns}/configmaps`, {
    labelSelector: 'app=inf',
    minBackoffMs: 100,
    maxBackoffMs: 500,
  });
  const evs = recorder(inf);
  await inf.start();
  try {
    await waitFor('watch open', () => inf.stats.watches >= 1, { timeoutMs: 5_000 });
    await new Promise((r) => setTimeout(r, 200));
    await proxy.cut();
    // changes while the informer cannot reach the server
    await cm(ns, 'c', '1');
    await setCm(ns, 'a', '2');
    await delCm(ns, 'b');
    await waitFor('watch failures while the proxy is down', () => inf.stats.restarts >= 2, { timeoutMs: 10_000 });
    await proxy.listen();
    await waitFor('events of the gap', () => has(evs, 'ADDED', 'c') && has(evs, 'MODIFIED', 'a', '2') && has(evs, 'DELETED', 'b'), {
      timeoutMs: 15_000,
    });
    assert.deepEqual(
      inf
        .list()
        .map((o) => `${o.metadata?.name}=${o.data?.v}`)
        .sort(),
      ['a=2', 'c=1'],
    );
    assert.equal(inf.stats.lists, 1, 'resumed from the resourceVersion, no re-list');
    // and it keeps working
    await setCm(ns, 'c', '3');
    await waitFor('event after the reconnect', () => has(evs, 'MODIFIED', 'c', '3'), { timeoutMs: 10_000 });
  } finally {
    inf.stop();
    proxy.mode = 'pass';
  }
});

test('410 Gone re-lists and reports what changed during the gap (HTTP 410 and ERROR event)', async () => {
  const ns = await freshNamespace('inf-gone');
  await cm(ns, 'keep', '1');
  await cm(ns, 'change', '1');
  await cm(ns, 'vanish', '1');
  const inf = new Informer<V1ConfigMap>(proxyKc, `/api/v1/namespaces/${ns}/configmaps`, {
    labelSelector: 'app=inf',
    minBackoffMs: 100,
    maxBackoffMs: 500,
  });
  const evs = recorder(inf);
  await inf.start();
  try {
    await waitFor('watch open', () => inf.stats.watches >= 1, { timeoutMs: 5_000 });
    // the server refuses everything for a while, then says our resourceVersion is gone
    proxy.mode = 'refuse';
    proxy.cutWatches();
    await cm(ns, 'new', '1');
    await setCm(ns, 'change', '2');
    await delCm(ns, 'vanish');
    await waitFor('refused watch attempts', () => inf.stats.restarts >= 2, { timeoutMs: 10_000 });
    proxy.goneOnce = true;
    proxy.mode = 'pass';
    await waitFor('re-list after 410', () => inf.stats.gone >= 1 && inf.stats.lists >= 2, { timeoutMs: 10_000 });
    await waitFor('gap events', () => has(evs, 'ADDED', 'new') && has(evs, 'MODIFIED', 'change', '2') && has(evs, 'DELETED', 'vanish'), {
      timeoutMs: 10_000,
    });
    assert.ok(has(evs, 'MODIFIED', 'keep', '1'), 'objects still there are delivered again after a re-list (level-based resync)');
    assert.deepEqual(
      inf
        .list()
        .map((o) => `${o.metadata?.name}=${o.data?.v}`)
        .sort(),
      ['change=2', 'keep=1', 'new=1'],
    );

    // an ERROR event with code 410 inside a 200 stream
    const listsBefore = inf.stats.lists;
    proxy.errorEventOnce = true;
    proxy.cutWatches();
    await delCm(ns, 'keep');
    await waitFor('re-list after an ERROR 410 event', () => inf.stats.lists > listsBefore, { timeoutMs: 10_000 });
    await waitFor('DELETED keep', () => has(evs, 'DELETED', 'keep'), { timeoutMs: 10_000 });
    assert.equal(inf.get(ns, 'keep'), undefined);
  } finally {
    inf.stop();
    proxy.mode = 'pass';
  }
});

test('a watch that goes silent is restarted by the watchdog', async () => {
  const ns = await freshNamespace('inf-silent');
  await cm(ns, 'a', '1');
  const inf = new Informer<V1ConfigMap>(proxyKc, `/api/v1/namespaces/${ns}/configmaps`, {
    labelSelector: 'app=inf',
    silenceTimeoutMs: 1_500,
    minBackoffMs: 100,
    maxBackoffMs: 500,
  });
  const evs = recorder(inf);
  await inf.start();
  try {
    await waitFor('watch open', () => inf.stats.watches >= 1, { timeoutMs: 5_000 });
    await new Promise((r) => setTimeout(r, 200));
    proxy.mode = 'blackhole';
    proxy.silenceWatches();
    await setCm(ns, 'a', '2'); // swallowed by the silent connection
    await waitFor('silence detected', () => inf.stats.silenceRestarts >= 1, { timeoutMs: 10_000 });
    assert.ok(!has(evs, 'MODIFIED', 'a', '2'), 'nothing came through the silent watch');
    proxy.mode = 'pass';
    await waitFor('event after the watchdog restart', () => has(evs, 'MODIFIED', 'a', '2'), { timeoutMs: 15_000 });
    assert.equal(inf.get(ns, 'a')?.data?.v, '2');
  } finally {
    inf.stop();
    proxy.mode = 'pass';
  }
});

test('stop() ends the watch: no more events and no timers left behind', async () => {
  const ns = await freshNamespace('inf-stop');
  const timers = () => process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length;
  const before = timers();
  const inf = new Informer<V1ConfigMap>(cluster.kc, `/api/v1/namespaces/${ns}/configmaps`, { silenceTimeoutMs: 2_000 });
  const evs = recorder(inf);
  await inf.start();
  await cm(ns, 'a', '1');
  await waitFor('ADDED a', () => has(evs, 'ADDED', 'a'), { timeoutMs: 10_000 });
  inf.stop();
  const n = evs.length;
  await cm(ns, 'b', '1');
  await new Promise((r) => setTimeout(r, 700));
  assert.equal(evs.length, n, 'no event after stop()');
  assert.ok(timers() <= before, `timers left: ${timers()} > ${before}`);
  assert.equal((await kubeRequest(cluster.kc, 'GET', `/api/v1/namespaces/${ns}/configmaps/b`)).status, 200);
});
