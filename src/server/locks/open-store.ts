// The one place the server chooses its StateStore: the embedded SQLite store in the data dir
// (`--locking-db-type boltdb`) or Redis shared by replicas (`--locking-db-type redis`).
// Everything else takes the interface. The caller awaits `connect()` before using it.
import type { Logger } from '../../log.js';
import type { ServerConfig } from '../config.js';
import { redisConnection } from './redis-connection.js';
import { RedisStore } from './redis-store.js';
import { SqliteStore } from './sqlite-store.js';
import type { StateStore } from './state-store.js';

export function openStateStore(cfg: Pick<ServerConfig, 'dataDir' | 'store' | 'replicaId'>, logger: Logger): StateStore {
  if (cfg.store.type === 'boltdb') return SqliteStore.open(cfg.dataDir);
  const r = cfg.store.redis;
  return RedisStore.create({
    dataDir: cfg.dataDir,
    replicaId: cfg.replicaId,
    sharedStateKey: r.sharedStateKey,
    ...redisConnection(r),
    logger,
  });
}
