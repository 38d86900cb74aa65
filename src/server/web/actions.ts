// What the web UI changes, each a POST or DELETE behind the cross-site check (csrf.ts):
// discarding a lock's plan and the lock (Atlantis's `DELETE /locks?id=`, and `POST
// /locks/discard?id=` for the lock page's form) and the global apply lock (Atlantis's `POST
// /apply/lock` and `DELETE /apply/unlock`, and `POST /apply/unlock` for the index's form; none
// of them with --disable-global-apply-lock, as Atlantis). A form gets a redirect to the page
// that shows the result; a script gets Atlantis's text.
import type express from 'express';
import type { Logger } from '../../log.js';
import { lockIdFromQuery, parseLockId } from '../locks/lock-id.js';
import type { LockKey, LockRecord, StateStore } from '../locks/state-store.js';
import { processRedactor } from '../secrets/redact.js';
import { discardLock } from './lock-delete.js';
import { decideCrossSite, prefersHtml } from './csrf.js';
import { PAGE_HEADERS } from './html.js';
import { type ServerView, messagePage } from './pages.js';

export interface ActionDeps {
  store: StateStore;
  logger: Logger;
  server: () => ServerView;
  /** A lock was discarded: tell its PR (Atlantis's warning comment). */
  onLockDiscarded: (lock: LockRecord) => void;
  /** False with --disable-global-apply-lock. */
  applyLockEnabled: boolean;
  /** Who is using the page (the --web-basic-auth user), recorded with the apply lock. */
  webUser: string | undefined;
  /** Origins that are this server besides the request's Host (--atlantis-url's). */
  ownOrigins: readonly string[];
}

/** The `id` query parameter, only as one string (a repeated or missing one is no id). */
export const idParam = (req: express.Request): string | undefined =>
  typeof req.query.id === 'string' && req.query.id !== '' ? req.query.id : undefined;

/** The id once more decoded: Atlantis's links encode it twice, the query decoding took one. */
export function unescaped(id: string): string {
  try {
    return lockIdFromQuery(id);
  } catch {
    return id;
  }
}

/** The lock an id parameter names. */
export function lockOf(id: string): LockKey | undefined {
  const parsed = parseLockId(unescaped(id));
  return parsed && { repo: parsed.repo, dir: parsed.dir, workspace: parsed.workspace };
}

/** Atlantis's time format in its answers (`2006-01-02 15:04:05`), in UTC. */
const atlantisTime = (iso: string): string => iso.slice(0, 19).replace('T', ' ');

const header = (req: express.Request, name: string): string | undefined => {
  const v = req.headers[name];
  return typeof v === 'string' ? v : undefined;
};

export function mountActions(app: express.Express, d: ActionDeps): void {
  /** A result: the page to go to for a form, the text for a script. */
  const done = (req: express.Request, res: express.Response, notice: string, text: string): void => {
    if (prefersHtml(req.headers.accept)) return void res.redirect(303, `/?notice=${notice}`);
    plain(res, 200, text);
  };
  const fail = (req: express.Request, res: express.Response, status: number, text: string): void => {
    if (!prefersHtml(req.headers.accept)) return void plain(res, status, text);
    res
      .status(status)
      .set(PAGE_HEADERS)
      .type('html')
      .send(messagePage(d.server(), status === 404 ? 'Not found' : 'Not done', text));
  };

  const guard: express.RequestHandler = (req, res, next) => {
    const decision = decideCrossSite({
      method: req.method,
      fetchSite: header(req, 'sec-fetch-site'),
      origin: header(req, 'origin'),
      host: header(req, 'host'),
      ownOrigins: d.ownOrigins,
    });
    if (decision.kind === 'allowed') return next();
    d.logger.warn('Cross-site request refused', { method: req.method, path: req.path, reason: decision.reason });
    plain(res, 403, 'Forbidden: this action must come from a page of this server');
  };

  const discard: express.RequestHandler = async (req, res) => {
    const id = idParam(req);
    if (id === undefined) return fail(req, res, 400, 'No lock id in request');
    const key = lockOf(id);
    let lock: LockRecord | undefined;
    try {
      lock = key && (await discardLock(d.store, key));
    } catch (e) {
      return fail(req, res, 500, `deleting lock failed with: '${(e as Error).message}'`);
    }
    if (!lock) return fail(req, res, 404, `No lock found at id '${unescaped(id)}'`);
    d.onLockDiscarded(lock);
    done(req, res, 'discarded', `Deleted lock id '${id}'`);
  };
  app.delete('/locks', guard, discard);
  app.post('/locks/discard', guard, discard);

  if (!d.applyLockEnabled) return;
  app.post('/apply/lock', guard, async (req, res) => {
    let lock: Awaited<ReturnType<StateStore['setApplyLock']>>;
    try {
      lock = await d.store.setApplyLock(true, d.webUser ?? 'anonymous');
    } catch (e) {
      return fail(req, res, 500, `creating apply lock failed with: ${(e as Error).message}`);
    }
    d.logger.info('Global apply lock on: every apply is refused until it is off', { by: lock?.by, since: lock?.time });
    done(req, res, 'apply-locked', `Apply Lock is acquired on ${atlantisTime(lock?.time ?? new Date().toISOString())}`);
  });
  const unlockApply: express.RequestHandler = async (req, res) => {
    try {
      await d.store.setApplyLock(false, d.webUser ?? 'anonymous');
    } catch (e) {
      return fail(req, res, 500, `deleting apply lock failed with: ${(e as Error).message}`);
    }
    d.logger.info('Global apply lock off: applies run again', { by: d.webUser ?? 'anonymous' });
    done(req, res, 'apply-unlocked', 'Deleted apply lock');
  };
  app.post('/apply/unlock', guard, unlockApply);
  app.delete('/apply/unlock', guard, unlockApply);
}

function plain(res: express.Response, status: number, text: string): void {
  res
    .status(status)
    .type('text/plain')
    .send(`${processRedactor.redact(text)}\n`);
}
