// One server per data dir. A second server on the same dir would recover the first one's
// running jobs as "crashed", share its locks and plans, and replace its pid file. Node has no
// flock, so the lock is SQLite's own file lock on a database of its own, left empty: in
// EXCLUSIVE locking mode a connection keeps its exclusive lock until it closes, and the kernel
// drops the lock when the process dies, so a restart after kill -9 finds the dir free, while
// a live holder (any process, even this one) makes the open fail at once with SQLITE_BUSY.
import Database from 'better-sqlite3';
import path from 'node:path';
import { UsageError } from '../../config/flags.js';
import { readPidFile } from './pid-file.js';

export const DATA_DIR_LOCK_FILE = 'atlantis-operator.lock';

export class DataDirLock {
  private constructor(private db: Database.Database | undefined) {}

  /** Takes the lock or throws a one-line UsageError (exit 2) naming the dir and, if known, the holder. */
  static acquire(dataDir: string): DataDirLock {
    const db = new Database(path.join(dataDir, DATA_DIR_LOCK_FILE), { timeout: 0 });
    try {
      db.pragma('locking_mode = EXCLUSIVE');
      // BEGIN EXCLUSIVE takes the exclusive lock, which EXCLUSIVE mode then keeps past COMMIT.
      // Nothing is ever written: no journal, no fsync on the way to the first /status.
      db.pragma('journal_mode = OFF');
      db.exec('BEGIN EXCLUSIVE; COMMIT;');
    } catch (e) {
      db.close();
      if ((e as { code?: string }).code !== 'SQLITE_BUSY' && (e as { code?: string }).code !== 'SQLITE_LOCKED') throw e;
      const holder = readPidFile(dataDir)?.pid;
      throw new UsageError(
        `--data-dir ${dataDir} is in use by another atlantis-operator server${holder ? ` (pid ${holder})` : ''}: one data dir serves one server`,
      );
    }
    return new DataDirLock(db);
  }

  release(): void {
    this.db?.close();
    this.db = undefined;
  }
}
