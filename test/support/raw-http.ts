// A raw HTTP/1.1 request over TCP for intake tests: headers and as much of the body as the
// test wants (possibly less than Content-Length, possibly nothing more ever), then whatever
// the server answers and when it closes the connection. fetch cannot send an unfinished body.
import net from 'node:net';

export interface RawRequest {
  socket: net.Socket;
  /** The status code of the server's answer, or null if the connection ended without one. */
  status: Promise<number | null>;
  /** Resolves when the connection is closed (by either side). */
  closed: Promise<void>;
  /** Everything the server sent. */
  response: () => string;
}

export function rawRequest(
  host: string,
  port: number,
  head: { method?: string; path?: string; headers: Record<string, string | number> },
  body: Buffer = Buffer.alloc(0),
): RawRequest {
  const socket = net.connect({ host, port });
  let received = '';
  let resolveStatus!: (s: number | null) => void;
  const status = new Promise<number | null>((r) => {
    resolveStatus = r;
  });
  const closed = new Promise<void>((r) =>
    socket.once('close', () => {
      resolveStatus(null);
      r();
    }),
  );
  socket.on('data', (d: Buffer) => {
    received += d.toString('latin1');
    const m = /^HTTP\/1\.1 (\d{3}) /.exec(received);
    if (m) resolveStatus(Number(m[1]));
  });
  // The server may drop the connection while the body is still being written.
  socket.on('error', () => undefined);
  const lines = [
    `${head.method ?? 'POST'} ${head.path ?? '/events'} HTTP/1.1`,
    `Host: ${host}:${port}`,
    ...Object.entries(head.headers).map(([k, v]) => `${k}: ${v}`),
  ];
  socket.write(`${lines.join('\r\n')}\r\n\r\n`);
  if (body.length > 0) socket.write(body);
  return { socket, status, closed, response: () => received };
}
