// The one place the server chooses its store: the embedded SQLite store in the data dir
// (`--locking-db-type boltdb`) or Redis shared by replicas (`--locking-db-type redis`), and
// with it the project leases and the replica registry. Everything else takes the interfaces.
// The caller awaits the store's `connect()` before using it.
import { LocalReplicaRegistry } from '../replicas/local-registry.js';
import { LocalProjectLeases } from './project-lease.js';
import { SqliteStore } from './sqlite-store.js';
import type { StoreParts, StoreSettings } from './store-parts.js';

/** The parts of the store the settings choose; the server loads them once, before it is built. */
export async function loadStoreParts(cfg: StoreSettings): Promise<StoreParts> {
  if (cfg.store.type === 'boltdb') return embeddedParts(cfg);
  // Loaded here only: the Redis parts bring ioredis (~0.5 MB of code), which a server on the
  // embedded store would otherwise read at every start.
  const { redisParts } = await import('./redis-parts.js');
  return redisParts(cfg, cfg.store.redis);
}

function embeddedParts(cfg: StoreSettings): StoreParts {
  return {
    openStateStore: () => SqliteStore.open(cfg.dataDir),
    openProjectLeases: (logger, timing = {}) => new LocalProjectLeases({ ...timing, logger }),
    openReplicaRegistry: (url) => new LocalReplicaRegistry({ id: cfg.replicaId, url }),
  };
}
