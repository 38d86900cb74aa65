// One server per data dir, and `drain` signals only that server: a second server on the same
// dir is refused (exit 2, one line) and leaves the first one's pid file alone; a restart after
// kill -9 finds the dir free; a pid file naming another process gets that process no signal.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { isRecordedProcess, processIdentity, readPidFile, writePidFile } from '../src/server/drain/pid-file.js';
import { type CliProcess, minimalServerArgs, runCli, startCli, waitForHttp } from './support/cli.js';
import { childList } from './support/children.js';

const children = childList();
after(() => {
  children.killAll();
});

async function startServer(dataDir: string, host: string): Promise<CliProcess> {
  const p = startCli(minimalServerArgs(dataDir, host));
  children.push(p);
  await waitForHttp(`http://${host}:4141/healthz`).catch((e: Error) => {
    throw new Error(`${e.message}\n${p.output()}`);
  });
  return p;
}

describe('pid file identity', () => {
  const a = { startTicks: '1000', cmdlineSha256: 'aa' };
  const rows: Array<[string, typeof a | undefined, (typeof a & { zombie?: boolean }) | undefined, boolean]> = [
    ['same process', a, { ...a }, true],
    ['pid reused by a later process', a, { startTicks: '2000', cmdlineSha256: 'aa' }, false],
    ['same start tick, other command line', a, { startTicks: '1000', cmdlineSha256: 'bb' }, false],
    ['our server, exited but not reaped', a, { startTicks: '1000', cmdlineSha256: 'e3', zombie: true }, true],
    ['a pid file without identity', undefined, { ...a }, false],
    ['no such process', a, undefined, false],
  ];
  for (const [what, recorded, now, ok] of rows)
    it(`${what}: ${ok ? 'signal' : 'do not signal'}`, () => assert.equal(isRecordedProcess(recorded, now), ok));

  it("reads a live process's identity from /proc", () => {
    const me = processIdentity(process.pid);
    assert.ok(me && /^\d+$/.test(me.startTicks) && /^[0-9a-f]{64}$/.test(me.cmdlineSha256));
  });
});

describe('`drain` and an unrelated process in the pid file', () => {
  for (const [what, identity] of [
    ['no identity (an old or forged pid file)', undefined],
    ['the identity of another process', 'other'],
  ] as const) {
    it(`does not signal it: ${what}`, async () => {
      const dataDir = mkdtempSync(path.join(tmpdir(), 'ato-own-'));
      // `sleep` dies of SIGUSR2 (default action), so any signal would show in its exit.
      const victim = spawn('sleep', ['60'], { stdio: 'ignore' });
      const exited = new Promise<NodeJS.Signals | number | null>((r) => victim.on('exit', (code, sig) => r(sig ?? code)));
      try {
        const other = identity === 'other' ? processIdentity(process.pid) : undefined;
        writePidFile(dataDir, {
          pid: victim.pid!,
          url: 'http://127.0.163.59:4141',
          startedAt: new Date().toISOString(),
          ...(other ? { identity: other } : {}),
        });
        const r = runCli(['drain', '--data-dir', dataDir, '--timeout', '2s']);
        assert.equal(r.code, 1, r.stdout + r.stderr);
        assert.match(r.stdout, new RegExp(`error: process ${victim.pid} named by the pid file in .* is not the server that wrote it`));
        const state = await Promise.race([exited, new Promise((res) => setTimeout(() => res('running'), 300))]);
        assert.equal(state, 'running', 'the unrelated process got no signal');
      } finally {
        victim.kill('SIGKILL');
      }
    });
  }
});

describe('one server per data dir', () => {
  it("refuses a second server on the same dir, keeps the first one's pid file, and a restart after kill -9 works", async () => {
    const dataDir = mkdtempSync(path.join(tmpdir(), 'ato-own-'));
    const first = await startServer(dataDir, '127.0.163.51');
    const pid = first.child.pid!;
    assert.equal(readPidFile(dataDir)?.pid, pid);

    const second = runCli(minimalServerArgs(dataDir, '127.0.163.52'));
    assert.equal(second.code, 2, second.stderr + second.stdout);
    assert.equal(
      second.stderr.trim(),
      `atlantis-operator: --data-dir ${dataDir} is in use by another atlantis-operator server (pid ${pid}): one data dir serves one server`,
    );
    assert.equal(readPidFile(dataDir)?.pid, pid, "the first server's pid file is untouched");
    assert.equal((await fetch('http://127.0.163.51:4141/healthz')).status, 200);

    first.child.kill('SIGKILL');
    await first.exited;
    const third = await startServer(dataDir, '127.0.163.53');
    assert.equal(readPidFile(dataDir)?.pid, third.child.pid);
    // The drain command recognises the new server from its pid file and drains it.
    const d = runCli(['drain', '--data-dir', dataDir, '--timeout', '20s']);
    assert.equal(d.code, 0, d.stdout + d.stderr);
    assert.equal((await third.exited).code, 0, third.output());
    assert.equal(existsSync(path.join(dataDir, 'atlantis-operator.pid')), false);
  });
});
