// The embedded store's registry (`--locking-db-type boltdb`): one server, so it alone is live
// and owns every PR; nothing to claim, nobody to report dead.
import type { ReplicaInfo } from './affinity.js';
import type { ReplicaMembership } from './membership.js';

/** The embedded store's registry: one server, so it alone is live and owns every PR. */
export class LocalReplicaRegistry implements ReplicaMembership {
  private info: ReplicaInfo;

  constructor(
    self: { id: string; url: string },
    private readonly now: () => number = Date.now,
  ) {
    this.info = { id: self.id, url: self.url, draining: false, heartbeatAt: now() };
  }

  get self(): ReplicaInfo {
    return { ...this.info };
  }

  async claim(): Promise<void> {}

  async start(): Promise<void> {
    await this.heartbeat();
  }

  async heartbeat(): Promise<void> {
    this.info = { ...this.info, heartbeatAt: this.now() };
  }

  async setDraining(draining: boolean): Promise<void> {
    this.info = { ...this.info, draining };
    await this.heartbeat();
  }

  async list(): Promise<ReplicaInfo[]> {
    return [this.self];
  }

  stop(): void {}

  async leave(): Promise<void> {}

  async close(): Promise<void> {}
}
