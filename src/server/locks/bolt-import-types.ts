// The records of the one-time import of Atlantis's atlantis.db (bolt-import.ts) as the stores
// keep them: what is written, the marker that says it was done, and the pull requests still
// to be told that their plans were not carried over.
import type { ApplyLock, LockKey, LockRecord } from './lock-record.js';
import type { PullStatus } from './pull-status.js';

/** Written with the import, in the same atomic change: while it exists no import runs again. */
export interface ImportMarker {
  /** RFC 3339 time of the import. */
  at: string;
  /** The file read, as it was named to the importer. */
  file: string;
  /** sha256 (hex) of the file's bytes. */
  sha256: string;
  /** The bbolt transaction the file's state was read at. */
  txid: string;
  /** Who imported: `server <replica id>` at a server's start, or `migrate command`. */
  by: string;
  locks: number;
  pulls: number;
  applyLock: boolean;
}

/** A pull request that held imported locks or had plans: it is told once to plan again. */
export interface ImportNotice {
  repo: string;
  pull: number;
  /** Its imported locks (the comment names them). */
  locks: Array<Pick<LockKey, 'dir' | 'workspace'> & { project?: string }>;
}

export interface AtlantisImportBatch {
  marker: ImportMarker;
  locks: LockRecord[];
  pulls: Array<{ repo: string; pull: number; status: PullStatus }>;
  applyLock: ApplyLock | undefined;
  notices: ImportNotice[];
}

export type AtlantisImportOutcome =
  /** Written; `kept`: locks this store already had on the same dir and workspace for another pull, left as they were. */
  | { imported: true; kept: LockRecord[] }
  /** Nothing written: an import was done before (its marker). */
  | { imported: false; marker: ImportMarker };
