// Journal entries of commands answered 503 whose write may have reached the store anyway (a
// timeout, a reply lost with the connection: the outcome is unknown). Such an entry, left,
// would run at this replica's next start (or on a survivor after its death) besides the
// delivery GitHub sends again after the 503: one command run twice; and its delivery's record
// would make that delivery, sent again, look like a replay. So each entry is removed with its
// delivery's record once the store answers again, by one loop for all of them, bounded in time.
import { sleep } from '../../../async.js';
import type { Logger } from '../../../log.js';
import type { StateStore } from '../../locks/state-store.js';
import { storeUnreachable } from '../../locks/store-wait.js';

/** How long the loop keeps trying while the store cannot be reached. */
export const REFUSED_ENTRY_WAIT_MS = 10 * 60_000;
const PAUSE_MS = 1000;

export class RefusedEntries {
  /** Command id -> the delivery that brought it, if any. */
  private readonly ids = new Map<string, string | undefined>();
  private loop: Promise<void> | undefined;

  constructor(
    private readonly store: Pick<StateStore, 'dropRefusedCommand'>,
    private readonly logger: Logger,
    private readonly maxWaitMs = REFUSED_ENTRY_WAIT_MS,
  ) {}

  /** Removes command `id`'s entry (and `deliveryId`'s record), if written, as soon as the store answers; resolves when the loop ends. */
  add(id: string, deliveryId?: string): Promise<void> {
    this.ids.set(id, deliveryId);
    this.loop ??= this.removeAll();
    return this.loop;
  }

  get pending(): number {
    return this.ids.size;
  }

  private async removeAll(): Promise<void> {
    try {
      await this.tryAll(Date.now() + this.maxWaitMs);
    } finally {
      // At once, in the same turn as the last check: an id added from now on starts a new loop.
      this.loop = undefined;
    }
  }

  private async tryAll(end: number): Promise<void> {
    while (this.ids.size > 0) {
      for (const [id, deliveryId] of [...this.ids]) {
        try {
          await this.store.dropRefusedCommand(id, deliveryId);
          this.ids.delete(id);
        } catch (e) {
          if (!storeUnreachable(e)) {
            this.ids.delete(id);
            this.logger.warn('Could not remove a refused command from the journal', { commandId: id, error: (e as Error).message });
            continue;
          }
          break;
        }
      }
      if (this.ids.size === 0) return;
      if (Date.now() + PAUSE_MS > end) {
        this.logger.error('State store unreachable for too long: refused commands may stay in the journal', {
          commandIds: [...this.ids.keys()],
        });
        this.ids.clear();
        return;
      }
      await sleep(PAUSE_MS);
    }
  }
}
