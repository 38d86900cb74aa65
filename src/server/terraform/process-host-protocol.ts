// Messages between the process host (the server's main thread) and its worker process
// (native/process-host.c), which starts every child process of the server. Binary, over the
// worker's stdin (requests) and stdout (events):
//
//   frame    u32 length, then that many bytes of payload (all integers little-endian)
//   string   u32 length, then the bytes (UTF-8 here; raw in C, no NUL byte)
//   request  u8 1 (spawn), u32 id, u8 flags (1 detached, 2 stdin pipe, 4 capture),
//            string command, string cwd, u32 n + n strings (args), u32 n + n strings (env, K=V)
//   event    u8 type, u32 id, then by type:
//            1 started  u32 pid
//            2 output   the rest of the frame: a chunk of combined stdout/stderr, raw bytes
//            3 exit     u8 kind (0 exit code, 1 signal, 2 never ran), i32 value (the code, the
//                       signal number, or the errno), u32 duration ms, u8 stage of a failure
//                       (1 exec, 2 chdir, 3 the worker's own pipe/fork, 4 a capture over
//                       MAX_CAPTURE_BYTES: the child was killed), string stdout, string stderr
//                       ('capture'; empty otherwise)
//
// The worker rejects a malformed request by exiting with code 1 (after a line on stderr); the
// server then fails what it ran and starts a new one. So a request the worker would reject
// (over MAX_REQUEST_BYTES, a NUL byte in a string) is refused here, for that spawn alone.
import { constants } from 'node:os';

export interface SpawnSpec {
  command: string;
  args: string[];
  cwd: string;
  /** Added to the worker's environment (the server's, cleaned: see secrets/child-env.ts). */
  env?: Record<string, string>;
  /** Own process group (setsid): a signal to the server's group never reaches the child. */
  detached?: boolean;
  /** Default 'pipe' (at EOF at once). */
  stdin?: 'ignore' | 'pipe';
  /**
   * 'stream': stdout and stderr combined, sent in chunks as they come (nothing kept);
   * 'capture': stdout and stderr returned with the exit, final newline stripped.
   */
  output: 'stream' | 'capture';
}

export interface SpawnExit {
  exitCode: number | null;
  signal: string | null;
  durationMs: number;
  /** Set when the process never ran (e.g. binary missing) or was lost: what to tell the user. */
  error?: string;
  /** 'capture' only. */
  stdout?: string;
  stderr?: string;
}

export const EXIT_KIND = { code: 0, signal: 1, error: 2 } as const;
export const FAILED_STAGE = { none: 0, exec: 1, chdir: 2, host: 3, output: 4 } as const;
/** A 'capture' child's stdout and stderr together, at most (MAX_CAPTURE in process-host.c). */
export const MAX_CAPTURE_BYTES = 64 * 1024 * 1024;

export type WorkerEvent =
  | { type: 'started'; id: number; pid: number }
  | { type: 'output'; id: number; chunk: Buffer }
  | {
      type: 'exit';
      id: number;
      kind: number;
      value: number;
      durationMs: number;
      stage: number;
      stdout: Buffer;
      stderr: Buffer;
    };

/** The worker's bound on a request's payload (MAX_FRAME in process-host.c); execve's is far lower. */
export const MAX_REQUEST_BYTES = 16 * 1024 * 1024;

const FLAG_DETACHED = 1;
const FLAG_STDIN_PIPE = 2;
const FLAG_CAPTURE = 4;

/** One spawn request as a whole frame. Throws on a string the C side cannot pass on (a NUL byte). */
export function encodeSpawn(id: number, spec: SpawnSpec): Buffer {
  const strings = (list: string[]): Buffer[] => [u32(list.length), ...list.map(str)];
  const flags =
    (spec.detached ? FLAG_DETACHED : 0) |
    ((spec.stdin ?? 'pipe') === 'pipe' ? FLAG_STDIN_PIPE : 0) |
    (spec.output === 'capture' ? FLAG_CAPTURE : 0);
  const env = Object.entries(spec.env ?? {}).map(([k, v]) => {
    if (k === '' || k.includes('=')) throw new Error(`invalid environment variable name ${JSON.stringify(k)}`);
    return `${k}=${v}`;
  });
  const payload = Buffer.concat([
    Buffer.from([1]),
    u32(id),
    Buffer.from([flags]),
    str(spec.command),
    str(spec.cwd),
    ...strings(spec.args),
    ...strings(env),
  ]);
  if (payload.length > MAX_REQUEST_BYTES) throw new Error(`a command line and environment of ${payload.length} bytes`);
  return Buffer.concat([u32(payload.length), payload]);
}

/** One event from its frame's payload. */
export function decodeEvent(p: Buffer): WorkerEvent {
  const type = p.readUInt8(0);
  const id = p.readUInt32LE(1);
  switch (type) {
    case 1:
      return { type: 'started', id, pid: p.readUInt32LE(5) };
    case 2:
      return { type: 'output', id, chunk: p.subarray(5) };
    case 3: {
      const outLen = p.readUInt32LE(15);
      const errAt = 19 + outLen;
      const errLen = p.readUInt32LE(errAt);
      if (errAt + 4 + errLen !== p.length) throw new Error(`malformed exit event of ${p.length} bytes`);
      return {
        type: 'exit',
        id,
        kind: p.readUInt8(5),
        value: p.readInt32LE(6),
        durationMs: p.readUInt32LE(10),
        stage: p.readUInt8(14),
        stdout: p.subarray(19, errAt),
        stderr: p.subarray(errAt + 4),
      };
    }
    default:
      throw new Error(`unknown event type ${type}`);
  }
}

/** Splits a byte stream into frame payloads; copies a frame only when it spans chunks. */
export class FrameReader {
  private chunks: Buffer[] = [];
  private buffered = 0;
  private need?: number;

  /** The payloads of the frames completed by `chunk`, in order. */
  push(chunk: Buffer): Buffer[] {
    this.chunks.push(chunk);
    this.buffered += chunk.length;
    const frames: Buffer[] = [];
    for (;;) {
      if (this.need === undefined) {
        if (this.buffered < 4) break;
        this.need = this.take(4).readUInt32LE(0);
      }
      if (this.buffered < this.need) break;
      frames.push(this.take(this.need));
      this.need = undefined;
    }
    return frames;
  }

  private take(n: number): Buffer {
    if (n === 0) return Buffer.alloc(0);
    this.buffered -= n;
    const first = this.chunks[0]!;
    if (first.length >= n) {
      if (first.length === n) this.chunks.shift();
      else this.chunks[0] = first.subarray(n);
      return first.subarray(0, n);
    }
    const parts: Buffer[] = [];
    let left = n;
    while (left > 0) {
      const c = this.chunks[0]!;
      if (c.length <= left) {
        parts.push(c);
        this.chunks.shift();
        left -= c.length;
      } else {
        parts.push(c.subarray(0, left));
        this.chunks[0] = c.subarray(left);
        left = 0;
      }
    }
    return Buffer.concat(parts, n);
  }
}

/** What an exit event means for the caller of spawn. */
export function toSpawnExit(e: Extract<WorkerEvent, { type: 'exit' }>, spec: SpawnSpec): SpawnExit {
  const base = { durationMs: e.durationMs };
  let exit: SpawnExit;
  if (e.kind === EXIT_KIND.code) exit = { ...base, exitCode: e.value, signal: null };
  else if (e.kind === EXIT_KIND.signal) exit = { ...base, exitCode: null, signal: signalName(e.value) };
  else exit = { ...base, exitCode: null, signal: null, error: failureMessage(spec, e.stage, e.value) };
  if (spec.output !== 'capture') return exit;
  return { ...exit, stdout: stripFinalNewline(e.stdout.toString('utf8')), stderr: stripFinalNewline(e.stderr.toString('utf8')) };
}

/** Worded as Node.js and execa word a spawn failure, e.g. "Command failed with ENOENT: terraform plan\nspawn terraform ENOENT". */
function failureMessage(spec: SpawnSpec, stage: number, errno: number): string {
  const line = [spec.command, ...spec.args].join(' ');
  if (stage === FAILED_STAGE.output) return `Command failed: its output passed ${MAX_CAPTURE_BYTES >> 20} MiB and it was stopped: ${line}`;
  const code = errnoName(errno);
  const where =
    stage === FAILED_STAGE.chdir ? ` (working directory ${spec.cwd})` : stage === FAILED_STAGE.host ? ' (in the process host)' : '';
  return `Command failed with ${code}: ${line}\nspawn ${spec.command} ${code}${where}`;
}

function signalName(n: number): string {
  return Object.entries(constants.signals).find(([, v]) => v === n)?.[0] ?? `signal ${n}`;
}

function errnoName(n: number): string {
  return Object.entries(constants.errno).find(([, v]) => v === n)?.[0] ?? `errno ${n}`;
}

function stripFinalNewline(s: string): string {
  if (s.endsWith('\r\n')) return s.slice(0, -2);
  return s.endsWith('\n') ? s.slice(0, -1) : s;
}

function u32(n: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeUInt32LE(n);
  return b;
}

function str(s: string): Buffer {
  if (s.includes('\0')) throw new Error(`a NUL byte in ${JSON.stringify(s.slice(0, 80))}`);
  const b = Buffer.from(s, 'utf8');
  return Buffer.concat([u32(b.length), b]);
}
