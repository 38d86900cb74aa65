// Atlantis's API: POST /api/plan and /api/apply (the workflow's plan and apply of a request,
// workflow/commands/api-command.ts), GET /api/locks. Answers as Atlantis v0.47's APIController does:
// 503 without --api-secret, 401 without the right X-Atlantis-Token, 400 for a bad body, 403
// for a repo outside the allowlist, the command.Result JSON with 200 (500 when a project
// failed). Ours on top: /api/locks needs the token too, a 400 names the field, and the run is
// one operation of the drain (a draining server refuses it with 503). Nothing starts before
// every check passed; no answer carries a secret.
import { createHash, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type express from 'express';
import type { Logger } from '../../log.js';
import type { Operation, OperationInfo } from '../drain/operation-tracker.js';
import type { LockRecord } from '../locks/state-store.js';
import { processRedactor } from '../secrets/redact.js';
import type { RepoAllowlist } from '../vcs/repo-allowlist.js';
import type { ApiOutcome } from '../workflow/commands/api-command.js';
import { SHUTTING_DOWN_COMMENT } from '../workflow/pr/messages.js';
import { type TeamRule, teamAllows } from '../workflow/commands/team-allowlist.js';
import { type ApiRequest, parseApiRequest, targetLabel } from './api-request.js';
import { apiError, commandResult, goJson, listLocksResult, resultHasErrors } from './api-result.js';

export const API_TOKEN_HEADER = 'X-Atlantis-Token';
/** A request body larger than this is refused (413) as it arrives. */
export const MAX_API_BODY_BYTES = 1024 * 1024;

/** Atlantis's texts, word for word. */
export const API_DISABLED = 'ignoring request since API is disabled';
export const API_TOKEN_MISMATCH = `header ${API_TOKEN_HEADER} did not match expected secret`;
export const REPO_NOT_ALLOWLISTED = 'repo not allowlisted';

export interface ApiDeps {
  /** --api-secret; undefined: the API is disabled. */
  apiSecret: string | undefined;
  allowlist: RepoAllowlist;
  /** The host's name in --repo-allowlist (vcs/host.ts). */
  hostname: string;
  /** The host's type as Atlantis names it (the request's `Type`). */
  hostType: string;
  /** A pull request's page, for the lock list. */
  pullUrl: (repo: string, pull: number) => string;
  /** --gh-team-allowlist: an API request has no user, so only rules for every team (`*`) let it run. */
  teamRules: readonly TeamRule[];
  logger: Logger;
  startOperation: (info: OperationInfo) => Operation | undefined;
  finishOperation: (op: Operation) => void;
  run: (command: 'plan' | 'apply', req: ApiRequest) => Promise<ApiOutcome>;
  listLocks: () => Promise<LockRecord[]>;
  /**
   * The global apply lock (Atlantis's "apply is disabled globally"): why an apply may not run
   * now (Atlantis's text), or undefined; checked before anything runs (workflow/commands/apply-lock.ts).
   */
  globalApplyLock?: () => Promise<string | undefined>;
}

/** Equality whose time shows neither the lengths nor the first differing byte. */
export function tokenMatches(given: string | undefined, secret: string): boolean {
  if (given === undefined) return false;
  const digest = (s: string) => createHash('sha256').update(s, 'utf8').digest();
  return timingSafeEqual(digest(given), digest(secret));
}

// Atlantis's sanitising of clone URLs in its API errors: a user or password in a URL goes.
const URL_CREDENTIALS = /(https?:\/\/)([^\s/@]+:)?[^\s/@]+@/gi;

/** A text of an answer without the server's secrets or credentials in URLs. */
export function sanitize(text: string): string {
  return processRedactor.redact(text).replace(URL_CREDENTIALS, '$1<redacted>@');
}

/** Every string in an answer, sanitized (before the JSON text: an escaped secret would not match there). */
function sanitized<T>(v: T): T {
  if (typeof v === 'string') return sanitize(v) as T;
  if (Array.isArray(v)) return v.map(sanitized) as T;
  if (typeof v === 'object' && v !== null) return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, sanitized(x)])) as T;
  return v;
}

function send(res: ServerResponse, status: number, body: unknown, close = false): void {
  const text = goJson(sanitized(body));
  res.writeHead(status, {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(text),
    // The body was not read: the client must not send its next request on this connection.
    ...(close ? { connection: 'close' } : {}),
  });
  res.end(text);
}

/** Reads the body up to the limit; undefined when it was refused (answered already). */
function readBody(req: IncomingMessage, res: ServerResponse): Promise<string | undefined> {
  return new Promise((resolve) => {
    const declared = Number(req.headers['content-length'] ?? 0);
    const tooLarge = () => send(res, 413, apiError(`request body is larger than ${MAX_API_BODY_BYTES} bytes`), true);
    if (declared > MAX_API_BODY_BYTES) {
      tooLarge();
      return resolve(undefined);
    }
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > MAX_API_BODY_BYTES) {
        req.removeAllListeners('data');
        req.pause();
        tooLarge();
        resolve(undefined);
        return;
      }
      chunks.push(c);
    });
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', () => resolve(undefined));
  });
}

export function mountApi(app: express.Express, d: ApiDeps): void {
  const log = d.logger.child({ component: 'api' });

  /** The secret checks of every endpoint; false when answered. */
  const authorized = (req: IncomingMessage, res: ServerResponse, path: string): boolean => {
    if (!d.apiSecret) {
      send(res, 503, apiError(API_DISABLED), true);
      return false;
    }
    const given = req.headers[API_TOKEN_HEADER.toLowerCase()];
    if (!tokenMatches(typeof given === 'string' ? given : undefined, d.apiSecret)) {
      // Never what was sent.
      log.info('API request refused: wrong or missing X-Atlantis-Token', { path, tokenSent: given !== undefined });
      send(res, 401, apiError(API_TOKEN_MISMATCH), true);
      return false;
    }
    return true;
  };

  const command = (name: 'plan' | 'apply') => async (req: express.Request, res: express.Response) => {
    const path = `/api/${name}`;
    if (!authorized(req, res, path)) return;
    const body = await readBody(req, res);
    if (body === undefined) return;
    const parsed = parseApiRequest(body, d.hostType);
    if (!parsed.ok) {
      log.info('API request refused: bad body', { path, error: sanitize(parsed.error) });
      return send(res, 400, apiError(parsed.error));
    }
    const r = parsed.request;
    if (!d.allowlist.isAllowed(r.repository, d.hostname)) {
      log.info('API request refused: repo not allowlisted', { path, repo: r.repository });
      return send(res, 403, apiError(REPO_NOT_ALLOWLISTED));
    }
    // /api/apply plans first, so it needs both.
    const needs = name === 'apply' ? ['plan', 'apply'] : ['plan'];
    const denied = d.teamRules.length > 0 ? needs.find((c) => !teamAllows(d.teamRules, [], c)) : undefined;
    if (denied !== undefined)
      return send(
        res,
        403,
        apiError(
          `team allowlist denied command: ${denied} is not authorized for API requests, which have no user (--gh-team-allowlist needs *:${denied})`,
        ),
      );
    const applyLocked = name === 'apply' ? await d.globalApplyLock?.() : undefined;
    if (applyLocked !== undefined) return send(res, 403, apiError(applyLocked));
    // The drain's decision, with no await between it and the start: a draining server runs nothing new.
    const op = d.startOperation({
      command: `api_${name}`,
      repo: r.repository,
      pull: r.pull > 0 ? r.pull : null,
      project: r.targets.map(targetLabel).join(',') || null,
    });
    if (!op) {
      log.info('API request refused during drain', { path, repo: r.repository });
      return send(res, 503, apiError(SHUTTING_DOWN_COMMENT));
    }
    // The operation ends once the answer is out (or the client gone): a drain that ends with it must not cut it off.
    const end = () => {
      if (res.writableFinished || res.destroyed) d.finishOperation(op);
      else res.once('close', () => d.finishOperation(op));
    };
    try {
      const outcome = await d.run(name, r);
      if (outcome.kind === 'error') {
        log.info('API request ended with an error', { path, repo: r.repository, status: outcome.status, error: sanitize(outcome.message) });
        return send(res, outcome.status, apiError(outcome.message));
      }
      const result = commandResult(name, outcome.runs);
      send(res, resultHasErrors(result) ? 500 : 200, result);
    } catch (e) {
      log.error('API request failed', { path, repo: r.repository, error: sanitize((e as Error).message) });
      send(res, 500, apiError((e as Error).message));
    } finally {
      end();
    }
  };

  app.post('/api/plan', command('plan'));
  app.post('/api/apply', command('apply'));
  app.get('/api/locks', async (req, res) => {
    if (!authorized(req, res, '/api/locks')) return;
    try {
      send(res, 200, listLocksResult(await d.listLocks(), d.pullUrl));
    } catch (e) {
      log.error('API request failed', { path: '/api/locks', error: sanitize((e as Error).message) });
      send(res, 500, apiError((e as Error).message));
    }
  });
  // As Atlantis's router: the path exists, the method does not.
  for (const p of ['/api/plan', '/api/apply', '/api/locks'])
    app.all(p, (_req, res) => {
      res.status(405).end();
    });
}
