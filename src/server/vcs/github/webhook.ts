// GitHub webhook intake, pure: signature check (X-Hub-Signature-256) and turning a raw body
// into the typed events the server acts on. Types use GitHub's own field names and carry
// only the fields the server reads.
import crypto from 'node:crypto';
import { Malformed, type Obj, hmacSha256Matches, obj, str } from '../webhook-shape.js';

export interface GhUser {
  login: string;
  type?: string;
}

export interface GhRepository {
  /** `owner/name` */
  full_name: string;
  name: string;
  owner: GhUser;
  clone_url: string;
  html_url?: string;
  private?: boolean;
  default_branch?: string;
}

export interface GhRef {
  sha: string;
  ref: string;
  /** Null when the fork was deleted. */
  repo?: GhRepository | null;
}

export interface GhPullRequest {
  number: number;
  state: string;
  draft: boolean;
  merged: boolean;
  head: GhRef;
  base: GhRef;
  user: GhUser;
  html_url?: string;
  title?: string;
}

export interface GhComment {
  id: number;
  body: string;
  user: GhUser;
  html_url?: string;
}

export interface GhIssue {
  number: number;
  /** Present only when the issue is a pull request. */
  pull_request?: { url?: string; html_url?: string };
  user: GhUser;
  title?: string;
}

export interface GhInstallation {
  id: number;
}

export interface IssueCommentEvent {
  kind: 'issue_comment';
  action: 'created';
  /** The PR number (GitHub sends it as issue.number). */
  pull: number;
  repository: GhRepository;
  issue: GhIssue;
  comment: GhComment;
  sender: GhUser;
  installation?: GhInstallation;
  deliveryId?: string;
}

export type PullRequestAction = 'opened' | 'ready_for_review' | 'synchronize' | 'closed';

export interface PullRequestEvent {
  kind: 'pull_request';
  action: PullRequestAction;
  number: number;
  pull_request: GhPullRequest;
  repository: GhRepository;
  sender: GhUser;
  installation?: GhInstallation;
  /** opened/ready_for_review/synchronize on a non-draft PR. Drafts are not autoplanned. */
  autoplan: boolean;
  deliveryId?: string;
}

export type WebhookParseResult =
  | IssueCommentEvent
  | PullRequestEvent
  | { kind: 'ignored'; event: string; reason: string }
  | { kind: 'malformed'; error: string };

const SIG_PREFIX = 'sha256=';

/** The header value GitHub would send for `rawBody` signed with `secret`. */
export function signBody(secret: string, rawBody: Buffer | string): string {
  return SIG_PREFIX + crypto.createHmac('sha256', secret).update(rawBody).digest('hex');
}

/** The answer (401) to a webhook whose signature is missing, malformed or wrong. */
export const BAD_SIGNATURE_TEXT = 'request did not pass validation: bad or missing X-Hub-Signature-256';

/** Whether an `X-Hub-Signature-256` header has the form `sha256=<64 hex digits>` (it may still be wrong). */
export function isWellFormedSignature(header: string | undefined): header is string {
  if (typeof header !== 'string') return false;
  const h = header.trim();
  return h.startsWith(SIG_PREFIX) && /^[0-9a-fA-F]{64}$/.test(h.slice(SIG_PREFIX.length));
}

/**
 * Checks `X-Hub-Signature-256`. Constant-time in the signature bytes; false on a missing or
 * malformed header and on an empty secret (an empty secret must never verify anything).
 */
export function verifySignature(secret: string, rawBody: Buffer, header: string | undefined): boolean {
  if (!secret || !isWellFormedSignature(header)) return false;
  return hmacSha256Matches(secret, rawBody, header.trim().slice(SIG_PREFIX.length));
}

// ---- structural validation ----------------------------------------------------------

function num(o: Obj, k: string, where: string): number {
  const v = o[k];
  if (typeof v !== 'number' || !Number.isInteger(v)) throw new Malformed(`${where}.${k} must be an integer`);
  return v;
}
function bool(o: Obj, k: string): boolean {
  return o[k] === true;
}

function user(v: unknown, where: string): GhUser {
  const o = obj(v, where);
  const u: GhUser = { login: str(o, 'login', where) };
  if (typeof o.type === 'string') u.type = o.type;
  return u;
}

function repository(v: unknown, where = 'repository'): GhRepository {
  const o = obj(v, where);
  const fullName = str(o, 'full_name', where);
  if (!/^[^/\s]+\/[^/\s]+$/.test(fullName)) throw new Malformed(`${where}.full_name must look like owner/name`);
  const r: GhRepository = {
    full_name: fullName,
    name: str(o, 'name', where),
    owner: user(o.owner, `${where}.owner`),
    clone_url: str(o, 'clone_url', where),
  };
  if (typeof o.html_url === 'string') r.html_url = o.html_url;
  if (typeof o.private === 'boolean') r.private = o.private;
  if (typeof o.default_branch === 'string') r.default_branch = o.default_branch;
  return r;
}

function ref(v: unknown, where: string): GhRef {
  const o = obj(v, where);
  const r: GhRef = { sha: str(o, 'sha', where), ref: str(o, 'ref', where) };
  if (o.repo === null) r.repo = null;
  else if (o.repo !== undefined) r.repo = repository(o.repo, `${where}.repo`);
  return r;
}

function pullRequest(v: unknown): GhPullRequest {
  const where = 'pull_request';
  const o = obj(v, where);
  const p: GhPullRequest = {
    number: num(o, 'number', where),
    state: typeof o.state === 'string' ? o.state : 'open',
    draft: bool(o, 'draft'),
    merged: bool(o, 'merged'),
    head: ref(o.head, `${where}.head`),
    base: ref(o.base, `${where}.base`),
    user: user(o.user, `${where}.user`),
  };
  if (typeof o.html_url === 'string') p.html_url = o.html_url;
  if (typeof o.title === 'string') p.title = o.title;
  return p;
}

function installation(v: unknown): GhInstallation | undefined {
  if (typeof v !== 'object' || v === null) return undefined;
  const id = (v as Obj).id;
  return typeof id === 'number' ? { id } : undefined;
}

const PR_ACTIONS: readonly string[] = ['opened', 'ready_for_review', 'synchronize', 'closed'];

/**
 * Parses a webhook body for the given `X-GitHub-Event`. Never throws: a body that is not
 * JSON or lacks a needed field is `malformed` (400); a valid event the server does not act
 * on is `ignored` (200).
 */
export function parseWebhook(eventName: string, rawBody: Buffer, deliveryId?: string): WebhookParseResult {
  let data: unknown;
  try {
    data = JSON.parse(rawBody.toString('utf8'));
  } catch (e) {
    return { kind: 'malformed', error: `body is not valid JSON: ${(e as Error).message}` };
  }
  try {
    const root = obj(data, 'body');
    if (eventName === 'ping') return { kind: 'ignored', event: eventName, reason: 'ping event' };
    if (eventName === 'issue_comment') {
      const action = str(root, 'action', 'body');
      if (action !== 'created') return { kind: 'ignored', event: eventName, reason: `issue_comment action ${action}` };
      const issueO = obj(root.issue, 'issue');
      const issue: GhIssue = { number: num(issueO, 'number', 'issue'), user: user(issueO.user, 'issue.user') };
      if (typeof issueO.title === 'string') issue.title = issueO.title;
      if (issueO.pull_request === undefined || issueO.pull_request === null) {
        return { kind: 'ignored', event: eventName, reason: 'comment on an issue, not a pull request' };
      }
      const prLink = obj(issueO.pull_request, 'issue.pull_request');
      issue.pull_request = {};
      if (typeof prLink.url === 'string') issue.pull_request.url = prLink.url;
      if (typeof prLink.html_url === 'string') issue.pull_request.html_url = prLink.html_url;
      const commentO = obj(root.comment, 'comment');
      const comment: GhComment = {
        id: num(commentO, 'id', 'comment'),
        body: str(commentO, 'body', 'comment'),
        user: user(commentO.user, 'comment.user'),
      };
      if (typeof commentO.html_url === 'string') comment.html_url = commentO.html_url;
      const ev: IssueCommentEvent = {
        kind: 'issue_comment',
        action: 'created',
        pull: issue.number,
        repository: repository(root.repository),
        issue,
        comment,
        sender: user(root.sender, 'sender'),
      };
      const inst = installation(root.installation);
      if (inst) ev.installation = inst;
      if (deliveryId !== undefined) ev.deliveryId = deliveryId;
      return ev;
    }
    if (eventName === 'pull_request') {
      const action = str(root, 'action', 'body');
      if (!PR_ACTIONS.includes(action)) return { kind: 'ignored', event: eventName, reason: `pull_request action ${action}` };
      const pr = pullRequest(root.pull_request);
      const ev: PullRequestEvent = {
        kind: 'pull_request',
        action: action as PullRequestAction,
        number: typeof root.number === 'number' ? root.number : pr.number,
        pull_request: pr,
        repository: repository(root.repository),
        sender: user(root.sender, 'sender'),
        autoplan: action !== 'closed' && !pr.draft,
      };
      const inst = installation(root.installation);
      if (inst) ev.installation = inst;
      if (deliveryId !== undefined) ev.deliveryId = deliveryId;
      return ev;
    }
    return { kind: 'ignored', event: eventName, reason: `unsupported event ${JSON.stringify(eventName)}` };
  } catch (e) {
    if (e instanceof Malformed) return { kind: 'malformed', error: e.message };
    return { kind: 'malformed', error: String(e) };
  }
}
