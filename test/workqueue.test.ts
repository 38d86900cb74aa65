// Work queue semantics, with a fake clock (no sleeping).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createControllerMetrics } from '../src/controller/metrics.js';
import { backoffDelay, objectKey, runWorkers, splitKey, WorkQueue, type QueueClock } from '../src/controller/workqueue.js';

class FakeClock implements QueueClock {
  t = 0;
  private seq = 0;
  private readonly timers = new Map<number, { at: number; fn: () => void }>();
  now(): number {
    return this.t;
  }
  setTimeout(fn: () => void, ms: number): unknown {
    const id = ++this.seq;
    this.timers.set(id, { at: this.t + ms, fn });
    return id;
  }
  clearTimeout(handle: unknown): void {
    this.timers.delete(handle as number);
  }
  pending(): number {
    return this.timers.size;
  }
  advance(ms: number): void {
    const end = this.t + ms;
    for (;;) {
      const due = [...this.timers.entries()].filter(([, v]) => v.at <= end).sort((a, b) => a[1].at - b[1].at)[0];
      if (!due) break;
      this.timers.delete(due[0]);
      this.t = due[1].at;
      due[1].fn();
    }
    this.t = end;
  }
}

const mk = (o: { baseDelayMs?: number; maxDelayMs?: number } = {}): { q: WorkQueue; clock: FakeClock } => {
  const clock = new FakeClock();
  return { q: new WorkQueue({ ...o, clock }), clock };
};

test('keys', () => {
  assert.equal(objectKey('infra', 'atlantis'), 'infra/atlantis');
  assert.deepEqual(splitKey('infra/atlantis'), { namespace: 'infra', name: 'atlantis' });
  for (const bad of ['', 'x', '/x', 'x/']) assert.throws(() => splitKey(bad), /Invalid work queue key/);
});

test('dedup: a key queued many times is processed once, in first-add order', async () => {
  const { q } = mk();
  q.add('a/1');
  q.add('a/2');
  q.add('a/1');
  q.add('a/1');
  assert.equal(q.len(), 2);
  assert.equal(await q.get(), 'a/1');
  assert.equal(await q.get(), 'a/2');
  assert.equal(q.len(), 0);
});

test('a key re-added while processing is not handed out twice, and is processed again after done', async () => {
  const { q } = mk();
  q.add('a/1');
  const k = await q.get();
  assert.equal(k, 'a/1');
  assert.equal(q.isProcessing('a/1'), true);
  q.add('a/1');
  q.add('a/1');
  assert.equal(q.len(), 0, 'not queued while a worker holds it');
  q.add('a/2');
  assert.equal(await q.get(), 'a/2', 'other keys still flow');
  q.done('a/1');
  assert.equal(q.len(), 1, 'queued once after done');
  assert.equal(await q.get(), 'a/1');
  q.done('a/1');
  assert.equal(q.len(), 0);
});

test('urgent keys go before all others: new, already queued, or re-added while processing; once each', async () => {
  const { q } = mk();
  q.add('a/1');
  q.add('a/2');
  q.add('a/3');
  q.add('a/4', { urgent: true });
  q.add('a/3', { urgent: true }); // already queued: moves to the front, stays single
  assert.equal(q.len(), 4);
  assert.deepEqual([await q.get(), await q.get()], ['a/4', 'a/3']);
  // Urgent while a worker holds it: queued before the others once done.
  q.add('a/4', { urgent: true });
  q.add('a/5');
  q.done('a/4');
  assert.equal(q.len(), 4);
  assert.deepEqual([await q.get(), await q.get(), await q.get(), await q.get()], ['a/4', 'a/1', 'a/2', 'a/5']);
  // Handed out means served: a later plain add of the key is not urgent.
  for (const k of ['a/1', 'a/2', 'a/3', 'a/4', 'a/5']) q.done(k);
  q.add('a/6');
  q.add('a/4');
  assert.deepEqual([await q.get(), await q.get()], ['a/6', 'a/4']);
});

test('get({ urgentOnly }) takes urgent keys only, and is served first when one comes', async () => {
  const { q } = mk();
  q.add('a/1');
  let urgentTaken: string | undefined = 'none yet';
  const lane = q.get({ urgentOnly: true }).then((k) => {
    urgentTaken = k;
    return k;
  });
  await Promise.resolve();
  assert.equal(urgentTaken, 'none yet', 'a plain key is not for the urgent lane');
  const plainWaiter = (async () => {
    const k = await q.get();
    return k;
  })();
  assert.equal(await plainWaiter, 'a/1');
  const secondPlain = q.get();
  q.add('a/2', { urgent: true }); // both kinds wait: the urgent lane gets it
  assert.equal(await lane, 'a/2');
  q.add('a/3');
  assert.equal(await secondPlain, 'a/3');
  // A plain key already queued (every plain worker busy) that becomes urgent goes to an idle
  // urgent-only worker at once.
  const lane2 = q.get({ urgentOnly: true });
  q.add('a/5');
  q.add('a/5', { urgent: true });
  assert.equal(await lane2, 'a/5');
  assert.equal(q.len(), 0);
  // Shut down: a waiting urgent-only worker is released even with plain keys queued.
  q.add('a/4');
  const idleLane = q.get({ urgentOnly: true });
  q.shutDown();
  assert.equal(await idleLane, undefined);
  assert.equal(await q.get(), 'a/4', 'plain workers still drain the queue');
});

test('runWorkers: urgent-only workers take an urgent key while every other worker is busy', async () => {
  const { q } = mk();
  const order: string[] = [];
  let release!: () => void;
  const blocked = new Promise<void>((r) => {
    release = r;
  });
  const done = runWorkers(
    q,
    1,
    async (key) => {
      order.push(key);
      if (key === 'a/slow') await blocked;
    },
    () => {},
    1,
  );
  q.add('a/slow');
  q.add('a/plain');
  await new Promise((r) => setImmediate(r));
  q.add('a/drained', { urgent: true });
  await new Promise((r) => setImmediate(r));
  assert.deepEqual(order, ['a/slow', 'a/drained'], 'the urgent key did not wait for the busy worker; the plain one did');
  release();
  await new Promise((r) => setImmediate(r));
  assert.deepEqual(order, ['a/slow', 'a/drained', 'a/plain']);
  q.shutDown();
  await done;
});

test('get() waits for an add', async () => {
  const { q } = mk();
  const pending = q.get();
  q.add('a/1');
  assert.equal(await pending, 'a/1');
  assert.equal(q.isProcessing('a/1'), true);
});

test('addAfter: due only after the delay; the earliest of several wins', async () => {
  const { q, clock } = mk();
  q.addAfter('a/1', 1000);
  q.addAfter('a/1', 5000);
  q.addAfter('a/1', 300);
  assert.equal(q.len(), 0);
  assert.equal(q.delayedCount(), 1);
  assert.equal(clock.pending(), 1, 'superseded timers are cleared');
  clock.advance(299);
  assert.equal(q.len(), 0);
  clock.advance(1);
  assert.equal(q.len(), 1);
  assert.equal(q.delayedCount(), 0);
  assert.equal(await q.get(), 'a/1');
  clock.advance(10_000);
  assert.equal(q.len(), 0, 'the superseded delays do not add it again');
});

test('addAfter with a non-positive delay adds now; a delayed key already queued stays single', () => {
  const { q, clock } = mk();
  q.addAfter('a/1', 0);
  assert.equal(q.len(), 1);
  q.addAfter('a/1', 100);
  clock.advance(100);
  assert.equal(q.len(), 1);
});

test('rate-limited retries: exponential per key, capped, reset by forget', () => {
  const { q, clock } = mk({ baseDelayMs: 10, maxDelayMs: 1000 });
  const delays = Array.from({ length: 9 }, () => q.addRateLimited('a/1'));
  assert.deepEqual(delays, [10, 20, 40, 80, 160, 320, 640, 1000, 1000]);
  assert.equal(q.numRequeues('a/1'), 9);
  assert.equal(q.addRateLimited('a/2'), 10, 'per key');
  q.forget('a/1');
  assert.equal(q.numRequeues('a/1'), 0);
  assert.equal(q.addRateLimited('a/1'), 10);
  clock.advance(10);
  assert.equal(q.len(), 2);
});

test('backoffDelay never overflows past the cap', () => {
  assert.equal(backoffDelay(0, 5, 300_000), 5);
  assert.equal(backoffDelay(5000, 5, 300_000), 300_000);
});

test('shutDown: releases waiting workers, ignores new adds, drains what is queued', async () => {
  const { q, clock } = mk();
  const waiting = q.get();
  q.shutDown();
  assert.equal(await waiting, undefined);
  assert.equal(q.shuttingDown, true);
  q.add('a/1');
  q.addAfter('a/2', 10);
  clock.advance(100);
  assert.equal(q.len(), 0);
  assert.equal(await q.get(), undefined);

  const { q: q2, clock: c2 } = mk();
  q2.add('b/1');
  q2.addAfter('b/2', 50);
  q2.shutDown();
  assert.equal(c2.pending(), 0, 'delayed adds are cancelled');
  assert.equal(await q2.get(), 'b/1', 'already queued keys are still handed out');
  q2.done('b/1');
  assert.equal(await q2.get(), undefined);
});

test('runWorkers: no key processed by two workers at once; successes forget, failures back off, requeue hints honoured', async () => {
  const { q, clock } = mk({ baseDelayMs: 100, maxDelayMs: 1000 });
  const active = new Set<string>();
  const seen: string[] = [];
  const errors: Array<[string, number]> = [];
  let overlap = false;
  let failOnce = true;
  let gate!: () => void;
  const firstBlocked = new Promise<void>((r) => (gate = r));
  let release!: () => void;
  const released = new Promise<void>((r) => (release = r));

  const done = runWorkers(
    q,
    4,
    async (key) => {
      if (active.has(key)) overlap = true;
      active.add(key);
      seen.push(key);
      try {
        if (key === 'ns/slow' && seen.filter((k) => k === 'ns/slow').length === 1) {
          gate();
          await released; // held while the same key is re-added
        }
        if (key === 'ns/flaky' && failOnce) {
          failOnce = false;
          throw new Error('conflict');
        }
        if (key === 'ns/hint') return { requeueAfterMs: 500 };
        return undefined;
      } finally {
        active.delete(key);
      }
    },
    (key, _err, retry) => errors.push([key, retry]),
  );

  q.add('ns/slow');
  await firstBlocked;
  q.add('ns/slow');
  q.add('ns/slow');
  q.add('ns/flaky');
  q.add('ns/hint');
  await new Promise((r) => setImmediate(r));
  release();
  for (let i = 0; i < 5; i++) await new Promise((r) => setImmediate(r));

  assert.equal(overlap, false);
  assert.equal(seen.filter((k) => k === 'ns/slow').length, 2, 'processed again once after the re-adds');
  assert.deepEqual(errors, [['ns/flaky', 100]]);
  assert.equal(q.numRequeues('ns/flaky'), 1);
  clock.advance(100);
  for (let i = 0; i < 5; i++) await new Promise((r) => setImmediate(r));
  assert.equal(seen.filter((k) => k === 'ns/flaky').length, 2, 'retried after the backoff');
  assert.equal(q.numRequeues('ns/flaky'), 0, 'forgotten after the success');
  assert.equal(seen.filter((k) => k === 'ns/hint').length, 1);
  clock.advance(400);
  for (let i = 0; i < 5; i++) await new Promise((r) => setImmediate(r));
  assert.equal(seen.filter((k) => k === 'ns/hint').length, 2, 'requeued by its hint');

  q.shutDown();
  await done;
});

// The controller metrics live here with the queue whose depth they export.

test('controller metrics: names of SPEC section 8, own registry, depth read at scrape time', async () => {
  const { q } = mk();
  const m = createControllerMetrics({ workqueueDepth: () => q.len() });
  q.add('a/1');
  q.add('a/2');
  m.observeReconcile('success', 0.02);
  m.observeReconcile('error', 0.5);
  m.setLeader(true);
  m.recordExecuted({ type: 'deletePod', ordinal: 2, podName: 'x-2', uid: 'u', reason: 'Drained', replace: true, drainDurationSeconds: 42 });
  m.recordExecuted({
    type: 'deletePod',
    ordinal: 1,
    podName: 'x-1',
    uid: 'u',
    reason: 'NotRunning',
    replace: true,
    drainDurationSeconds: null,
  });
  m.recordExecuted({ type: 'emitEvent', eventType: 'Warning', reason: 'DrainTimeout', message: '', podName: 'x-0' });
  m.recordExecuted({ type: 'emitEvent', eventType: 'Normal', reason: 'RolloutComplete', message: '', podName: null });
  const text = await m.registry.metrics();
  for (const line of [
    'atlantis_operator_reconcile_total{result="success"} 1',
    'atlantis_operator_reconcile_total{result="error"} 1',
    'atlantis_operator_reconcile_duration_seconds_count 2',
    'atlantis_operator_drain_duration_seconds_count 1',
    'atlantis_operator_drain_duration_seconds_sum 42',
    'atlantis_operator_drain_timeouts_total 1',
    'atlantis_operator_rollouts_total 1',
    'atlantis_operator_leader 1',
    'atlantis_operator_workqueue_depth 2',
  ])
    assert.ok(text.includes(line), `missing: ${line}`);
  // A second instance (another test, a restarted controller in-process) must not collide.
  const again = createControllerMetrics();
  assert.match(await again.registry.metrics(), /atlantis_operator_leader 0/);
});

test('onTake reports how long each key waited in the queue (the queue-duration metric)', async () => {
  const clock = new FakeClock();
  const waits: number[] = [];
  const q = new WorkQueue({ clock, onTake: (ms) => waits.push(ms) });
  q.add('a/1');
  clock.advance(250);
  q.add('a/2');
  clock.advance(50);
  assert.equal(await q.get(), 'a/1');
  assert.equal(await q.get(), 'a/2');
  assert.deepEqual(waits, [300, 50]);
  // A worker already waiting takes a new key at once: it waited 0 ms.
  const next = q.get();
  q.add('a/3');
  assert.equal(await next, 'a/3');
  assert.deepEqual(waits, [300, 50, 0]);
  // Re-added while processing: its wait starts when done() queues it again, not at the add.
  q.add('a/3');
  clock.advance(1000);
  q.done('a/3');
  clock.advance(20);
  assert.equal(await q.get(), 'a/3');
  assert.deepEqual(waits, [300, 50, 0, 20]);
});
