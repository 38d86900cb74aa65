// The process host (every child process of the server started by one small worker process,
// dist/native/process-host, at nice 10, also for the session group of a detached one) and the
// ProcessRunner on top of it, with real processes: output streaming (a character split between
// chunks), exit codes and signals, SIGINT-then-SIGKILL cancellation, an interrupt that arrives
// before the pid is known, a missing binary, what a child inherits (signals, stdin, env, PATH),
// a worker that dies, a worker that goes with its server, and that the server forks only once.
import assert from 'node:assert/strict';
import childProcess from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { syncBuiltinESMExports } from 'node:module';
import { getPriority, tmpdir } from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { execa } from 'execa';
import type { LogFields, Logger } from '../src/log.js';
import { MAX_CAPTURE_BYTES } from '../src/server/terraform/process-host-protocol.js';
import { ProcessHost } from '../src/server/terraform/process-host.js';
import { ProcessRunner, type RunResult } from '../src/server/terraform/runner.js';
import { waitFor } from './support/server.js';

const dir = mkdtempSync(path.join(tmpdir(), 'process-host-'));
// The priority this process started with: CI may run the suite under nice.
const ownPriority = getPriority();
after(() => rmSync(dir, { recursive: true, force: true }));

function recordingLogger(lines: Array<{ level: string; msg: string; fields?: LogFields }>): Logger {
  const log = (level: string) => (msg: string, fields?: LogFields) => {
    lines.push({ level, msg, fields });
  };
  const logger: Logger = { error: log('error'), warn: log('warn'), info: log('info'), debug: log('debug'), child: () => logger };
  return logger;
}

function setup(opts: { interruptGraceMs?: number; binary?: string } = {}) {
  const logs: Array<{ level: string; msg: string; fields?: LogFields }> = [];
  const logger = recordingLogger(logs);
  const host = new ProcessHost({ logger });
  const runner = new ProcessRunner({ host, binary: opts.binary ?? 'sh', interruptGraceMs: opts.interruptGraceMs ?? 60_000, logger });
  return { host, runner, logs };
}

/** Parent pid, process group, nice value and state of a process, from /proc. */
function procStat(pid: number): { ppid: number; pgid: number; nice: number; state: string } | undefined {
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return undefined;
  }
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return { state: f[0]!, ppid: Number(f[1]), pgid: Number(f[2]), nice: Number(f[16]) };
}

/** Gone, or a zombie nobody has waited for yet. */
function dead(pid: number): boolean {
  const s = procStat(pid);
  return s === undefined || s.state === 'Z';
}

describe('process host', () => {
  it('streams combined output to listeners and the log file, reports the exit code, runs in its own process group', async (t) => {
    const { host, runner } = setup();
    const logFile = path.join(dir, 'jobs', 'stream.log');
    const go = path.join(dir, 'stream-go');
    const chunks: string[] = [];
    const run = runner.run({
      jobId: 'stream',
      args: ['-c', `echo "out $TF_IN_AUTOMATION $EXTRA"; while [ ! -e ${go} ]; do sleep 0.05; done; echo err >&2; exit 3`],
      cwd: dir,
      env: { EXTRA: 'x' },
      logFile,
      onOutput: (c) => chunks.push(c),
    });
    await waitFor('the first line, streamed while the process runs', () => chunks.join('').includes('out true x\n'));
    // Whatever fails below, let the child end so the file does not hang on it.
    t.after(() => writeFileSync(go, ''));
    const [p] = runner.running();
    assert.equal(procStat(p!.pid)?.ppid, host.pid, 'a child of the worker process');
    assert.equal(procStat(p!.pid)?.pgid, p!.pid, 'leads its own process group');
    assert.equal(procStat(p!.pid)?.nice, 10, 'runs at nice 10, after the server');
    assert.equal(getPriority(), ownPriority, 'the server itself keeps its priority');
    // Its own session: where the kernel groups by session (autogroup), the group is niced too.
    if (existsSync('/proc/self/autogroup')) assert.match(readFileSync(`/proc/${p!.pid}/autogroup`, 'utf8'), /nice 10\b/);
    else assert.ok(procStat(p!.pid), 'no autogroup on this kernel; the child runs all the same');
    writeFileSync(go, '');
    const r = await run;
    assert.equal(r.exitCode, 3);
    assert.equal(r.signal, null);
    assert.equal(r.interrupted, false);
    assert.match(r.output, /^out true x\n/m);
    assert.match(r.output, /^err\n/m);
    assert.equal(chunks.join(''), r.output);
    assert.equal(readFileSync(logFile, 'utf8'), r.output);
    assert.equal(runner.running().length, 0);
  });

  it('reports a process ended by a signal', async () => {
    const { runner } = setup();
    const r = await runner.run({ jobId: 'signal', args: ['-c', 'kill -TERM $$'], cwd: dir });
    assert.equal(r.exitCode, null);
    assert.equal(r.signal, 'SIGTERM');
  });

  it('cancels with SIGINT to the group, then SIGKILL after the grace when SIGINT is ignored', async () => {
    const { runner, logs } = setup({ interruptGraceMs: 300 });
    let out = '';
    const run = runner.run({
      jobId: 'stubborn',
      args: ['-c', 'trap "" INT; echo ready; while :; do sleep 0.05; done'],
      cwd: dir,
      onOutput: (c) => {
        out += c;
      },
    });
    await waitFor('the process to trap SIGINT', () => out.includes('ready'));
    const pid = runner.running()[0]!.pid;
    runner.cancel('stubborn');
    const r: RunResult = await run;
    assert.equal(r.signal, 'SIGKILL');
    assert.equal(r.interrupted, true);
    assert.equal(r.killed, true);
    assert.deepEqual(
      logs.filter((l) => l.level === 'warn').map((l) => [l.fields?.signal, l.fields?.pid]),
      [
        ['SIGINT', pid],
        ['SIGKILL', pid],
      ],
    );
    await waitFor('no process of the group left', () => dead(pid));
  });

  it('keeps an interrupt that arrives before the pid is known and sends it once the process runs', async () => {
    const { runner } = setup();
    const run = runner.run({ jobId: 'early', args: ['-c', 'trap "exit 130" INT; while :; do sleep 0.05; done'], cwd: dir });
    // The pid comes in a message from the worker process, so it cannot be known yet.
    assert.equal(runner.running().length, 0);
    runner.cancel('early');
    const r = await run;
    // SIGINT reached it: through the trap, or before sh had set it up (it was sent at once).
    assert.ok(r.exitCode === 130 || r.signal === 'SIGINT', JSON.stringify(r));
    assert.equal(r.interrupted, true);
    assert.equal(r.killed, false);
  });

  it('refuses new processes after interruptAll and interrupts the ones being spawned', async () => {
    const { runner } = setup();
    const run = runner.run({ jobId: 'spawning', args: ['-c', 'trap "exit 130" INT; while :; do sleep 0.05; done'], cwd: dir });
    runner.interruptAll();
    const r = await run;
    assert.ok(r.exitCode === 130 || r.signal === 'SIGINT', JSON.stringify(r));
    assert.equal(r.interrupted, true);
    const refused = await runner.run({ jobId: 'late', args: ['-c', 'echo never'], cwd: dir });
    assert.equal(refused.output, 'Not started: the server is shutting down.\n');
  });

  it('gives a readable message when the binary is missing', async () => {
    const { runner } = setup({ binary: path.join(dir, 'no-such-terraform') });
    const r = await runner.run({ jobId: 'missing', args: ['plan'], cwd: dir });
    assert.equal(r.exitCode, null);
    assert.equal(r.signal, null);
    assert.match(r.output, /ENOENT/);
    assert.ok(r.output.includes(path.join(dir, 'no-such-terraform')), r.output);
  });

  it('captures stdout and stderr separately (git)', async () => {
    const { host } = setup();
    const ok = await host.spawn({ command: 'git', args: ['--version'], cwd: dir, output: 'capture' });
    assert.equal(ok.exitCode, 0);
    assert.match(ok.stdout ?? '', /^git version \d/);
    const bad = await host.spawn({
      command: 'git',
      args: ['rev-parse', 'HEAD'],
      cwd: dir,
      env: { GIT_CEILING_DIRECTORIES: dir },
      output: 'capture',
    });
    assert.notEqual(bad.exitCode, 0);
    assert.match(bad.stderr ?? '', /not a git repository/);
    assert.equal(bad.stdout, '');
  });

  it('stops a captured child whose output passes the bound, says why, and keeps serving', async () => {
    const { host } = setup();
    // stdout and stderr count together: each is under the bound, both are 2 MiB over it. The
    // bound is passed while the second head still writes, before the shell could start sleep.
    const half = MAX_CAPTURE_BYTES / 2 + (1 << 20);
    const over = await host.spawn({
      command: 'sh',
      args: ['-c', `head -c ${half} /dev/zero; head -c ${half} /dev/zero >&2; sleep 30`],
      cwd: dir,
      output: 'capture',
    });
    assert.equal(over.exitCode, null);
    assert.equal(
      over.error,
      `Command failed: its output passed 64 MiB and it was stopped: sh -c head -c ${half} /dev/zero; head -c ${half} /dev/zero >&2; sleep 30`,
    );
    assert.equal(over.stdout, '');
    assert.ok(over.durationMs < 20_000, `killed, not waited for: ${over.durationMs} ms`);
    const under = await host.spawn({ command: 'head', args: ['-c', String(half), '/dev/zero'], cwd: dir, output: 'capture' });
    assert.equal(under.exitCode, 0);
    assert.equal(under.stdout?.length, half);
  });

  it('decodes a character split between two chunks of output whole', async () => {
    const { runner } = setup();
    const chunks: string[] = [];
    // é is \303\251: the two bytes come in two writes, so in two chunks.
    const r = await runner.run({
      jobId: 'utf8',
      args: ['-c', "printf '\\303'; sleep 0.2; printf '\\251\\n'"],
      cwd: dir,
      onOutput: (c) => chunks.push(c),
    });
    assert.equal(r.output, '\u00e9\n');
    assert.ok(
      chunks.every((c) => !c.includes('\ufffd')),
      JSON.stringify(chunks),
    );
  });

  it('gives a child default signal handling, stdin at EOF, the extended environment and its PATH', async () => {
    const { host } = setup();
    const bin = path.join(dir, 'bin');
    mkdirSync(bin, { recursive: true });
    writeFileSync(path.join(bin, 'only-here'), '#!/bin/sh\necho "found $1"\n');
    chmodSync(path.join(bin, 'only-here'), 0o755);
    const script = 'grep -E "^Sig(Ign|Blk):" /proc/self/status; cat; echo "stdin done $EXTRA"; only-here x\n';
    for (const stdin of ['pipe', 'ignore'] as const) {
      const r = await host.spawn({
        command: 'sh',
        args: ['-c', script],
        cwd: dir,
        env: { EXTRA: 'y', PATH: `${bin}:${process.env.PATH}` },
        stdin,
        output: 'capture',
      });
      assert.equal(r.exitCode, 0, JSON.stringify(r));
      // The worker ignores SIGINT, SIGTERM and SIGPIPE; its children must not (SIG_IGN survives exec).
      // Nor signal 32, which GNU make (posix_spawn) leaves ignored in what it starts, as `make test`.
      assert.equal(r.stdout, 'SigBlk:\t0000000000000000\nSigIgn:\t0000000000000000\nstdin done y\nfound x', stdin);
      assert.equal(r.stderr, '');
    }
  });

  it('fails the processes of a worker process that dies, kills them, logs it, and starts a new worker for later ones', async () => {
    const { host, runner, logs } = setup();
    let out = '';
    const run = runner.run({
      jobId: 'orphan',
      args: ['-c', 'echo ready; while :; do sleep 0.05; done'],
      cwd: dir,
      onOutput: (c) => {
        out += c;
      },
    });
    await waitFor('the process', () => out.includes('ready'));
    const pid = runner.running()[0]!.pid;
    const firstWorker = host.pid!;
    // Stopped, the worker cannot start what is asked next: that request is in flight when it dies.
    process.kill(firstWorker, 'SIGSTOP');
    const never = host.spawn({ command: 'true', args: [], cwd: dir, output: 'capture' });
    process.kill(firstWorker, 'SIGKILL');
    const lost = await never;
    assert.match(lost.error ?? '', /process host stopped unexpectedly \(signal SIGKILL\) while running true; it did not start/);
    const r = await run;
    assert.equal(r.exitCode, null);
    assert.match(
      r.output,
      new RegExp(`process host stopped unexpectedly \\(signal SIGKILL\\) while running sh; process ${pid} was killed`),
    );
    assert.ok(
      logs.some((l) => l.level === 'error' && l.msg.startsWith('Process host stopped') && l.fields?.processes === 2),
      JSON.stringify(logs),
    );
    await waitFor('the orphaned process killed', () => dead(pid));
    assert.equal(runner.running().length, 0);

    const again = await runner.run({ jobId: 'after', args: ['-c', 'echo again'], cwd: dir });
    assert.equal(again.exitCode, 0);
    assert.equal(again.output, 'again\n');
    assert.notEqual(host.pid, firstWorker, 'a new worker process');
  });

  it('never forks the server for a child: the worker process starts them, and goes when the server closes it', async () => {
    // Count child_process.spawn calls in this process (execa and the process host call it
    // through their ESM imports, which syncBuiltinESMExports updates): one, for the worker.
    const original = childProcess.spawn;
    let ownSpawns = 0;
    childProcess.spawn = ((...args: Parameters<typeof original>) => {
      ownSpawns++;
      return original(...args);
    }) as typeof original;
    syncBuiltinESMExports();
    try {
      await execa('true');
      assert.equal(ownSpawns, 1, 'the counter sees a spawn in this process');
      ownSpawns = 0;

      const { host, runner } = setup();
      const r = await runner.run({ jobId: 'where', args: ['-c', 'echo $PPID'], cwd: dir });
      const worker = host.pid;
      assert.ok(worker !== undefined && worker !== process.pid);
      assert.equal(r.output, `${worker}\n`, 'a child of the worker');
      assert.equal(procStat(worker)?.ppid, process.pid, 'the worker is a child of the server');
      const g = await host.spawn({ command: 'git', args: ['--version'], cwd: dir, output: 'capture' });
      assert.equal(g.exitCode, 0);
      assert.match(g.stdout ?? '', /^git version/);
      assert.equal(ownSpawns, 1, 'the server started its worker, and nothing else');
      host.close();
      await waitFor('the worker to exit once closed', () => dead(worker));
    } finally {
      childProcess.spawn = original;
      syncBuiltinESMExports();
    }
  });

  it('the worker exits when its server is SIGKILLed', async () => {
    const server = execa(
      process.execPath,
      ['--import', 'tsx', new URL('./fixtures/process-host/host-and-wait.ts', import.meta.url).pathname],
      { reject: false },
    );
    let line = '';
    server.stdout!.on('data', (c: Buffer) => {
      line += c.toString();
    });
    await waitFor('the fixture server to start a child through its worker', () => line.includes('\n'), 30_000);
    const { worker, child } = JSON.parse(line) as { worker: number; child: number };
    assert.equal(procStat(child)?.ppid, worker);
    try {
      server.kill('SIGKILL');
      await server;
      await waitFor('the worker to exit after its server', () => dead(worker));
    } finally {
      try {
        process.kill(child, 'SIGKILL');
      } catch {
        /* gone */
      }
    }
  });
});
