// TurnQueue (src/server/http/turn-queue.ts): tasks start in order, in later event-loop turns,
// a budget's worth per turn; I/O is served between turns; a failing task fails only itself;
// idle() waits for queued and running tasks. Then the same through the server's request
// listener, for a body with a Content-Length and a chunked one: a /status sent after a
// burst of slow webhooks is answered before they have all been handled.
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, it } from 'node:test';
import { execa } from 'execa';
import { createLogger } from '../src/log.js';
import { initialDrainState } from '../src/server/drain/drain-state.js';
import { OperationTracker } from '../src/server/drain/operation-tracker.js';
import { WEBHOOK_TURN_BUDGET_MS, buildRequestListener } from '../src/server/http/app.js';
import { TurnQueue } from '../src/server/http/turn-queue.js';
import { ServerMetrics } from '../src/server/metrics.js';

/** Counts event-loop turns: a setImmediate that schedules itself again, until stopped. */
function turnCounter(): { readonly turn: number; stop: () => void } {
  let turn = 0;
  let stopped = false;
  const tick = () => {
    turn++;
    if (!stopped) setImmediate(tick);
  };
  setImmediate(tick);
  return {
    get turn() {
      return turn;
    },
    stop: () => {
      stopped = true;
    },
  };
}

const spin = (ms: number) => {
  const end = performance.now() + ms;
  while (performance.now() < end) {
    /* busy, as a handler's CPU work */
  }
};

describe('TurnQueue', () => {
  it('starts tasks in order, never in the turn that queued them, a budget of them per turn', async () => {
    let clock = 0; // each task takes 1 ms of this clock
    const q = new TurnQueue(3, () => clock);
    const counter = turnCounter();
    const started: Array<{ task: number; turn: number }> = [];
    const done = Array.from({ length: 10 }, (_, i) =>
      q.run(async () => {
        started.push({ task: i, turn: counter.turn });
        clock += 1;
        return i;
      }),
    );
    assert.equal(started.length, 0, 'nothing runs in the turn that queued it');
    assert.equal(q.pending, 10);
    assert.deepEqual(await Promise.all(done), [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    counter.stop();
    assert.deepEqual(
      started.map((s) => s.task),
      [0, 1, 2, 3, 4, 5, 6, 7, 8, 9],
    );
    const perTurn: number[] = [];
    started.forEach((s, i) => {
      if (i > 0 && s.turn === started[i - 1]!.turn) perTurn[perTurn.length - 1]!++;
      else perTurn.push(1);
    });
    assert.deepEqual(perTurn, [3, 3, 3, 1], 'three 1 ms tasks fill a 3 ms budget');
  });

  it('starts one task per turn even when it alone takes longer than the budget', async () => {
    let clock = 0;
    const q = new TurnQueue(3, () => clock);
    const counter = turnCounter();
    const turns: number[] = [];
    await Promise.all(
      [0, 1, 2].map(() =>
        q.run(async () => {
          turns.push(counter.turn);
          clock += 10;
        }),
      ),
    );
    counter.stop();
    assert.equal(new Set(turns).size, 3);
  });

  it('lets timers and I/O run between turns', async () => {
    const q = new TurnQueue(3);
    let startedWhenTimerFired = -1;
    let started = 0;
    await Promise.all(
      Array.from({ length: 30 }, () =>
        q.run(async () => {
          // The first task sets a timer: it is due once the 1 ms tasks of this turn are done.
          if (started++ === 0)
            setTimeout(() => {
              startedWhenTimerFired = started;
            }, 0);
          spin(1);
        }),
      ),
    );
    assert.ok(
      startedWhenTimerFired >= 1 && startedWhenTimerFired < 30,
      `the timer fired after ${startedWhenTimerFired} of 30 tasks had started`,
    );
  });

  it('fails only the task that throws, synchronously or not', async () => {
    const q = new TurnQueue(3);
    const results = await Promise.allSettled([
      q.run(async () => 'a'),
      q.run(() => {
        throw new Error('sync');
      }),
      q.run(async () => {
        throw new Error('async');
      }),
      q.run(async () => 'd'),
    ]);
    assert.deepEqual(
      results.map((r) => (r.status === 'fulfilled' ? r.value : (r.reason as Error).message)),
      ['a', 'sync', 'async', 'd'],
    );
  });

  it('idle() resolves once nothing waits and nothing runs', async () => {
    const q = new TurnQueue(3);
    await q.idle(); // empty: at once
    let release!: () => void;
    const blocker = new Promise<void>((r) => {
      release = r;
    });
    let finished = false;
    void q.run(() => blocker);
    void q.run(async () => 'second');
    const idle = q.idle().then(() => {
      finished = true;
    });
    await new Promise((r) => setTimeout(r, 20));
    assert.equal(q.pending, 0, 'both started');
    assert.equal(finished, false, 'the first still runs');
    release();
    await idle;
    assert.equal(finished, true);
  });
});

/**
 * A client in a process of its own (in this one, its requests would go out at the pace of the
 * server's own event loop): 40 webhooks at once, each on its own connection, then a /status
 * once they are all sent. Prints how many webhooks had been answered when /status was.
 */
const BURST_CLIENT = `
const http = require('node:http');
const [url, mode] = process.argv.slice(1);
let answered = 0;
const send = (method, path) => new Promise((resolve, reject) => {
  const headers = { 'x-github-event': 'ping', 'content-type': 'application/json' };
  // 'chunked': no Content-Length, the body ends with the last chunk.
  if (method === 'POST' && mode === 'plain') headers['content-length'] = '2';
  const r = http.request(url + path, { method, agent: false, headers }, (res) => {
    let text = '';
    res.on('data', (c) => { text += c; }); res.on('end', () => resolve({ code: res.statusCode, text }));
  });
  r.on('error', reject);
  if (method === 'POST') r.write('{}');
  r.end();
});
const hooks = Array.from({ length: 40 }, () => send('POST', '/events').then((a) => { answered++; return a; }));
setTimeout(async () => {
  const status = await send('GET', '/status');
  const atStatus = answered;
  const answers = await Promise.all(hooks);
  console.log(JSON.stringify({ status: status.code, atStatus, codes: answers.map((a) => a.code), bodies: answers.map((a) => a.text) }));
}, 20);
`;

describe('webhooks take their turn on the HTTP surface', () => {
  // Both ways GitHub could send a body (it sends a Content-Length).
  for (const [name, body] of [
    ['body with a Content-Length', '{}'],
    ['chunked body', undefined],
  ] as const) {
    it(`answers a /status sent after a burst of 40 slow webhooks before they have all been handled: ${name}`, async () => {
      let handled = 0;
      const listener = buildRequestListener({
        tracker: new OperationTracker(),
        drainState: () => initialDrainState,
        metrics: new ServerMetrics({ defaults: false }),
        logger: createLogger({ silent: true }),
        storeHealthy: async () => true,
        webhookQueue: new TurnQueue(WEBHOOK_TURN_BUDGET_MS),
        // 10 ms of CPU each, a slow webhook: 400 ms for the burst, so that a client delayed by a
        // busy machine still sends its /status well before the last one is handled.
        onWebhook: async (req) => {
          spin(10);
          handled++;
          return { status: 200, body: `Ignoring ${req.rawBody.length}\n` };
        },
      });
      const server = http.createServer(listener).listen(0, '127.0.0.1');
      await new Promise((r) => server.once('listening', r));
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
      try {
        const client = execa(process.execPath, ['-e', BURST_CLIENT, url, body === undefined ? 'chunked' : 'plain']);
        const out = JSON.parse((await client).stdout) as { status: number; atStatus: number; codes: number[]; bodies: string[] };
        assert.equal(out.status, 200);
        assert.deepEqual(new Set(out.codes), new Set([200]));
        assert.deepEqual(new Set(out.bodies), new Set(['Ignoring 2\n']), 'the whole body reached the handler');
        assert.equal(handled, 40);
        assert.ok(out.atStatus < 30, `/status was answered after ${out.atStatus} of 40 webhooks`);
      } finally {
        server.closeAllConnections();
        await new Promise((r) => server.close(r));
      }
    });
  }
});
