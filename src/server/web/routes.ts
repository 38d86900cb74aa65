// The web UI's routes (mounted by workflow/index.ts): the index (GET /), a lock's page (GET
// /lock?id=, the link Atlantis puts in plan comments), a job's page (GET /jobs/:id, its output
// live while it runs, from /jobs/:id/stream), the stylesheet and script under /static/, and
// the actions (actions.ts). A GET never changes anything. With a shared store every replica
// lists every replica's jobs, and a job of another replica is shown (and followed while it
// runs) from the output its replica copies into the store.
import { existsSync, readFileSync } from 'node:fs';
import type express from 'express';
import type { Logger } from '../../log.js';
import type { ApplyLock, StateStore } from '../locks/state-store.js';
import { processRedactor } from '../secrets/redact.js';
import { isJobId, mergeJobs } from '../workflow/jobs/job-views.js';
import type { JobRegistry } from '../workflow/jobs/jobs.js';
import { type ActionDeps, idParam, lockOf, mountActions, unescaped } from './actions.js';
import { AnsiHtml } from './ansi.js';
import { SCRIPT, STYLESHEET } from './assets.js';
import { PAGE_HEADERS } from './html.js';
import { sharedJob, streamJob } from './job-stream.js';
import { type ServerView, indexPage, jobPage, lockPage } from './pages.js';

export interface WebUiDeps {
  store: StateStore;
  jobs: JobRegistry;
  jobLogPath: (id: string) => string;
  logger: Logger;
  /** This server's state now (drain, operations, replica). */
  server: () => ServerView;
  onLockDiscarded: ActionDeps['onLockDiscarded'];
  /** False with --disable-global-apply-lock: the index neither shows nor sets it. */
  applyLockEnabled: boolean;
  /** The --web-basic-auth user, if on. */
  webUser?: string;
  /** --atlantis-url: its origin is this server's too (csrf.ts). */
  atlantisUrl: string;
  /** A pull request's page on the code host, for the lock page's link. */
  pullUrl: (repo: string, pull: number) => string;
}

/** Jobs of every replica the index lists, newest first. */
const SHARED_JOBS_LISTED = 100;

const plain = (res: express.Response, status: number, text: string): void =>
  void res
    .status(status)
    .type('text/plain')
    .send(`${processRedactor.redact(text)}\n`);

const html = (res: express.Response, body: string): void => void res.status(200).set(PAGE_HEADERS).type('html').send(body);

export function mountWebUi(app: express.Express, d: WebUiDeps): void {
  const asset = (type: string, body: string) => (_req: express.Request, res: express.Response) =>
    void res.set({ 'content-type': type, 'cache-control': 'no-cache', 'x-content-type-options': 'nosniff' }).send(body);
  app.get('/static/atlantis.css', asset('text/css; charset=utf-8', STYLESHEET));
  app.get('/static/atlantis.js', asset('text/javascript; charset=utf-8', SCRIPT));
  // Pages say they have no icon; a browser showing a plain-text answer still asks for one.
  app.get('/favicon.ico', (_req, res) => void res.status(204).end());

  app.get('/', async (req, res) => {
    // As Atlantis: a store that does not answer is a 503 with the reason, not a page without locks.
    let locks: Awaited<ReturnType<StateStore['list']>>;
    let applyLock: ApplyLock | undefined;
    try {
      locks = await d.store.list();
    } catch (e) {
      return plain(res, 503, `Could not retrieve locks: ${(e as Error).message}`);
    }
    try {
      applyLock = d.applyLockEnabled ? await d.store.getApplyLock() : undefined;
    } catch (e) {
      return plain(res, 503, `Could not retrieve global apply lock: ${(e as Error).message}`);
    }
    // A server alone has every job it lists in memory (pruned with its log); replicas read the journal too.
    const shared = d.store.shared ? await d.store.recentJobs(SHARED_JOBS_LISTED) : [];
    const jobs = mergeJobs([...d.jobs.running(), ...d.jobs.recent()], shared);
    html(
      res,
      indexPage({
        server: d.server(),
        ...(d.applyLockEnabled ? { applyLock: { lock: applyLock } } : {}),
        locks,
        running: jobs.running,
        recent: jobs.recent,
        ...(typeof req.query.notice === 'string' ? { notice: req.query.notice } : {}),
      }),
    );
  });

  app.get('/lock', async (req, res) => {
    const id = idParam(req);
    if (id === undefined) return plain(res, 400, 'No lock id in request');
    const key = lockOf(id);
    const lock = key && (await d.store.getLock(key));
    if (!lock) return plain(res, 404, `No lock found at id '${unescaped(id)}'`);
    const plan = await d.store.getPlan(lock.repo, lock.pull, lock.dir, lock.workspace);
    html(
      res,
      lockPage({
        server: d.server(),
        lock,
        id,
        ...(plan ? { plan } : {}),
        pullUrl: d.pullUrl(lock.repo, lock.pull),
      }),
    );
  });

  app.get('/jobs/:id', async (req, res) => {
    const id = req.params.id;
    const local = d.jobs.get(id);
    const job = local ?? (await sharedJob(d.store, id));
    const log = d.jobLogPath(id);
    const hasLog = isJobId(id) && existsSync(log);
    if (!job && !hasLog) return plain(res, 404, 'job not found');
    const title = job ? `${job.command} ${job.repo}#${job.pull} ${job.dir} ${job.workspace}` : `job ${id}`;
    // This replica's job from memory; another replica's from the store; an old one of this
    // replica from its log file. The stream goes on from where this text ends (its cursor).
    let text = '';
    let cursor: { at: number; unit: 'chars' | 'bytes' } | undefined;
    if (local) {
      const out = d.jobs.outputFrom(id, 0);
      text = out?.text ?? '';
      cursor = { at: out?.cursor ?? 0, unit: 'chars' };
    } else if (job) {
      const out = await d.store.readJobOutput(id);
      text = out.text;
      cursor = { at: out.cursor, unit: 'bytes' };
    }
    if (text === '' && hasLog && job?.status !== 'running') text = readFileSync(log, 'utf8');
    const ansi = new AnsiHtml();
    const outputHtml = ansi.push(processRedactor.redact(text));
    const held = cursor?.unit === 'bytes' ? Buffer.byteLength(ansi.held) : ansi.held.length;
    const from = job?.status === 'running' && cursor !== undefined ? cursor.at - held : undefined;
    html(
      res,
      jobPage({
        server: d.server(),
        title,
        ...(job ? { job } : {}),
        outputHtml,
        ...(from !== undefined ? { streamUrl: `/jobs/${encodeURIComponent(id)}/stream?from=${from}&format=html` } : {}),
      }),
    );
  });

  app.get('/jobs/:id/stream', (req, res) => streamJob(d, req.params.id, req, res));

  mountActions(app, {
    store: d.store,
    logger: d.logger,
    server: d.server,
    onLockDiscarded: d.onLockDiscarded,
    applyLockEnabled: d.applyLockEnabled,
    webUser: d.webUser,
    ownOrigins: [d.atlantisUrl],
  });
}
