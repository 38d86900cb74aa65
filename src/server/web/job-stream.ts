// A job's output as server-sent events (GET /jobs/:id/stream). This replica's job comes from
// memory as terraform writes it; another replica's from the copy in the shared store, read
// from a cursor until its journal says it ended. Two forms: `output` events of plain text (as
// before: what scripts read) and, with `?format=html`, `html` events of coloured, escaped
// HTML (ansi.ts) for the job page, each with its position as the event id, so a browser that
// reconnects (Last-Event-ID) goes on where it was instead of repeating or missing output.
import type express from 'express';
import { sleep } from '../../async.js';
import type { StateStore } from '../locks/state-store.js';
import { processRedactor } from '../secrets/redact.js';
import { isJobId, viewOfRecord } from '../workflow/jobs/job-views.js';
import type { JobRegistry, JobView } from '../workflow/jobs/jobs.js';
import { AnsiHtml } from './ansi.js';

export interface JobStreamDeps {
  store: StateStore;
  jobs: JobRegistry;
}

/** How often a page following another replica's job reads the store, and for how long at most. */
const SHARED_POLL_MS = 500;
const SHARED_FOLLOW_MAX_MS = 24 * 3600 * 1000;

const POSITION = /^(0|[1-9][0-9]{0,14})$/;

/**
 * Where a stream starts in the job's output: a reconnecting browser's Last-Event-ID, else
 * `?from=`, else undefined (only what comes from now on). Anything but a plain number is ignored.
 */
export function streamStart(lastEventId: string | undefined, from: unknown): number | undefined {
  if (lastEventId !== undefined && POSITION.test(lastEventId)) return Number(lastEventId);
  return typeof from === 'string' && POSITION.test(from) ? Number(from) : undefined;
}

type Unit = 'chars' | 'bytes';

/** Writes output events; `cursor` is the position after `chunk`, in the store's unit (this replica: characters, Redis: bytes). */
function sender(res: express.Response, html: boolean, unit: Unit): (chunk: string, cursor: number) => void {
  if (!html) return (chunk) => void res.write(`event: output\ndata: ${JSON.stringify(processRedactor.redact(chunk))}\n\n`);
  const ansi = new AnsiHtml();
  return (chunk, cursor) => {
    const out = ansi.push(processRedactor.redact(chunk));
    // What the converter holds back (a cut escape) is sent again after a reconnect.
    const held = unit === 'chars' ? ansi.held.length : Buffer.byteLength(ansi.held);
    res.write(`id: ${cursor - held}\nevent: html\ndata: ${JSON.stringify(out)}\n\n`);
  };
}

const done = (res: express.Response, result: string) => void res.end(`event: done\ndata: ${JSON.stringify(result)}\n\n`);

function openStream(res: express.Response): void {
  res.writeHead(200, { 'Content-Type': 'text/event-stream', 'Cache-Control': 'no-cache', Connection: 'keep-alive' });
}

export async function streamJob(d: JobStreamDeps, id: string, req: express.Request, res: express.Response): Promise<void> {
  const html = req.query.format === 'html';
  const start = streamStart(typeof req.headers['last-event-id'] === 'string' ? req.headers['last-event-id'] : undefined, req.query.from);
  const job = d.jobs.get(id);
  if (!job) return streamSharedJob(d, id, req, res, html, start);
  openStream(res);
  const send = sender(res, html, 'chars');
  // Read and subscribed in the same turn: nothing terraform writes in between is missed.
  let cursor = 0;
  if (start !== undefined) {
    const first = d.jobs.outputFrom(id, start);
    if (first) {
      cursor = first.cursor;
      if (first.text !== '') send(first.text, cursor);
    }
  }
  if (job.status !== 'running') return done(res, job.status);
  const unsubscribe = d.jobs.subscribe(
    id,
    (chunk) => {
      cursor += chunk.length;
      send(chunk, cursor);
    },
    (status) => {
      done(res, status);
      unsubscribe();
    },
  );
  req.on('close', unsubscribe);
}

/** Another replica's job, from the store's journal (a shared store only). */
export async function sharedJob(store: StateStore, id: string): Promise<JobView | undefined> {
  if (!store.shared || !isJobId(id)) return undefined;
  const rec = await store.getJob(id);
  return rec && viewOfRecord(rec);
}

/**
 * Follows another replica's job: its output from the store from `start` on, until its journal
 * says it finished (its last output is written before that), the viewer leaves, or a day.
 */
async function streamSharedJob(
  d: JobStreamDeps,
  id: string,
  req: express.Request,
  res: express.Response,
  html: boolean,
  start: number | undefined,
): Promise<void> {
  const job = await sharedJob(d.store, id);
  if (!job) return void res.status(404).type('text/plain').send('job not found\n');
  openStream(res);
  const send = sender(res, html, 'bytes');
  const gone = new AbortController();
  req.on('close', () => gone.abort());
  let cursor = start ?? 0;
  const end = Date.now() + SHARED_FOLLOW_MAX_MS;
  while (!gone.signal.aborted && Date.now() < end) {
    try {
      const rec = await d.store.getJob(id);
      const out = await d.store.readJobOutput(id, cursor);
      cursor = out.cursor;
      if (out.text !== '') send(out.text, cursor);
      if (!rec || rec.result !== undefined) return done(res, rec?.result ?? 'finished');
    } catch {
      // The store is away for a moment: try again at the next poll, the cursor is unchanged.
    }
    await sleep(SHARED_POLL_MS, gone.signal);
  }
  res.end();
}
