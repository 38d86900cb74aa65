// Atlantis listens on every interface and has no bind address, so a bench that runs it runs
// itself again in a user and network namespace of its own with only loopback up (`unshare
// -rn`), as the fixture recorders do: nothing it opens is reachable from outside, and its
// port cannot collide with another engineer's servers on the shared loopback.
import { spawn } from 'node:child_process';
import { networkInterfaces } from 'node:os';

export function onlyLoopback(): boolean {
  return Object.values(networkInterfaces()).every((addrs) => (addrs ?? []).every((a) => a.internal));
}

/** Runs `node --import tsx <script> ...args` in a namespace with only loopback; resolves to its exit code. */
export function runInLoopbackNamespace(script: string, args: string[], env: NodeJS.ProcessEnv = process.env): Promise<number> {
  const child = spawn(
    'unshare',
    ['-rn', 'sh', '-c', 'ip link set lo up && exec "$@"', 'sh', process.execPath, '--import', 'tsx', script, ...args],
    { stdio: 'inherit', env },
  );
  return new Promise((resolve) => child.once('exit', (code, signal) => resolve(code ?? (signal ? 128 : 1))));
}
