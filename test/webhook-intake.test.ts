// How POST /events bodies are received (src/server/http/webhook-intake.ts): refused from the
// headers before any body byte is read (415 compressed, 413 too large, 401 unsigned), bodies
// held at once bounded in bytes and number (the oldest unfinished one makes room: 503), and a
// body that does not come in time dropped (408). admitWebhook is pure; the rest runs on a
// real node:http server on loopback with small limits.
import assert from 'node:assert/strict';
import http, { type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { headerRefusalOf } from '../src/server/http/app.js';
import { type IntakeLimits, MAX_WEBHOOK_BYTES, WebhookIntake, admitWebhook } from '../src/server/http/webhook-intake.js';
import { githubWebhooks } from '../src/server/vcs/github/webhooks.js';
import { rawRequest } from './support/raw-http.js';
import { waitFor } from './support/server.js';

const SIG = `sha256=${'ab'.repeat(32)}`;
/** GitHub's refusal from the headers when a webhook secret is set (no well-formed X-Hub-Signature-256: 401). */
const SIGNED = headerRefusalOf(githubWebhooks({ secret: 'secret' }));

describe('admitWebhook', () => {
  it('refuses from the headers alone: compressed 415, too large 413, unsigned 401', () => {
    const rows: Array<[string, IncomingHttpHeaders, boolean, number | 'ok']> = [
      ['as GitHub sends it', { 'content-length': '851', 'x-hub-signature-256': SIG }, true, 'ok'],
      ['empty body', { 'content-length': '0', 'x-hub-signature-256': SIG }, true, 'ok'],
      ['exactly the limit', { 'content-length': String(MAX_WEBHOOK_BYTES), 'x-hub-signature-256': SIG }, true, 'ok'],
      ['one byte over the limit', { 'content-length': String(MAX_WEBHOOK_BYTES + 1), 'x-hub-signature-256': SIG }, true, 413],
      [
        'chunked (no Content-Length): its size is checked as it comes',
        { 'transfer-encoding': 'chunked', 'x-hub-signature-256': SIG },
        true,
        'ok',
      ],
      ['identity encoding', { 'content-length': '10', 'content-encoding': 'identity', 'x-hub-signature-256': SIG }, true, 'ok'],
      ['identity, other case', { 'content-length': '10', 'content-encoding': ' Identity ', 'x-hub-signature-256': SIG }, true, 'ok'],
      ['gzip', { 'content-length': '10', 'content-encoding': 'gzip', 'x-hub-signature-256': SIG }, true, 415],
      ['gzip, even without a secret', { 'content-length': '10', 'content-encoding': 'gzip' }, false, 415],
      ['deflate', { 'content-length': '10', 'content-encoding': 'deflate', 'x-hub-signature-256': SIG }, true, 415],
      ['br, chunked', { 'transfer-encoding': 'chunked', 'content-encoding': 'br', 'x-hub-signature-256': SIG }, true, 415],
      ['gzip, unsigned: 415 first', { 'content-length': '10', 'content-encoding': 'gzip' }, true, 415],
      ['too large and unsigned: 413 first', { 'content-length': String(MAX_WEBHOOK_BYTES + 1) }, true, 413],
      ['unsigned', { 'content-length': '10' }, true, 401],
      ['unsigned, no secret set: the handler decides', { 'content-length': '10' }, false, 'ok'],
      ['sha1 only', { 'content-length': '10', 'x-hub-signature': `sha1=${'ab'.repeat(20)}` }, true, 401],
      ['short signature', { 'content-length': '10', 'x-hub-signature-256': 'sha256=abcd' }, true, 401],
      ['signature not hex', { 'content-length': '10', 'x-hub-signature-256': `sha256=${'zz'.repeat(32)}` }, true, 401],
      ['two signatures (joined by node:http)', { 'content-length': '10', 'x-hub-signature-256': `${SIG}, ${SIG}` }, true, 401],
      ['not a number', { 'content-length': '1e3', 'x-hub-signature-256': SIG }, true, 413],
    ];
    for (const [what, headers, requireSignature, want] of rows) {
      const a = admitWebhook(headers, requireSignature ? SIGNED : undefined);
      assert.equal(a.ok ? 'ok' : a.status, want, what);
    }
  });
});

describe('WebhookIntake on a real server (small limits)', () => {
  const HOST = '127.0.165.1';
  const limits: IntakeLimits = { maxHeldBytes: 1000, maxReceiving: 3, bodyTimeoutMs: 1500 };
  const refused: number[] = [];
  let intake: WebhookIntake;
  let server: http.Server;
  let port: number;
  before(async () => {
    intake = new WebhookIntake(
      SIGNED,
      {
        onBody: async (_req, body, res) => {
          res.writeHead(200, { 'content-type': 'text/plain' });
          res.end(`got ${body.length}\n`);
        },
        onRefused: (_req, status) => void refused.push(status),
      },
      limits,
    );
    server = http.createServer((req, res) => intake.receive(req, res)).listen(0, HOST);
    await new Promise((r) => server.once('listening', r));
    port = (server.address() as AddressInfo).port;
  });
  after(async () => {
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  });

  const headers = (length: number | 'chunked', extra: Record<string, string> = {}) => ({
    ...(length === 'chunked' ? { 'Transfer-Encoding': 'chunked' } : { 'Content-Length': length }),
    'X-Hub-Signature-256': SIG,
    ...extra,
  });
  const settled = () => waitFor('nothing held', () => intake.held.bytes === 0 && intake.held.receiving === 0, 5000);

  it('answers a whole body', async () => {
    const r = rawRequest(HOST, port, { headers: headers(5) }, Buffer.from('hello'));
    assert.equal(await r.status, 200);
    assert.match(r.response(), /got 5/);
    r.socket.destroy();
    await settled();
  });

  it('refuses gzip and unsigned bodies before reading them, and closes the connection', async () => {
    for (const [h, want] of [
      [headers(100, { 'Content-Encoding': 'gzip' }), 415],
      [{ 'Content-Length': 100 }, 401],
    ] as const) {
      const r = rawRequest(HOST, port, { headers: h }, Buffer.alloc(10));
      assert.equal(await r.status, want);
      await r.closed;
      assert.match(r.response(), /connection: close/i);
    }
    assert.equal(intake.held.receiving, 0, 'nothing was taken in');
  });

  it('the oldest unfinished body makes room for a newer one (bytes)', async () => {
    const old = rawRequest(HOST, port, { headers: headers(900) }, Buffer.alloc(800, 'a'));
    await waitFor('800 bytes held', () => intake.held.bytes === 800, 5000);
    const fresh = rawRequest(HOST, port, { headers: headers(300) }, Buffer.alloc(300, 'b'));
    assert.equal(await fresh.status, 200, 'the newer body is answered');
    assert.equal(await old.status, 503, 'the oldest unfinished one was dropped');
    await old.closed;
    fresh.socket.destroy();
    await settled();
  });

  it('the oldest unfinished body makes room for a newer one (number)', async () => {
    const slow = [0, 1, 2].map(() => rawRequest(HOST, port, { headers: headers(50) }, Buffer.alloc(10)));
    await waitFor('three bodies being received', () => intake.held.receiving === 3, 5000);
    const fresh = rawRequest(HOST, port, { headers: headers(20) }, Buffer.alloc(20));
    assert.equal(await fresh.status, 200);
    assert.equal(await slow[0]!.status, 503);
    assert.equal(intake.held.receiving, 2);
    for (const s of slow) s.socket.destroy();
    fresh.socket.destroy();
    await settled();
  });

  it('a body not complete in time is dropped with 408 and its connection closed', async () => {
    const r = rawRequest(HOST, port, { headers: headers(100) }, Buffer.alloc(10));
    const t0 = Date.now();
    assert.equal(await r.status, 408);
    await r.closed;
    assert.ok(Date.now() - t0 >= limits.bodyTimeoutMs - 100, `dropped after ${Date.now() - t0} ms`);
    await settled();
  });

  it('a chunked body over 25 MiB gets 413 as it goes over (default limits)', async () => {
    const big = new WebhookIntake(SIGNED, { onBody: async (_q, _b, res) => void res.end(), onRefused: () => undefined });
    const server2 = http.createServer((req, res) => big.receive(req, res)).listen(0, HOST);
    await new Promise((r) => server2.once('listening', r));
    after(async () => {
      server2.closeAllConnections();
      await new Promise((r) => server2.close(r));
    });
    const r = rawRequest(HOST, (server2.address() as AddressInfo).port, { headers: headers('chunked') });
    const chunk = Buffer.alloc(1024 * 1024, 'x');
    let sent = 0;
    // Bounded: at most 30 MiB are offered; the server answers before the 26th.
    for (let i = 0; i < 30 && !r.socket.destroyed; i++) {
      r.socket.write(`${chunk.length.toString(16)}\r\n`);
      r.socket.write(chunk);
      if (!r.socket.write('\r\n')) await new Promise((res) => r.socket.once('drain', res).once('close', res));
      sent++;
    }
    assert.equal(await r.status, 413, `after ${sent} MiB`);
    await waitFor('nothing held', () => big.held.bytes === 0, 5000);
  });

  it('a client that goes away mid-body is counted as 400 and frees what it held', async () => {
    refused.length = 0;
    const r = rawRequest(HOST, port, { headers: headers(100) }, Buffer.alloc(40));
    await waitFor('40 bytes held', () => intake.held.bytes === 40, 5000);
    r.socket.destroy();
    await settled();
    assert.deepEqual(refused, [400]);
  });
});
