// The JSON the GitLab stand-in answers with, shaped as GitLab's REST API v4 documents its
// entities (users, projects, merge requests, notes, pipelines, commit statuses, commits): the
// fields a client decodes, with GitLab's names, types and nulls.
import type { CommitInfo } from './gitlab-standin-git.js';
import {
  type GlJob,
  type GlMergeRequest,
  type GlNote,
  type GlPipeline,
  type GlProject,
  type GlUser,
  type JobStatus,
  blockingDiscussionsResolved,
  detailedMergeStatus,
  headPipeline,
  legacyMergeStatus,
  pipelineStatus,
} from './gitlab-standin-model.js';

/** What the shapes need to know of the stand-in's state. */
export interface GlView {
  /** `https://<host>:<port>[<relative root>]`, GitLab's external URL. */
  webUrl: string;
  user(id: number): GlUser;
  project(id: number): GlProject;
  notesOf(projectId: number, iid: number): GlNote[];
  jobsOf(pipelineId: number): GlJob[];
  pipelines(): GlPipeline[];
  /** The number of changed files of a merge request (from its diff). */
  changedFileCount(mr: GlMergeRequest): number;
  diffRefs(mr: GlMergeRequest): { base_sha: string | null; head_sha: string; start_sha: string | null };
}

export function userBasic(v: GlView, u: GlUser): Record<string, unknown> {
  return {
    id: u.id,
    username: u.username,
    name: u.name,
    state: u.state,
    locked: false,
    avatar_url: `https://secure.gravatar.com/avatar/${u.id}?s=80&d=identicon`,
    web_url: `${v.webUrl}/${u.username}`,
  };
}

/** GET /user: the token's own user, with the fields only its owner sees. */
export function currentUser(v: GlView, u: GlUser): Record<string, unknown> {
  return {
    ...userBasic(v, u),
    created_at: '2024-01-01T00:00:00.000Z',
    bio: '',
    location: '',
    public_email: null,
    skype: '',
    linkedin: '',
    twitter: '',
    website_url: '',
    organization: '',
    job_title: '',
    bot: u.bot,
    last_sign_in_at: null,
    confirmed_at: '2024-01-01T00:00:00.000Z',
    last_activity_on: null,
    email: `${u.username}@example.com`,
    theme_id: 1,
    color_scheme_id: 1,
    projects_limit: 100000,
    current_sign_in_at: null,
    identities: [],
    can_create_group: true,
    can_create_project: true,
    two_factor_enabled: false,
    external: false,
    private_profile: false,
    commit_email: `${u.username}@example.com`,
  };
}

function namespaceOf(p: GlProject): { path: string; name: string; fullPath: string } {
  const slash = p.path.lastIndexOf('/');
  const fullPath = p.path.slice(0, slash);
  const path = fullPath.slice(fullPath.lastIndexOf('/') + 1);
  return { path, name: path, fullPath };
}

export function projectJson(v: GlView, p: GlProject): Record<string, unknown> {
  const ns = namespaceOf(p);
  const name = p.path.slice(p.path.lastIndexOf('/') + 1);
  const host = new URL(v.webUrl).host;
  const fork = p.forkedFromId === undefined ? undefined : v.project(p.forkedFromId);
  return {
    id: p.id,
    description: null,
    name,
    name_with_namespace: `${ns.name} / ${name}`,
    path: name,
    path_with_namespace: p.path,
    created_at: p.createdAt,
    default_branch: p.defaultBranch,
    tag_list: [],
    topics: [],
    ssh_url_to_repo: `git@${new URL(v.webUrl).hostname}:${p.path}.git`,
    http_url_to_repo: `${v.webUrl}/${p.path}.git`,
    web_url: `${v.webUrl}/${p.path}`,
    readme_url: null,
    forks_count: 0,
    avatar_url: null,
    star_count: 0,
    last_activity_at: p.createdAt,
    namespace: {
      id: p.id + 100_000,
      name: ns.name,
      path: ns.path,
      kind: 'group',
      full_path: ns.fullPath,
      parent_id: null,
      avatar_url: null,
      web_url: `${v.webUrl}/groups/${ns.fullPath}`,
    },
    container_registry_image_prefix: `${host}/${p.path}`,
    _links: {
      self: `${v.webUrl}/api/v4/projects/${p.id}`,
      merge_requests: `${v.webUrl}/api/v4/projects/${p.id}/merge_requests`,
      repo_branches: `${v.webUrl}/api/v4/projects/${p.id}/repository/branches`,
    },
    archived: false,
    visibility: 'private',
    ...(fork ? { forked_from_project: { id: fork.id, path_with_namespace: fork.path, web_url: `${v.webUrl}/${fork.path}` } } : {}),
    merge_requests_enabled: true,
    jobs_enabled: true,
    issues_enabled: true,
    merge_method: p.settings.mergeMethod,
    squash_option: 'default_off',
    only_allow_merge_if_pipeline_succeeds: p.settings.onlyAllowMergeIfPipelineSucceeds,
    allow_merge_on_skipped_pipeline: p.settings.allowMergeOnSkippedPipeline,
    only_allow_merge_if_all_discussions_are_resolved: p.settings.onlyAllowMergeIfAllDiscussionsAreResolved,
    remove_source_branch_after_merge: true,
    printing_merge_request_link_enabled: true,
    request_access_enabled: true,
    ci_config_path: '',
    shared_with_groups: [],
    permissions: { project_access: { access_level: 40, notification_level: 3 }, group_access: null },
  };
}

export function pipelineJson(v: GlView, p: GlPipeline): Record<string, unknown> {
  const project = v.project(p.projectId);
  return {
    id: p.id,
    iid: p.iid,
    project_id: p.projectId,
    sha: p.sha,
    ref: p.ref,
    status: pipelineStatus(v.jobsOf(p.id)),
    source: p.source,
    created_at: p.createdAt,
    updated_at: p.updatedAt,
    web_url: `${v.webUrl}/${project.path}/-/pipelines/${p.id}`,
  };
}

/** The head pipeline object of a merge request (GitLab's detailed pipeline entity). */
function headPipelineJson(v: GlView, p: GlPipeline): Record<string, unknown> {
  const status: JobStatus = pipelineStatus(v.jobsOf(p.id));
  return {
    ...pipelineJson(v, p),
    before_sha: '0000000000000000000000000000000000000000',
    tag: false,
    yaml_errors: null,
    user: userBasic(v, v.user(1)),
    started_at: p.createdAt,
    finished_at: ['success', 'failed', 'canceled', 'skipped'].includes(status) ? p.updatedAt : null,
    committed_at: null,
    duration: null,
    queued_duration: null,
    coverage: null,
    detailed_status: {
      icon: `status_${status}`,
      text: status,
      label: status,
      group: status,
      tooltip: status,
      has_details: true,
      details_path: `/${v.project(p.projectId).path}/-/pipelines/${p.id}`,
      illustration: null,
      favicon: `/assets/ci_favicons/favicon_status_${status}.png`,
    },
  };
}

/** A merge request as GET /projects/:id/merge_requests/:iid answers it. */
export function mergeRequestJson(v: GlView, mr: GlMergeRequest): Record<string, unknown> {
  const project = v.project(mr.projectId);
  const notes = v.notesOf(mr.projectId, mr.iid);
  const head = headPipeline(mr, v.pipelines());
  const headStatus = head ? pipelineStatus(v.jobsOf(head.id)) : undefined;
  const author = userBasic(v, v.user(mr.authorId));
  const changes = mr.changesCount !== undefined ? mr.changesCount : String(v.changedFileCount(mr));
  const webUrl = `${v.webUrl}/${project.path}/-/merge_requests/${mr.iid}`;
  const dms = detailedMergeStatus({ mr, project, notes, headPipelineStatus: headStatus });
  const merger = mr.mergeUserId === undefined ? null : userBasic(v, v.user(mr.mergeUserId));
  return {
    id: mr.id,
    iid: mr.iid,
    project_id: mr.projectId,
    title: mr.title,
    description: mr.description,
    state: mr.state,
    created_at: mr.createdAt,
    updated_at: mr.updatedAt,
    merged_by: merger,
    merge_user: merger,
    merged_at: mr.mergedAt ?? null,
    merge_after: null,
    prepared_at: mr.createdAt,
    closed_by: null,
    closed_at: mr.closedAt ?? null,
    target_branch: mr.targetBranch,
    source_branch: mr.sourceBranch,
    user_notes_count: notes.filter((n) => !n.system).length,
    upvotes: 0,
    downvotes: 0,
    author,
    assignees: [],
    assignee: null,
    reviewers: [],
    source_project_id: mr.sourceProjectId,
    target_project_id: mr.projectId,
    labels: mr.labels,
    draft: mr.draft,
    imported: false,
    imported_from: 'none',
    work_in_progress: mr.draft,
    milestone: null,
    merge_when_pipeline_succeeds: false,
    merge_status: legacyMergeStatus(mr),
    detailed_merge_status: dms,
    sha: mr.sha,
    merge_commit_sha: mr.mergeCommitSha ?? null,
    squash_commit_sha: null,
    discussion_locked: null,
    should_remove_source_branch: mr.shouldRemoveSourceBranch ?? null,
    force_remove_source_branch: true,
    prepared: true,
    reference: `!${mr.iid}`,
    references: { short: `!${mr.iid}`, relative: `!${mr.iid}`, full: `${project.path}!${mr.iid}` },
    web_url: webUrl,
    time_stats: { time_estimate: 0, total_time_spent: 0, human_time_estimate: null, human_total_time_spent: null },
    squash: false,
    squash_on_merge: false,
    task_completion_status: { count: 0, completed_count: 0 },
    has_conflicts: mr.hasConflicts,
    blocking_discussions_resolved: blockingDiscussionsResolved(project, notes),
    approvals_before_merge: null,
    subscribed: false,
    changes_count: changes,
    latest_build_started_at: head ? head.createdAt : null,
    latest_build_finished_at: null,
    first_deployed_to_production_at: null,
    pipeline: head ? pipelineJson(v, head) : null,
    head_pipeline: head ? headPipelineJson(v, head) : null,
    diff_refs: v.diffRefs(mr),
    merge_error: null,
    first_contribution: false,
    user: { can_merge: true },
  };
}

export function noteJson(v: GlView, n: GlNote): Record<string, unknown> {
  return {
    id: n.id,
    type: n.resolvable ? 'DiscussionNote' : null,
    body: n.body,
    attachment: null,
    author: userBasic(v, v.user(n.authorId)),
    created_at: n.createdAt,
    updated_at: n.updatedAt,
    system: n.system,
    noteable_id: n.mrIid + 5000,
    noteable_type: 'MergeRequest',
    project_id: n.projectId,
    resolvable: n.resolvable,
    ...(n.resolvable ? { resolved: n.resolved, resolved_by: null, resolved_at: null } : {}),
    confidential: false,
    internal: false,
    imported: false,
    imported_from: 'none',
    noteable_iid: n.mrIid,
    commands_changes: {},
  };
}

/** A commit status (an external job) as POST /statuses/:sha and GET .../statuses answer it. */
export function jobJson(v: GlView, j: GlJob): Record<string, unknown> {
  return {
    id: j.id,
    sha: j.sha,
    ref: j.ref,
    status: j.status,
    name: j.name,
    target_url: j.targetUrl,
    description: j.description,
    created_at: j.createdAt,
    started_at: j.startedAt,
    finished_at: j.finishedAt,
    allow_failure: j.allowFailure,
    coverage: j.coverage,
    pipeline_id: j.pipelineId,
    author: userBasic(v, v.user(j.authorId)),
  };
}

export function commitJson(v: GlView, project: GlProject, c: CommitInfo, last: GlPipeline | undefined): Record<string, unknown> {
  const lastJson = last ? pipelineJson(v, last) : null;
  return {
    id: c.id,
    short_id: c.id.slice(0, 8),
    created_at: c.committedDate,
    parent_ids: c.parentIds,
    title: c.title,
    message: c.message,
    author_name: c.authorName,
    author_email: c.authorEmail,
    authored_date: c.authoredDate,
    committer_name: c.committerName,
    committer_email: c.committerEmail,
    committed_date: c.committedDate,
    trailers: {},
    extended_trailers: {},
    web_url: `${v.webUrl}/${project.path}/-/commit/${c.id}`,
    stats: { additions: 0, deletions: 0, total: 0 },
    status: lastJson ? lastJson.status : null,
    project_id: project.id,
    last_pipeline: lastJson,
  };
}
