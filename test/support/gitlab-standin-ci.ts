// The GitLab stand-in's commit and commit-status routes: GET /repository/commits/:sha (with its
// `last_pipeline`), GET /repository/commits/:sha/statuses, and POST /statuses/:sha, which in
// GitLab adds a job to a pipeline of the commit (the one named by `pipeline_id`, else the
// newest for the commit and ref, else a new `external` pipeline) and moves it through GitLab's
// job state machine: a second `running` on a running job is refused with 400 "Cannot
// transition status via :run from :running", which Atlantis's client knows to ignore.
import type { GlStore } from './gitlab-standin-store.js';
import { commitJson, jobJson } from './gitlab-standin-json.js';
import { readCommit } from './gitlab-standin-git.js';
import { type GlJob, type GlPipeline, type GlProject, type GlUser, type JobStatus, statusTransition } from './gitlab-standin-model.js';
import { type Answer, badRequest, notFound, paginate } from './gitlab-standin-mrs.js';

const STATES = ['pending', 'running', 'success', 'failed', 'canceled', 'skipped'];

export interface CiRoute {
  store: GlStore;
  me: GlUser;
  project: GlProject;
  method: string;
  /** Path segments after the project id, decoded. */
  rest: string[];
  params: Record<string, unknown>;
  query: Record<string, string>;
  pageUrl: string;
}

function newestPipeline(store: GlStore, project: GlProject, sha: string, o: { ref?: string; id?: number } = {}): GlPipeline | undefined {
  return store
    .pipelines()
    .filter(
      (p) =>
        p.projectId === project.id && p.sha === sha && (o.ref === undefined || p.ref === o.ref) && (o.id === undefined || p.id === o.id),
    )
    .sort((a, b) => b.id - a.id)[0];
}

const str = (v: unknown): string | undefined => (typeof v === 'string' && v !== '' ? v : undefined);

function setStatus(r: CiRoute, sha: string): Answer {
  const s = r.store;
  const p = r.params;
  if (p.state === undefined || p.state === null || p.state === '') return [400, { error: 'state is missing' }];
  if (typeof p.state !== 'string' || !STATES.includes(p.state)) return [400, { error: 'state does not have a valid value' }];
  const commit = r.project.bareDir ? readCommit(r.project.bareDir, sha) : undefined;
  if (!commit) return notFound('Commit Not Found');
  const pipelineId = p.pipeline_id === undefined || p.pipeline_id === null ? undefined : Number(p.pipeline_id);
  if (pipelineId !== undefined && !Number.isInteger(pipelineId)) return [400, { error: 'pipeline_id is invalid' }];
  const refParam = str(p.ref);
  const matching = newestPipeline(s, r.project, commit.id, {
    ...(refParam ? { ref: refParam } : {}),
    ...(pipelineId !== undefined ? { id: pipelineId } : {}),
  });
  const ref = refParam ?? matching?.ref ?? s.branchesContaining(r.project, commit.id)[0];
  if (!ref) return notFound('References for commit Not Found');
  if (pipelineId !== undefined && !matching) return notFound('Pipeline for pipeline_id, sha and ref Not Found');
  // Only the three optional attributes that are present (not blank) are written (attributes_for_keys).
  const targetUrl = str(p.target_url);
  const description = str(p.description);
  if (targetUrl !== undefined && !/^https?:\/\/[^\s/]+/.test(targetUrl))
    return badRequest({ target_url: ['is blocked: Only allowed schemes are http, https'] });
  if (targetUrl !== undefined && targetUrl.length > 255) return badRequest({ target_url: ['is too long (maximum is 255 characters)'] });
  const pipeline = matching ?? s.createPipeline(r.project, commit.id, ref, 'external');
  const name = str(p.name) ?? str(p.context) ?? 'default';
  if (s.jobsOf(pipeline.id).some((j) => j.name === name && j.stage !== 'external' && !j.retried))
    return badRequest({ name: ['has already been taken'] });
  let job: GlJob | undefined = s
    .jobsOf(pipeline.id)
    .find(
      (j) =>
        j.stage === 'external' &&
        !j.retried &&
        j.name === name &&
        j.ref === ref &&
        j.authorId === r.me.id &&
        (j.status === 'running' || j.status === 'pending'),
    );
  const next = statusTransition(job ? job.status : null, p.state);
  if (typeof next !== 'string') return badRequest(next.error);
  if (!job) job = s.createJob(pipeline, name, 'external', r.me.id, { status: 'created' });
  job.ref = ref;
  if (targetUrl !== undefined) job.targetUrl = targetUrl;
  if (description !== undefined) job.description = description;
  if (typeof p.coverage === 'number') job.coverage = p.coverage;
  moveTo(s, job, pipeline, next);
  return [201, jobJson(s, job)];
}

function moveTo(s: GlStore, job: GlJob, pipeline: GlPipeline, status: JobStatus): void {
  const now = s.now();
  if (status !== 'pending' && job.startedAt === null) job.startedAt = now;
  if (['success', 'failed', 'canceled', 'skipped'].includes(status)) job.finishedAt = now;
  job.status = status;
  pipeline.updatedAt = now;
}

/** Answers /projects/:id/repository/commits/:sha[/statuses] and /projects/:id/statuses/:sha; undefined for another route. */
export function answerCiRoute(r: CiRoute): Answer | undefined {
  const s = r.store;
  const [a, b, sha, d] = r.rest;
  if (a === 'statuses' && b !== undefined && sha === undefined) return r.method === 'POST' ? setStatus(r, b) : undefined;
  if (a !== 'repository' || b !== 'commits' || sha === undefined || r.method !== 'GET') return undefined;
  const commit = r.project.bareDir ? readCommit(r.project.bareDir, sha) : undefined;
  if (d === undefined && r.rest.length === 3) {
    if (!commit) return notFound('Commit Not Found');
    return [200, commitJson(s, r.project, commit, newestPipeline(s, r.project, commit.id))];
  }
  if (d !== 'statuses' || r.rest.length !== 4) return undefined;
  if (!commit) return notFound('Commit Not Found');
  const pipelines = new Set(
    s
      .pipelines()
      .filter((p) => p.projectId === r.project.id && p.sha === commit.id)
      .map((p) => p.id),
  );
  const all = r.query.all === 'true';
  let jobs = s.jobs.filter((j) => pipelines.has(j.pipelineId) && (all || !j.retried));
  if (r.query.ref) jobs = jobs.filter((j) => j.ref === r.query.ref);
  if (r.query.name) jobs = jobs.filter((j) => j.name === r.query.name);
  if (r.query.stage) jobs = jobs.filter((j) => j.stage === r.query.stage);
  if (r.query.pipeline_id) jobs = jobs.filter((j) => j.pipelineId === Number(r.query.pipeline_id));
  const key = r.query.order_by === 'pipeline_id' ? (j: GlJob) => j.pipelineId * 1e6 + j.id : (j: GlJob) => j.id;
  const dir = r.query.sort === 'desc' ? -1 : 1;
  jobs.sort((x, y) => dir * (key(x) - key(y)));
  const [items, headers] = paginate(jobs, r.query, r.pageUrl);
  return [200, items.map((j) => jobJson(s, j)), headers];
}
