// The Atlantis import (bolt-import.ts) into the embedded SQLite store: one IMMEDIATE
// transaction writes the locks, the pull statuses, the apply lock, the notices and the marker,
// or nothing. The marker is a row of the store's `meta` table, read inside the transaction, so
// two importers (a server and the migrate command) cannot both import.
import type Database from 'better-sqlite3';
import type { AtlantisImportBatch, AtlantisImportOutcome, ImportMarker, ImportNotice } from './bolt-import-types.js';
import { type LockRow, toLock } from './store-rows.js';
import type { LockRecord } from './state-store.js';

const MARKER_KEY = 'atlantis_import';

const NOTICES_TABLE = `CREATE TABLE IF NOT EXISTS atlantis_import_notices (
  repo TEXT NOT NULL, pull INTEGER NOT NULL, locks TEXT NOT NULL, PRIMARY KEY (repo, pull)
)`;

export function sqliteImportMarker(db: Database.Database): ImportMarker | undefined {
  const row = db.prepare('SELECT value FROM meta WHERE key = ?').get(MARKER_KEY) as { value: string } | undefined;
  return row && (JSON.parse(row.value) as ImportMarker);
}

export function sqliteImportAtlantis(db: Database.Database, batch: AtlantisImportBatch): AtlantisImportOutcome {
  db.exec(NOTICES_TABLE);
  const run = db.transaction((): AtlantisImportOutcome => {
    const marker = sqliteImportMarker(db);
    if (marker) return { imported: false, marker };
    const kept: LockRecord[] = [];
    const getLock = db.prepare('SELECT * FROM locks WHERE repo = ? AND dir = ? AND workspace = ?');
    const putLock = db.prepare('INSERT INTO locks (repo, dir, workspace, pull, user, project, time) VALUES (?, ?, ?, ?, ?, ?, ?)');
    for (const l of batch.locks) {
      const cur = getLock.get(l.repo, l.dir, l.workspace) as LockRow | undefined;
      if (cur) {
        if (cur.pull !== l.pull) kept.push(toLock(cur));
        continue;
      }
      putLock.run(l.repo, l.dir, l.workspace, l.pull, l.user, l.project ?? null, l.time);
    }
    const hasStatus = db.prepare('SELECT 1 FROM pull_status WHERE repo = ? AND pull = ?');
    const putStatus = db.prepare('INSERT INTO pull_status (repo, pull, head_sha) VALUES (?, ?, ?)');
    const putProject = db.prepare(
      'INSERT OR IGNORE INTO pull_projects (repo, pull, seq, dir, workspace, project, status) VALUES (?, ?, ?, ?, ?, ?, ?)',
    );
    for (const p of batch.pulls) {
      // A status recorded here already is newer than Atlantis's.
      if (hasStatus.get(p.repo, p.pull)) continue;
      putStatus.run(p.repo, p.pull, p.status.headSha);
      for (const [i, s] of p.status.projects.entries()) putProject.run(p.repo, p.pull, i, s.dir, s.workspace, s.project, s.status);
    }
    if (batch.applyLock)
      db.prepare("INSERT OR IGNORE INTO meta (key, value) VALUES ('apply_lock', ?)").run(JSON.stringify(batch.applyLock));
    const putNotice = db.prepare('INSERT OR REPLACE INTO atlantis_import_notices (repo, pull, locks) VALUES (?, ?, ?)');
    for (const n of batch.notices) putNotice.run(n.repo, n.pull, JSON.stringify(n.locks));
    db.prepare('INSERT INTO meta (key, value) VALUES (?, ?)').run(MARKER_KEY, JSON.stringify(batch.marker));
    return { imported: true, kept };
  });
  return run.immediate();
}

/** Removes and returns the notices not yet posted, in one transaction (one poster only). */
export function sqliteTakeImportNotices(db: Database.Database): ImportNotice[] {
  db.exec(NOTICES_TABLE);
  const run = db.transaction(() => {
    const rows = db.prepare('SELECT repo, pull, locks FROM atlantis_import_notices ORDER BY repo, pull').all() as {
      repo: string;
      pull: number;
      locks: string;
    }[];
    db.prepare('DELETE FROM atlantis_import_notices').run();
    return rows.map((r) => ({ repo: r.repo, pull: r.pull, locks: JSON.parse(r.locks) as ImportNotice['locks'] }));
  });
  return run.immediate();
}
