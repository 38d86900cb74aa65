// DNS rebinding: the web UI answers only to this server's names (src/server/http/allowed-hosts.ts).
// The decision as a table, then the real server process: a page on evil.example whose name
// was made to resolve to the server sends `POST /apply/lock` with `Host: evil.example` and
// `Origin: http://evil.example`, which the cross-site check lets through (Origin equals Host).
// It used to switch the global apply lock on; now it is refused, and so is reading a page
// under that name, while the names of --atlantis-url and --allowed-hosts, localhost and IP
// addresses work, and /events, the probes, /status and /metrics answer to any name.
import assert from 'node:assert/strict';
import http from 'node:http';
import { after, before, describe, it } from 'node:test';
import { allowedHosts, decideHost, hostChecked } from '../src/server/http/allowed-hosts.js';
import type { CliProcess } from './support/cli.js';
import { type WorkflowEnv, createWorkflowEnv, startWorkflowServer, tempDataDir } from './support/workflow-env.js';

describe('which host names the web UI answers to', () => {
  const allowed = allowedHosts('https://Atlantis.Example.com/', ['ci.internal:8443', 'https://other.example', '']);
  const rows: Array<[string | undefined, 'allowed' | 'refused']> = [
    ['atlantis.example.com', 'allowed'],
    ['ATLANTIS.example.com:4141', 'allowed'],
    ['atlantis.example.com.', 'allowed'],
    ['ci.internal', 'allowed'],
    ['other.example:443', 'allowed'],
    ['localhost:4141', 'allowed'],
    ['127.0.0.1:4141', 'allowed'],
    ['10.1.2.3', 'allowed'],
    ['[::1]:4141', 'allowed'],
    [undefined, 'allowed'],
    ['evil.example', 'refused'],
    ['evil.example:4141', 'refused'],
    ['atlantis.example.com.evil.example', 'refused'],
    ['example.com', 'refused'],
    ['127.0.0.1.nip.io', 'refused'],
    ['a b', 'refused'],
  ];
  for (const [host, want] of rows) it(`Host: ${host}: ${want}`, () => assert.equal(decideHost(host, allowed).kind, want));

  it('`*` turns the check off', () => {
    assert.equal(decideHost('evil.example', allowedHosts('http://a:4141', ['*'])).kind, 'allowed');
  });

  it('checked: the web UI and its actions; not: /events, the probes, /status, /metrics, the API', () => {
    for (const p of ['/', '/jobs/x', '/jobs/x/stream', '/lock', '/locks', '/apply/lock', '/apply/unlock', '/nope'])
      assert.equal(hostChecked(p), true, p);
    for (const p of ['/events', '/healthz', '/readyz', '/status', '/metrics', '/api/plan', '/api/locks'])
      assert.equal(hostChecked(p), false, p);
  });
});

const host = '127.0.166.1';
let env: WorkflowEnv;
let server: CliProcess;

before(async () => {
  env = await createWorkflowEnv();
  ({ p: server } = await startWorkflowServer(env, tempDataDir(), host, ['--allowed-hosts', 'atlantis.ci.internal']));
});
after(async () => {
  server.child.kill('SIGKILL');
  await env.close();
});

/** A request to the real server with the given Host header (as a browser sends it after rebinding). */
function request(
  method: string,
  path: string,
  hostHeader: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host, port: 4141, method, path, headers: { ...headers, host: hostHeader }, timeout: 10_000 }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => {
        body += c;
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

describe('the real server refuses a rebound host name', () => {
  it('POST /apply/lock from a page of evil.example (Origin = Host) is refused, and so is reading a page', async () => {
    const evil = 'evil.example:4141';
    const refused = await request('POST', '/apply/lock', evil, { origin: 'http://evil.example:4141' });
    assert.equal(refused.status, 403, refused.body);
    assert.match(refused.body, /does not answer to the host name "evil.example:4141"/);
    const page = await request('GET', '/', evil);
    assert.equal(page.status, 403);
    assert.doesNotMatch(page.body, /<html/i);
    // The apply lock is still off: the index (under the server's own name) offers to turn it on.
    const index = await request('GET', '/', `${host}:4141`);
    assert.equal(index.status, 200);
    assert.match(index.body, /Apply commands are enabled/);
    assert.match(server.output(), /"msg":"Request for a host name that is not this server refused","host":"evil.example:4141"/);
  });

  it('its own names work: --atlantis-url, --allowed-hosts, localhost, an IP address', async () => {
    for (const name of [`${host}:4141`, 'atlantis.ci.internal', 'localhost:4141', '10.0.0.9:4141'])
      assert.equal((await request('GET', '/', name)).status, 200, name);
    const lock = await request('POST', '/apply/lock', 'atlantis.ci.internal', { origin: 'http://atlantis.ci.internal' });
    assert.equal(lock.status, 200, lock.body);
    assert.match((await request('GET', '/', 'atlantis.ci.internal')).body, /Apply commands are disabled globally/);
    assert.equal((await request('DELETE', '/apply/unlock', 'atlantis.ci.internal')).status, 200);
  });

  it('/healthz, /readyz, /status, /metrics, /events and the API answer under any name', async () => {
    const evil = 'evil.example';
    assert.equal((await request('GET', '/healthz', evil)).status, 200);
    assert.equal((await request('GET', '/readyz', evil)).status, 200);
    assert.equal((await request('GET', '/status?wait_drained=0', evil)).status, 200);
    assert.equal((await request('GET', '/metrics', evil)).status, 200);
    assert.equal((await request('POST', '/events', evil)).status, 401, 'unsigned: refused by its signature, not its name');
    assert.equal((await request('GET', '/api/locks', evil)).status, 503, 'no --api-secret: the API answers itself');
  });
});
