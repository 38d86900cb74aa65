// Service addresses: one loopback address per Service (its stand-in ClusterIP), each of its
// ports listening there. Allocated from 127.2.1.1 ... 127.2.254.254: pods live in 127.1.0.0/16
// and tests bind their own servers in 127.0.0.0/16, so none of them collide. Claimed
// machine-wide like pod addresses (dev/local-node/ip.ts), so proxies of several local
// clusters on one machine never take the same one.
import { claimLoopbackAddress, releaseLoopbackAddress } from '../local-node/index.js';

const SIZE = 254 * 254;

/** The n-th address of the range (n taken modulo its size). */
export function serviceAddress(n: number): string {
  const i = ((n % SIZE) + SIZE) % SIZE;
  return `127.2.${Math.floor(i / 254) + 1}.${(i % 254) + 1}`;
}

export class AddressPool {
  private next = Math.floor(Math.random() * SIZE);
  private readonly mine = new Set<string>();

  /** A free address, claimed for this process; undefined when the range is used up. */
  allocate(): string | undefined {
    for (let i = 0; i < SIZE; i++) {
      const ip = serviceAddress(this.next++);
      if (!this.mine.has(ip) && claimLoopbackAddress(ip)) {
        this.mine.add(ip);
        return ip;
      }
    }
    return undefined;
  }

  release(ip: string): void {
    if (!this.mine.delete(ip)) return;
    releaseLoopbackAddress(ip);
  }

  releaseAll(): void {
    for (const ip of [...this.mine]) this.release(ip);
  }
}
