// The Service proxy's listener (dev/service-proxy/forward.ts) with real sockets on loopback:
// where new connections go, what a client sees without endpoints or with a dead one, that
// open connections stay with their pod when the endpoints change, half-close, close().
import { test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import type { Endpoint } from '../dev/service-proxy/endpoints.js';
import { emptyStats, PortProxy } from '../dev/service-proxy/forward.js';

/** A backend that answers each line "who" with its name, and its end with "<name> bye". */
async function backend(name: string): Promise<{ port: number; close(): Promise<void>; sockets: Set<net.Socket> }> {
  const sockets = new Set<net.Socket>();
  const server = net.createServer({ allowHalfOpen: true }, (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
    s.on('error', () => {});
    let buf = '';
    s.on('data', (d) => {
      buf += d.toString();
      for (let nl = buf.indexOf('\n'); nl >= 0; nl = buf.indexOf('\n')) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        if (line === 'who') s.write(`${name}\n`);
      }
    });
    s.on('end', () => s.end(`${name} bye\n`));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return {
    port: (server.address() as net.AddressInfo).port,
    sockets,
    close: () =>
      new Promise<void>((r) => {
        for (const s of sockets) s.destroy();
        server.close(() => r());
      }),
  };
}

/** A client connection that collects what it receives and how it ended. */
interface Client {
  sock: net.Socket;
  /** resolves with the next line received */
  line(): Promise<string>;
  /** resolves with 'end' (a FIN, after all data) or the error code (e.g. ECONNRESET) */
  ended: Promise<string>;
  data(): string;
}

function connect(port: number): Client {
  const sock = net.connect({ host: '127.0.0.1', port, allowHalfOpen: true });
  let got = '';
  let waiter: (() => void) | undefined;
  sock.on('data', (d) => {
    got += d.toString();
    waiter?.();
  });
  const ended = new Promise<string>((resolve) => {
    sock.on('end', () => resolve('end'));
    sock.on('error', (e: NodeJS.ErrnoException) => resolve(e.code ?? e.message));
    sock.on('close', () => resolve('close'));
  });
  let taken = 0;
  return {
    sock,
    ended,
    data: () => got,
    async line() {
      for (let i = 0; i < 1_000; i++) {
        const nl = got.indexOf('\n', taken);
        if (nl >= 0) {
          const l = got.slice(taken, nl);
          taken = nl + 1;
          return l;
        }
        const why = await Promise.race([new Promise<string>((r) => (waiter = () => r(''))), ended]);
        if (why) throw new Error(`connection ended (${why}) before a line; got ${JSON.stringify(got)}`);
      }
      throw new Error('no line after 1000 reads');
    },
  };
}

function proxyFor(randoms: number[] = []) {
  const stats = emptyStats();
  const records: Array<{ outcome: string; endpoint?: string; error?: string }> = [];
  let i = 0;
  const pp = new PortProxy({
    service: 'web',
    servicePort: 80,
    stats,
    connectTimeoutMs: 2_000,
    random: () => randoms[i++ % Math.max(1, randoms.length)] ?? 0,
    onConnection: (r) => records.push(r),
  });
  return { pp, stats, records };
}

const ep = (podName: string, port: number): Endpoint => ({ servicePort: 80, podName, ip: '127.0.0.1', port });

test('no Ready endpoint: the connection is reset at once, counted as refused', async () => {
  const { pp, stats, records } = proxyFor();
  const { port } = await pp.listen('127.0.0.1', 0);
  try {
    const c = connect(port);
    c.sock.write('who\n');
    // A reset, not a FIN and not silence: the client learns at once that nothing serves here.
    assert.equal(await c.ended, 'ECONNRESET');
    assert.equal(c.data(), '');
    assert.deepEqual(stats, { forwarded: 0, refused: 1, failed: 0, perPod: {} });
    assert.deepEqual(records, [{ outcome: 'refused' }]);
  } finally {
    await pp.close(true);
  }
});

test('each new connection goes to the endpoint the random number picks; bytes flow both ways; half-close is passed on', async () => {
  const a = await backend('a');
  const b = await backend('b');
  const { pp, stats, records } = proxyFor([0.1, 0.9, 0.6, 0.2]);
  const { port } = await pp.listen('127.0.0.1', 0);
  try {
    pp.setEndpoints([ep('a', a.port), ep('b', b.port)]);
    const answers: string[] = [];
    for (let i = 0; i < 4; i++) {
      const c = connect(port);
      c.sock.write('who\n');
      answers.push(await c.line());
      // The client's FIN reaches the pod, whose answer after it still reaches the client.
      c.sock.end();
      assert.equal(await c.line(), `${answers[i]} bye`);
      assert.equal(await c.ended, 'end');
    }
    assert.deepEqual(answers, ['a', 'b', 'b', 'a']);
    assert.deepEqual(stats, { forwarded: 4, refused: 0, failed: 0, perPod: { a: 2, b: 2 } });
    assert.deepEqual(
      records.map((r) => r.endpoint),
      [a, b, b, a].map((x) => `${x === a ? 'a' : 'b'}@127.0.0.1:${x.port}`),
    );
  } finally {
    await pp.close(true);
    await a.close();
    await b.close();
  }
});

test('an endpoint that refuses: the client is reset, counted as failed; endpoints changed later apply to new connections only', async () => {
  const a = await backend('a');
  const b = await backend('b');
  const dead = await backend('dead');
  const deadPort = dead.port;
  await dead.close();
  const { pp, stats, records } = proxyFor([0]);
  const { port } = await pp.listen('127.0.0.1', 0);
  try {
    pp.setEndpoints([ep('dead', deadPort)]);
    const c0 = connect(port);
    assert.equal(await c0.ended, 'ECONNRESET');
    assert.equal(records.at(-1)?.outcome, 'failed');
    assert.equal(records.at(-1)?.error, 'ECONNREFUSED');

    pp.setEndpoints([ep('a', a.port)]);
    const kept = connect(port);
    kept.sock.write('who\n');
    assert.equal(await kept.line(), 'a');
    // a leaves the endpoints: the open connection stays with it (as conntrack keeps it)...
    pp.setEndpoints([ep('b', b.port)]);
    kept.sock.write('who\n');
    assert.equal(await kept.line(), 'a');
    // ...and a new one goes to b
    const fresh = connect(port);
    fresh.sock.write('who\n');
    assert.equal(await fresh.line(), 'b');
    // no endpoints: new connections reset, the open ones still served
    pp.setEndpoints([]);
    const none = connect(port);
    assert.equal(await none.ended, 'ECONNRESET');
    kept.sock.write('who\n');
    assert.equal(await kept.line(), 'a');
    // the pod's process dies (its sockets reset): the client's connection is reset too
    for (const s of a.sockets) s.resetAndDestroy();
    assert.equal(await kept.ended, 'ECONNRESET');
    fresh.sock.destroy();
    assert.deepEqual(stats, { forwarded: 2, refused: 1, failed: 1, perPod: { a: 1, b: 1 } });
  } finally {
    await pp.close(true);
    await a.close();
    await b.close();
  }
});

test('close(false) stops listening and leaves open connections; close(true) cuts them', async () => {
  const a = await backend('a');
  const first = proxyFor([0]);
  const { port } = await first.pp.listen('127.0.0.1', 0);
  first.pp.setEndpoints([ep('a', a.port)]);
  const c = connect(port);
  c.sock.write('who\n');
  assert.equal(await c.line(), 'a');
  await first.pp.close(false);
  assert.equal(first.pp.address(), undefined);
  const refused = net.connect({ host: '127.0.0.1', port });
  const code = await new Promise<string>((r) => refused.on('error', (e: NodeJS.ErrnoException) => r(e.code ?? '')));
  assert.equal(code, 'ECONNREFUSED', 'nothing listens any more');
  c.sock.write('who\n');
  assert.equal(await c.line(), 'a', 'the open connection carries on');

  const second = proxyFor([0]);
  const again = await second.pp.listen('127.0.0.1', 0);
  second.pp.setEndpoints([ep('a', a.port)]);
  const d = connect(again.port);
  d.sock.write('who\n');
  assert.equal(await d.line(), 'a');
  await second.pp.close(true);
  assert.match(await d.ended, /^(end|ECONNRESET|close)$/);
  c.sock.destroy();
  await a.close();
});

test('a close() while the listener is still starting leaves nothing listening', async () => {
  const { pp } = proxyFor();
  const listening = pp.listen('127.0.0.1', 0);
  await pp.close(true);
  const { port } = await listening;
  assert.equal(pp.address(), undefined);
  const probe = net.connect({ host: '127.0.0.1', port });
  const code = await new Promise<string>((r) => {
    probe.on('error', (e: NodeJS.ErrnoException) => r(e.code ?? ''));
    probe.on('connect', () => r('connected'));
  });
  probe.destroy();
  assert.equal(code, 'ECONNREFUSED');
});
