// What the server opens on its store, of either kind (open-store.ts chooses the kind).
import type { Logger } from '../../log.js';
import type { ServerConfig } from '../config.js';
import type { ReplicaMembership } from '../replicas/membership.js';
import type { ReplicaRegistryOptions } from '../replicas/registry.js';
import type { LeaseTiming, ProjectLeases } from './project-lease.js';
import type { StateStore } from './state-store.js';

export type StoreSettings = Pick<ServerConfig, 'dataDir' | 'store' | 'replicaId'>;
export type RegistryOptions = Pick<ReplicaRegistryOptions, 'heartbeatMs' | 'ttlMs' | 'onReplicaGone' | 'logger' | 'keyPrefix'>;

/** Opens the parts of one kind of store, for the settings loadStoreParts was given. */
export interface StoreParts {
  openStateStore(logger: Logger): StateStore;
  openProjectLeases(logger: Logger, timing?: LeaseTiming): ProjectLeases;
  /** Redis shares it between the replicas; the embedded store's has this server alone. */
  openReplicaRegistry(url: string, opts?: RegistryOptions): ReplicaMembership;
}
