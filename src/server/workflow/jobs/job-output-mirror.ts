// Copies each job's terraform output into the store, so that every replica's page can show a
// job that runs on another one. Chunks are batched (terraform writes many small lines) and
// written in order, one write at a time per job. A failed write is logged once per job and its
// chunks dropped: the job's log file on this replica keeps the whole output anyway.
import type { Logger } from '../../../log.js';
import type { StateStore } from '../../locks/state-store.js';

interface Pending {
  chunks: string[];
  timer: NodeJS.Timeout | undefined;
  /** The write in flight (and those before it), so writes of one job never overlap. */
  writing: Promise<void>;
  warned: boolean;
}

export class JobOutputMirror {
  private readonly jobs = new Map<string, Pending>();

  constructor(
    private readonly store: Pick<StateStore, 'appendJobOutput'>,
    private readonly log: Logger,
    private readonly batchMs = 200,
  ) {}

  append(id: string, chunk: string): void {
    const p = this.entry(id);
    p.chunks.push(chunk);
    // Not unref'd: a pending batch is written before the process may end.
    p.timer ??= setTimeout(() => void this.flush(id), this.batchMs);
  }

  /** Writes what is buffered for the job; resolves once it (and every earlier batch) is in the store. */
  flush(id: string): Promise<void> {
    const p = this.jobs.get(id);
    if (!p) return Promise.resolve();
    clearTimeout(p.timer);
    p.timer = undefined;
    const text = p.chunks.join('');
    p.chunks = [];
    if (text !== '') p.writing = p.writing.then(() => this.write(id, p, text));
    return p.writing;
  }

  /** The job is over: its last batch is written and its entry forgotten. */
  async finish(id: string): Promise<void> {
    await this.flush(id);
    const p = this.jobs.get(id);
    if (p && p.chunks.length === 0 && p.timer === undefined) this.jobs.delete(id);
  }

  private entry(id: string): Pending {
    let p = this.jobs.get(id);
    if (!p) {
      p = { chunks: [], timer: undefined, writing: Promise.resolve(), warned: false };
      this.jobs.set(id, p);
    }
    return p;
  }

  private async write(id: string, p: Pending, text: string): Promise<void> {
    try {
      await this.store.appendJobOutput(id, text);
    } catch (err) {
      if (p.warned) return;
      p.warned = true;
      this.log.warn('Could not copy job output to the state store: other replicas show it incomplete', {
        job: id,
        error: (err as Error).message,
      });
    }
  }
}
