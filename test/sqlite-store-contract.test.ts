// The StateStore contract (test/support/state-store-contract.ts) on the embedded SQLite
// store: the same behaviour table the Redis store passes, so the workflow cannot tell them apart.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { SqliteStore } from '../src/server/locks/sqlite-store.js';
import { stateStoreContract } from './support/state-store-contract.js';

stateStoreContract('SqliteStore', async () => {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'ato-sqlite-contract-'));
  const store = SqliteStore.open(dataDir);
  await store.connect();
  return {
    store,
    dataDir,
    reopen: async () => SqliteStore.open(dataDir),
    otherServer: async () => SqliteStore.open(fs.mkdtempSync(path.join(dataDir, 'other-'))),
    cleanup: async () => {
      fs.rmSync(dataDir, { recursive: true, force: true });
    },
  };
});
