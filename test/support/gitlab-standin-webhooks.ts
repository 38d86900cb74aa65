// Webhooks as GitLab sends them: the Merge Request Hook and the Note Hook (a comment on a merge
// request), built from the stand-in's state in the shapes of GitLab's documented payload
// examples (user/project/integrations/webhook_events.md), POSTed with GitLab's headers
// (X-Gitlab-Event, X-Gitlab-Token, X-Gitlab-Instance, X-Gitlab-Webhook-UUID,
// X-Gitlab-Event-UUID, Idempotency-Key, User-Agent GitLab/<version>).
import crypto from 'node:crypto';
import type { GitLabStandin } from './gitlab-standin.js';
import { readCommit } from './gitlab-standin-git.js';
import {
  type GlMergeRequest,
  type GlNote,
  type GlProject,
  detailedMergeStatus,
  headPipeline,
  legacyMergeStatus,
  pipelineStatus,
} from './gitlab-standin-model.js';

export type GitlabEvent = 'Merge Request Hook' | 'Note Hook';

/** GitLab's `2015-05-17 18:21:36 UTC`, the time format of note payloads. */
function utc(iso: string): string {
  return `${iso.slice(0, 10)} ${iso.slice(11, 19)} UTC`;
}

/** `2013-12-03T17:23:34Z`, the time format of merge request payloads. */
function isoSeconds(iso: string): string {
  return `${iso.slice(0, 19)}Z`;
}

function userHook(gl: GitLabStandin, id: number): Record<string, unknown> {
  const u = gl.user(id);
  return {
    id: u.id,
    name: u.name,
    username: u.username,
    avatar_url: `https://secure.gravatar.com/avatar/${u.id}?s=80&d=identicon`,
    email: '[REDACTED]',
  };
}

export function projectHook(gl: GitLabStandin, p: GlProject): Record<string, unknown> {
  const name = p.path.slice(p.path.lastIndexOf('/') + 1);
  const ns = p.path.slice(0, p.path.lastIndexOf('/'));
  const host = new URL(gl.url).hostname;
  return {
    id: p.id,
    name,
    description: '',
    web_url: `${gl.url}/${p.path}`,
    avatar_url: null,
    git_ssh_url: `git@${host}:${p.path}.git`,
    git_http_url: gl.gitUrl(p.path),
    namespace: ns.slice(ns.lastIndexOf('/') + 1),
    visibility_level: 0,
    path_with_namespace: p.path,
    default_branch: p.defaultBranch,
    ci_config_path: '',
    homepage: `${gl.url}/${p.path}`,
    url: gl.gitUrl(p.path),
    ssh_url: `git@${host}:${p.path}.git`,
    http_url: gl.gitUrl(p.path),
  };
}

function repositoryHook(gl: GitLabStandin, p: GlProject): Record<string, unknown> {
  return { name: p.path.slice(p.path.lastIndexOf('/') + 1), url: gl.gitUrl(p.path), description: '', homepage: `${gl.url}/${p.path}` };
}

function lastCommit(gl: GitLabStandin, mr: GlMergeRequest): Record<string, unknown> {
  const target = gl.project(mr.projectId);
  const c = target.bareDir ? readCommit(target.bareDir, mr.sha) : undefined;
  return {
    id: mr.sha,
    message: c?.message ?? '',
    title: c?.title ?? '',
    timestamp: c?.committedDate ?? null,
    url: `${gl.url}/${target.path}/-/commit/${mr.sha}`,
    author: { name: c?.authorName ?? '', email: c?.authorEmail ?? '' },
  };
}

function mergeStatusOf(gl: GitLabStandin, mr: GlMergeRequest): string {
  const head = headPipeline(mr, gl.pipelines());
  return detailedMergeStatus({
    mr,
    project: gl.project(mr.projectId),
    notes: gl.notesOf(mr.projectId, mr.iid),
    headPipelineStatus: head ? pipelineStatus(gl.jobsOf(head.id)) : undefined,
  });
}

export interface MergeRequestHookOptions {
  action: 'open' | 'close' | 'reopen' | 'update' | 'merge' | 'approved' | 'unapproved' | 'approval' | 'unapproval';
  /** Who did it (default the merge request's author). */
  user?: string;
  /** The head before a push (only set when code changed, as GitLab does). */
  oldrev?: string;
  changes?: Record<string, { previous: unknown; current: unknown }>;
}

/** A `Merge Request Hook` payload for the merge request as the stand-in holds it now. */
export function mergeRequestHook(gl: GitLabStandin, mr: GlMergeRequest, o: MergeRequestHookOptions): Record<string, unknown> {
  const target = gl.project(mr.projectId);
  const source = gl.project(mr.sourceProjectId);
  const userId = o.user ? (gl.userByName(o.user)?.id ?? mr.authorId) : mr.authorId;
  const head = headPipeline(mr, gl.pipelines());
  const attrs: Record<string, unknown> = {
    id: mr.id,
    iid: mr.iid,
    target_branch: mr.targetBranch,
    source_branch: mr.sourceBranch,
    source_project_id: mr.sourceProjectId,
    author_id: mr.authorId,
    assignee_ids: [],
    assignee_id: null,
    reviewer_ids: [],
    title: mr.title,
    created_at: isoSeconds(mr.createdAt),
    updated_at: isoSeconds(mr.updatedAt),
    last_edited_at: null,
    last_edited_by_id: null,
    milestone_id: null,
    state_id: { opened: 1, closed: 2, merged: 3, locked: 4 }[mr.state],
    state: mr.state,
    blocking_discussions_resolved: true,
    work_in_progress: mr.draft,
    draft: mr.draft,
    first_contribution: false,
    merge_status: legacyMergeStatus(mr),
    target_project_id: mr.projectId,
    description: mr.description,
    prepared_at: isoSeconds(mr.createdAt),
    total_time_spent: 0,
    time_change: 0,
    human_total_time_spent: null,
    human_time_change: null,
    human_time_estimate: null,
    head_pipeline_id: head?.id ?? null,
    url: `${gl.url}/${target.path}/-/merge_requests/${mr.iid}`,
    source: projectHook(gl, source),
    target: projectHook(gl, target),
    last_commit: lastCommit(gl, mr),
    labels: mr.labels.map((title, i) => ({
      id: 200 + i,
      title,
      color: '#6699cc',
      project_id: target.id,
      type: 'ProjectLabel',
      group_id: null,
    })),
    action: o.action,
    detailed_merge_status: mergeStatusOf(gl, mr),
  };
  if (o.oldrev !== undefined) attrs.oldrev = o.oldrev;
  return {
    object_kind: 'merge_request',
    event_type: 'merge_request',
    user: userHook(gl, userId),
    project: projectHook(gl, target),
    repository: repositoryHook(gl, target),
    object_attributes: attrs,
    labels: attrs.labels,
    changes: o.changes ?? {},
    assignees: [],
    reviewers: [],
  };
}

/** A `Note Hook` payload for `note`, a comment on a merge request. */
export function noteHook(gl: GitLabStandin, note: GlNote, o: { action?: 'create' | 'update' } = {}): Record<string, unknown> {
  const project = gl.project(note.projectId);
  const mr = gl.findMergeRequest(note.projectId, note.mrIid);
  if (!mr) throw new Error(`stand-in: note ${note.id} is on no merge request`);
  const source = gl.project(mr.sourceProjectId);
  return {
    object_kind: 'note',
    event_type: 'note',
    user: userHook(gl, note.authorId),
    project_id: project.id,
    project: projectHook(gl, project),
    repository: repositoryHook(gl, project),
    object_attributes: {
      id: note.id,
      note: note.body,
      noteable_type: 'MergeRequest',
      author_id: note.authorId,
      created_at: utc(note.createdAt),
      updated_at: utc(note.updatedAt),
      project_id: project.id,
      attachment: null,
      line_code: null,
      commit_id: '',
      noteable_id: mr.id,
      system: note.system,
      st_diff: null,
      action: o.action ?? 'create',
      url: `${gl.url}/${project.path}/-/merge_requests/${mr.iid}#note_${note.id}`,
    },
    merge_request: {
      id: mr.id,
      target_branch: mr.targetBranch,
      source_branch: mr.sourceBranch,
      source_project_id: mr.sourceProjectId,
      author_id: mr.authorId,
      assignee_id: null,
      title: mr.title,
      created_at: utc(mr.createdAt),
      updated_at: utc(mr.updatedAt),
      milestone_id: null,
      state: mr.state,
      merge_status: legacyMergeStatus(mr),
      target_project_id: mr.projectId,
      iid: mr.iid,
      description: mr.description,
      position: 0,
      labels: [],
      source: projectHook(gl, source),
      target: projectHook(gl, project),
      last_commit: lastCommit(gl, mr),
      work_in_progress: mr.draft,
      draft: mr.draft,
      detailed_merge_status: mergeStatusOf(gl, mr),
    },
  };
}

export interface SendGitlabWebhookOptions {
  /** The hook's secret token; null sends no X-Gitlab-Token header. */
  token: string | null;
  /** GitLab's external URL (X-Gitlab-Instance). */
  instance: string;
  /** GitLab's version (User-Agent). */
  version?: string;
  timeoutMs?: number;
}

export interface GitlabWebhookResponse {
  status: number;
  body: string;
}

/** POSTs a webhook the way GitLab does. */
export async function sendGitlabWebhook(
  url: string,
  event: GitlabEvent,
  payload: unknown,
  o: SendGitlabWebhookOptions,
): Promise<GitlabWebhookResponse> {
  const headers: Record<string, string> = {
    'content-type': 'application/json',
    'user-agent': `GitLab/${(o.version ?? '17.11.1-ee').replace(/-ee$/, '')}`,
    'idempotency-key': crypto.randomUUID(),
    'x-gitlab-event': event,
    'x-gitlab-webhook-uuid': crypto.randomUUID(),
    'x-gitlab-instance': o.instance,
    'x-gitlab-event-uuid': crypto.randomUUID(),
  };
  if (o.token !== null) headers['x-gitlab-token'] = o.token;
  const res = await fetch(url, {
    method: 'POST',
    headers,
    body: JSON.stringify(payload),
    signal: AbortSignal.timeout(o.timeoutMs ?? 30_000),
  });
  return { status: res.status, body: await res.text() };
}
