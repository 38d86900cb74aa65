// One listener per Service port: each new connection goes to one Ready endpoint picked at
// random (pickEndpoint), bytes are copied both ways until both sides are done.
//
// - No Ready endpoint: the connection is accepted and reset at once (RST), as a load balancer
//   without backends does; the client fails fast instead of waiting.
// - The endpoint refuses or does not answer within connectTimeoutMs: the client is reset too
//   (kube-proxy's DNAT would pass the pod's RST on; it does not retry another endpoint).
// - A change of endpoints affects new connections only: open ones stay with their pod until
//   either side closes them, as kube-proxy's conntrack entries do.
import net from 'node:net';
import { type Endpoint, endpointText, pickEndpoint } from './endpoints.js';

export interface PortStats {
  /** connections handed to an endpoint that accepted them */
  forwarded: number;
  /** connections reset because the port had no Ready endpoint */
  refused: number;
  /** connections reset because the picked endpoint refused or did not answer */
  failed: number;
  /** forwarded connections per pod */
  perPod: Record<string, number>;
}

export function emptyStats(): PortStats {
  return { forwarded: 0, refused: 0, failed: 0, perPod: {} };
}

export interface PortProxyOptions {
  service: string;
  servicePort: number;
  /** counters, shared by the ports of one Service */
  stats: PortStats;
  connectTimeoutMs: number;
  random: () => number;
  /** one record per connection: where it went, or why it did not */
  onConnection(r: { outcome: 'forwarded' | 'refused' | 'failed'; endpoint?: string; error?: string }): void;
}

/** Resets `s` (RST) where Node.js can; plainly closes a socket still connecting or whose FIN is already queued. */
export function resetSocket(s: net.Socket): void {
  if (s.destroyed) return;
  // resetAndDestroy() on a socket with a pending shutdown fails (EINVAL) and leaks its handle.
  if (s.connecting || s.pending || s.writableEnded || !s.writable) s.destroy();
  else s.resetAndDestroy();
}

export class PortProxy {
  private server: net.Server | undefined;
  private endpoints: readonly Endpoint[] = [];
  private readonly sockets = new Set<net.Socket>();
  private bound: { host: string; port: number } | undefined;
  private starting: Promise<void> = Promise.resolve();
  private closed = false;

  constructor(private readonly o: PortProxyOptions) {}

  /** Takes effect for the next connection. */
  setEndpoints(eps: readonly Endpoint[]): void {
    this.endpoints = eps;
  }

  /** Sockets of open connections (both sides counted). */
  openConnections(): number {
    return this.sockets.size;
  }

  isClosed(): boolean {
    return this.closed;
  }

  /** Where it listens, once listening. */
  address(): { host: string; port: number } | undefined {
    return this.bound;
  }

  /** Listens on host:port (port 0: a free one). */
  listen(host: string, port: number): Promise<{ host: string; port: number }> {
    if (this.closed) return Promise.reject(new Error('the port proxy is closed'));
    const server = net.createServer({ allowHalfOpen: true, pauseOnConnect: true }, (c) => this.accept(c));
    this.server = server;
    const started = new Promise<{ host: string; port: number }>((resolve, reject) => {
      server.once('error', reject);
      server.listen({ host, port, exclusive: true }, () => {
        server.off('error', reject);
        server.on('error', () => {});
        const a = server.address() as net.AddressInfo;
        // closed while it was starting: close() waits for this and then closes it
        if (this.server === server) this.bound = { host, port: a.port };
        resolve({ host, port: a.port });
      });
    });
    this.starting = started.then(
      () => {},
      () => {},
    );
    return started;
  }

  /**
   * Stops listening. `dropConnections` also cuts the open connections (the proxy stops);
   * without it they carry on, as established connections do when kube-proxy removes a Service.
   */
  async close(dropConnections: boolean): Promise<void> {
    this.closed = true;
    const s = this.server;
    this.server = undefined;
    this.bound = undefined;
    if (dropConnections) for (const sock of [...this.sockets]) sock.destroy();
    // A listen still on its way binds after a close() issued now: let it finish first.
    await this.starting;
    if (!s?.listening) return;
    // The listening socket closes at once; close()'s callback waits for every open connection.
    const ended = new Promise<void>((r) => s.close(() => r()));
    if (!dropConnections) return;
    for (const sock of [...this.sockets]) sock.destroy();
    await ended;
  }

  private track(s: net.Socket): void {
    this.sockets.add(s);
    s.once('close', () => this.sockets.delete(s));
  }

  private accept(client: net.Socket): void {
    client.on('error', () => {});
    const ep = pickEndpoint(this.endpoints, this.o.random());
    if (!ep) {
      this.o.stats.refused++;
      this.o.onConnection({ outcome: 'refused' });
      resetSocket(client);
      return;
    }
    this.track(client);
    const up = net.connect({ host: ep.ip, port: ep.port, allowHalfOpen: true });
    this.track(up);
    // settled once the endpoint accepted or failed: each connection is counted once
    let settled = false;
    const fail = (error: string) => {
      if (settled) return;
      settled = true;
      this.o.stats.failed++;
      this.o.onConnection({ outcome: 'failed', endpoint: endpointText(ep), error });
      up.destroy();
      resetSocket(client);
    };
    up.setTimeout(this.o.connectTimeoutMs, () => fail('connect timeout'));
    up.on('error', (e: NodeJS.ErrnoException) => {
      if (!settled) fail(e.code ?? e.message);
      else resetSocket(client); // the pod reset the connection: so does the client's side
    });
    client.on('close', () => up.destroy());
    client.on('error', () => resetSocket(up));
    up.once('connect', () => {
      if (settled) return;
      settled = true;
      up.setTimeout(0);
      this.o.stats.forwarded++;
      this.o.stats.perPod[ep.podName] = (this.o.stats.perPod[ep.podName] ?? 0) + 1;
      this.o.onConnection({ outcome: 'forwarded', endpoint: endpointText(ep) });
      client.pipe(up);
      up.pipe(client);
      client.resume();
    });
  }
}
