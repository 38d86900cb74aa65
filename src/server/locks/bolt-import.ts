// The one-time import of Atlantis's atlantis.db into whichever store is configured: at a
// server's start when its data dir holds Atlantis's `atlantis.db` (where Atlantis keeps it), or
// by `atlantis-operator migrate atlantis-db <file>`. Its locks, its pull requests' plan statuses
// and its global apply lock are carried over; its plans are not (the notices ask each pull
// request to plan again). All or nothing, once:
// - the file is read and every record checked before anything is written (bolt-file.ts,
//   bolt-atlantis.ts); a damaged file is an error and the store is left as it was;
// - the store writes everything and a marker in one atomic change, unless a marker is there
//   already (a restart, another replica, the command run before): then nothing is written.
// The file itself is only read, never changed, so going back to Atlantis finds it as it was.
import { createHash } from 'node:crypto';
import { createReadStream, existsSync } from 'node:fs';
import path from 'node:path';
import type { Logger } from '../../log.js';
import { type AtlantisState, atlantisState } from './bolt-atlantis.js';
import { readBoltFile } from './bolt-file.js';
import type { AtlantisImportBatch, ImportMarker, ImportNotice } from './bolt-import-types.js';
import type { LockRecord, StateStore } from './state-store.js';

/** Atlantis's file in its data dir (server/core/boltdb). */
export const ATLANTIS_DB_FILENAME = 'atlantis.db';

export type ImportReport =
  | { result: 'imported'; marker: ImportMarker; kept: LockRecord[]; notes: string[]; notices: number }
  | { result: 'already'; marker: ImportMarker };

async function sha256Of(file: string): Promise<string> {
  const h = createHash('sha256');
  for await (const chunk of createReadStream(file)) h.update(chunk as Buffer);
  return h.digest('hex');
}

/** The pull requests to tell: those holding an imported lock, or with a plan that is now gone. */
export function noticesFor(state: AtlantisState): ImportNotice[] {
  const byPull = new Map<string, ImportNotice>();
  const of = (repo: string, pull: number): ImportNotice => {
    const k = `${repo}#${pull}`;
    const n = byPull.get(k) ?? { repo, pull, locks: [] };
    byPull.set(k, n);
    return n;
  };
  for (const l of state.locks) {
    // An API run without a pull request (pull 0) has no one to tell.
    if (l.pull <= 0) continue;
    of(l.repo, l.pull).locks.push({ dir: l.dir, workspace: l.workspace, ...(l.project !== undefined ? { project: l.project } : {}) });
  }
  for (const p of state.pulls)
    if (p.pull > 0 && p.status.projects.some((s) => s.status === 'planned' || s.status === 'apply_errored')) of(p.repo, p.pull);
  return [...byPull.values()];
}

/**
 * Reads `file` and imports it into `store` unless an import was done before. Throws (with
 * nothing written) when the file is damaged or the store cannot take it.
 */
export async function importAtlantisDb(store: StateStore, file: string, by: string, now = new Date()): Promise<ImportReport> {
  const earlier = await store.atlantisImportMarker();
  if (earlier) return { result: 'already', marker: earlier };
  const sha256 = await sha256Of(file);
  const db = await readBoltFile(file);
  const state = atlantisState(db);
  const marker: ImportMarker = {
    at: now.toISOString(),
    file,
    sha256,
    txid: String(db.txid),
    by,
    locks: state.locks.length,
    pulls: state.pulls.length,
    applyLock: state.applyLock !== undefined,
  };
  const notices = noticesFor(state);
  const batch: AtlantisImportBatch = { marker, locks: state.locks, pulls: state.pulls, applyLock: state.applyLock, notices };
  const out = await store.importAtlantisState(batch);
  if (!out.imported) return { result: 'already', marker: out.marker };
  return { result: 'imported', marker, kept: out.kept, notes: state.notes, notices: notices.length };
}

/** Logs a report as a server or the command says it: what was imported, merged, or left. */
export function logImportReport(log: Logger, r: ImportReport): void {
  if (r.result === 'already') {
    log.info("Atlantis's atlantis.db was imported before: not imported again", {
      importedAt: r.marker.at,
      importedBy: r.marker.by,
      file: r.marker.file,
    });
    return;
  }
  const m = r.marker;
  log.info("Imported Atlantis's locks from atlantis.db; plans are not carried over: each pull request will be asked to plan again", {
    file: m.file,
    sha256: m.sha256,
    locks: m.locks,
    pullStatuses: m.pulls,
    applyLock: m.applyLock,
    pullRequestsToTell: r.notices,
  });
  for (const note of r.notes) log.warn('Atlantis lock merged on import', { note });
  for (const l of r.kept)
    log.warn('Atlantis lock not imported: the store already had a lock on that dir and workspace', {
      repo: l.repo,
      dir: l.dir,
      workspace: l.workspace,
      heldBy: l.pull,
    });
}

/**
 * At a server's start: imports `<dataDir>/atlantis.db` when there is one. Never throws: a
 * file that cannot be imported is logged as an error (nothing imported) and the server starts;
 * the next start tries again, until an import succeeds.
 */
export async function importAtStart(store: StateStore, dataDir: string, by: string, log: Logger): Promise<ImportReport | undefined> {
  const file = path.join(dataDir, ATLANTIS_DB_FILENAME);
  if (!existsSync(file)) return undefined;
  try {
    const r = await importAtlantisDb(store, file, by);
    logImportReport(log, r);
    return r;
  } catch (e) {
    log.error("Atlantis's atlantis.db could not be imported: nothing was imported; the server starts without Atlantis's locks", {
      file,
      error: (e as Error).message,
    });
    return undefined;
  }
}

/**
 * Ours: the comment that tells a pull request its plans were not carried over, naming the
 * locks it still holds (as Atlantis's closed-PR comment lists them). `exe`: --executable-name.
 */
export function planAgainComment(n: ImportNotice, exe = 'atlantis'): string {
  const held = n.locks.map((l) => `- dir: \`${l.dir}\` workspace: \`${l.workspace}\`${l.project ? ` project: \`${l.project}\`` : ''}`);
  const locks = held.length > 0 ? `This pull request keeps its locks:\n\n${held.join('\n')}\n\nIts` : 'Its';
  return (
    `**Plans Not Carried Over**: this Atlantis server was replaced by atlantis-operator. ${locks} plans were not carried over: ` +
    `comment \`${exe} plan\` to plan again before \`${exe} apply\`.`
  );
}

/**
 * Takes the notices not yet posted (one replica gets them) and comments on each pull request.
 * A comment that fails is logged and not tried again: the apply still says to plan again.
 */
export async function postImportNotices(
  store: StateStore,
  post: (repo: string, pull: number, body: string) => Promise<void>,
  exe: string,
  log: Logger,
): Promise<number> {
  let posted = 0;
  for (const n of await store.takeImportNotices()) {
    try {
      await post(n.repo, n.pull, planAgainComment(n, exe));
      posted++;
    } catch (e) {
      log.warn('Could not tell a pull request to plan again after the Atlantis import', {
        repo: n.repo,
        pull: n.pull,
        error: (e as Error).message,
      });
    }
  }
  if (posted > 0) log.info('Told the pull requests of the Atlantis import to plan again', { pullRequests: posted });
  return posted;
}
