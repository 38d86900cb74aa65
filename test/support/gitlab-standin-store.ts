// The GitLab stand-in's state and what a test does to it directly (as a person would in GitLab's
// UI or a CI runner would): users, groups and their members, projects backed by bare
// repositories, merge requests, people's notes and threads, approvals, CI pipelines. Ids are
// handed out in order from fixed starting points, so the same sequence of calls gives the
// same ids in every run (the recorded fixtures rely on it).
import type { GlView } from './gitlab-standin-json.js';
import { branchesContaining, fetchInto, mergeBase, mergeRequestDiff, readCommit, updateRef } from './gitlab-standin-git.js';
import type {
  AccessLevel,
  GlAward,
  GlGroup,
  GlJob,
  GlMergeRequest,
  GlNote,
  GlPipeline,
  GlProject,
  GlProjectSettings,
  GlUser,
  JobStatus,
} from './gitlab-standin-model.js';

export class GlStore implements GlView {
  webUrl = '';
  readonly users = new Map<number, GlUser>();
  readonly groups = new Map<number, GlGroup>();
  readonly projects = new Map<number, GlProject>();
  /** Keyed `<projectId>!<iid>`. */
  readonly mergeRequests = new Map<string, GlMergeRequest>();
  readonly notes = new Map<number, GlNote>();
  readonly awards: GlAward[] = [];
  readonly pipelineList: GlPipeline[] = [];
  readonly jobs: GlJob[] = [];
  /** When set, every timestamp the stand-in writes (fixed clocks make answers comparable). */
  clock: () => Date = () => new Date();
  private seq = { user: 1, group: 100, project: 1, mr: 500, note: 1000, award: 1, pipeline: 2000, job: 8000 };

  now(): string {
    return this.clock().toISOString();
  }

  // ---- people ---------------------------------------------------------------------

  addUser(username: string, o: { name?: string; bot?: boolean; state?: GlUser['state'] } = {}): GlUser {
    const u: GlUser = { id: this.seq.user++, username, name: o.name ?? username, state: o.state ?? 'active', bot: o.bot ?? false };
    this.users.set(u.id, u);
    return u;
  }

  userByName(username: string): GlUser | undefined {
    return [...this.users.values()].find((u) => u.username.toLowerCase() === username.toLowerCase());
  }

  /** A group (full path, e.g. `acme/platform`) with direct members. */
  addGroup(path: string, members: Array<{ username: string; accessLevel?: AccessLevel }> = []): GlGroup {
    const g: GlGroup = { id: this.seq.group++, path, name: path.slice(path.lastIndexOf('/') + 1), members: new Map() };
    for (const m of members) {
      const u = this.userByName(m.username) ?? this.addUser(m.username);
      g.members.set(u.id, m.accessLevel ?? 30);
    }
    this.groups.set(g.id, g);
    return g;
  }

  groupByIdOrPath(id: string): GlGroup | undefined {
    if (/^\d+$/.test(id)) return this.groups.get(Number(id));
    return [...this.groups.values()].find((g) => g.path.toLowerCase() === id.toLowerCase());
  }

  // ---- projects -------------------------------------------------------------------

  addProject(
    path: string,
    o: { bareDir?: string; defaultBranch?: string; forkedFrom?: string; settings?: Partial<GlProjectSettings> } = {},
  ): GlProject {
    const forked = o.forkedFrom === undefined ? undefined : this.projectByIdOrPath(o.forkedFrom);
    if (o.forkedFrom !== undefined && !forked) throw new Error(`stand-in: no project ${o.forkedFrom} to fork`);
    const p: GlProject = {
      id: this.seq.project++,
      path,
      defaultBranch: o.defaultBranch ?? 'main',
      ...(o.bareDir ? { bareDir: o.bareDir } : {}),
      ...(forked ? { forkedFromId: forked.id } : {}),
      settings: {
        onlyAllowMergeIfPipelineSucceeds: false,
        allowMergeOnSkippedPipeline: false,
        onlyAllowMergeIfAllDiscussionsAreResolved: false,
        mergeMethod: 'merge',
        ...o.settings,
      },
      createdAt: this.now(),
    };
    this.projects.set(p.id, p);
    return p;
  }

  projectByIdOrPath(id: string): GlProject | undefined {
    if (/^\d+$/.test(id)) return this.projects.get(Number(id));
    return [...this.projects.values()].find((p) => p.path.toLowerCase() === id.toLowerCase());
  }

  // ---- merge requests -------------------------------------------------------------

  /**
   * Opens a merge request from `sourceBranch` (of `sourceProject`, default the target itself:
   * a fork's branch otherwise) and keeps its head as `refs/merge-requests/<iid>/head` in the
   * target repository, as GitLab does.
   */
  openMergeRequest(
    projectPath: string,
    o: {
      sourceBranch: string;
      targetBranch?: string;
      sourceProject?: string;
      author: string;
      title?: string;
      description?: string;
      draft?: boolean;
      labels?: string[];
      iid?: number;
    },
  ): GlMergeRequest {
    const target = this.mustProject(projectPath);
    const source = o.sourceProject ? this.mustProject(o.sourceProject) : target;
    const iid = o.iid ?? 1 + Math.max(0, ...[...this.mergeRequests.values()].filter((m) => m.projectId === target.id).map((m) => m.iid));
    const sha = this.publishHead(target, source, o.sourceBranch, iid);
    const author = this.userByName(o.author) ?? this.addUser(o.author);
    const now = this.now();
    const mr: GlMergeRequest = {
      id: this.seq.mr++,
      iid,
      projectId: target.id,
      sourceProjectId: source.id,
      sourceBranch: o.sourceBranch,
      targetBranch: o.targetBranch ?? target.defaultBranch,
      sha,
      title: o.title ?? `Merge request ${iid}`,
      description: o.description ?? '',
      state: 'opened',
      draft: o.draft ?? false,
      authorId: author.id,
      labels: o.labels ?? [],
      hasConflicts: false,
      approvalsRequired: 0,
      approvedBy: [],
      createdAt: now,
      updatedAt: now,
    };
    this.mergeRequests.set(`${target.id}!${iid}`, mr);
    return mr;
  }

  /** After a push to the source branch: the merge request's new head (returns the old one, GitLab's `oldrev`). */
  refreshHead(mr: GlMergeRequest): string {
    const old = mr.sha;
    mr.sha = this.publishHead(this.project(mr.projectId), this.project(mr.sourceProjectId), mr.sourceBranch, mr.iid);
    mr.updatedAt = this.now();
    return old;
  }

  private publishHead(target: GlProject, source: GlProject, branch: string, iid: number): string {
    const ref = `refs/merge-requests/${iid}/head`;
    if (!target.bareDir || !source.bareDir) throw new Error('stand-in: merge requests need projects with a bareDir');
    if (source.id === target.id) {
      const c = readCommit(target.bareDir, `refs/heads/${branch}`);
      if (!c) throw new Error(`stand-in: no branch ${branch} in ${target.path}`);
      updateRef(target.bareDir, ref, c.id);
      return c.id;
    }
    fetchInto(target.bareDir, source.bareDir, `refs/heads/${branch}`, ref);
    return readCommit(target.bareDir, ref)!.id;
  }

  mergeRequest(projectPath: string, iid: number): GlMergeRequest {
    const mr = this.mergeRequests.get(`${this.mustProject(projectPath).id}!${iid}`);
    if (!mr) throw new Error(`stand-in: no merge request ${projectPath}!${iid}`);
    return mr;
  }

  findMergeRequest(projectId: number, iid: number): GlMergeRequest | undefined {
    return this.mergeRequests.get(`${projectId}!${iid}`);
  }

  approve(mr: GlMergeRequest, username: string): void {
    const u = this.userByName(username) ?? this.addUser(username);
    if (!mr.approvedBy.includes(u.id)) mr.approvedBy.push(u.id);
  }

  /** A note someone wrote on the merge request (a comment, or with `resolvable` a thread to resolve). */
  addNote(
    mr: GlMergeRequest,
    body: string,
    username: string,
    o: { resolvable?: boolean; resolved?: boolean; system?: boolean } = {},
  ): GlNote {
    const u = this.userByName(username) ?? this.addUser(username);
    return this.createNote(mr, body, u.id, o);
  }

  createNote(
    mr: GlMergeRequest,
    body: string,
    authorId: number,
    o: { resolvable?: boolean; resolved?: boolean; system?: boolean } = {},
  ): GlNote {
    const now = this.now();
    const id = this.seq.note++;
    const n: GlNote = {
      id,
      projectId: mr.projectId,
      mrIid: mr.iid,
      body,
      authorId,
      system: o.system ?? false,
      resolvable: o.resolvable ?? false,
      resolved: o.resolved ?? false,
      discussionId: id.toString(16).padStart(40, '0'),
      createdAt: now,
      updatedAt: now,
    };
    this.notes.set(n.id, n);
    mr.updatedAt = now;
    return n;
  }

  notesOf(projectId: number, iid: number): GlNote[] {
    return [...this.notes.values()].filter((n) => n.projectId === projectId && n.mrIid === iid).sort((a, b) => a.id - b.id);
  }

  nextAwardId(): number {
    return this.seq.award++;
  }

  // ---- CI -------------------------------------------------------------------------

  /** A CI pipeline on `sha` (of `ref`, default the merge request's branch) with one job per entry. */
  addPipeline(
    projectPath: string,
    o: {
      sha: string;
      ref: string;
      source?: GlPipeline['source'];
      jobs: Array<{ name: string; status: JobStatus; allowFailure?: boolean }>;
    },
  ): GlPipeline {
    const project = this.mustProject(projectPath);
    const p = this.createPipeline(project, o.sha, o.ref, o.source ?? 'push');
    for (const j of o.jobs)
      this.createJob(p, j.name, 'test', this.users.keys().next().value ?? 1, { status: j.status, allowFailure: j.allowFailure ?? false });
    return p;
  }

  createPipeline(project: GlProject, sha: string, ref: string, source: GlPipeline['source']): GlPipeline {
    const now = this.now();
    const iid = 1 + this.pipelineList.filter((x) => x.projectId === project.id).length;
    const p: GlPipeline = { id: this.seq.pipeline++, iid, projectId: project.id, sha, ref, source, createdAt: now, updatedAt: now };
    this.pipelineList.push(p);
    return p;
  }

  createJob(p: GlPipeline, name: string, stage: string, authorId: number, o: { status: JobStatus; allowFailure?: boolean }): GlJob {
    const now = this.now();
    const done = ['success', 'failed', 'canceled', 'skipped'].includes(o.status);
    const j: GlJob = {
      id: this.seq.job++,
      projectId: p.projectId,
      pipelineId: p.id,
      sha: p.sha,
      ref: p.ref,
      name,
      stage,
      status: o.status,
      description: null,
      targetUrl: null,
      coverage: null,
      allowFailure: o.allowFailure ?? false,
      authorId,
      retried: false,
      createdAt: now,
      startedAt: o.status === 'created' || o.status === 'pending' ? null : now,
      finishedAt: done ? now : null,
    };
    for (const old of this.jobs) if (old.pipelineId === p.id && old.name === name) old.retried = true;
    this.jobs.push(j);
    p.updatedAt = now;
    return j;
  }

  /** Changes a job's status (a CI job that finishes), keeping GitLab's timestamps. */
  setJobStatus(pipeline: GlPipeline, name: string, status: JobStatus): void {
    const j = this.jobs.find((x) => x.pipelineId === pipeline.id && x.name === name && !x.retried);
    if (!j) throw new Error(`stand-in: pipeline ${pipeline.id} has no job ${name}`);
    j.status = status;
    if (['success', 'failed', 'canceled', 'skipped'].includes(status)) j.finishedAt = this.now();
    pipeline.updatedAt = this.now();
  }

  // ---- GlView ---------------------------------------------------------------------

  user(id: number): GlUser {
    const u = this.users.get(id);
    if (!u) throw new Error(`stand-in: no user ${id}`);
    return u;
  }

  project(id: number): GlProject {
    const p = this.projects.get(id);
    if (!p) throw new Error(`stand-in: no project ${id}`);
    return p;
  }

  mustProject(path: string): GlProject {
    const p = this.projectByIdOrPath(path);
    if (!p) throw new Error(`stand-in: no project ${path}`);
    return p;
  }

  jobsOf(pipelineId: number): GlJob[] {
    return this.jobs.filter((j) => j.pipelineId === pipelineId);
  }

  pipelines(): GlPipeline[] {
    return this.pipelineList;
  }

  diffOf(mr: GlMergeRequest): ReturnType<typeof mergeRequestDiff> {
    const bare = this.project(mr.projectId).bareDir;
    return bare ? mergeRequestDiff(bare, mr.targetBranch, mr.sha) : [];
  }

  changedFileCount(mr: GlMergeRequest): number {
    return this.diffOf(mr).length;
  }

  diffRefs(mr: GlMergeRequest): { base_sha: string | null; head_sha: string; start_sha: string | null } {
    const bare = this.project(mr.projectId).bareDir;
    const start = bare ? (readCommit(bare, `refs/heads/${mr.targetBranch}`)?.id ?? null) : null;
    const base = bare ? (mergeBase(bare, `refs/heads/${mr.targetBranch}`, mr.sha) ?? null) : null;
    return { base_sha: base, head_sha: mr.sha, start_sha: start };
  }

  branchesContaining(project: GlProject, sha: string): string[] {
    return project.bareDir ? branchesContaining(project.bareDir, sha) : [];
  }
}
