// Gitea webhook intake, pure: the signature (X-Gitea-Signature, a hex HMAC-SHA256 of the body)
// and the events the server acts on, as Atlantis v0.47's Gitea events controller reads them
// (X-Gitea-Event-Type `pull_request_comment`, `pull_request`, `pull_request_sync`), with the
// differences docs/gitea.md lists: only new comments run (an edited or deleted one does not),
// a draft is not autoplanned, and a pull request closed without merging releases its locks.
import crypto from 'node:crypto';
import { Malformed, type Obj, hmacSha256Matches, obj, str } from '../webhook-shape.js';

/** The pull request of a webhook, in Gitea's field names, only what the server reads. */
export interface GiteaHookPull {
  number: number;
  state: string;
  merged: boolean;
  draft: boolean;
  author: string;
  headSha: string;
  headRef: string;
  baseRef: string;
  /** `owner/name` and clone URL of the head repository; null when Gitea gives none (a deleted fork). */
  headRepo: { fullName: string; cloneUrl: string } | null;
  baseRepo: { fullName: string; cloneUrl: string };
}

export type GiteaHookEvent =
  | { kind: 'pull'; action: string; pull: GiteaHookPull }
  | { kind: 'comment'; repo: string; cloneUrl: string; pull: number; commentId: number; body: string; author: string }
  /** 200: nothing to do, in these words. */
  | { kind: 'ignored'; reason: string }
  /** 400: a body that cannot be read. */
  | { kind: 'malformed'; error: string };

/** The header value Gitea sends for `rawBody` signed with `secret` (X-Gitea-Signature). */
export function signGitea(secret: string, rawBody: Buffer | string): string {
  return crypto.createHmac('sha256', secret).update(rawBody).digest('hex');
}

/** Whether an X-Gitea-Signature header has the form of one (64 hex digits); it may still be wrong. */
export function isWellFormedGiteaSignature(header: string | undefined): header is string {
  return typeof header === 'string' && /^[0-9a-fA-F]{64}$/.test(header.trim());
}

/**
 * Checks X-Gitea-Signature. Constant-time in the signature bytes; false on a missing or
 * malformed header and on an empty secret (an empty secret must never verify anything).
 */
export function verifyGiteaSignature(secret: string, rawBody: Buffer, header: string | undefined): boolean {
  if (!secret || !isWellFormedGiteaSignature(header)) return false;
  return hmacSha256Matches(secret, rawBody, header.trim());
}

function num(o: Obj, k: string, where: string): number {
  const v = o[k];
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 1) throw new Malformed(`${where}.${k} must be a positive integer`);
  return v;
}
function login(v: unknown, where: string): string {
  const name = str(obj(v, where), 'login', where);
  if (name === '') throw new Malformed(`${where}.login must not be empty`);
  return name;
}

function repo(v: unknown, where: string): { fullName: string; cloneUrl: string } {
  const o = obj(v, where);
  const fullName = str(o, 'full_name', where);
  // Gitea's owners and names have no slash; Atlantis refuses such a name too (models.NewRepo).
  if (!/^[^/\s]+\/[^/\s]+$/.test(fullName) || fullName.includes('..')) throw new Malformed(`${where}.full_name must look like owner/name`);
  return { fullName, cloneUrl: str(o, 'clone_url', where) };
}

function pull(v: unknown): GiteaHookPull {
  const w = 'pull_request';
  const o = obj(v, w);
  const head = obj(o.head, `${w}.head`);
  const base = obj(o.base, `${w}.base`);
  return {
    number: num(o, 'number', w),
    state: str(o, 'state', w),
    merged: o.merged === true,
    draft: o.draft === true,
    author: login(o.user, `${w}.user`),
    headSha: str(head, 'sha', `${w}.head`),
    headRef: str(head, 'ref', `${w}.head`),
    baseRef: str(base, 'ref', `${w}.base`),
    headRepo: head.repo === null || head.repo === undefined ? null : repo(head.repo, `${w}.head.repo`),
    baseRepo: repo(base.repo, `${w}.base.repo`),
  };
}

/**
 * Parses a delivery by its X-Gitea-Event-Type. Never throws: a body that is not JSON or lacks
 * a needed field is `malformed` (400); an event the server does not act on is `ignored` (200).
 */
export function parseGiteaWebhook(eventType: string, rawBody: Buffer, deliveryId: string | undefined): GiteaHookEvent {
  // Atlantis's words for the events it does not handle.
  if (eventType !== 'pull_request_comment' && eventType !== 'pull_request' && eventType !== 'pull_request_sync')
    return { kind: 'ignored', reason: `Ignoring unsupported Gitea event type: ${eventType} X-Gitea-Delivery=${deliveryId ?? ''}` };
  let data: unknown;
  try {
    data = JSON.parse(rawBody.toString('utf8'));
  } catch (e) {
    return { kind: 'malformed', error: `body is not valid JSON: ${(e as Error).message}` };
  }
  try {
    const root = obj(data, 'body');
    const action = str(root, 'action', 'body');
    if (eventType === 'pull_request_comment') {
      // Atlantis runs an edited or deleted comment again; here only a new one runs.
      if (action !== 'created') return { kind: 'ignored', reason: `Ignoring comment event since action was not created (${action})` };
      const r = repo(root.repository, 'repository');
      const issue = obj(root.issue, 'issue');
      const comment = obj(root.comment, 'comment');
      return {
        kind: 'comment',
        repo: r.fullName,
        cloneUrl: r.cloneUrl,
        pull: num(issue, 'number', 'issue'),
        commentId: num(comment, 'id', 'comment'),
        body: str(comment, 'body', 'comment'),
        author: login(comment.user, 'comment.user'),
      };
    }
    return { kind: 'pull', action, pull: pull(root.pull_request) };
  } catch (e) {
    return { kind: 'malformed', error: e instanceof Malformed ? e.message : String(e) };
  }
}
