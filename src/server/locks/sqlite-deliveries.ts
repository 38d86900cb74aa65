// The webhook deliveries of the SQLite store (its `deliveries` table): which delivery ids were
// accepted in the last DELIVERY_TTL_MS, and the command each one journalled. Every call runs
// inside the caller's transaction.
import type Database from 'better-sqlite3';
import { DELIVERY_TTL_MS } from './state-store.js';

export class SqliteDeliveries {
  constructor(
    private readonly sql: (text: string) => Database.Statement,
    private readonly nowMs: () => number,
  ) {}

  /** undefined: never seen (or longer ago than the TTL); else whether its command is still to start. */
  replayOf(id: string): 'handled' | 'pending' | undefined {
    const seen = this.sql('SELECT command_id FROM deliveries WHERE id = ? AND at > ?').get(id, this.nowMs() - DELIVERY_TTL_MS) as
      | { command_id: string | null }
      | undefined;
    if (seen === undefined) return undefined;
    if (seen.command_id === null) return 'handled';
    const c = this.sql('SELECT started_at FROM commands WHERE id = ?').get(seen.command_id) as { started_at: string | null } | undefined;
    return c !== undefined && c.started_at === null ? 'pending' : 'handled';
  }

  /** Records a delivery (`commandId` null: queued), and forgets those past the TTL, so the table stays bounded. */
  record(id: string, commandId: string | null): void {
    const now = this.nowMs();
    this.sql('DELETE FROM deliveries WHERE at <= ?').run(now - DELIVERY_TTL_MS);
    this.sql('INSERT OR REPLACE INTO deliveries (id, command_id, at) VALUES (?, ?, ?)').run(id, commandId, now);
  }

  /** Forgets a delivery if it names this command. */
  forget(id: string, commandId: string): void {
    this.sql('DELETE FROM deliveries WHERE id = ? AND command_id = ?').run(id, commandId);
  }
}
