// DrainWatch against real servers on loopback: an in-process Atlantis server running a real
// terraform apply, and a plain HTTP server that does not know `wait_drained` (an older
// server version), to check the pacing.
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, describe, it } from 'node:test';
import { DrainWatch } from '../src/controller/reconcile/drain-watch.js';
import { probeServerStatus } from '../src/controller/reconcile/status-probe.js';
import type { StatusProbe } from '../src/controller/types.js';
import type { AtlantisServer } from '../src/server/server.js';
import { startTestServer, waitFor } from './support/server.js';
import { makeTerraformDir } from './support/terraform.js';

const servers: AtlantisServer[] = [];
const watches: DrainWatch[] = [];
after(async () => {
  for (const w of watches) w.stopAll();
  for (const s of servers) await s.close();
});

function portOf(url: string): number {
  return Number(new URL(url).port);
}

/** A DrainWatch on `port` that records each request's start and answer. */
function watchOn(port: number, opts: { minIntervalMs?: number; waitSeconds?: number } = {}) {
  const calls: Array<{ startedAt: number; answer?: StatusProbe }> = [];
  const changes: string[] = [];
  const watch = new DrainWatch({
    ...opts,
    errorBackoffMs: 100,
    onChange: (key) => changes.push(key),
    longPoll: async (ip, wait, signal) => {
      const call: (typeof calls)[number] = { startedAt: Date.now() };
      calls.push(call);
      call.answer = await probeServerStatus(ip, { port, waitDrainedSeconds: wait, signal });
      return call.answer;
    },
  });
  watches.push(watch);
  return { watch, calls, changes };
}

describe('DrainWatch', () => {
  it('holds one request while terraform runs and rings once the server is drained', async () => {
    const { server, url } = await startTestServer();
    servers.push(server);
    const dir = makeTerraformDir(3, 1);
    const run = server.runOperation({ command: 'apply', repo: 'acme/infra', pull: 1, project: 'x' }, () =>
      server.runner.run({ jobId: 'x', args: ['apply', '-auto-approve', '-input=false', '-no-color'], cwd: dir }),
    );
    await waitFor('terraform running', () => server.runner.running().length === 1);
    server.requestDrain('annotation');

    const { watch, calls, changes } = watchOn(portOf(url), { waitSeconds: 30 });
    watch.sync('ns/a', [{ uid: 'u1', podIP: '127.0.0.1', restarts: 0 }]);
    assert.equal(watch.size(), 1);
    await waitFor('the drained answer', () => changes.length > 0, 20_000);
    const r = await run;
    assert.ok(r.started && r.value.exitCode === 0, 'the apply finished');
    assert.deepEqual(changes, ['ns/a']);
    assert.equal(calls.length, 1, 'one held request for the whole apply');
    const held = watch.observed('u1', 0, new Date(), 5000);
    assert.ok(held !== 'pending' && held?.ok && held.body.shutting_down && held.body.in_progress_operations === 0);
    // Only from the same container, and only while fresh.
    assert.equal(watch.observed('u1', 1, new Date(), 5000), undefined, 'the container restarted since');
    assert.equal(watch.observed('u1', 0, new Date(Date.now() + 6000), 5000), undefined, 'too old');
    assert.equal(watch.observed('other', 0, new Date(), 5000), undefined);
    // Drained is final: nothing more is asked.
    await new Promise((r) => setTimeout(r, 300));
    assert.equal(calls.length, 1);
    watch.sync('ns/a', []);
    assert.equal(watch.size(), 0);
  });

  it('polls a server that answers at once no faster than minIntervalMs, and stops when told', async () => {
    let requests = 0;
    const plain = http.createServer((_req, res) => {
      requests++;
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ shutting_down: true, in_progress_operations: 1, version: 'old' }));
    });
    plain.listen(0, '127.0.0.1');
    await new Promise((r) => plain.once('listening', r));
    after(() => plain.close());
    const { watch, calls, changes } = watchOn((plain.address() as AddressInfo).port, { minIntervalMs: 200 });
    watch.sync('ns/b', [{ uid: 'u2', podIP: '127.0.0.1', restarts: 0 }]);
    await waitFor('4 requests', () => calls.length >= 4, 10_000);
    const last = watch.observed('u2', 0, new Date(), 5000);
    assert.ok(last !== 'pending' && last?.ok && last.body.in_progress_operations === 1, 'the last answer: one operation left');
    watch.sync('ns/b', []);
    assert.equal(watch.observed('u2', 0, new Date(), 5000), undefined, 'not watched any more');
    for (let i = 1; i < 4; i++) assert.ok(calls[i]!.startedAt - calls[i - 1]!.startedAt >= 195, `request ${i} paced`);
    assert.deepEqual(changes, ['ns/b'], 'the same answer again is no news');
    const seen = requests;
    await new Promise((r) => setTimeout(r, 500));
    assert.ok(requests <= seen + 1, 'stopped');
  });

  it('reads a slow answer as "not answering" once it is overdue, but still takes it when it comes', async () => {
    let answered = 0;
    const slow = http.createServer((_req, res) => {
      setTimeout(() => {
        answered++;
        res.setHeader('content-type', 'application/json');
        res.end(JSON.stringify({ shutting_down: true, in_progress_operations: 0, version: 'slow' }));
      }, 1500);
    });
    slow.listen(0, '127.0.0.1');
    await new Promise((r) => slow.once('listening', r));
    after(() => slow.close());
    const port = (slow.address() as AddressInfo).port;
    const changes: string[] = [];
    const watch = new DrainWatch({
      waitSeconds: 0.2,
      lateAfterMs: 300,
      onChange: (key) => changes.push(key),
      longPoll: (ip, wait, signal) => probeServerStatus(ip, { port, waitDrainedSeconds: wait, timeoutMs: 10_000, signal }),
    });
    watches.push(watch);
    watch.sync('ns/d', [{ uid: 'u5', podIP: '127.0.0.1', restarts: 0 }]);
    assert.equal(watch.observed('u5', 0, new Date(), 5000), 'pending', 'first request held, not overdue: wait for its answer');
    await new Promise((r) => setTimeout(r, 800));
    const overdue = watch.observed('u5', 0, new Date(), 5000);
    assert.ok(overdue && overdue !== 'pending' && !overdue.ok && /^no answer for \ds$/.test(overdue.error), JSON.stringify(overdue));
    assert.equal(answered, 0);
    await waitFor('the late answer', () => changes.length > 0, 10_000);
    assert.equal(answered, 1, 'the same request, not given up');
    const late = watch.observed('u5', 0, new Date(), 5000);
    assert.ok(
      late !== 'pending' && late?.ok && late.body.shutting_down && late.body.in_progress_operations === 0,
      'drained, from the late answer',
    );
    watch.stopAll();
  });

  it('a moved pod (new IP) or restarted container gets a new watch; an unreachable one is reported once', async () => {
    const { watch, calls, changes } = watchOn(9, { minIntervalMs: 50 }); // nothing listens on port 9
    watch.sync('ns/c', [{ uid: 'u3', podIP: '127.0.0.1', restarts: 0 }]);
    await waitFor('3 attempts', () => calls.length >= 3, 10_000);
    assert.ok(calls.every((c) => c.answer === undefined || !c.answer.ok));
    assert.deepEqual(changes, ['ns/c'], 'failing again is no news');
    const failed = watch.observed('u3', 0, new Date(), 5000);
    assert.ok(failed !== 'pending' && failed?.ok === false, 'the failure is the last answer');
    watch.sync('ns/c', [{ uid: 'u3', podIP: '127.0.0.2', restarts: 0 }]);
    assert.equal(watch.size(), 1);
    // Another key's sync leaves this key's watches alone; add() starts only what is missing.
    watch.sync('ns/other', []);
    assert.equal(watch.size(), 1);
    const attempts = calls.length;
    // Not awaited: add() starts the request synchronously, which is what is counted next; its
    // promise only resolves (once the request is sent or has failed), it never rejects.
    void watch.add('ns/c', { uid: 'u3', podIP: '127.0.0.1', restarts: 0 });
    void watch.add('ns/c', { uid: 'u4', podIP: '127.0.0.1', restarts: 0 });
    assert.equal(watch.size(), 2);
    assert.equal(calls.length, attempts + 1, 'one new request, for u4');
    watch.stopAll();
    assert.equal(watch.size(), 0);
  });
});

describe('DrainWatch.add', () => {
  it('resolves once the first request is on its way, not when it is answered; and when it fails', async () => {
    let arrived = 0;
    const silent = http.createServer(() => {
      arrived++;
    }); // takes the request, never answers
    await new Promise<void>((r) => silent.listen(0, '127.0.0.1', r));
    after(() => {
      silent.closeAllConnections();
      silent.close();
    });
    const port = (silent.address() as AddressInfo).port;
    const watch = new DrainWatch({
      waitSeconds: 30,
      onChange: () => {},
      longPoll: (ip, wait, signal, onSent) => probeServerStatus(ip, { port, waitDrainedSeconds: wait, timeoutMs: 60_000, signal, onSent }),
    });
    watches.push(watch);
    await watch.add('ns/s', { uid: 's1', podIP: '127.0.0.1', restarts: 0 });
    assert.equal(watch.observed('s1', 0, new Date(), 5000), 'pending', 'sent, not answered');
    await waitFor('the request at the server', () => arrived === 1, 5000);
    await watch.add('ns/s', { uid: 's1', podIP: '127.0.0.1', restarts: 0 }); // already watched: at once
    assert.equal(arrived, 1);
    watch.stopAll();

    const refused = new DrainWatch({
      onChange: () => {},
      longPoll: (ip, wait, signal, onSent) => probeServerStatus(ip, { port: 9, waitDrainedSeconds: wait, signal, onSent }),
    });
    watches.push(refused);
    await refused.add('ns/r', { uid: 'r1', podIP: '127.0.0.1', restarts: 0 }); // resolves on the failure
    const failed = refused.observed('r1', 0, new Date(), 5000);
    assert.ok(failed !== 'pending' && failed?.ok === false, JSON.stringify(failed));
    refused.stopAll();
  });
});

describe('probeServerStatus', () => {
  it('accepts only an Atlantis /status answer; names what went wrong otherwise; stops when aborted', async () => {
    let answer: (res: http.ServerResponse) => void = () => undefined;
    const plain = http.createServer((_req, res) => answer(res));
    await new Promise<void>((r) => plain.listen(0, '127.0.0.1', r));
    after(() => plain.close());
    const port = (plain.address() as AddressInfo).port;
    const probe = (o: { timeoutMs?: number; signal?: AbortSignal } = {}) => probeServerStatus('127.0.0.1', { port, ...o });

    answer = (res) => res.end(JSON.stringify({ shutting_down: true, in_progress_operations: 0, version: 'x' }));
    const ok = await probe();
    assert.ok(ok.ok && ok.body.shutting_down && ok.body.in_progress_operations === 0, JSON.stringify(ok));
    answer = (res) => res.writeHead(503).end('{}');
    assert.deepEqual({ ...(await probe()), at: undefined }, { ok: false, error: 'HTTP 503', at: undefined });
    answer = (res) => res.end('{"status":"ok"}');
    const notAtlantis = await probe();
    assert.ok(!notAtlantis.ok && notAtlantis.error === 'not an Atlantis /status answer', JSON.stringify(notAtlantis));
    answer = (res) => res.end('<html>');
    const notJson = await probe();
    assert.ok(!notJson.ok && notJson.error === 'not JSON', JSON.stringify(notJson));

    answer = () => undefined; // never answers
    const late = await probe({ timeoutMs: 200 });
    assert.ok(!late.ok && late.error === 'ETIMEDOUT', JSON.stringify(late));
    const ac = new AbortController();
    const t0 = Date.now();
    setTimeout(() => ac.abort(), 100);
    const aborted = await probe({ timeoutMs: 10_000, signal: ac.signal });
    assert.ok(!aborted.ok && aborted.error === 'ABORT_ERR', JSON.stringify(aborted));
    assert.ok(Date.now() - t0 < 5000, 'the abort ends the request, not its timeout');
    plain.closeAllConnections();
  });

  it('a throwing onChange ends that watch with onError, and the next sync starts it again', async () => {
    const plain = http.createServer((_req, res) =>
      res.end(JSON.stringify({ shutting_down: false, in_progress_operations: 1, version: 'x' })),
    );
    await new Promise<void>((r) => plain.listen(0, '127.0.0.1', r));
    after(() => plain.close());
    const port = (plain.address() as AddressInfo).port;
    const errors: string[] = [];
    let changes = 0;
    const watch = new DrainWatch({
      minIntervalMs: 50,
      onChange: () => {
        changes++;
        throw new Error('listener bug');
      },
      onError: (key, e) => errors.push(`${key}: ${(e as Error).message}`),
      longPoll: (ip, wait, signal) => probeServerStatus(ip, { port, waitDrainedSeconds: wait, signal }),
    });
    watches.push(watch);
    const target = { uid: 'u9', podIP: '127.0.0.1', restarts: 0 };
    watch.sync('ns/e', [target]);
    await waitFor('the first error', () => errors.length === 1, 10_000);
    assert.deepEqual(errors, ['ns/e: listener bug']);
    assert.equal(watch.size(), 0, 'the failed watch is gone, not left half alive');
    watch.sync('ns/e', [target]);
    await waitFor('the restarted watch fails again', () => errors.length === 2, 10_000);
    assert.equal(changes, 2);
    plain.closeAllConnections();
  });
});
