// The Kubernetes client's optional client-side rate limit (a token bucket, driven here by a
// fake clock), its per-request hook, its 429 / Retry-After retries, aborts and the typed
// ResourceClient, against real HTTP servers on loopback.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { KubeConfig } from '@kubernetes/client-node';
import {
  DEFAULT_RETRY,
  KubeApiError,
  TokenBucket,
  configureKubeClient,
  kubeRequest,
  kubeRequestOk,
  nextRetryWaitMs,
  retryAfterMs,
} from '../src/k8s/client.js';
import { ResourceClient, isConflict, isNotFound } from '../src/k8s/resources.js';

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
    assert.deepEqual(
      seen.map((s) => [s.method, s.status]),
      [
        ['GET', 200],
        ['DELETE', 404],
        ['PATCH', 429],
      ],
    );
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

/**
 * A loopback API server stand-in that answers each request from `answers` in turn (the last
 * one repeats) and records, by its own clock, when each request arrived and was answered.
 */
async function scriptedServer(answers: Array<{ status: number; retryAfter?: string; body?: unknown }>) {
  const seen: Array<{ method: string; url: string; arrived: number; answered: number }> = [];
  let answered = (): void => {};
  const server = http.createServer((req, res) => {
    const arrived = Date.now();
    req.resume();
    req.on('end', () => {
      const a = answers[Math.min(seen.length, answers.length - 1)]!;
      res.statusCode = a.status;
      res.setHeader('content-type', 'application/json');
      if (a.retryAfter !== undefined) res.setHeader('retry-after', a.retryAfter);
      seen.push({ method: req.method!, url: req.url!, arrived, answered: Date.now() });
      res.end(JSON.stringify(a.body ?? { kind: 'Status', code: a.status }));
      answered();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.61.29.3', r));
  const kc = loopbackKubeConfig(`http://127.61.29.3:${(server.address() as AddressInfo).port}`);
  return {
    kc,
    seen,
    /** Resolves when the next answer has been sent. */
    nextAnswer: () =>
      new Promise<void>((r) => {
        answered = r;
      }),
    close: () => {
      server.closeAllConnections();
      server.close();
    },
  };
}

test('retryAfterMs and nextRetryWaitMs: delta-seconds or an HTTP date; bounded in count and total wait', () => {
  const now = Date.parse('2026-12-01T10:00:00Z');
  assert.equal(retryAfterMs('3', now), 3000);
  assert.equal(retryAfterMs(['0'], now), 0);
  assert.equal(retryAfterMs('Tue, 01 Dec 2026 10:00:05 GMT', now), 5000);
  assert.equal(retryAfterMs('Tue, 01 Dec 2026 09:59:00 GMT', now), 0, 'a date in the past: at once');
  for (const bad of [undefined, '', 'soon', '-1', '1.5']) assert.equal(retryAfterMs(bad, now), undefined, String(bad));
  const p = { maxRetries: 2, maxWaitMs: 10_000 };
  assert.equal(nextRetryWaitMs(p, 0, 0, 1000), 1000);
  assert.equal(nextRetryWaitMs(p, 0, 0, undefined), undefined, 'no Retry-After: no retry');
  assert.equal(nextRetryWaitMs(p, 2, 2000, 1000), undefined, 'retries used up');
  assert.equal(nextRetryWaitMs(p, 1, 9500, 1000), undefined, 'the wait would pass the total bound');
  assert.equal(nextRetryWaitMs(p, 1, 9000, 1000), 1000, 'up to the bound exactly');
  assert.deepEqual(DEFAULT_RETRY, { maxRetries: 5, maxWaitMs: 30_000 });
});

test("a 429 with Retry-After is sent again after that wait (by the server's clock) and succeeds", async () => {
  const s = await scriptedServer([
    { status: 429, retryAfter: '1' },
    { status: 200, body: { kind: 'Pod' } },
  ]);
  try {
    const statuses: number[] = [];
    configureKubeClient(s.kc, { onResponse: (r) => statuses.push(r.status) });
    const res = await kubeRequest(s.kc, 'PATCH', '/api/v1/namespaces/a/pods/p', { metadata: {} });
    assert.equal(res.status, 200);
    assert.deepEqual(res.body, { kind: 'Pod' });
    assert.deepEqual(
      s.seen.map((x) => x.method),
      ['PATCH', 'PATCH'],
      'the same request, twice',
    );
    const gap = s.seen[1]!.arrived - s.seen[0]!.answered;
    assert.ok(gap >= 990, `the retry came ${gap} ms after the 429, not before its Retry-After of 1 s`);
    assert.ok(gap < 5000, `and not much later (${gap} ms)`);
    assert.deepEqual(statuses, [429, 200], 'each try reaches the metrics hook');
  } finally {
    s.close();
  }
});

test('429 retries are bounded: by count, and by total wait (a long Retry-After returns the 429 at once)', async () => {
  const always = await scriptedServer([{ status: 429, retryAfter: '0' }]);
  try {
    const res = await kubeRequest(always.kc, 'GET', '/api/v1/pods', undefined, { retry: { maxRetries: 3, maxWaitMs: 10_000 } });
    assert.equal(res.status, 429);
    assert.equal(always.seen.length, 4, 'the first try and 3 retries');
  } finally {
    always.close();
  }
  const long = await scriptedServer([{ status: 429, retryAfter: '120' }]);
  try {
    const t0 = Date.now();
    const res = await kubeRequest(long.kc, 'GET', '/api/v1/pods');
    assert.equal(res.status, 429, 'Retry-After 120 s is beyond the 30 s bound: the caller gets the 429');
    assert.equal(long.seen.length, 1);
    assert.ok(Date.now() - t0 < 5000);
    await assert.rejects(
      kubeRequestOk(long.kc, 'GET', '/api/v1/pods'),
      (e: unknown) => e instanceof KubeApiError && e.status === 429,
      'kubeRequestOk throws the 429 it was left with',
    );
    assert.equal(long.seen.length, 2);
  } finally {
    long.close();
  }
  const none = await scriptedServer([{ status: 429 }, { status: 200 }]);
  try {
    assert.equal((await kubeRequest(none.kc, 'GET', '/api/v1/pods')).status, 429, 'no Retry-After: no retry');
    assert.equal(none.seen.length, 1);
  } finally {
    none.close();
  }
});

test('an aborted signal ends the wait for a Retry-After at once, and no request goes out after it', async () => {
  const s = await scriptedServer([{ status: 429, retryAfter: '20' }, { status: 200 }]);
  try {
    const ac = new AbortController();
    const answered = s.nextAnswer();
    const req = kubeRequest(s.kc, 'GET', '/api/v1/pods', undefined, { signal: ac.signal });
    await answered;
    const abortedAt = Date.now();
    ac.abort(new Error('controller stopping'));
    await assert.rejects(req, (e: Error) => e.name === 'AbortError');
    assert.ok(Date.now() - abortedAt < 1000, 'rejected at once, not after the 20 s Retry-After');
    assert.equal(s.seen.length, 1);
    // Aborted before it starts: nothing is sent.
    await assert.rejects(kubeRequest(s.kc, 'GET', '/api/v1/pods', undefined, { signal: ac.signal }));
    assert.equal(s.seen.length, 1);
  } finally {
    s.close();
  }
});

test('ResourceClient: get of a missing object is undefined; create conflicts and apply parameters', async () => {
  const s = await scriptedServer([
    { status: 404, body: { kind: 'Status', reason: 'NotFound', code: 404 } },
    { status: 409, body: { kind: 'Status', reason: 'AlreadyExists', message: 'services "x" already exists', code: 409 } },
    { status: 200, body: { metadata: { name: 'x' } } },
  ]);
  try {
    const services = new ResourceClient<{ metadata?: { name?: string; namespace?: string } }>(s.kc, {
      apiVersion: 'v1',
      plural: 'services',
    });
    assert.equal(await services.get('a', 'x'), undefined);
    await assert.rejects(
      services.create('a', { metadata: { name: 'x' } }),
      (e: unknown) => isConflict(e) && !isNotFound(e) && /already exists/.test((e as Error).message),
    );
    assert.deepEqual(
      await services.apply({ metadata: { name: 'x', namespace: 'a' } }, { fieldManager: 'atlantis-operator', force: true }),
      { metadata: { name: 'x' } },
    );
    assert.deepEqual(
      s.seen.map((x) => `${x.method} ${x.url}`),
      [
        'GET /api/v1/namespaces/a/services/x',
        'POST /api/v1/namespaces/a/services',
        'PATCH /api/v1/namespaces/a/services/x?fieldManager=atlantis-operator&force=true',
      ],
    );
  } finally {
    s.close();
  }
});

test('timeoutMs bounds the silences of the socket, not the whole answer; a timeout names the request and reaches the hook as 0', async () => {
  // /slow trickles its body past timeoutMs, never silent for long; /stall sends its headers and stops.
  const server = http.createServer((req, res) => {
    res.writeHead(200, { 'content-type': 'application/json' });
    if (req.url?.startsWith('/stall')) {
      res.flushHeaders();
      return;
    }
    let n = 0;
    res.write('[');
    const t = setInterval(() => {
      if (++n < 12) res.write(`${n > 1 ? ',' : ''}${n}`);
      else {
        clearInterval(t);
        res.end(']');
      }
    }, 100);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  try {
    const kc = loopbackKubeConfig(`http://127.0.0.1:${(server.address() as AddressInfo).port}`);
    const seen: number[] = [];
    configureKubeClient(kc, { onResponse: (r) => seen.push(r.status) });
    const t0 = Date.now();
    const slow = await kubeRequest(kc, 'GET', '/slow', undefined, { timeoutMs: 700 });
    assert.deepEqual(slow.body, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]);
    assert.ok(Date.now() - t0 >= 1000, 'the answer took longer than timeoutMs and was not cut');
    await assert.rejects(
      kubeRequest(kc, 'GET', '/stall', undefined, { timeoutMs: 300 }),
      (e: Error) => e.message === 'GET /stall: timed out',
    );
    assert.deepEqual(seen, [200, 0]);
  } finally {
    server.closeAllConnections();
    server.close();
  }
});

test('requests of one kubeconfig share its keep-alive connection', async () => {
  const sockets = new Set<unknown>();
  const server = http.createServer((req, res) => {
    sockets.add(req.socket);
    res.setHeader('content-type', 'application/json');
    res.end('{}');
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  try {
    const kc = loopbackKubeConfig(`http://127.0.0.1:${(server.address() as AddressInfo).port}`);
    for (let i = 0; i < 3; i++) assert.equal((await kubeRequest(kc, 'GET', '/api/v1/pods')).status, 200);
    assert.equal(sockets.size, 1, 'one connection for three requests in turn');
  } finally {
    server.closeAllConnections();
    server.close();
  }
});
