// The instance nonce of this data dir's last run, kept in `<data dir>/replica-instance.json`.
// Why: a replica restarted after a crash finds its own last heartbeat still in Redis (it lives
// one TTL). The nonce there equal to the one its data dir kept means the process that wrote it
// is this data dir's previous one, which is dead (the data dir lock, drain/data-dir-lock.ts, is
// held by one live process at most), so the new run takes the id over at once, without waiting
// for the record to expire. Written (atomically) before the first heartbeat of every run.
import { readFileSync, renameSync, writeFileSync } from 'node:fs';
import path from 'node:path';

export const INSTANCE_FILE = 'replica-instance.json';

export const instanceFilePath = (dataDir: string): string => path.join(dataDir, INSTANCE_FILE);

/** The nonce the last run under `replicaId` kept here, if any (a file of another id, or unreadable: none). */
export function readInstanceFile(file: string, replicaId: string): string | undefined {
  try {
    const v = JSON.parse(readFileSync(file, 'utf8')) as { replicaId?: unknown; instance?: unknown };
    return v.replicaId === replicaId && typeof v.instance === 'string' && v.instance !== '' ? v.instance : undefined;
  } catch {
    return undefined;
  }
}

export function writeInstanceFile(file: string, content: { replicaId: string; instance: string }): void {
  writeFileSync(`${file}.tmp`, JSON.stringify(content), { mode: 0o600 });
  renameSync(`${file}.tmp`, file);
}
