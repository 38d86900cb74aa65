// Express (and the API and web UI routes) is loaded by the first request that needs it, not at
// start (src/server/http/app.ts). On the real bundle: requests that go through Express answer
// as ever when they are the first ones, all at once; a held /status?wait_drained is answered
// by the drain's end; and when Express cannot be loaded, those requests answer 500 and say
// why, while GET /status, POST /events and the probes (GET /healthz, /readyz), which never
// need it, still answer.
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import type { StatusBody } from '../src/contract/drain-protocol.js';
import { fastPath } from '../src/server/http/app.js';
import { type CliProcess, minimalServerArgs, stageCli, startCli } from './support/cli.js';
import { tempDataDir } from './support/workflow-env.js';

const started: CliProcess[] = [];
const dirs: string[] = [];
after(() => {
  for (const s of started) s.child.kill('SIGKILL');
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

/** Starts the server and waits for a plain GET /status (a request Express never sees). */
async function start(host: string, cli?: string): Promise<{ server: CliProcess; url: string }> {
  const dataDir = tempDataDir();
  dirs.push(dataDir);
  const server = startCli(minimalServerArgs(dataDir, host), {}, cli ? { cli } : {});
  started.push(server);
  const url = `http://${host}:4141`;
  const end = Date.now() + 30_000;
  for (;;) {
    try {
      if ((await fetch(`${url}/status`)).status === 200) return { server, url };
    } catch {
      if (Date.now() > end) throw new Error(`the server did not answer /status within 30 s\n${server.output()}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }
}

async function get(url: string): Promise<{ status: number; type: string | null; body: string }> {
  const res = await fetch(url, { signal: AbortSignal.timeout(30_000) });
  return { status: res.status, type: res.headers.get('content-type'), body: await res.text() };
}

describe('Express loaded by the first request that needs it', () => {
  it('answers the first requests through Express, sent all at once, as ever; a held /status is answered at the drain', async () => {
    const { server, url } = await start('127.0.78.1');
    const held = fetch(`${url}/status?wait_drained=30`, { signal: AbortSignal.timeout(30_000) });
    const [healthz, healthz2, readyz, status, badWait, metrics, page, css, unknown] = await Promise.all(
      [
        '/healthz',
        '/healthz',
        '/readyz',
        '/status?wait_drained=0',
        '/status?wait_drained=abc',
        '/metrics',
        '/',
        '/static/atlantis.css',
        '/no-such-path',
      ].map((p) => get(`${url}${p}`)),
    );
    for (const r of [healthz, healthz2])
      assert.deepEqual(r, { status: 200, type: 'application/json; charset=utf-8', body: '{"status":"ok"}' });
    assert.deepEqual(readyz, { status: 200, type: 'application/json; charset=utf-8', body: '{"status":"ok"}' });
    assert.equal(status.status, 200);
    assert.equal((JSON.parse(status.body) as StatusBody).shutting_down, false);
    assert.equal(badWait.status, 400);
    assert.match(badWait.body, /^wait_drained must be a number of seconds from 0 to 60/);
    assert.equal(metrics.status, 200);
    assert.match(metrics.body, /^# HELP atlantis_/m);
    assert.equal(page.status, 200);
    assert.match(page.body, /^<!doctype html>/);
    assert.deepEqual([css.status, css.type], [200, 'text/css; charset=utf-8']);
    assert.equal(unknown.status, 404);

    // A wait that runs out answers with the status of that moment (and gives the held request time to arrive).
    const short = await get(`${url}/status?wait_drained=0.2`);
    assert.equal((JSON.parse(short.body) as StatusBody).shutting_down, false);

    // Nothing runs: the drain ends at once and answers the held request.
    server.child.kill('SIGTERM');
    const drained = await held;
    assert.equal(drained.status, 200);
    assert.equal(((await drained.json()) as StatusBody).shutting_down, true);
    assert.equal((await server.exited).code, 0);
    assert.match(server.output(), /"msg":"Drained","heldStatusRequests":1}/);
  });

  it('answers 500 and says why when Express cannot be loaded; GET /status, POST /events and the probes still answer', async () => {
    const staged = mkdtempSync(path.join(tmpdir(), 'ato-cli-'));
    dirs.push(staged);
    const cli = stageCli(staged);
    // Express is bundled apart (hack/bundle.mjs) and required on first use.
    const express = path.join(staged, 'dist', 'vendor', 'express.cjs');
    assert.ok(existsSync(express), 'the build has Express in dist/vendor/');
    rmSync(express);

    const { server, url } = await start('127.0.78.2', cli);
    const answers = await Promise.all(['/healthz?via=express', '/metrics', '/'].map((p) => get(`${url}${p}`)));
    for (const a of answers) {
      assert.equal(a.status, 500);
      assert.equal(a.type, 'text/plain; charset=utf-8');
      assert.match(a.body, /^Could not load the HTTP routes: .*vendor\/express\.cjs/);
    }
    assert.equal((await get(`${url}/status`)).status, 200);
    for (const probe of ['/healthz', '/readyz'])
      assert.deepEqual(
        await get(`${url}${probe}`),
        { status: 200, type: 'application/json; charset=utf-8', body: '{"status":"ok"}' },
        probe,
      );
    const hook = await fetch(`${url}/events`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-github-event': 'ping' },
      body: '{}',
    });
    assert.equal(hook.status, 200, await hook.text());
    const logged = server
      .output()
      .split('\n')
      .filter((l) => l.includes('Could not load the HTTP routes'));
    assert.equal(logged.length, 3, server.output());
    assert.match(logged[0] ?? '', /Request failed/);
  });
});

describe('which requests skip Express', () => {
  it('a plain GET /status, /healthz, /readyz and every POST /events; nothing else', () => {
    const table: Array<[string | undefined, string | undefined, ReturnType<typeof fastPath>]> = [
      ['GET', '/status', 'status'],
      ['GET', '/status?wait_drained=30', undefined],
      ['HEAD', '/status', undefined],
      ['POST', '/events', 'events'],
      ['POST', '/events?x=1', 'events'],
      ['POST', '/eventsx', undefined],
      ['GET', '/events', undefined],
      ['GET', '/healthz', 'liveness'],
      ['GET', '/healthz?via=express', undefined],
      ['HEAD', '/healthz', undefined],
      ['GET', '/readyz', 'readiness'],
      ['POST', '/readyz', undefined],
      ['GET', '/metrics', undefined],
      ['GET', '/', undefined],
      [undefined, undefined, undefined],
    ];
    for (const [method, url, want] of table) assert.equal(fastPath(method, url), want, `${method} ${url}`);
  });
});
