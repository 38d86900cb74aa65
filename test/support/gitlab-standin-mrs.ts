// The GitLab stand-in's merge request routes (under /projects/:id/merge_requests/:iid): the
// merge request, its diffs, approvals, notes (list, create, edit) and their award emoji,
// discussions, merge and reset of approvals; with GitLab's status codes and error bodies.
import type { GlStore } from './gitlab-standin-store.js';
import { mergeRequestJson, noteJson, pipelineJson, userBasic } from './gitlab-standin-json.js';
import {
  type GlMergeRequest,
  type GlProject,
  type GlUser,
  approvals,
  detailedMergeStatus,
  headPipeline,
  pipelineStatus,
} from './gitlab-standin-model.js';

export type Answer = [number, unknown, Record<string, string>?];

/** GitLab's longest note: 1,000,000 characters (Note validates `note` length). */
export const NOTE_MAX_CHARS = 1_000_000;

export const notFound = (what = 'Not found'): Answer => [404, { message: `404 ${what}` }];
export const unauthorized = (): Answer => [401, { message: '401 Unauthorized' }];
export const badRequest = (message: unknown): Answer => [400, { message }];

/** Emoji names GitLab knows (a subset of its list; enough for what clients award). */
const EMOJI = new Set([
  'thumbsup',
  'thumbsdown',
  '+1',
  '-1',
  'eyes',
  'rocket',
  'tada',
  'heart',
  'smile',
  'laughing',
  'confused',
  'hourglass',
  'hourglass_flowing_sand',
  'white_check_mark',
  'heavy_check_mark',
  'x',
  'warning',
  'robot',
  'construction',
]);

/**
 * Offset pagination as GitLab answers it: `page` (from 1) and `per_page` (default 20, at most
 * 100), with X-Page, X-Per-Page, X-Total, X-Total-Pages, X-Next-Page, X-Prev-Page and Link.
 */
export function paginate<T>(items: T[], query: Record<string, string>, pageUrl: string): [T[], Record<string, string>] {
  const perPage = Math.min(100, Math.max(1, Number(query.per_page) || 20));
  const totalPages = Math.max(1, Math.ceil(items.length / perPage));
  const page = Math.max(1, Number(query.page) || 1);
  const next = page < totalPages ? String(page + 1) : '';
  const prev = page > 1 ? String(Math.min(page - 1, totalPages)) : '';
  const link = (p: number, rel: string): string => {
    const u = new URL(pageUrl);
    for (const [k, v] of Object.entries(query)) u.searchParams.set(k, v);
    u.searchParams.set('page', String(p));
    u.searchParams.set('per_page', String(perPage));
    return `<${u.toString()}>; rel="${rel}"`;
  };
  const links = [
    ...(prev ? [link(Number(prev), 'prev')] : []),
    ...(next ? [link(Number(next), 'next')] : []),
    link(1, 'first'),
    link(totalPages, 'last'),
  ];
  const headers = {
    'x-page': String(page),
    'x-per-page': String(perPage),
    'x-total': String(items.length),
    'x-total-pages': String(totalPages),
    'x-next-page': next,
    'x-prev-page': prev,
    link: links.join(', '),
  };
  return [items.slice((page - 1) * perPage, page * perPage), headers];
}

export interface MrRoute {
  store: GlStore;
  me: GlUser;
  project: GlProject;
  method: string;
  /** Path segments after `merge_requests`, decoded. */
  rest: string[];
  params: Record<string, unknown>;
  query: Record<string, string>;
  pageUrl: string;
}

function approvalsJson(r: MrRoute, mr: GlMergeRequest): Record<string, unknown> {
  const a = approvals(mr);
  return {
    id: mr.id,
    iid: mr.iid,
    project_id: mr.projectId,
    title: mr.title,
    description: mr.description,
    state: mr.state,
    created_at: mr.createdAt,
    updated_at: mr.updatedAt,
    merge_status: mr.hasConflicts ? 'cannot_be_merged' : 'can_be_merged',
    approved: a.approved,
    approvals_required: a.approvalsRequired,
    approvals_left: a.approvalsLeft,
    require_password_to_approve: false,
    approved_by: mr.approvedBy.map((id) => ({ user: userBasic(r.store, r.store.user(id)) })),
    suggested_approvers: [],
    approvers: [],
    approver_groups: [],
    user_has_approved: mr.approvedBy.includes(r.me.id),
    user_can_approve: mr.authorId !== r.me.id && !mr.approvedBy.includes(r.me.id),
    approval_rules_left: [],
    has_approval_rules: a.approvalsRequired > 0,
    merge_request_approvers_available: true,
    multiple_approval_rules_available: true,
    invalid_approvers_rules: [],
  };
}

function bodyParam(params: Record<string, unknown>): string | Answer {
  if (!('body' in params) || params.body === null || params.body === undefined) return [400, { error: 'body is missing' }];
  if (typeof params.body !== 'string') return [400, { error: 'body is invalid' }];
  if (params.body.trim() === '') return [400, { error: 'body is empty' }];
  if (params.body.length > NOTE_MAX_CHARS) return badRequest(`Note {:note=>["is too long (maximum is ${NOTE_MAX_CHARS} characters)"]}`);
  return params.body;
}

function merge(r: MrRoute, mr: GlMergeRequest): Answer {
  const s = r.store;
  const project = s.project(mr.projectId);
  // Not open, a draft, a pipeline or approvals or threads still owed: 405; conflicts: 422;
  // a `sha` that is not the head: 409 (merge_requests.md, "Merge a merge request").
  const head = headPipeline(mr, s.pipelines());
  const status = detailedMergeStatus({
    mr,
    project,
    notes: s.notesOf(mr.projectId, mr.iid),
    headPipelineStatus: head ? pipelineStatus(s.jobsOf(head.id)) : undefined,
  });
  if (status === 'conflict') return [422, { message: 'Branch cannot be merged' }];
  if (status !== 'mergeable') return [405, { message: '405 Method Not Allowed' }];
  if (typeof r.params.sha === 'string' && r.params.sha !== mr.sha)
    return [409, { message: `SHA does not match HEAD of source branch: ${mr.sha}` }];
  const now = s.now();
  mr.state = 'merged';
  mr.mergedAt = now;
  mr.updatedAt = now;
  mr.mergeUserId = r.me.id;
  // No merge is made in the repository; the commit SHA stands for it.
  mr.mergeCommitSha = [...mr.sha].reverse().join('');
  if (typeof r.params.merge_commit_message === 'string') mr.mergeCommitMessage = r.params.merge_commit_message;
  if (typeof r.params.should_remove_source_branch === 'boolean') mr.shouldRemoveSourceBranch = r.params.should_remove_source_branch;
  return [200, mergeRequestJson(s, mr)];
}

function notes(r: MrRoute, mr: GlMergeRequest): Answer {
  const s = r.store;
  const [, noteId, sub] = r.rest;
  if (noteId === undefined) {
    if (r.method === 'GET') {
      const orderBy = r.query.order_by === 'updated_at' ? 'updatedAt' : 'createdAt';
      const dir = r.query.sort === 'asc' ? 1 : -1;
      const all = s.notesOf(mr.projectId, mr.iid).sort((a, b) => dir * (a[orderBy].localeCompare(b[orderBy]) || a.id - b.id));
      const [items, headers] = paginate(all, r.query, r.pageUrl);
      return [200, items.map((n) => noteJson(s, n)), headers];
    }
    if (r.method !== 'POST') return [405, { message: '405 Method Not Allowed' }];
    const body = bodyParam(r.params);
    if (typeof body !== 'string') return body;
    return [201, noteJson(s, s.createNote(mr, body, r.me.id))];
  }
  const note = s.notes.get(Number(noteId));
  if (!note || note.projectId !== mr.projectId || note.mrIid !== mr.iid) return notFound('Note Not Found');
  if (sub === 'award_emoji' && r.rest.length === 3) {
    if (r.method === 'GET') return [200, s.awards.filter((a) => a.noteId === note.id).map((a) => ({ id: a.id, name: a.name }))];
    if (r.method !== 'POST') return [405, { message: '405 Method Not Allowed' }];
    const name = r.params.name;
    if (typeof name !== 'string') return [400, { error: 'name is missing' }];
    if (!EMOJI.has(name)) return badRequest({ name: ['is not a valid emoji name'] });
    if (s.awards.some((a) => a.noteId === note.id && a.name === name && a.userId === r.me.id))
      return badRequest({ name: ['has already been taken'] });
    const award = { id: s.nextAwardId(), noteId: note.id, name, userId: r.me.id, createdAt: s.now() };
    s.awards.push(award);
    return [
      201,
      {
        id: award.id,
        name,
        user: userBasic(s, r.me),
        created_at: award.createdAt,
        updated_at: award.createdAt,
        awardable_id: note.id,
        awardable_type: 'Note',
        url: null,
      },
    ];
  }
  if (sub !== undefined) return notFound();
  if (r.method === 'GET') return [200, noteJson(s, note)];
  if (r.method !== 'PUT') return [405, { message: '405 Method Not Allowed' }];
  // Only its author may edit a note.
  if (note.authorId !== r.me.id) return [403, { message: '403 Forbidden' }];
  const body = bodyParam(r.params);
  if (typeof body !== 'string') return body;
  note.body = body;
  note.updatedAt = s.now();
  return [200, noteJson(s, note)];
}

/** Answers /projects/:id/merge_requests/:iid[/...]; undefined for another route. */
export function answerMergeRequestRoute(r: MrRoute): Answer | undefined {
  const s = r.store;
  const [iidText, what] = r.rest;
  if (iidText === undefined || !/^\d+$/.test(iidText)) return undefined;
  const mr = s.findMergeRequest(r.project.id, Number(iidText));
  if (!mr) return notFound();
  const sub = { ...r, rest: r.rest.slice(1) };
  if (what === undefined) return r.method === 'GET' ? [200, mergeRequestJson(s, mr)] : undefined;
  if (what === 'notes') return notes(sub, mr);
  if (r.rest.length !== 2) return undefined;
  if (what === 'diffs' && r.method === 'GET') {
    const [items, headers] = paginate(s.diffOf(mr), r.query, r.pageUrl);
    return [200, items, headers];
  }
  if (what === 'changes' && r.method === 'GET') return [200, { ...mergeRequestJson(s, mr), changes: s.diffOf(mr), overflow: false }];
  if (what === 'approvals' && r.method === 'GET') return [200, approvalsJson(r, mr)];
  if (what === 'discussions' && r.method === 'GET') {
    const threads = s
      .notesOf(mr.projectId, mr.iid)
      .map((n) => ({ id: n.discussionId, individual_note: !n.resolvable, notes: [noteJson(s, n)] }));
    const [items, headers] = paginate(threads, r.query, r.pageUrl);
    return [200, items, headers];
  }
  if (what === 'pipelines' && r.method === 'GET') {
    const mine = s.pipelines().filter((p) => p.sha === mr.sha && (p.projectId === mr.projectId || p.projectId === mr.sourceProjectId));
    return [200, mine.sort((a, b) => b.id - a.id).map((p) => pipelineJson(s, p))];
  }
  if (what === 'merge' && r.method === 'PUT') return merge(r, mr);
  if (what === 'reset_approvals' && r.method === 'PUT') {
    // Only a bot user (project or group access token) may reset approvals.
    if (!r.me.bot) return unauthorized();
    mr.approvedBy = [];
    return [202, null];
  }
  return undefined;
}
