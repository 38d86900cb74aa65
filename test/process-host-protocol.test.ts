// The framing between the server and its process host worker (process-host-protocol.ts): the
// bytes of a spawn request, the decoding of each event, frames split anywhere across reads,
// what an exit event means for the caller, and that the worker (dist/native/process-host, built
// by make build) answers a real request and rejects malformed ones by exiting with code 1.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'node:test';
import {
  FrameReader,
  MAX_REQUEST_BYTES,
  type SpawnSpec,
  type WorkerEvent,
  decodeEvent,
  encodeSpawn,
  toSpawnExit,
} from '../src/server/terraform/process-host-protocol.js';

const WORKER = fileURLToPath(new URL('../dist/native/process-host', import.meta.url));

const u32 = (n: number): number[] => [n & 0xff, (n >> 8) & 0xff, (n >> 16) & 0xff, (n >>> 24) & 0xff];
const str = (s: string): number[] => [...u32(Buffer.byteLength(s)), ...Buffer.from(s)];
const frame = (payload: number[]): Buffer => Buffer.from([...u32(payload.length), ...payload]);
const exitPayload = (id: number, kind: number, value: number, ms: number, stage: number, out = '', err = ''): number[] => [
  3,
  ...u32(id),
  kind,
  ...u32(value),
  ...u32(ms),
  stage,
  ...str(out),
  ...str(err),
];

describe('process host protocol', () => {
  it('encodes a spawn request', () => {
    const cases: Array<[string, SpawnSpec, number[]]> = [
      [
        'stream, detached, stdin ignored, env',
        { command: 'tf', args: ['plan', 'é'], cwd: '/w', env: { A: '1' }, detached: true, stdin: 'ignore', output: 'stream' },
        [1, ...u32(7), 1, ...str('tf'), ...str('/w'), ...u32(2), ...str('plan'), ...str('é'), ...u32(1), ...str('A=1')],
      ],
      [
        'capture, stdin pipe by default, no env',
        { command: 'git', args: [], cwd: '.', output: 'capture' },
        [1, ...u32(7), 2 | 4, ...str('git'), ...str('.'), ...u32(0), ...u32(0)],
      ],
    ];
    for (const [name, spec, payload] of cases) assert.deepEqual(encodeSpawn(7, spec), frame(payload), name);
  });

  it('refuses a request the worker would reject, without sending it', () => {
    const spec: SpawnSpec = { command: 'sh', args: [], cwd: '/', output: 'capture' };
    assert.throws(() => encodeSpawn(1, { ...spec, args: ['a\0b'] }), /NUL byte/);
    assert.throws(() => encodeSpawn(1, { ...spec, env: { 'A=B': 'x' } }), /invalid environment variable name/);
    assert.throws(() => encodeSpawn(1, { ...spec, env: { '': 'x' } }), /invalid environment variable name/);
    assert.throws(() => encodeSpawn(1, { ...spec, args: ['x'.repeat(MAX_REQUEST_BYTES)] }), /bytes/);
  });

  it('decodes each event', () => {
    const cases: Array<[number[], WorkerEvent]> = [
      [[1, ...u32(5), ...u32(4242)], { type: 'started', id: 5, pid: 4242 }],
      [[2, ...u32(5), 0xc3, 0xa9], { type: 'output', id: 5, chunk: Buffer.from('é') }],
      [
        exitPayload(5, 0, 3, 120, 0),
        { type: 'exit', id: 5, kind: 0, value: 3, durationMs: 120, stage: 0, stdout: Buffer.alloc(0), stderr: Buffer.alloc(0) },
      ],
      [
        exitPayload(6, 1, 15, 9, 0, 'out\n', 'err'),
        { type: 'exit', id: 6, kind: 1, value: 15, durationMs: 9, stage: 0, stdout: Buffer.from('out\n'), stderr: Buffer.from('err') },
      ],
    ];
    for (const [payload, event] of cases) assert.deepEqual(decodeEvent(Buffer.from(payload)), event);
    assert.throws(() => decodeEvent(Buffer.from([9, ...u32(1)])), /unknown event type 9/);
    assert.throws(() => decodeEvent(Buffer.from([...exitPayload(1, 0, 0, 0, 0, 'a'), 0])), /malformed exit event/);
  });

  it('reads the same frames however the stream is split', () => {
    const payloads = [[1, ...u32(1), ...u32(10)], [2, ...u32(1), ...Buffer.from('hello')], [], exitPayload(1, 0, 0, 5, 0)];
    const stream = Buffer.concat(payloads.map(frame));
    const expected = payloads.map((p) => Buffer.from(p));
    for (let a = 0; a <= stream.length; a++)
      for (let b = a; b <= stream.length; b += 3) {
        const r = new FrameReader();
        const got = [stream.subarray(0, a), stream.subarray(a, b), stream.subarray(b)].flatMap((c) => r.push(c));
        assert.deepEqual(got, expected, `split at ${a} and ${b}`);
      }
  });

  it('turns an exit event into what spawn resolves with', () => {
    const capture: SpawnSpec = { command: '/x/tf', args: ['plan', '-out=p'], cwd: '/w', output: 'capture' };
    const stream: SpawnSpec = { ...capture, output: 'stream' };
    const exit = (p: number[]) => decodeEvent(Buffer.from(p)) as Extract<WorkerEvent, { type: 'exit' }>;
    assert.deepEqual(toSpawnExit(exit(exitPayload(1, 0, 2, 30, 0)), stream), { durationMs: 30, exitCode: 2, signal: null });
    assert.deepEqual(toSpawnExit(exit(exitPayload(1, 1, 9, 30, 0)), stream), { durationMs: 30, exitCode: null, signal: 'SIGKILL' });
    assert.deepEqual(toSpawnExit(exit(exitPayload(1, 0, 0, 1, 0, 'a\n\n', 'b\r\n')), capture), {
      durationMs: 1,
      exitCode: 0,
      signal: null,
      stdout: 'a\n',
      stderr: 'b',
    });
    assert.equal(
      toSpawnExit(exit(exitPayload(1, 2, 2, 0, 1)), stream).error,
      'Command failed with ENOENT: /x/tf plan -out=p\nspawn /x/tf ENOENT',
    );
    assert.equal(
      toSpawnExit(exit(exitPayload(1, 2, 2, 0, 2)), stream).error,
      'Command failed with ENOENT: /x/tf plan -out=p\nspawn /x/tf ENOENT (working directory /w)',
    );
    assert.equal(
      toSpawnExit(exit(exitPayload(1, 2, 24, 0, 3)), stream).error,
      'Command failed with EMFILE: /x/tf plan -out=p\nspawn /x/tf EMFILE (in the process host)',
    );
    assert.deepEqual(toSpawnExit(exit(exitPayload(1, 2, 27, 40, 4)), capture), {
      durationMs: 40,
      exitCode: null,
      signal: null,
      error: 'Command failed: its output passed 64 MiB and it was stopped: /x/tf plan -out=p',
      stdout: '',
      stderr: '',
    });
  });

  /** Runs the worker on `input`, closing its stdin (EOF) once it has sent `events` events; its events, exit code and stderr. */
  async function worker(input: Buffer, events = 0): Promise<{ events: WorkerEvent[]; code: number | null; stderr: string }> {
    const p = spawn(WORKER, [], { stdio: ['pipe', 'pipe', 'pipe'] });
    const frames = new FrameReader();
    const got: WorkerEvent[] = [];
    let stderr = '';
    p.stdout.on('data', (c: Buffer) => {
      got.push(...frames.push(c).map(decodeEvent));
      if (got.length >= events) p.stdin.end();
    });
    p.stderr.on('data', (c: Buffer) => {
      stderr += c.toString();
    });
    p.stdin.on('error', () => {}); // it may be gone before it has read everything
    if (events === 0) p.stdin.end(input);
    else p.stdin.write(input);
    const code = await new Promise<number | null>((resolve) => p.on('close', resolve));
    return { events: got, code, stderr };
  }

  it('the worker answers a request, then exits 0 at EOF', async () => {
    const r = await worker(
      encodeSpawn(3, { command: 'sh', args: ['-c', 'echo hi; echo oops >&2; exit 4'], cwd: '/', output: 'capture' }),
      2,
    );
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.events.length, 2);
    assert.equal(r.events[0]!.type, 'started');
    const e = r.events[1] as Extract<WorkerEvent, { type: 'exit' }>;
    assert.deepEqual([e.type, e.id, e.kind, e.value, e.stdout.toString(), e.stderr.toString()], ['exit', 3, 0, 4, 'hi\n', 'oops\n']);
  });

  it('the worker rejects a malformed request: a line on stderr, exit code 1', async () => {
    const good = encodeSpawn(1, { command: 'true', args: [], cwd: '/', output: 'capture' });
    const cases: Array<[string, Buffer, RegExp]> = [
      ['an empty frame', frame([]), /frame of 0 bytes/],
      ['a frame over the bound', Buffer.from(u32(MAX_REQUEST_BYTES + 1)), /frame of \d+ bytes/],
      ['an unknown type', frame([9, ...u32(1)]), /type 9/],
      ['a string past the end', frame([1, ...u32(1), 0, ...u32(100), 0x61]), /past the end/],
      ['a NUL byte in a string', frame([1, ...u32(1), 0, ...str('a\0b')]), /NUL byte/],
      ['bytes after the end', Buffer.concat([Buffer.from(u32(good.length - 3)), good.subarray(4), Buffer.from([0])]), /after the end/],
      [
        'an env entry without a name',
        frame([1, ...u32(1), 4, ...str('true'), ...str('/'), ...u32(0), ...u32(1), ...str('=x')]),
        /without a name/,
      ],
      ['more arguments than bytes', frame([1, ...u32(1), 4, ...str('true'), ...str('/'), ...u32(1_000_000)]), /1000000 arguments/],
    ];
    for (const [name, input, message] of cases) {
      const r = await worker(input);
      assert.equal(r.code, 1, name);
      assert.match(r.stderr, /^process-host: malformed request: /, name);
      assert.match(r.stderr, message, name);
      assert.deepEqual(r.events, [], name);
    }
  });
});
