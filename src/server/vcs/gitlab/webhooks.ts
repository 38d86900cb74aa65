// GitLab's webhooks behind the host interface (VcsWebhooks): the Merge Request Hook and the
// Note Hook, authenticated by X-Gitlab-Token (the webhook's secret token, compared in constant
// time), turned into the workflow's events as Atlantis v0.47 reads them, with Atlantis's
// answers to what it does not act on. A clone URL in a payload must be on --gitlab-hostname's
// host and under its path, at the project's own path, as Atlantis checks it: git is given the
// token for that host only.
import { createHash, timingSafeEqual } from 'node:crypto';
import type { PullRequest, VcsEvent, VcsWebhooks, WebhookAnswer, WebhookDelivery, WebhookRequest } from '../host.js';

export const EVENT_HEADER = 'x-gitlab-event';
export const TOKEN_HEADER = 'x-gitlab-token';
/** Kept across GitLab's retries of one delivery (GitLab 17.4+). */
export const IDEMPOTENCY_HEADER = 'idempotency-key';
/** One per delivery (older GitLab: the only id). */
export const EVENT_UUID_HEADER = 'x-gitlab-event-uuid';

/** The `X-Gitlab-Event` values atlantis_webhooks_total names; any other is `other` (the header is read unauthenticated). */
export const GITLAB_EVENT_LABELS: readonly string[] = [
  'Merge Request Hook',
  'Note Hook',
  'Push Hook',
  'Tag Push Hook',
  'Pipeline Hook',
  'Job Hook',
  'Issue Hook',
  'System Hook',
];

export interface GitlabWebhookOptions {
  /** --gitlab-webhook-secret; undefined: --insecure-no-webhook-secret, nothing is checked. */
  secret: string | undefined;
  /** --gitlab-hostname's host (`host[:port]`) and path: where clone URLs must point. */
  host: string;
  basePath: string;
  /**
   * Told the source project of each authenticated merge request hook and note hook (its id,
   * path and checked clone URL), as Atlantis takes a comment's head repository from the note
   * hook rather than asking GitLab again.
   */
  onSourceProject?: (id: number, project: { repo: string; cloneUrl: string }) => void;
}

const digest = (s: string): Buffer => createHash('sha256').update(s).digest();

interface ProjectHook {
  path_with_namespace?: unknown;
  git_http_url?: unknown;
}

type Obj = Record<string, unknown>;
const obj = (v: unknown): Obj => (v && typeof v === 'object' && !Array.isArray(v) ? (v as Obj) : {});
const text = (v: unknown): string => (typeof v === 'string' ? v : '');

/** A project of a payload: its path and clone URL, checked as Atlantis's NewRepo checks them; an Error says why not. */
export function checkedProject(
  p: ProjectHook,
  o: Pick<GitlabWebhookOptions, 'host' | 'basePath'>,
): { repo: string; cloneUrl: string } | Error {
  const repo = text(p.path_with_namespace);
  let cloneUrl = text(p.git_http_url);
  if (repo === '') return new Error("repoFullName can't be empty");
  if (cloneUrl === '') return new Error("cloneURL can't be empty");
  if (!cloneUrl.endsWith('.git')) cloneUrl += '.git';
  let u: URL;
  try {
    u = new URL(cloneUrl);
  } catch {
    return new Error('invalid clone url');
  }
  if (u.protocol !== 'https:' && u.protocol !== 'http:') return new Error(`clone url must be http(s), not ${u.protocol}`);
  if (u.username !== '' || u.password !== '') return new Error('clone url must not carry credentials');
  if (u.host.toLowerCase() !== o.host.toLowerCase()) return new Error(`expected clone url host "${o.host}" but had "${u.host}"`);
  const want = `${o.basePath}/${repo}.git`;
  if (u.pathname !== want) return new Error(`expected clone url to have path "${want}" but had "${u.pathname}"`);
  const parts = repo.split('/');
  if (parts.length < 2 || parts.some((s) => s === '' || s === '..' || s === '.'))
    return new Error(`invalid repo format "${repo}", owner or repo cannot be empty or contain '..'`);
  return { repo, cloneUrl };
}

/** Atlantis's event kinds of a Merge Request Hook: open, update with new commits or out of draft, merge and close. */
function pullAction(attrs: Obj, changes: Obj): 'opened' | 'updated' | 'closed' | undefined {
  const action = text(attrs.action);
  const draft = attrs.work_in_progress === true || attrs.draft === true;
  if (draft && action !== 'close') return undefined;
  if (action === 'open') return 'opened';
  if (action === 'merge' || action === 'close') return 'closed';
  if (action !== 'update') return undefined;
  if (text(attrs.oldrev) !== '') return 'updated';
  const title = obj(changes.title);
  const wasDraft = text(title.previous).startsWith('Draft:');
  return wasDraft && !text(title.current).startsWith('Draft:') ? 'updated' : undefined;
}

const NOT_ACTIONABLE: WebhookAnswer = { status: 200, body: 'Ignoring non-actionable pull request event' };

function parseMergeRequestHook(body: Obj, o: GitlabWebhookOptions): VcsEvent {
  const attrs = obj(body.object_attributes);
  const base = checkedProject(obj(body.project), o);
  if (base instanceof Error) return { kind: 'answer', status: 400, body: `Error parsing webhook: ${base.message}` };
  const head = checkedProject(obj(attrs.source), o);
  if (head instanceof Error) return { kind: 'answer', status: 400, body: `Error parsing webhook: ${head.message}` };
  if (typeof attrs.source_project_id === 'number') o.onSourceProject?.(attrs.source_project_id, head);
  const action = pullAction(attrs, obj(body.changes));
  if (action === undefined) return { kind: 'answer', ...NOT_ACTIONABLE };
  const iid = attrs.iid;
  const sha = text(obj(attrs.last_commit).id);
  if (typeof iid !== 'number' || !Number.isInteger(iid) || iid <= 0 || sha === '')
    return { kind: 'answer', status: 400, body: 'Error parsing webhook: merge request iid or last commit missing' };
  // As Atlantis: the user of the event is the pull request's author for the command.
  const user = text(obj(body.user).username);
  const pull: PullRequest & Required<Pick<PullRequest, 'headCloneUrl' | 'baseCloneUrl'>> = {
    repo: base.repo,
    number: iid,
    state: text(attrs.state) === 'opened' ? 'open' : 'closed',
    author: user,
    headSha: sha,
    headRef: text(attrs.source_branch),
    baseRef: text(attrs.target_branch),
    headRepo: head.repo,
    baseRepo: base.repo,
    headCloneUrl: head.cloneUrl,
    baseCloneUrl: base.cloneUrl,
  };
  return { kind: 'pull', action, pull, autoplan: action !== 'closed' };
}

function parseNoteHook(body: Obj, o: GitlabWebhookOptions): VcsEvent {
  const attrs = obj(body.object_attributes);
  const type = text(attrs.noteable_type);
  if (type === 'Commit') return { kind: 'answer', status: 200, body: 'Ignoring comment on commit event' };
  if (type !== 'MergeRequest') return { kind: 'answer', status: 200, body: 'Ignoring unsupported event' };
  // An edited note is not a new command (Atlantis would run it again).
  if (attrs.action !== undefined && attrs.action !== 'create')
    return { kind: 'answer', status: 200, body: 'Ignoring comment event since action was not create' };
  const base = checkedProject(obj(body.project), o);
  if (base instanceof Error) return { kind: 'answer', status: 400, body: `Error parsing webhook: ${base.message}` };
  const mr = obj(body.merge_request);
  const source = checkedProject(obj(mr.source), o);
  if (typeof mr.source_project_id === 'number' && !(source instanceof Error)) o.onSourceProject?.(mr.source_project_id, source);
  const iid = mr.iid;
  const id = attrs.id;
  const author = text(obj(body.user).username);
  if (typeof iid !== 'number' || !Number.isInteger(iid) || iid <= 0 || typeof id !== 'number' || author === '')
    return { kind: 'answer', status: 400, body: 'Error parsing webhook: merge request, note id or user missing' };
  return { kind: 'comment', repo: base.repo, pull: iid, cloneUrl: base.cloneUrl, commentId: id, body: text(attrs.note), author };
}

/** GitLab's webhooks with `secret` as their secret token. */
export function gitlabWebhooks(o: GitlabWebhookOptions): VcsWebhooks {
  const { secret } = o;
  const refusal = (h: WebhookRequest['headers']): WebhookAnswer | undefined => {
    if (secret === undefined) return undefined;
    const sent = h[TOKEN_HEADER] ?? '';
    if (timingSafeEqual(digest(sent), digest(secret)) && sent === secret) return undefined;
    // Atlantis's words, the sent value echoed back to its sender.
    return { status: 400, body: `header X-Gitlab-Token=${sent} did not match expected secret` };
  };
  return {
    // In this order: the forward's proof covers the event, the delivery's ids and the token (forward-auth.ts).
    headerNames: [EVENT_HEADER, IDEMPOTENCY_HEADER, EVENT_UUID_HEADER, TOKEN_HEADER],
    eventName: (h) => h[EVENT_HEADER],
    deliveryId: (h) => h[IDEMPOTENCY_HEADER] ?? h[EVENT_UUID_HEADER],
    eventLabel: (h) => {
      const e = h[EVENT_HEADER];
      if (e === undefined) return 'unknown';
      return GITLAB_EVENT_LABELS.includes(e) ? e : 'other';
    },
    // The token is a header: a wrong one is refused before the body is read.
    ...(secret === undefined ? {} : { refuseBeforeBody: refusal }),
    authenticate: (req: WebhookDelivery) => refusal(req.headers),
    parse(req): VcsEvent {
      const event = req.headers[EVENT_HEADER];
      if (!event) return { kind: 'answer', status: 400, body: 'Ignoring request' };
      if (event !== 'Merge Request Hook' && event !== 'Note Hook')
        return { kind: 'answer', status: 200, body: 'Ignoring unsupported event' };
      let body: Obj;
      try {
        body = obj(JSON.parse(req.rawBody.toString('utf8')));
      } catch (e) {
        return { kind: 'answer', status: 400, body: `Error parsing webhook: ${(e as Error).message}` };
      }
      return event === 'Merge Request Hook' ? parseMergeRequestHook(body, o) : parseNoteHook(body, o);
    },
  };
}
