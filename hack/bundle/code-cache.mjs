// Makes dist/cli-<hash>.code-cache and dist/cli-<hash>.builtins.json for the launcher
// (hack/bundle/launcher.cjs): starts a real server from it with the image's node flags, on
// loopback and a port of the system's choosing, in a data dir of its own; once it says "Server
// started" it is sent SIGTERM, and as it exits the launcher writes what V8 compiled so far (the
// bundle's top level and every function the start ran) and the built-in modules it loaded.
// With `write: false` the same start is only a smoke test of a tree (hack/image/runtime-tree.mjs).
import { spawn } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

/** The image's Node.js flags, from src/node-args.ts (the Dockerfile's build stage has no TypeScript compiler). */
export function nodeArgs(repo) {
  const text = readFileSync(path.join(repo, 'src/node-args.ts'), 'utf8');
  const m = /export const NODE_ARGS[^=]*=\s*(\[[^\]]*\])/.exec(text);
  if (!m) throw new Error('hack/bundle/code-cache.mjs: no NODE_ARGS array in src/node-args.ts');
  return JSON.parse(m[1].replaceAll("'", '"'));
}

/** The files the launcher reads beside itself, for the bundle whose hash it was written with. */
export function cacheFiles(launcher) {
  const hash = /const CLI_HASH = '([0-9a-f]+)';/.exec(readFileSync(launcher, 'utf8'))?.[1];
  if (!hash) throw new Error(`${launcher} names no bundle hash`);
  const dir = path.dirname(launcher);
  return [`cli-${hash}.code-cache`, `cli-${hash}.builtins.json`].map((f) => path.join(dir, f));
}

export async function startAndStop({ repo, launcher, write, timeoutMs = 60_000 }) {
  const work = mkdtempSync(path.join(tmpdir(), 'ato-code-cache-'));
  const args = [
    ...nodeArgs(repo),
    launcher,
    'server',
    '--bind-address=127.0.0.1',
    '--port=0',
    `--data-dir=${path.join(work, 'data')}`,
    '--gh-user=code-cache',
    '--gh-token=code-cache-token',
    '--repo-allowlist=github.com/code-cache/*',
    '--insecure-no-webhook-secret',
    '--tf-download=false',
  ];
  const env = { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: work, ...(write ? { ATLANTIS_OPERATOR_CODE_CACHE: 'write' } : {}) };
  const files = cacheFiles(launcher);
  if (write) for (const f of files) rmSync(f, { force: true });
  const child = spawn(process.execPath, args, { cwd: work, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let log = '';
  const exited = new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
  const onData = (d) => {
    log += d;
    if (log.includes('Server started')) child.kill('SIGTERM');
  };
  child.stdout.on('data', onData);
  child.stderr.on('data', onData);
  const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
  const { code, signal } = await exited;
  clearTimeout(timer);
  rmSync(work, { recursive: true, force: true });
  const missing = write ? files.filter((f) => !existsSync(f)) : [];
  if (code !== 0 || !log.includes('Server started') || missing.length) {
    if (write) for (const f of files) rmSync(f, { force: true });
    throw new Error(
      `hack/bundle/code-cache.mjs: the server ended with ${signal ?? code}${missing.length ? `, without ${missing.join(', ')}` : ''}:\n${log.slice(-3000)}`,
    );
  }
  // Written under the server's umask (0600); the image runs the CLI as another user than the build.
  if (write) for (const f of files) chmodSync(f, 0o644);
}
