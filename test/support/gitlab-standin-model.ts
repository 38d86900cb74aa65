// The GitLab stand-in's state (users, groups, projects, merge requests, notes, pipelines and the
// jobs that commit statuses are) and the decisions GitLab makes from it, kept pure so they can
// be table-tested: a pipeline's status from its jobs, a merge request's head pipeline, its
// approvals and its `detailed_merge_status`. Sources: GitLab's REST API documentation
// (merge_requests.md "Merge status", commits.md "Set commit pipeline status",
// merge_request_approvals.md) and, where the documentation is silent, GitLab's own services
// (Ci::CreateCommitStatusService for which pipeline an external status joins).

export interface GlUser {
  id: number;
  username: string;
  name: string;
  state: 'active' | 'blocked';
  /** A bot user (project or group access token): may reset approvals. */
  bot: boolean;
}

/** GitLab's access levels (members API): 10 guest … 50 owner. */
export type AccessLevel = 10 | 20 | 30 | 40 | 50;

export interface GlGroup {
  id: number;
  /** Full path, e.g. `acme` or `acme/platform`. */
  path: string;
  name: string;
  /** Direct members only (GET /groups/:id/members/:user_id does not list inherited ones). */
  members: Map<number, AccessLevel>;
}

export interface GlProjectSettings {
  onlyAllowMergeIfPipelineSucceeds: boolean;
  allowMergeOnSkippedPipeline: boolean;
  onlyAllowMergeIfAllDiscussionsAreResolved: boolean;
  mergeMethod: 'merge' | 'rebase_merge' | 'ff';
}

export interface GlProject {
  id: number;
  /** `namespace/name` (namespace may be nested: `group/sub/name`). */
  path: string;
  defaultBranch: string;
  /** The bare repository served at `<path>.git` and read for commits, diffs and files. */
  bareDir?: string;
  forkedFromId?: number;
  settings: GlProjectSettings;
  createdAt: string;
}

export type MrState = 'opened' | 'closed' | 'merged' | 'locked';

export interface GlMergeRequest {
  id: number;
  iid: number;
  /** The target project. */
  projectId: number;
  sourceProjectId: number;
  sourceBranch: string;
  targetBranch: string;
  /** Head commit of the source branch. */
  sha: string;
  title: string;
  description: string;
  state: MrState;
  draft: boolean;
  authorId: number;
  labels: string[];
  hasConflicts: boolean;
  /** Approvals the project's rules ask for (0 on GitLab Free). */
  approvalsRequired: number;
  approvedBy: number[];
  /** null: GitLab is still preparing the diff (changes_count null); undefined: counted from the diff. */
  changesCount?: string | null;
  /** Set to answer this instead of the value computed from the state (e.g. `checking`). */
  detailedMergeStatus?: string;
  createdAt: string;
  updatedAt: string;
  mergedAt?: string;
  mergeCommitSha?: string;
  mergeUserId?: number;
  closedAt?: string;
  shouldRemoveSourceBranch?: boolean;
  mergeCommitMessage?: string;
}

export interface GlNote {
  id: number;
  projectId: number;
  mrIid: number;
  body: string;
  authorId: number;
  system: boolean;
  /** A thread that must be resolved (a "blocking discussion"). */
  resolvable: boolean;
  resolved: boolean;
  discussionId: string;
  createdAt: string;
  updatedAt: string;
}

export interface GlAward {
  id: number;
  noteId: number;
  name: string;
  userId: number;
  createdAt: string;
}

export type JobStatus = 'created' | 'pending' | 'running' | 'success' | 'failed' | 'canceled' | 'skipped' | 'manual';

/** A job of a pipeline: a CI job, or a commit status set through POST /statuses (stage `external`). */
export interface GlJob {
  id: number;
  projectId: number;
  pipelineId: number;
  sha: string;
  ref: string;
  name: string;
  stage: string;
  status: JobStatus;
  description: string | null;
  targetUrl: string | null;
  coverage: number | null;
  allowFailure: boolean;
  authorId: number;
  /** Replaced by a later job of the same name (GitLab's `retried`); the statuses list shows the latest. */
  retried: boolean;
  createdAt: string;
  startedAt: string | null;
  finishedAt: string | null;
}

export interface GlPipeline {
  id: number;
  iid: number;
  projectId: number;
  sha: string;
  ref: string;
  source: 'push' | 'merge_request_event' | 'external' | 'web' | 'api';
  createdAt: string;
  updatedAt: string;
}

/** A pipeline's status from its jobs' (the latest of each name), as GitLab composes it. */
export function pipelineStatus(jobs: GlJob[]): JobStatus {
  const latest = jobs.filter((j) => !j.retried);
  if (latest.length === 0) return 'created';
  const has = (s: JobStatus): boolean => latest.some((j) => j.status === s);
  if (latest.every((j) => j.status === 'skipped')) return 'skipped';
  if (has('running')) return 'running';
  if (has('pending')) return 'pending';
  if (has('created')) return latest.every((j) => j.status === 'created') ? 'created' : 'running';
  if (latest.some((j) => j.status === 'failed' && !j.allowFailure)) return 'failed';
  if (has('canceled')) return 'canceled';
  if (has('manual') && !latest.some((j) => j.status === 'success')) return 'manual';
  return 'success';
}

/**
 * The merge request's head pipeline: the newest pipeline for its head commit in the source
 * or target project (GitLab links the source branch's pipeline, or the MR pipeline).
 */
export function headPipeline(mr: GlMergeRequest, pipelines: Iterable<GlPipeline>): GlPipeline | undefined {
  let best: GlPipeline | undefined;
  for (const p of pipelines) {
    if (p.sha !== mr.sha) continue;
    if (p.projectId !== mr.sourceProjectId && p.projectId !== mr.projectId) continue;
    const mrRef = p.ref === `refs/merge-requests/${mr.iid}/head`;
    if (p.ref !== mr.sourceBranch && !mrRef) continue;
    if (!best || p.id > best.id) best = p;
  }
  return best;
}

export interface Approvals {
  approved: boolean;
  approvalsRequired: number;
  approvalsLeft: number;
}

export function approvals(mr: GlMergeRequest): Approvals {
  const left = Math.max(0, mr.approvalsRequired - mr.approvedBy.length);
  return { approved: left === 0, approvalsRequired: mr.approvalsRequired, approvalsLeft: left };
}

/**
 * `blocking_discussions_resolved`: true unless the project asks for every thread to be resolved
 * before merging and one is not (GitLab's `mergeable_discussions_state?`).
 */
export function blockingDiscussionsResolved(project: GlProject, notes: GlNote[]): boolean {
  if (!project.settings.onlyAllowMergeIfAllDiscussionsAreResolved) return true;
  return !notes.some((n) => n.resolvable && !n.resolved);
}

export interface MergeFacts {
  mr: GlMergeRequest;
  project: GlProject;
  notes: GlNote[];
  headPipelineStatus: JobStatus | undefined;
}

/**
 * `detailed_merge_status`, the first check that fails in GitLab's order (open, draft, conflicts,
 * discussions, CI, approvals), or `mergeable`. `ci_must_pass` when the project asks for a
 * successful pipeline and there is none (or it failed, or was skipped without
 * `allow_merge_on_skipped_pipeline`); `ci_still_running` while it runs.
 */
export function detailedMergeStatus(f: MergeFacts): string {
  if (f.mr.detailedMergeStatus !== undefined) return f.mr.detailedMergeStatus;
  if (f.mr.state !== 'opened') return 'not_open';
  if (f.mr.draft) return 'draft_status';
  if (f.mr.hasConflicts) return 'conflict';
  if (!blockingDiscussionsResolved(f.project, f.notes)) return 'discussions_not_resolved';
  if (f.project.settings.onlyAllowMergeIfPipelineSucceeds) {
    const s = f.headPipelineStatus;
    if (s === 'running' || s === 'pending' || s === 'created') return 'ci_still_running';
    const skippedOk = s === 'skipped' && f.project.settings.allowMergeOnSkippedPipeline;
    if (s !== 'success' && !skippedOk) return 'ci_must_pass';
  }
  if (approvals(f.mr).approvalsLeft > 0) return 'not_approved';
  return 'mergeable';
}

/** The deprecated `merge_status` GitLab still sends: only conflicts make it `cannot_be_merged`. */
export function legacyMergeStatus(mr: GlMergeRequest): string {
  if (mr.detailedMergeStatus === 'checking' || mr.detailedMergeStatus === 'unchecked') return mr.detailedMergeStatus;
  return mr.hasConflicts ? 'cannot_be_merged' : 'can_be_merged';
}

/** GitLab's transition for a POST /statuses `state` onto a job in `from` (null: a new job), or the error text. */
export function statusTransition(from: JobStatus | null, to: string): JobStatus | { error: string } {
  const invalid = (event: string): { error: string } => ({
    error: `Cannot transition status via :${event} from :${from} (Reason(s): Status cannot transition via "${event}")`,
  });
  const start: JobStatus = from ?? 'created';
  switch (to) {
    case 'pending':
      // enqueue! is allowed from created (and manual/skipped, which external jobs never are).
      return start === 'created' ? 'pending' : invalid('enqueue');
    case 'running':
      // `enqueue` (no bang: a failure is ignored), then `run!` from pending only.
      return start === 'created' || start === 'pending' ? 'running' : invalid('run');
    case 'success':
      return start === 'created' || start === 'pending' || start === 'running' ? 'success' : invalid('success');
    case 'failed':
      return start === 'created' || start === 'pending' || start === 'running' ? 'failed' : invalid('drop');
    case 'canceled':
      return start === 'created' || start === 'pending' || start === 'running' ? 'canceled' : invalid('cancel');
    case 'skipped':
      return start === 'created' || start === 'pending' ? 'skipped' : invalid('skip');
    default:
      return { error: 'invalid state' };
  }
}
