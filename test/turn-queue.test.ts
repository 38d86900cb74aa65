// TurnQueue (src/server/http/turn-queue.ts): tasks start in order, in later event-loop turns,
// a budget's worth per turn; I/O is served between turns; a failing task fails only itself;
// idle() waits for queued and running tasks. Then the same through the server's request
// listener, for a body with a Content-Length and a chunked one: a /status sent after a
// burst of slow webhooks is answered before they have all been handled, within a few of them
// by the wall clock of the client that sent it and of the server that handled them.
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
 * server's own event loop): 41 connections, then, once the server says on stdin that it has
 * them all, 40 webhooks on 40 of them and, 20 ms later, a /status on the last. Prints when the
 * /status request was in the kernel's hands (the wall clock, as the server times webhooks).
 */
const BURST_CLIENT = `
const http = require('node:http');
const [url, mode] = process.argv.slice(1);
const open = (method, path) => {
  const headers = { 'x-github-event': 'ping', 'content-type': 'application/json' };
  // 'chunked': no Content-Length, the body ends with the last chunk.
  if (method === 'POST' && mode === 'plain') headers['content-length'] = '2';
  let r;
  const answer = new Promise((resolve, reject) => {
    r = http.request(url + path, { method, agent: false, headers }, (res) => {
      let text = '';
      res.on('data', (c) => { text += c; }); res.on('end', () => resolve({ code: res.statusCode, text }));
    });
    r.on('error', reject);
  });
  // The connection is made now; the request goes out with the first write.
  return { r, answer };
};
const hooks = Array.from({ length: 40 }, () => open('POST', '/events'));
const status = open('GET', '/status');
let sentAt = 0;
process.stdin.once('data', async () => {
  for (const h of hooks) {
    h.r.write('{}');
    h.r.end();
  }
  setTimeout(() => {
    // On a connected socket 'finish' comes once the request is written to it: a client held
    // back by the machine's load takes this time late, never early.
    status.r.once('finish', () => { sentAt = Date.now(); });
    status.r.end();
  }, 20);
  const st = await status.answer;
  const answers = await Promise.all(hooks.map((h) => h.answer));
  console.log(JSON.stringify({ status: st.code, sentAt, codes: answers.map((a) => a.code), bodies: answers.map((a) => a.text) }));
});
`;

/**
 * One burst through the server's request listener: what the client saw, the times the server
 * finished each webhook, and how many it had finished when it answered /status.
 */
async function burst(mode: 'plain' | 'chunked') {
  const handledAt: number[] = [];
  let handledAtAnswer = -1;
  const listener = buildRequestListener({
    tracker: new OperationTracker(),
    drainState: () => initialDrainState,
    metrics: new ServerMetrics({ defaults: false }),
    logger: createLogger({ silent: true }),
    storeHealthy: async () => true,
    webhookQueue: new TurnQueue(WEBHOOK_TURN_BUDGET_MS),
    // 10 ms of CPU each, a slow webhook: 400 ms for the burst.
    onWebhook: async (req) => {
      spin(10);
      handledAt.push(Date.now());
      return { status: 200, body: `Ignoring ${req.rawBody.length}\n` };
    },
  });
  const server = http
    .createServer((req, res) => {
      if (req.url === '/status') res.once('finish', () => (handledAtAnswer = handledAt.length));
      listener(req, res);
    })
    .listen(0, '127.0.0.1');
  await new Promise((r) => server.once('listening', r));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  try {
    const client = execa(process.execPath, ['-e', BURST_CLIENT, url, mode]);
    // The burst starts once the server has taken all 41 connections: how soon a loaded
    // machine gets connections to a server is not what is tested.
    let accepted = 0;
    server.on('connection', () => {
      if (++accepted === 41) client.stdin?.end('go\n');
    });
    const out = JSON.parse((await client).stdout) as { status: number; sentAt: number; codes: number[]; bodies: string[] };
    return { ...out, handledAt, handledAtAnswer };
  } finally {
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  }
}

describe('webhooks take their turn on the HTTP surface', () => {
  // Both ways GitHub could send a body (it sends a Content-Length).
  for (const [name, body] of [
    ['body with a Content-Length', '{}'],
    ['chunked body', undefined],
  ] as const) {
    it(`answers a /status sent after a burst of 40 slow webhooks before they have all been handled: ${name}`, async () => {
      // The order is judged from both processes' clocks (the wall clock): when the client sent
      // /status, and when the server finished each webhook. A client the machine's load held
      // back until the burst was over proves nothing either way: the burst is sent again (3
      // times at most).
      for (let attempt = 1; ; attempt++) {
        const r = await burst(body === undefined ? 'chunked' : 'plain');
        assert.equal(r.status, 200);
        assert.deepEqual(new Set(r.codes), new Set([200]));
        assert.deepEqual(new Set(r.bodies), new Set(['Ignoring 2\n']), 'the whole body reached the handler');
        assert.equal(r.handledAt.length, 40);
        const before = r.handledAt.filter((t) => t <= r.sentAt).length;
        if (before === 40 && attempt < 3) continue;
        assert.ok(before < 40, 'the client sent /status after the last webhook was handled, 3 times');
        // Between the sending of /status and its answer, a few webhooks at most took their turn.
        assert.ok(r.handledAtAnswer - before <= 5, `/status sent after ${before} and answered after ${r.handledAtAnswer} of 40 webhooks`);
        return;
      }
    });
  }
});
