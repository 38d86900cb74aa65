// The one place the server chooses and opens its StateStore. For now the embedded SQLite
// store in the data dir (`--locking-db-type boltdb`); everything else takes the interface.
import type { ServerConfig } from '../config.js';
import { SqliteStore } from './sqlite-store.js';
import type { StateStore } from './state-store.js';

export function openStateStore(cfg: Pick<ServerConfig, 'dataDir'>): StateStore {
  return SqliteStore.open(cfg.dataDir);
}
