// Runs the built CLI (dist/) as a real process. `make test` builds first.
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { closeSync, cpSync, existsSync, openSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { sleep } from '../../src/async.js';

export const CLI = fileURLToPath(new URL('../../dist/atlantis-operator.cjs', import.meta.url));

export function assertBuilt(): void {
  if (!existsSync(CLI)) throw new Error(`${CLI} is missing: run 'make build' (make test does it)`);
}

/**
 * Copies the built CLI into `dir` (dist/ and the package whose addon the bundle loads at run
 * time: better-sqlite3), so that another user runs it where
 * the clone itself sits under a directory only its owner may enter. Returns the CLI's path.
 */
export function stageCli(dir: string): string {
  assertBuilt();
  const root = path.dirname(path.dirname(CLI));
  cpSync(path.join(root, 'dist'), path.join(dir, 'dist'), { recursive: true });
  const require = createRequire(path.join(root, 'package.json'));
  for (const pkg of ['better-sqlite3']) {
    const from = path.dirname(require.resolve(`${pkg}/package.json`));
    cpSync(from, path.join(dir, 'node_modules', pkg), { recursive: true });
  }
  return path.join(dir, 'dist', path.basename(CLI));
}

export function runCli(
  args: string[],
  env: NodeJS.ProcessEnv = {},
  timeoutMs = 30_000,
): { code: number | null; stdout: string; stderr: string } {
  assertBuilt();
  const r = spawnSync(process.execPath, [CLI, ...args], {
    env: { PATH: process.env.PATH, HOME: process.env.HOME, ...env },
    encoding: 'utf8',
    timeout: timeoutMs,
  });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

export interface CliProcess {
  child: ChildProcess;
  output: () => string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/**
 * Starts the CLI (or `cli`, another build of it); its output is kept in memory, or appended
 * to `logFile`. A benchmark should use a file: Node.js writes to a pipe synchronously, so a
 * busy reader on the other end (the benchmark itself, on a loaded machine) would stall the
 * process's event loop once the pipe is full. A container runtime reads a container's output
 * promptly.
 */
/** `prefix`: a command that execs node in the same process, e.g. `setpriv --reuid=...` to run it as another user; `nodeArgs`: node's own flags. */
export function startCli(
  args: string[],
  env: NodeJS.ProcessEnv = {},
  opts: { logFile?: string; cli?: string; prefix?: string[]; nodeArgs?: readonly string[] } = {},
): CliProcess {
  if (!opts.cli) assertBuilt();
  const cli = opts.cli ?? CLI;
  // The file is the child's own stdout/stderr; the parent's copy of the fd can close at once.
  const fd = opts.logFile ? openSync(opts.logFile, 'a') : undefined;
  let child: ChildProcess;
  try {
    const [command, ...prefixArgs] = [...(opts.prefix ?? []), process.execPath];
    child = spawn(command as string, [...prefixArgs, ...(opts.nodeArgs ?? []), cli, ...args], {
      env: { PATH: process.env.PATH, HOME: process.env.HOME, ...env },
      stdio: ['ignore', fd ?? 'pipe', fd ?? 'pipe'],
    });
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
  let out = '';
  child.stdout?.on('data', (d: Buffer) => {
    out += d.toString();
  });
  child.stderr?.on('data', (d: Buffer) => {
    out += d.toString();
  });
  const file = opts.logFile;
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.on('exit', (code, signal) => resolve({ code, signal })),
  );
  return { child, output: () => (file ? readFileSync(file, 'utf8') : out), exited };
}

/** Resolves when `url` answers 200, or rejects after `timeoutMs`. */
export async function waitForHttp(url: string, timeoutMs = 15_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (Date.now() < end) {
    try {
      if ((await fetch(url, { signal: AbortSignal.timeout(1000) })).ok) return;
    } catch {
      /* not up yet */
    }
    await sleep(100);
  }
  throw new Error(`${url} did not answer within ${timeoutMs} ms`);
}

/** `server` with the fewest flags it starts with (no webhook secret), on `host`:4141. */
export function minimalServerArgs(dataDir: string, host: string): string[] {
  return [
    'server',
    '--bind-address',
    host,
    '--port',
    '4141',
    '--data-dir',
    dataDir,
    '--repo-allowlist',
    'github.com/acme/*',
    '--gh-user',
    'bot',
    '--gh-token',
    'tok',
    '--insecure-no-webhook-secret',
  ];
}
