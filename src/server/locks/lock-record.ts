// A project lock and the global apply lock as every store keeps them: the records the store's
// interface (state-store.ts) and the Atlantis import (bolt-import-types.ts) both speak of.

export interface LockKey {
  /** `owner/name` */
  repo: string;
  /** Repo-relative dir, `.` for the root. */
  dir: string;
  workspace: string;
}

export interface LockRecord extends LockKey {
  pull: number;
  user: string;
  project?: string;
  /** RFC 3339 time the lock was taken. */
  time: string;
}

/** The global apply lock (the web page's "Disable Apply Commands"): while it is on, every apply is refused. */
export interface ApplyLock {
  /** RFC 3339 time it was turned on. */
  time: string;
  /** Who turned it on, as the web page shows it. */
  by: string;
}
