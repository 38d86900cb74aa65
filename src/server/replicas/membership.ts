// What a replica knows of the others, whatever keeps them: Redis's registry (registry.ts) for
// replicas sharing a store, the embedded store's registry of one (local-registry.ts).
import type { ReplicaInfo } from './affinity.js';

/** What a replica knows of the others, whatever the store; the workflow takes this, never a class. */
export interface ReplicaMembership {
  /** This replica as it last announced itself. */
  readonly self: ReplicaInfo;
  /**
   * Connects (Redis) and claims this replica's id: rejects with a one-line UsageError while
   * another live replica holds it; then heartbeats as not serving yet (it owns no PR), so that
   * nobody takes it for dead while it recovers its journal.
   */
  claim(): Promise<void>;
  /** Claims the id if not done yet, then heartbeats as serving, and keeps heartbeating. */
  start(): Promise<void>;
  /** One heartbeat now (the timer calls it); rejects when it could not be written. */
  heartbeat(): Promise<void>;
  /** Announces the drain (or its end) with a heartbeat at once. */
  setDraining(draining: boolean): Promise<void>;
  /** The live replicas, self included once its heartbeat is stored, sorted by id. */
  list(): Promise<ReplicaInfo[]>;
  /** Stops heartbeating, without leaving: to the others this replica dies after the TTL. */
  stop(): void;
  /** Clean shutdown: stops heartbeating and removes this replica's record at once. */
  leave(): Promise<void>;
  /** Stops heartbeating and closes the connection (no leave). */
  close(): Promise<void>;
}
