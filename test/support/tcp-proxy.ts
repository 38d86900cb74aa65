// A TCP proxy on loopback for network fault tests: clients connect to it instead of the
// real server (e.g. a kubeconfig pointing at the proxy, TLS end to end through it) and the
// test decides what the network does:
//
//   const proxy = new TcpProxy({ host: '127.0.201.2', target: { host: '127.0.0.1', port } });
//   await proxy.listen();              // proxy.port
//   proxy.dropAll();                   // every connection is cut (both sides destroyed); new ones pass
//   proxy.silence();                   // a black hole: see below
//   proxy.pass();                      // new connections are forwarded again
//   await proxy.close();
//
// Silent: every open connection, and every connection accepted while silent, becomes a
// black hole for good: the proxy keeps the client's socket open and reads (and discards)
// what it sends, but forwards nothing either way and never closes it, like a half-open
// connection behind a NAT or load balancer that lost its state. A client notices only by its
// own timeouts (e.g. a watch that gets no bytes). pass() does not revive black holes: only
// connections accepted after it are forwarded.
//
// Cutting a socket resets it (RST), except one whose FIN is already on its way (end() called,
// by the proxy or by Node.js itself after the peer's FIN) or that is still connecting: that one
// is closed plainly. On Node.js 20 (libuv 1.46) resetAndDestroy() of a socket with a pending
// shutdown fails with EINVAL (an 'error' event, which the proxy ignores), and Node.js then
// drops the socket's handle without closing it: an open TCP handle that nothing owns any more
// and nothing can close, so the process never exits (once its event loop is empty it spins in
// its exit cleanup). That is how test/controller-watch-proxy.test.ts ran into its 600 s file
// timeout: its after() hook calls close() the moment the controller has exited, which can be
// in the same turn of the event loop in which the proxy passed the FIN of one of the
// controller's last connections on (upstream.end()).
import net from 'node:net';

export type TcpProxyMode = 'pass' | 'silent';

export interface TcpProxyOptions {
  /** a loopback address (127.x.y.z) to listen on */
  host: string;
  /** 0 (default): a free port */
  port?: number;
  target: { host: string; port: number };
}

export interface ProxyConnection {
  id: number;
  acceptedAt: number;
  /** 'forwarding' until dropped, black-holed or closed */
  state: 'connecting' | 'forwarding' | 'blackhole' | 'closed';
  /** bytes client -> server and server -> client that were forwarded */
  bytesUp: number;
  bytesDown: number;
  /** bytes the proxy read and threw away while the connection was a black hole */
  bytesDiscarded: number;
}

interface Conn extends ProxyConnection {
  client: net.Socket;
  upstream?: net.Socket;
  /** client bytes that arrived before the upstream connection was up */
  pending: Buffer[];
}

export class TcpProxy {
  readonly host: string;
  port: number;
  private readonly target: { host: string; port: number };
  private server: net.Server | undefined;
  private currentMode: TcpProxyMode = 'pass';
  private readonly conns = new Set<Conn>();
  private readonly history: Conn[] = [];
  private nextId = 1;
  /** Every socket of the proxy (both sides of every connection) until its 'close': what close() destroys, uncapped. */
  private readonly sockets = new Set<net.Socket>();
  private closed = false;
  /**
   * counters for assertions and failure messages; `resetFailed`: resets Node.js could not do (each
   * leaves a handle open that keeps the process alive), `lateAccepts`: connections refused
   * because close() had begun
   */
  readonly stats = { accepted: 0, forwarded: 0, dropped: 0, blackholed: 0, upstreamErrors: 0, resetFailed: 0, lateAccepts: 0 };

  constructor(opts: TcpProxyOptions) {
    if (!/^127\.\d+\.\d+\.\d+$/.test(opts.host)) throw new Error(`TcpProxy listens on loopback only, not ${opts.host}`);
    this.host = opts.host;
    this.port = opts.port ?? 0;
    this.target = opts.target;
  }

  get mode(): TcpProxyMode {
    return this.currentMode;
  }

  /** host:port clients should use. */
  get address(): string {
    return `${this.host}:${this.port}`;
  }

  async listen(): Promise<void> {
    if (this.server) return;
    const server = net.createServer((client) => this.accept(client));
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(this.port, this.host, () => {
        server.off('error', reject);
        resolve();
      });
    });
    const a = server.address();
    this.port = typeof a === 'object' && a ? a.port : 0;
    this.server = server;
  }

  /** Cuts every connection now (both sides destroyed: the client sees a reset/close). The listener stays. */
  dropAll(): number {
    let n = 0;
    for (const c of [...this.conns]) {
      n++;
      this.stats.dropped++;
      this.finish(c, true);
    }
    return n;
  }

  /** Turns every open connection, and every one accepted from now on, into a black hole. */
  silence(): void {
    this.currentMode = 'silent';
    for (const c of this.conns) if (c.state !== 'blackhole') this.blackhole(c);
  }

  /** Forwards connections accepted from now on (black holes stay black holes). */
  pass(): void {
    this.currentMode = 'pass';
  }

  /** Connections accepted so far (open and closed), oldest first. */
  connections(): ProxyConnection[] {
    return this.history.map(({ id, acceptedAt, state, bytesUp, bytesDown, bytesDiscarded }) => ({
      id,
      acceptedAt,
      state,
      bytesUp,
      bytesDown,
      bytesDiscarded,
    }));
  }

  /** Open connections by state. */
  openCounts(): Record<ProxyConnection['state'], number> {
    const r = { connecting: 0, forwarding: 0, blackhole: 0, closed: 0 };
    for (const c of this.conns) r[c.state]++;
    return r;
  }

  /** Sockets not closed yet (both sides counted): 0 after close() has returned. */
  openSockets(): number {
    return this.sockets.size;
  }

  /**
   * Stops listening and destroys every connection, black holes included. Returns once the
   * listener is closed, or after `timeoutMs` at the latest (then with a line on stderr, and
   * the counters, instead of holding the caller up).
   */
  async close(timeoutMs = 5_000): Promise<void> {
    const s = this.server;
    this.server = undefined;
    this.closed = true;
    // The listener first, so no connection arrives while the others are being destroyed.
    const listenerClosed = s ? new Promise<void>((r) => s.close(() => r())) : Promise.resolve();
    for (const c of [...this.conns]) this.finish(c, true);
    // Whatever the bookkeeping says, every socket the proxy still holds.
    for (const sock of [...this.sockets]) sock.destroy();
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<boolean>((r) => {
      timer = setTimeout(() => r(true), timeoutMs);
    });
    const late = await Promise.race([listenerClosed.then(() => false), timedOut]);
    clearTimeout(timer);
    if (late)
      process.stderr.write(
        `TcpProxy ${this.address}: the listener did not close within ${timeoutMs} ms; open sockets ${this.sockets.size}, ` +
          `stats ${JSON.stringify(this.stats)}\n`,
      );
  }

  /** Tracks `s` until its 'close'. */
  private track(s: net.Socket): void {
    this.sockets.add(s);
    s.once('close', () => this.sockets.delete(s));
  }

  private accept(client: net.Socket): void {
    if (this.closed) {
      this.stats.lateAccepts++;
      client.on('error', () => {});
      client.destroy();
      return;
    }
    this.track(client);
    this.stats.accepted++;
    const c: Conn = {
      id: this.nextId++,
      acceptedAt: Date.now(),
      state: 'connecting',
      bytesUp: 0,
      bytesDown: 0,
      bytesDiscarded: 0,
      client,
      pending: [],
    };
    this.conns.add(c);
    this.history.push(c);
    if (this.history.length > 10_000) this.history.splice(0, 1_000);
    client.on('error', () => {});
    client.on('close', () => this.finish(c, false));
    client.on('data', (d: Buffer) => this.fromClient(c, d));
    client.on('end', () => {
      if (c.state === 'forwarding') c.upstream?.end();
      else if (c.state === 'connecting') this.finish(c, true);
      // a black hole never answers, not even a FIN
    });
    if (this.currentMode === 'silent') {
      this.blackhole(c);
      return;
    }
    const up = net.connect({ host: this.target.host, port: this.target.port });
    this.track(up);
    c.upstream = up;
    up.setNoDelay(true);
    client.setNoDelay(true);
    up.on('error', () => {
      if (c.state === 'connecting' || c.state === 'forwarding') this.stats.upstreamErrors++;
    });
    up.on('connect', () => {
      if (c.state !== 'connecting') {
        up.destroy();
        return;
      }
      c.state = 'forwarding';
      this.stats.forwarded++;
      for (const d of c.pending.splice(0)) this.write(up, client, d, () => (c.bytesUp += d.length));
    });
    up.on('data', (d: Buffer) => {
      if (c.state !== 'forwarding') return;
      this.write(client, up, d, () => (c.bytesDown += d.length));
    });
    up.on('end', () => {
      if (c.state === 'forwarding') client.end();
    });
    up.on('close', (hadError) => {
      // a clean close after the server's FIN: client.end() (on 'end') lets queued bytes out
      if (c.state === 'connecting' || (c.state === 'forwarding' && hadError)) this.finish(c, true);
    });
  }

  private fromClient(c: Conn, d: Buffer): void {
    switch (c.state) {
      case 'connecting':
        c.pending.push(d);
        return;
      case 'forwarding':
        this.write(c.upstream!, c.client, d, () => (c.bytesUp += d.length));
        return;
      case 'blackhole':
        c.bytesDiscarded += d.length;
        return;
      case 'closed':
        return;
    }
  }

  /** Writes to `to`, pausing `from` while `to` is full. */
  private write(to: net.Socket, from: net.Socket, d: Buffer, count: () => void): void {
    count();
    if (!to.write(d)) {
      from.pause();
      to.once('drain', () => from.resume());
    }
  }

  private blackhole(c: Conn): void {
    c.state = 'blackhole';
    this.stats.blackholed++;
    c.pending = [];
    // The server side goes away; the client keeps an open socket that never hears anything.
    c.upstream?.destroy();
    c.upstream = undefined;
    c.client.resume();
  }

  /** Closes both sides; `cut` resets them (RST), as a dropped connection looks to its ends. */
  private finish(c: Conn, cut: boolean): void {
    this.conns.delete(c);
    if (c.state === 'closed') return;
    c.state = 'closed';
    c.pending = [];
    const kill = (s: net.Socket | undefined) => {
      if (!s || s.destroyed) return;
      if (cut) this.reset(s);
      else s.destroy();
    };
    kill(c.upstream);
    if (cut) kill(c.client);
  }

  /**
   * Resets `s` (RST) where Node.js can: not while it is connecting, and not once its FIN is on
   * its way (end() called: resetAndDestroy() would fail with EINVAL and leave the handle open
   * for good, see the top of this file); those are closed plainly. A reset that fails anyway
   * is counted in stats.resetFailed (nothing can close that handle any more: Node.js marks it
   * closing), so the failure report of a hung test names it.
   */
  private reset(s: net.Socket): void {
    if (s.connecting || s.pending || s.writableEnded || !s.writable) {
      s.destroy();
      return;
    }
    const onError = (e: NodeJS.ErrnoException) => {
      if (e.syscall === 'reset') this.stats.resetFailed++;
    };
    s.on('error', onError);
    s.resetAndDestroy();
    s.off('error', onError);
  }
}
