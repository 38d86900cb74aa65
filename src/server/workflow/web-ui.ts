// The server's web page: locks, running and recent jobs (GET /), and a job's terraform
// output, live while it runs (GET /jobs/:id, streamed from /jobs/:id/stream as
// server-sent events); a lock's page (GET /lock?id=) and, as Atlantis, its deletion
// (DELETE /locks?id=), the only endpoint here that changes state. Every text shown is
// scrubbed of the server's secrets (secrets/redact.ts), job output included. With a shared
// store every replica lists every replica's jobs, and a job of another replica is shown (and
// followed while it runs) from the output its replica copies into the store.
import { existsSync, readFileSync } from 'node:fs';
import type express from 'express';
import { lockIdFromQuery, lockId, lockPath as lockPathOf, parseLockId } from '../locks/lock-id.js';
import type { LockKey, LockRecord, StateStore } from '../locks/state-store.js';
import { discardLock } from './lock-delete.js';
import { processRedactor } from '../secrets/redact.js';
import type { JobRegistry, JobView } from './jobs.js';
import { isJobId, mergeJobs, viewOfRecord } from './job-views.js';
import { sleep } from '../../async.js';

export interface WebUiDeps {
  store: StateStore;
  jobs: JobRegistry;
  jobLogPath: (id: string) => string;
  drainStatus: () => { shuttingDown: boolean; inProgress: number };
  /** A lock was deleted from the web page: tell its PR (Atlantis's warning comment). */
  onLockDiscarded: (lock: LockRecord) => void;
}

/** A lock's page: `/lock?id=<lock id>`, the id encoded twice, as Atlantis links it. */
export const lockPath = (l: LockKey & { project?: string }): string => lockPathOf(lockId(l.repo, l.dir, l.workspace, l.project));

const plain = (res: express.Response, status: number, text: string): void =>
  void res
    .status(status)
    .type('text/plain')
    .send(`${processRedactor.redact(text)}\n`);

/** The `id` query parameter, only as one string (a repeated or missing one is no id). */
const idParam = (req: express.Request): string | undefined =>
  typeof req.query.id === 'string' && req.query.id !== '' ? req.query.id : undefined;

/** The lock an id parameter names: Atlantis's links encode the id twice, so it is decoded once more here. */
function lockOf(id: string): LockKey | undefined {
  const parsed = parseLockId(unescaped(id));
  return parsed && { repo: parsed.repo, dir: parsed.dir, workspace: parsed.workspace };
}

function unescaped(id: string): string {
  try {
    return lockIdFromQuery(id);
  } catch {
    return id;
  }
}

const esc = (s: unknown): string => processRedactor.redact(String(s)).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

function page(title: string, body: string): string {
  return `<!doctype html><html><head><meta charset="utf-8"><title>${esc(title)}</title>
<style>body{font-family:system-ui,sans-serif;margin:2rem;color:#222}table{border-collapse:collapse;margin-bottom:2rem}
td,th{border:1px solid #ccc;padding:.3rem .6rem;text-align:left}pre{background:#111;color:#eee;padding:1rem;overflow:auto;max-height:80vh}
.badge{padding:.1rem .4rem;border-radius:.3rem;background:#eee}.draining{background:#fc6}</style></head><body>${body}</body></html>`;
}

function jobRows(jobs: JobView[]): string {
  if (jobs.length === 0) return '<tr><td colspan="6">none</td></tr>';
  return jobs
    .map(
      (j) =>
        `<tr><td><a href="/jobs/${esc(j.id)}">${esc(j.command)}</a></td><td>${esc(j.repo)}#${esc(j.pull)}</td><td>${esc(j.project ?? '')}</td><td>${esc(j.dir)}</td><td>${esc(j.workspace)}</td><td>${esc(j.status)}</td></tr>`,
    )
    .join('');
}

export function mountWebUi(app: express.Express, d: WebUiDeps): void {
  app.get('/', async (_req, res) => {
    const locks = await d.store.list();
    const st = d.drainStatus();
    const lockRows =
      locks.length === 0
        ? '<tr><td colspan="6">none</td></tr>'
        : locks
            .map(
              (l) =>
                `<tr><td>${esc(l.repo)}</td><td>${esc(l.dir)}</td><td>${esc(l.workspace)}</td><td>#${esc(l.pull)} by ${esc(l.user)}</td><td>${esc(l.time)}</td><td><a href="${esc(lockPath(l))}">lock</a></td></tr>`,
            )
            .join('');
    // A server alone has every job it lists in memory (pruned with its log); replicas read the journal too.
    const shared = d.store.shared ? await d.store.recentJobs(SHARED_JOBS_LISTED) : [];
    const jobs = mergeJobs([...d.jobs.running(), ...d.jobs.recent()], shared);
    const head = '<tr><th>command</th><th>pull request</th><th>project</th><th>dir</th><th>workspace</th><th>status</th></tr>';
    res.type('html').send(
      page(
        'atlantis',
        `<h1>atlantis <span class="badge ${st.shuttingDown ? 'draining' : ''}">${st.shuttingDown ? 'draining' : 'serving'}, ${st.inProgress} operation(s) in progress</span></h1>
<h2>Locks</h2><table><tr><th>repo</th><th>dir</th><th>workspace</th><th>held by</th><th>since</th><th></th></tr>${lockRows}</table>
<h2>Running jobs</h2><table>${head}${jobRows(jobs.running)}</table>
<h2>Recent jobs</h2><table>${head}${jobRows(jobs.recent)}</table>`,
      ),
    );
  });

  app.get('/lock', async (req, res) => {
    const id = idParam(req);
    if (id === undefined) return plain(res, 400, 'No lock id in request');
    const key = lockOf(id);
    const l = key && (await d.store.getLock(key));
    if (!l) return plain(res, 404, `No lock found at id '${unescaped(id)}'`);
    res.type('html').send(
      page(
        `lock ${id}`,
        `<p><a href="/">all locks and jobs</a></p><h1>${esc(l.repo)} ${esc(l.dir)} ${esc(l.workspace)}</h1>
<table><tr><th>locked by</th><td>#${esc(l.pull)} by ${esc(l.user)}</td></tr><tr><th>since</th><td>${esc(l.time)}</td></tr></table>
<button id="discard" data-id="${esc(id)}">Discard Plan &amp; Unlock</button><p id="result"></p>
<script>const b=document.getElementById('discard');b.onclick=async()=>{const r=await fetch('/locks?id='+encodeURIComponent(b.dataset.id),{method:'DELETE'});
document.getElementById('result').textContent=await r.text();if(r.ok)setTimeout(()=>{location.href='/'},1000)}</script>`,
      ),
    );
  });

  app.delete('/locks', async (req, res) => {
    const id = idParam(req);
    if (id === undefined) return plain(res, 400, 'No lock id in request');
    const key = lockOf(id);
    const l = key && (await discardLock(d.store, key));
    if (!l) return plain(res, 404, `No lock found at id '${unescaped(id)}'`);
    d.onLockDiscarded(l);
    plain(res, 200, `Deleted lock id '${id}'`);
  });

  app.get('/jobs/:id', async (req, res) => {
    const id = req.params.id;
    const job = d.jobs.get(id) ?? (isJobId(id) ? await sharedJob(d, id) : undefined);
    const log = d.jobLogPath(id);
    const hasLog = isJobId(id) && existsSync(log);
    if (!job && !hasLog) return void res.status(404).type('text/plain').send('job not found\n');
    const title = job ? `${job.command} ${job.repo}#${job.pull} ${job.dir} ${job.workspace}` : `job ${id}`;
    // This replica's job from memory; another replica's from the store (its cursor, so the
    // stream goes on from there); an old one of this replica from its log file.
    let initial = '';
    let from = '';
    if (job && d.jobs.get(id)) initial = d.jobs.output(id) ?? '';
    else if (job && d.store.shared) {
      const out = await d.store.readJobOutput(id);
      initial = out.text;
      from = `?from=${out.cursor}`;
    }
    if (initial === '' && hasLog) initial = readFileSync(log, 'utf8');
    const live = job?.status === 'running';
    res.type('html').send(
      page(
        title,
        `<p><a href="/">all jobs</a></p><h1>${esc(title)}</h1><p id="status">${esc(job?.status ?? 'finished')}</p><pre id="out">${esc(initial)}</pre>
${
  live
    ? `<script>const out=document.getElementById('out');const es=new EventSource('/jobs/${esc(id)}/stream${from}');
es.addEventListener('output',e=>{out.textContent+=JSON.parse(e.data);out.scrollTop=out.scrollHeight});
es.addEventListener('done',e=>{document.getElementById('status').textContent=JSON.parse(e.data);es.close()});</script>`
    : ''
}`,
      ),
    );
  });

  app.get('/jobs/:id/stream', async (req, res) => {
    const id = req.params.id;
    const job = d.jobs.get(id);
    if (!job) return void (await streamSharedJob(d, id, req, res));
    res.writeHead(200, { 'Content-Type': 'text/event-stream', 'Cache-Control': 'no-cache', Connection: 'keep-alive' });
    if (job.status !== 'running') {
      res.end(`event: done\ndata: ${JSON.stringify(job.status)}\n\n`);
      return;
    }
    const unsubscribe = d.jobs.subscribe(
      id,
      (chunk) => res.write(sseOutput(chunk)),
      (status) => {
        res.end(`event: done\ndata: ${JSON.stringify(status)}\n\n`);
        unsubscribe();
      },
    );
    req.on('close', unsubscribe);
  });
}

/** Jobs of every replica the index lists, newest first. */
const SHARED_JOBS_LISTED = 100;
/** How often a page following another replica's job reads the store, and for how long at most. */
const SHARED_POLL_MS = 500;
const SHARED_FOLLOW_MAX_MS = 24 * 3600 * 1000;

const sseOutput = (chunk: string): string => `event: output\ndata: ${JSON.stringify(processRedactor.redact(chunk))}\n\n`;

/** Another replica's job, from the store's journal (a shared store only). */
async function sharedJob(d: WebUiDeps, id: string): Promise<JobView | undefined> {
  if (!d.store.shared) return undefined;
  const rec = await d.store.getJob(id);
  return rec && viewOfRecord(rec);
}

/**
 * Follows another replica's job: its output from the store from `?from=` on, until its journal
 * says it finished (its last output is written before that), the viewer leaves, or a day.
 */
async function streamSharedJob(d: WebUiDeps, id: string, req: express.Request, res: express.Response): Promise<void> {
  const job = isJobId(id) ? await sharedJob(d, id) : undefined;
  if (!job) return void res.status(404).type('text/plain').send('job not found\n');
  const from = typeof req.query.from === 'string' && /^(0|[1-9][0-9]{0,12})$/.test(req.query.from) ? Number(req.query.from) : 0;
  res.writeHead(200, { 'Content-Type': 'text/event-stream', 'Cache-Control': 'no-cache', Connection: 'keep-alive' });
  const gone = new AbortController();
  req.on('close', () => gone.abort());
  let cursor = from;
  const end = Date.now() + SHARED_FOLLOW_MAX_MS;
  while (!gone.signal.aborted && Date.now() < end) {
    try {
      const rec = await d.store.getJob(id);
      const out = await d.store.readJobOutput(id, cursor);
      cursor = out.cursor;
      if (out.text !== '') res.write(sseOutput(out.text));
      if (!rec || rec.result !== undefined) return void res.end(`event: done\ndata: ${JSON.stringify(rec?.result ?? 'finished')}\n\n`);
    } catch {
      // The store is away for a moment: try again at the next poll, the cursor is unchanged.
    }
    await sleep(SHARED_POLL_MS, gone.signal);
  }
  res.end();
}
