// The Redis store, project leases and replica registry of `--locking-db-type redis`, each on a
// connection of its own. Reached only through open-store.ts's import(), with ioredis under them.
import { ReplicaRegistry } from '../replicas/registry.js';
import { instanceFilePath } from '../replicas/instance-file.js';
import { redisConnection } from './redis-connection.js';
import { RedisProjectLeases } from './redis-lease.js';
import { RedisStore } from './redis-store.js';
import type { RedisSettings } from './store-config.js';
import type { StoreParts, StoreSettings } from './store-parts.js';

export function redisParts(cfg: StoreSettings, r: RedisSettings): StoreParts {
  return {
    openStateStore: (logger) =>
      RedisStore.create({
        dataDir: cfg.dataDir,
        replicaId: cfg.replicaId,
        sharedStateKey: r.sharedStateKey,
        ...redisConnection(r),
        logger,
      }),
    openProjectLeases: (logger, timing = {}) => new RedisProjectLeases({ ...redisConnection(r), ...timing, logger }),
    openReplicaRegistry: (url, opts = {}) =>
      new ReplicaRegistry({
        ...opts,
        self: { id: cfg.replicaId, url },
        key: r.sharedStateKey,
        instanceFile: instanceFilePath(cfg.dataDir),
        ...redisConnection(r),
      }),
  };
}
