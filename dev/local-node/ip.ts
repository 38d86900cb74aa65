// Pod addresses: 127.1.1.1 ... 127.1.254.254, claimed machine-wide because several local
// nodes may run on one machine (tests of several people, a dev/up.ts next to `make test`).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const IP_CLAIMS = path.join(os.tmpdir(), 'atlantis-local-node-ips');

function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * Claims a loopback address machine-wide (the local nodes' pod addresses go through this);
 * false when another live process holds it. Tests that bind fixed 127.0.N.M addresses can
 * claim them here too, so that no pod gets the same address.
 */
export function claimLoopbackAddress(ip: string): boolean {
  fs.mkdirSync(IP_CLAIMS, { recursive: true });
  const f = path.join(IP_CLAIMS, ip);
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      fs.writeFileSync(f, `${process.pid}\n`, { flag: 'wx' });
      return true;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      let pid = 0;
      try {
        pid = Number(fs.readFileSync(f, 'utf8').trim());
      } catch {
        continue;
      }
      if (pid > 0 && pidAlive(pid)) return false;
      fs.rmSync(f, { force: true });
    }
  }
  return false;
}

/** Releases an address claimed by this process. */
export function releaseLoopbackAddress(ip: string): void {
  const f = path.join(IP_CLAIMS, ip);
  try {
    if (Number(fs.readFileSync(f, 'utf8').trim()) === process.pid) fs.rmSync(f, { force: true });
  } catch {
    // already gone
  }
}

/**
 * The next free pod address. Pods live in 127.1.0.0/16; tests and the demo bind their own
 * servers in 127.0.0.0/16, so the two never collide. Round robin from a random start, so a
 * freed address is not reused at once; stale claims of dead processes are taken over.
 * `counter` is advanced in place. Undefined when every address is taken.
 */
export function allocatePodAddress(used: ReadonlySet<string>, counter: { next: number }): string | undefined {
  const size = 254 * 254;
  for (let i = 0; i < size; i++) {
    const n = counter.next++ % size;
    const ip = `127.1.${Math.floor(n / 254) + 1}.${(n % 254) + 1}`;
    if (!used.has(ip) && claimLoopbackAddress(ip)) return ip;
  }
  return undefined;
}
