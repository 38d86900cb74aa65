// In-memory view of this replica's jobs (one project command run) for the web page: running
// and recent jobs and a live feed of their terraform output. The durable journal is in the
// store, and so is a copy of the output (the mirror), for the pages of other replicas; the
// full output is in the per-job log file.
import { EventEmitter } from 'node:events';
import type { JobOutputMirror } from './job-output-mirror.js';

export type JobStatus = 'running' | 'success' | 'failure' | 'error' | 'interrupted';

export interface JobView {
  id: string;
  command: string;
  repo: string;
  pull: number;
  project: string | null;
  dir: string;
  workspace: string;
  startedAt: Date;
  finishedAt: Date | null;
  status: JobStatus;
}

interface JobEntry extends JobView {
  output: string[];
  outputLength: number;
  /** Characters dropped from the front (past MAX_OUTPUT_CHARS): where `output` starts in the job's whole output. */
  dropped: number;
}

const MAX_OUTPUT_CHARS = 2 * 1024 * 1024;

export class JobRegistry {
  private readonly jobs = new Map<string, JobEntry>();
  private readonly events = new EventEmitter();

  private readonly keepFinished: number;
  private readonly mirror: JobOutputMirror | undefined;

  constructor(opts: { keepFinished?: number; mirror?: JobOutputMirror } = {}) {
    this.keepFinished = opts.keepFinished ?? 100;
    this.mirror = opts.mirror;
    this.events.setMaxListeners(0);
  }

  start(job: Omit<JobView, 'startedAt' | 'finishedAt' | 'status'>): void {
    this.jobs.set(job.id, { ...job, startedAt: new Date(), finishedAt: null, status: 'running', output: [], outputLength: 0, dropped: 0 });
  }

  append(id: string, chunk: string): void {
    const j = this.jobs.get(id);
    if (!j) return;
    j.output.push(chunk);
    j.outputLength += chunk.length;
    while (j.outputLength > MAX_OUTPUT_CHARS && j.output.length > 1) {
      const gone = j.output.shift()!.length;
      j.outputLength -= gone;
      j.dropped += gone;
    }
    this.mirror?.append(id, chunk);
    this.events.emit(`output:${id}`, chunk);
  }

  /** Resolves once the job's output is in the store too (write the journal's end after it). */
  finish(id: string, status: Exclude<JobStatus, 'running'>): Promise<void> {
    const j = this.jobs.get(id);
    if (!j) return Promise.resolve();
    j.status = status;
    j.finishedAt = new Date();
    this.events.emit(`done:${id}`, status);
    this.prune();
    return this.mirror?.finish(id) ?? Promise.resolve();
  }

  get(id: string): JobView | undefined {
    const j = this.jobs.get(id);
    return j ? strip(j) : undefined;
  }

  output(id: string): string | undefined {
    return this.jobs.get(id)?.output.join('');
  }

  /**
   * The output from character `from` of the job's whole output on (what was dropped is not
   * there any more), and the position after it: a page that read up to a position and then
   * subscribes in the same turn misses nothing.
   */
  outputFrom(id: string, from: number): { text: string; cursor: number } | undefined {
    const j = this.jobs.get(id);
    if (!j) return undefined;
    const text = j.output.join('');
    return { text: text.slice(Math.max(0, from - j.dropped)), cursor: j.dropped + text.length };
  }

  running(): JobView[] {
    return [...this.jobs.values()].filter((j) => j.status === 'running').map(strip);
  }

  recent(): JobView[] {
    return [...this.jobs.values()]
      .filter((j) => j.status !== 'running')
      .reverse()
      .map(strip);
  }

  /** Drops a finished job (its log was pruned): the web page then lists it no more. */
  forget(id: string): void {
    if (this.jobs.get(id)?.status !== 'running') this.jobs.delete(id);
  }

  /** Live output of a running job; returns an unsubscribe function. */
  subscribe(id: string, onChunk: (chunk: string) => void, onDone: (status: JobStatus) => void): () => void {
    this.events.on(`output:${id}`, onChunk);
    this.events.once(`done:${id}`, onDone);
    return () => {
      this.events.off(`output:${id}`, onChunk);
      this.events.off(`done:${id}`, onDone);
    };
  }

  private prune(): void {
    const finished = [...this.jobs.values()].filter((j) => j.status !== 'running');
    for (const j of finished.slice(0, Math.max(0, finished.length - this.keepFinished))) this.jobs.delete(j.id);
  }
}

function strip(j: JobEntry): JobView {
  const { output: _o, outputLength: _l, dropped: _d, ...view } = j;
  return view;
}
