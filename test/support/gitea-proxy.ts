// Two small HTTP forwarders on loopback for the Gitea tests:
// - startApiRecorder: the server's --gitea-base-url points here; every API request goes on to
//   the real Gitea unchanged and is kept (method, path, body, Gitea's status) in the order the
//   server made it, so a test reads what the server wrote to Gitea, in order, as the GitHub
//   stand-in's `calls` let it.
// - startRoundRobin: what a Kubernetes Service does for the webhooks: each delivery Gitea sends
//   goes to the next of several replicas.
import http from 'node:http';
import type { AddressInfo } from 'node:net';

/** One API request as the server sent it, with Gitea's answer (RecordedCall's shape, paths without /api/v1). */
export interface ApiCall {
  method: string;
  /** Path under /api/v1, without the query string. */
  path: string;
  query: Record<string, string>;
  headers: http.IncomingHttpHeaders;
  body: unknown;
  status: number;
}

export interface Forwarder {
  url: string;
  close(): Promise<void>;
}

export interface ApiRecorder extends Forwarder {
  calls: ApiCall[];
}

function readAll(req: http.IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

/** Sends `req` (already read: `body`) to `target` and answers with what came back; resolves to its status and body. */
function forward(
  target: URL,
  req: http.IncomingMessage,
  body: Buffer,
  res: http.ServerResponse,
): Promise<{ status: number; text: string }> {
  return new Promise((resolve) => {
    const headers = { ...req.headers, host: target.host };
    const out = http.request(
      { host: target.hostname, port: target.port, method: req.method, path: req.url, headers, timeout: 120_000 },
      (answer) => {
        const status = answer.statusCode ?? 502;
        const chunks: Buffer[] = [];
        res.writeHead(status, answer.headers);
        answer.on('data', (c: Buffer) => {
          chunks.push(c);
          res.write(c);
        });
        answer.on('end', () => {
          res.end();
          resolve({ status, text: Buffer.concat(chunks).toString('utf8') });
        });
      },
    );
    out.on('error', () => {
      if (!res.headersSent) res.writeHead(502).end('forwarder: no answer');
      resolve({ status: 502, text: 'forwarder: no answer' });
    });
    out.end(body);
  });
}

async function listen(server: http.Server, host: string): Promise<string> {
  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  return `http://${host}:${(server.address() as AddressInfo).port}`;
}

function closer(server: http.Server): () => Promise<void> {
  return async () => {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  };
}

export async function startApiRecorder(giteaUrl: string, host: string): Promise<ApiRecorder> {
  const target = new URL(giteaUrl);
  const calls: ApiCall[] = [];
  const server = http.createServer(async (req, res) => {
    const body = await readAll(req);
    const url = new URL(req.url ?? '/', 'http://x');
    // The call is kept once answered, at the place of its request: the order the server asked in.
    const call: ApiCall = {
      method: req.method ?? 'GET',
      path: url.pathname.replace(/^\/api\/v1(?=\/)/, ''),
      query: Object.fromEntries(url.searchParams),
      headers: req.headers,
      body: undefined,
      status: 0,
    };
    try {
      call.body = body.length > 0 ? JSON.parse(body.toString('utf8')) : undefined;
    } catch {
      call.body = body.toString('utf8');
    }
    calls.push(call);
    call.status = (await forward(target, req, body, res)).status;
  });
  return { url: await listen(server, host), calls, close: closer(server) };
}

/** A delivery as the round-robin forwarder passed it on: to which target, Gitea's event type, the answer. */
export interface PassedDelivery {
  target: number;
  eventType: string;
  status: number;
  text: string;
}

export async function startRoundRobin(targets: string[], host: string): Promise<Forwarder & { sent: number[]; passed: PassedDelivery[] }> {
  const urls = targets.map((t) => new URL(t));
  const sent = urls.map(() => 0);
  const passed: PassedDelivery[] = [];
  let next = 0;
  const server = http.createServer(async (req, res) => {
    const body = await readAll(req);
    const i = next++ % urls.length;
    sent[i]! += 1;
    const answer = await forward(urls[i]!, req, body, res);
    passed.push({ target: i, eventType: String(req.headers['x-gitea-event-type'] ?? ''), ...answer });
  });
  return { url: await listen(server, host), sent, passed, close: closer(server) };
}
