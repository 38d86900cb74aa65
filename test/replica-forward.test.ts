// Forwarding a webhook to its owner (src/server/replicas/forward.ts) against a real node:http
// server: the bytes and GitHub's headers arrive unchanged, the loop-guard header is set, the
// owner's answer comes back, and every failure (refused, timeout, cut off) is an outcome.
import assert from 'node:assert/strict';
import { createHmac, randomBytes } from 'node:crypto';
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, test } from 'node:test';
import { afterForwardFailure, route } from '../src/server/replicas/affinity.js';
import { FORWARDED_BY_HEADER, type ForwardedWebhook, forwardWebhook, forwardedBy } from '../src/server/replicas/forward.js';

interface Seen {
  method: string | undefined;
  url: string | undefined;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
}

let srv: http.Server;
let base: string;
const seen: Seen[] = [];
let handler: (req: IncomingMessage, body: Buffer, res: ServerResponse) => void = (_q, _b, res) => {
  res.writeHead(200, { 'content-type': 'text/plain' });
  res.end('Processing...\n');
};

before(async () => {
  srv = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      seen.push({ method: req.method, url: req.url, headers: req.headers, body });
      handler(req, body, res);
    });
  });
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', () => r()));
  base = `http://127.0.0.1:${(srv.address() as AddressInfo).port}`;
});
after(async () => {
  srv.closeAllConnections();
  await new Promise<void>((r) => srv.close(() => r()));
});

const SECRET = 'webhook-secret';
const DELIVERY = '72d3162e-cc78-11e3-81ab-4c9367dc0958';
const signature = (body: Buffer): string => `sha256=${createHmac('sha256', SECRET).update(body).digest('hex')}`;
function webhook(body: Buffer): ForwardedWebhook {
  return {
    headers: { 'x-github-event': 'issue_comment', 'x-github-delivery': DELIVERY, 'x-hub-signature-256': signature(body) },
    contentType: 'application/json',
    rawBody: body,
  };
}

test('body byte-identical (invalid UTF-8 and all), GitHub headers unchanged, the loop guard set, the answer returned', async () => {
  seen.length = 0;
  // Bytes a string round trip would change: invalid UTF-8, a NUL, a CR LF, a BOM.
  const body = Buffer.concat([
    Buffer.from('{"action":"created","comment":{"body":"atlantis plan ü"}}'),
    Buffer.from([0xff, 0xfe, 0x00, 0x0d, 0x0a, 0xef, 0xbb, 0xbf]),
  ]);
  const w = webhook(body);
  const out = await forwardWebhook(`${base}/`, w, { selfId: 'atlantis-1' });
  assert.deepEqual(out, { ok: true, status: 200, body: 'Processing...\n' });
  assert.equal(seen.length, 1);
  const s = seen[0]!;
  assert.equal(s.method, 'POST');
  assert.equal(s.url, '/events');
  assert.ok(s.body.equals(body), 'byte-identical body');
  assert.equal(s.headers['x-github-event'], 'issue_comment');
  assert.equal(s.headers['x-github-delivery'], DELIVERY);
  assert.equal(s.headers['x-hub-signature-256'], signature(body));
  assert.equal(s.headers['content-type'], 'application/json');
  assert.equal(s.headers['content-length'], String(body.length));
  assert.equal(s.headers[FORWARDED_BY_HEADER], 'atlantis-1');
  assert.equal(forwardedBy(s.headers), 'atlantis-1');
  // The signature still verifies on the owner, over the bytes it got.
  assert.equal(`sha256=${createHmac('sha256', SECRET).update(s.body).digest('hex')}`, s.headers['x-hub-signature-256']);
});

test('a form-encoded webhook keeps its Content-Type; absent GitHub headers are not invented', async () => {
  seen.length = 0;
  const body = Buffer.from(`payload=${encodeURIComponent('{"zen":"x"}')}`);
  await forwardWebhook(base, { headers: {}, contentType: 'application/x-www-form-urlencoded', rawBody: body }, { selfId: 'a' });
  const s = seen[0]!;
  assert.equal(s.headers['content-type'], 'application/x-www-form-urlencoded');
  assert.ok(s.body.equals(body));
  for (const h of ['x-github-event', 'x-github-delivery', 'x-hub-signature-256']) assert.equal(s.headers[h], undefined, h);
});

test('a large body (1 MiB of random bytes) arrives whole', async () => {
  seen.length = 0;
  const body = randomBytes(1024 * 1024);
  const out = await forwardWebhook(base, webhook(body), { selfId: 'a' });
  assert.equal(out.ok, true);
  assert.ok(seen[0]!.body.equals(body));
});

test("the owner's status and body come back as they are (4xx relayed, 5xx handled locally)", async () => {
  for (const [status, text, next] of [
    [202, 'Queued: the server is shutting down\n', 'relay'],
    [401, 'request signature mismatch\n', 'relay'],
    [503, 'shutting down\n', 'local'],
    [500, 'boom\n', 'local'],
  ] as const) {
    handler = (_q, _b, res) => {
      res.writeHead(status);
      res.end(text);
    };
    const out = await forwardWebhook(base, webhook(Buffer.from('{}')), { selfId: 'a' });
    assert.deepEqual(out, { ok: true, status, body: text });
    assert.equal(afterForwardFailure(out).kind, next, String(status));
  }
});

test('an owner that never answers: a timeout within the bound, then handled locally', async () => {
  handler = () => {
    // Never answers.
  };
  const t0 = Date.now();
  const out = await forwardWebhook(base, webhook(Buffer.from('{}')), { selfId: 'a', timeoutMs: 300 });
  const took = Date.now() - t0;
  assert.equal(out.ok, false);
  if (!out.ok) assert.equal(out.failure, 'timeout');
  assert.ok(took >= 290 && took < 2000, `took ${took} ms`);
  assert.deepEqual(afterForwardFailure(out), { kind: 'local', reason: 'unreachable' });
});

test('an answer that stops halfway: a timeout too (the bound is the whole exchange)', async () => {
  handler = (_q, _b, res) => {
    res.writeHead(200, { 'content-length': '100' });
    res.write('Proc');
  };
  const out = await forwardWebhook(base, webhook(Buffer.from('{}')), { selfId: 'a', timeoutMs: 300 });
  assert.equal(out.ok ? 'ok' : out.failure, 'timeout');
});

test('an owner that drops the connection: reset, then handled locally', async () => {
  handler = (req) => req.socket.destroy();
  const out = await forwardWebhook(base, webhook(Buffer.from('{}')), { selfId: 'a' });
  assert.equal(out.ok ? 'ok' : out.failure, 'reset');
  assert.equal(afterForwardFailure(out).kind, 'local');
});

test('a refused connection: refused at once, then handled locally', async () => {
  // A port that was just free: nothing listens there.
  const tmp = http.createServer();
  await new Promise<void>((r) => tmp.listen(0, '127.0.0.1', () => r()));
  const port = (tmp.address() as AddressInfo).port;
  await new Promise<void>((r) => tmp.close(() => r()));
  const t0 = Date.now();
  const out = await forwardWebhook(`http://127.0.0.1:${port}`, webhook(Buffer.from('{}')), { selfId: 'a' });
  assert.equal(out.ok ? 'ok' : out.failure, 'refused');
  assert.ok(Date.now() - t0 < 2000);
  assert.deepEqual(afterForwardFailure(out), { kind: 'local', reason: 'unreachable' });
});

test('a bad owner url is an outcome, not a throw', async () => {
  const out = await forwardWebhook('not a url', webhook(Buffer.from('{}')), { selfId: 'a' });
  assert.equal(out.ok ? 'ok' : out.failure, 'error');
  const ftp = await forwardWebhook('ftp://127.0.0.1', webhook(Buffer.from('{}')), { selfId: 'a' });
  assert.equal(ftp.ok ? 'ok' : ftp.failure, 'error');
});

test('forwardedBy reads the loop-guard header; absent or empty means a direct delivery', () => {
  assert.equal(forwardedBy({}), undefined);
  assert.equal(forwardedBy({ [FORWARDED_BY_HEADER]: '' }), undefined);
  assert.equal(forwardedBy({ [FORWARDED_BY_HEADER]: 'atlantis-2' }), 'atlantis-2');
});

test('an answer longer than 64 KiB is not an answer of ours: handled locally', async () => {
  handler = (_q, _b, res) => {
    res.writeHead(200);
    res.end(Buffer.alloc(65 * 1024, 0x61));
  };
  const out = await forwardWebhook(base, webhook(Buffer.from('{}')), { selfId: 'a' });
  assert.equal(out.ok ? 'ok' : out.failure, 'error');
  assert.equal(afterForwardFailure(out).kind, 'local');
});

test('loop guard end to end: the owner routes what it received forwarded to itself, even when its list names another owner', async () => {
  seen.length = 0;
  handler = (_q, _b, res) => {
    res.writeHead(200);
    res.end('ok');
  };
  const a = { id: 'a', url: base, draining: false, heartbeatAt: 1 };
  const b = { id: 'b', url: base, draining: false, heartbeatAt: 1 };
  // A key that a's (stale) view gives to b: b forwards it to a, a must not send it back.
  const key = ['acme/infra#1', 'acme/infra#2', 'acme/infra#3', 'acme/infra#4', 'acme/infra#5'].find(
    (k) => route(k, a, [a, b]).kind === 'forward',
  )!;
  await forwardWebhook(base, webhook(Buffer.from('{}')), { selfId: 'b' });
  const by = forwardedBy(seen[0]!.headers);
  assert.equal(by, 'b');
  assert.deepEqual(route(key, a, [a, b], { forwardedBy: by! }), { kind: 'local', reason: 'forwarded' });
});
