// The real server process under many slow, unfinished webhook bodies nobody signed: gzip
// bombs (20 MiB each once inflated), unsigned bodies declaring 25 MiB, and bodies with a
// well-formed but wrong signature sending 20 MiB each. Its resident memory (VmRSS/VmHWM in
// /proc/<pid>/status) stays bounded, GitHub's webhooks are answered meanwhile, and every
// unfinished body is dropped within the body timeout. Loopback only; every loop bounded.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { gzipSync } from 'node:zlib';
import { DEFAULT_INTAKE_LIMITS } from '../src/server/http/webhook-intake.js';
import { type CliProcess, startCli, waitForHttp } from './support/cli.js';
import { sendWebhook } from './support/github-standin.js';
import { type RawRequest, rawRequest } from './support/raw-http.js';
import { waitFor } from './support/server.js';
import { WEBHOOK_SECRET, type WorkflowEnv, createWorkflowEnv, tempDataDir } from './support/workflow-env.js';

const HOST = '127.0.166.1';
const MiB = 1024 * 1024;
/** Well-formed, but not the right HMAC for anything sent here. */
const WRONG_SIG = `sha256=${'0f'.repeat(32)}`;

let env: WorkflowEnv;
let server: CliProcess;
const url = `http://${HOST}:4141`;

before(async () => {
  env = await createWorkflowEnv({ ghHost: '127.0.166.250' });
  server = startCli(env.serverArgs(tempDataDir(), HOST));
  await waitForHttp(`${url}/healthz`).catch((e: Error) => {
    throw new Error(`${e.message}\n${server.output()}`);
  });
});
after(async () => {
  server.child.kill('SIGKILL');
  await env.close();
});

/** VmRSS and VmHWM (peak) of the server process, in bytes. */
function memory(): { rss: number; peak: number } {
  const status = readFileSync(`/proc/${server.child.pid}/status`, 'utf8');
  const kb = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)?.[1]) * 1024;
  return { rss: kb('VmRSS'), peak: kb('VmHWM') };
}

async function metric(code: string): Promise<number> {
  const text = await (await fetch(`${url}/metrics`)).text();
  return [...text.matchAll(new RegExp(`^atlantis_webhooks_total\\{event="issue_comment",code="${code}"\\} (\\d+)`, 'gm'))].reduce(
    (n, m) => n + Number(m[1]),
    0,
  );
}

const ping = () =>
  sendWebhook(`${url}/events`, 'ping', { zen: 'Keep it logically awesome.', hook_id: 1 }, { secret: WEBHOOK_SECRET, timeoutMs: 10_000 });

describe('webhook intake under unsigned, unfinished bodies (real server process)', () => {
  it("memory stays bounded, GitHub's webhooks are answered, unfinished bodies are dropped in time", async () => {
    assert.equal((await ping()).status, 200);
    const before = memory();
    const head = (headers: Record<string, string | number>) => ({
      headers: { 'Content-Type': 'application/json', 'X-GitHub-Event': 'issue_comment', ...headers },
    });

    // 40 gzip bombs, all but their last byte sent: 800 MiB once inflated.
    const bomb = gzipSync(Buffer.alloc(20 * MiB));
    const gzips = Array.from({ length: 40 }, () =>
      rawRequest(
        HOST,
        4141,
        head({ 'Content-Encoding': 'gzip', 'Content-Length': bomb.length, 'X-Hub-Signature-256': WRONG_SIG }),
        bomb.subarray(0, -1),
      ),
    );
    // 40 unsigned bodies declaring 25 MiB, 256 KiB of it sent.
    const unsigned = Array.from({ length: 40 }, () =>
      rawRequest(HOST, 4141, head({ 'Content-Length': 25 * MiB }), Buffer.alloc(256 * 1024, 'u')),
    );
    // 8 bodies with a well-formed (wrong) signature declaring 25 MiB, 20 MiB of it sent:
    // 160 MiB offered, of which 64 MiB may be held at once.
    const twenty = Buffer.alloc(20 * MiB, '{');
    const huge = Array.from({ length: 8 }, () =>
      rawRequest(HOST, 4141, head({ 'Content-Length': 25 * MiB, 'X-Hub-Signature-256': WRONG_SIG }), twenty),
    );
    const all: RawRequest[] = [...gzips, ...unsigned, ...huge];
    await waitFor(
      'every attack byte written or refused',
      () => all.every((r) => r.socket.destroyed || r.socket.writableLength === 0),
      60_000,
    );

    // GitHub's webhook, while bodies are still held open.
    const open = huge.filter((r) => !r.socket.destroyed).length;
    const t0 = Date.now();
    const during = await ping();
    assert.equal(during.status, 200, during.body);
    const pingMs = Date.now() - t0;

    // Whatever is still unfinished is dropped at the body timeout (408), connection closed.
    await Promise.race([
      Promise.all(all.map((r) => r.closed)),
      new Promise((r) => setTimeout(r, DEFAULT_INTAKE_LIMITS.bodyTimeoutMs + 10_000)),
    ]);
    // VmHWM: the most the server held at any time during the attack.
    const peak = memory().peak;
    const grew = (peak - before.rss) / MiB;
    console.log(
      `server RSS before ${(before.rss / MiB).toFixed(0)} MiB, peak during the attack ${(peak / MiB).toFixed(0)} MiB (+${grew.toFixed(0)} MiB); ` +
        `huge bodies still open at the ping ${open}; ping answered in ${pingMs} ms`,
    );
    assert.ok(grew < 192, `the server grew by ${grew.toFixed(0)} MiB`);

    // The server's own count of what it answered: 415 and 401 from the headers alone; the
    // oldest huge bodies were dropped (503) to keep the held bytes under the bound.
    await waitFor('gzip and unsigned bodies answered', async () => (await metric('415')) === 40 && (await metric('401')) === 40, 20_000);
    assert.ok(
      (await metric('503')) >= huge.length - Math.floor(DEFAULT_INTAKE_LIMITS.maxHeldBytes / (20 * MiB)),
      `dropped for room: ${await metric('503')}`,
    );
    assert.equal(
      all.filter((r) => !r.socket.destroyed && !r.socket.readableEnded).length,
      0,
      'every attack connection was closed by the server',
    );
    assert.equal(
      (await metric('503')) + (await metric('408')),
      huge.length,
      'every huge body was dropped (503 for room, 408 at the timeout)',
    );
    assert.equal((await ping()).status, 200);
  });
});
