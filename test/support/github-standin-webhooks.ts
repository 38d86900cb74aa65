// Webhooks as GitHub sends them (headers, HMAC signatures) and the payloads of the events
// the server handles (pull_request, issue_comment), shaped like GitHub's. Re-exported by
// github-standin.ts.
import crypto from 'node:crypto';
export interface SendWebhookOptions {
  secret?: string;
  deliveryId?: string;
  /** Send this signature header instead of the right one (forgery tests). */
  signature?: string | null;
  /** Send these bytes instead of JSON.stringify(payload) (truncated-body tests). */
  rawBody?: Buffer | string;
  timeoutMs?: number;
  /**
   * More headers, or a function of what is sent that gives them (e.g. a forward's proof, which
   * is over the body, the delivery id and the signature: workflow-env.ts handleHere).
   */
  headers?: Record<string, string> | ((sent: SentWebhook) => Record<string, string>);
}

/** What a webhook sends, for headers computed from it. */
export interface SentWebhook {
  event: string;
  deliveryId: string;
  signature: string | undefined;
  body: Buffer;
}

export interface WebhookResponse {
  status: number;
  body: string;
  headers: Headers;
  deliveryId: string;
}

/** POSTs a webhook the way GitHub does. */
export async function sendWebhook(
  targetUrl: string,
  event: string,
  payload: unknown,
  opts: SendWebhookOptions = {},
): Promise<WebhookResponse> {
  const raw = opts.rawBody !== undefined ? Buffer.from(opts.rawBody) : Buffer.from(JSON.stringify(payload));
  const deliveryId = opts.deliveryId ?? crypto.randomUUID();
  const headers: Record<string, string> = {
    'content-type': 'application/json',
    'user-agent': 'GitHub-Hookshot/3b5e1c2',
    'x-github-event': event,
    'x-github-delivery': deliveryId,
    'x-github-hook-id': '123456',
    'x-github-hook-installation-target-type': 'repository',
    ...(typeof opts.headers === 'object' ? opts.headers : {}),
  };
  if (opts.signature !== undefined) {
    if (opts.signature !== null) headers['x-hub-signature-256'] = opts.signature;
  } else if (opts.secret !== undefined) {
    headers['x-hub-signature-256'] = 'sha256=' + crypto.createHmac('sha256', opts.secret).update(raw).digest('hex');
    headers['x-hub-signature'] = 'sha1=' + crypto.createHmac('sha1', opts.secret).update(raw).digest('hex');
  }
  if (typeof opts.headers === 'function')
    Object.assign(headers, opts.headers({ event, deliveryId, signature: headers['x-hub-signature-256'], body: raw }));
  const res = await fetch(targetUrl, { method: 'POST', headers, body: raw, signal: AbortSignal.timeout(opts.timeoutMs ?? 30_000) });
  return { status: res.status, body: await res.text(), headers: res.headers, deliveryId };
}

export interface RepoPayloadOptions {
  /** `owner/name` */
  repo: string;
  cloneUrl?: string;
}

export function repoPayload(o: RepoPayloadOptions): Record<string, unknown> {
  const [owner, name] = o.repo.split('/');
  return {
    id: 1296269,
    node_id: 'MDEwOlJlcG9zaXRvcnkxMjk2MjY5',
    name,
    full_name: o.repo,
    private: false,
    owner: { login: owner, id: 1, type: 'Organization' },
    html_url: `https://github.com/${o.repo}`,
    clone_url: o.cloneUrl ?? `https://github.com/${o.repo}.git`,
    default_branch: 'main',
    fork: false,
  };
}

/** A fork's repository object, as GitHub puts it in a PR's `head.repo`: another owner, `fork: true`. */
export function forkPayload(fullName: string, cloneUrl?: string): Record<string, unknown> {
  const [owner] = fullName.split('/');
  return {
    ...repoPayload({ repo: fullName, cloneUrl }),
    id: 7_000_001,
    node_id: 'R_fork',
    owner: { login: owner, id: 7, type: 'User' },
    fork: true,
  };
}

export interface PullRequestPayloadOptions extends RepoPayloadOptions {
  action: 'opened' | 'ready_for_review' | 'synchronize' | 'closed' | 'reopened' | 'edited' | 'labeled';
  number: number;
  headSha: string;
  headRef?: string;
  baseRef?: string;
  baseSha?: string;
  draft?: boolean;
  merged?: boolean;
  user?: string;
  sender?: string;
  installationId?: number;
  /** A fork's `owner/name` as the head repository, or null for a deleted fork (see StandinPull.headRepo). */
  headRepo?: string | null;
  headCloneUrl?: string;
}

/** A `pull_request` webhook payload shaped like GitHub's. */
export function pullRequestPayload(o: PullRequestPayloadOptions): Record<string, unknown> {
  const repo = repoPayload(o);
  const headRepo = o.headRepo === undefined ? repo : o.headRepo === null ? null : forkPayload(o.headRepo, o.headCloneUrl);
  const headOwner = (o.headRepo ?? o.repo).split('/')[0];
  const baseOwner = o.repo.split('/')[0];
  const payload: Record<string, unknown> = {
    action: o.action,
    number: o.number,
    pull_request: {
      url: `https://api.github.com/repos/${o.repo}/pulls/${o.number}`,
      id: 1000 + o.number,
      html_url: `https://github.com/${o.repo}/pull/${o.number}`,
      number: o.number,
      state: o.action === 'closed' ? 'closed' : 'open',
      locked: false,
      title: `PR ${o.number}`,
      user: { login: o.user ?? 'dev', id: 2, type: 'User' },
      draft: o.draft ?? false,
      merged: o.merged ?? false,
      head: { label: `${headOwner}:${o.headRef ?? 'feature'}`, ref: o.headRef ?? 'feature', sha: o.headSha, repo: headRepo },
      base: { label: `${baseOwner}:${o.baseRef ?? 'main'}`, ref: o.baseRef ?? 'main', sha: o.baseSha ?? '0'.repeat(40), repo },
    },
    repository: repo,
    sender: { login: o.sender ?? o.user ?? 'dev', id: 2, type: 'User' },
  };
  if (o.installationId !== undefined) payload.installation = { id: o.installationId };
  return payload;
}

export interface IssueCommentPayloadOptions extends RepoPayloadOptions {
  number: number;
  body: string;
  commentId?: number;
  user?: string;
  action?: 'created' | 'edited' | 'deleted';
  /** false: a comment on a plain issue, not a PR. */
  onPullRequest?: boolean;
  installationId?: number;
  /** The issue's (PR's) state GitHub sends along; default open. */
  state?: 'open' | 'closed';
}

let commentSeq = 500_000;

/** An `issue_comment` webhook payload shaped like GitHub's. */
export function issueCommentPayload(o: IssueCommentPayloadOptions): Record<string, unknown> {
  const repo = repoPayload(o);
  const id = o.commentId ?? commentSeq++;
  const issue: Record<string, unknown> = {
    url: `https://api.github.com/repos/${o.repo}/issues/${o.number}`,
    number: o.number,
    title: `PR ${o.number}`,
    user: { login: 'dev', id: 2, type: 'User' },
    state: o.state ?? 'open',
  };
  if (o.onPullRequest !== false) {
    issue.pull_request = {
      url: `https://api.github.com/repos/${o.repo}/pulls/${o.number}`,
      html_url: `https://github.com/${o.repo}/pull/${o.number}`,
    };
  }
  const payload: Record<string, unknown> = {
    action: o.action ?? 'created',
    issue,
    comment: {
      id,
      html_url: `https://github.com/${o.repo}/pull/${o.number}#issuecomment-${id}`,
      body: o.body,
      user: { login: o.user ?? 'dev', id: 2, type: 'User' },
      created_at: new Date().toISOString(),
    },
    repository: repo,
    sender: { login: o.user ?? 'dev', id: 2, type: 'User' },
  };
  if (o.installationId !== undefined) payload.installation = { id: o.installationId };
  return payload;
}

/** A delivery as the server keeps it (vcs/host.ts WebhookDelivery): GitHub's three headers and the body, for the pure decisions. */
export function githubDelivery(d: {
  event: string | undefined;
  signature: string | undefined;
  deliveryId?: string | undefined;
  rawBody: Buffer;
}): { headers: Record<string, string | undefined>; rawBody: Buffer } {
  return {
    headers: { 'x-github-event': d.event, 'x-github-delivery': d.deliveryId, 'x-hub-signature-256': d.signature },
    rawBody: d.rawBody,
  };
}
