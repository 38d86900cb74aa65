// A commit status on GitLab, as Atlantis v0.47's GitLab client sets one: the commit's last
// pipeline is looked up first, so the status joins it (`pipeline_id`); without one after a
// couple of looks (2 s apart; with --gitlab-status-retry-enabled five, 2 to 5 s apart), the
// status names the merge request's source branch (`ref`), and GitLab makes a pipeline for it
// that later statuses join. GitLab's states: `running` for pending, `failed` for failure and
// error. A 409 (another update of the pipeline in progress) is tried again, up to ten times
// in all; a `running` GitLab refuses because the job is already running is taken as done.
import type { Logger } from '../../../log.js';
import type { CommitStatus } from '../host.js';
import { GitLabApiError, type GitLabClient } from './client.js';

const STATE: Record<CommitStatus['state'], string> = { pending: 'running', success: 'success', failure: 'failed', error: 'failed' };

/** GitLab's answer when a `running` status is set on a job that is already running. */
const ALREADY_RUNNING = 'Cannot transition status via :run from :running';

export interface StatusWriterOptions {
  client: GitLabClient;
  logger: Logger;
  statusRetryEnabled: boolean;
  sleep: (ms: number) => Promise<void>;
  random?: () => number;
}

/** The waits between looks for the commit's pipeline (before look 2, 3, ...): Atlantis's backoffs. */
export function pipelineLookWaits(retryEnabled: boolean, random: () => number = Math.random): number[] {
  if (!retryEnabled) return [2000];
  // jpillora/backoff with Min 2 s, Max 5 s, factor 2 and jitter: a uniform pick between 2 s and the doubled step.
  return [0, 1, 2, 3].map((n) => {
    const top = Math.min(5000, 2000 * 2 ** n);
    return Math.round(2000 + random() * (top - 2000));
  });
}

/** The request body in the field order of Atlantis's library (state, ref, context, target_url, description, pipeline_id). */
export function statusBody(s: CommitStatus, where: { pipelineId: number } | { ref: string } | undefined, redact: (t: string) => string) {
  const body: Record<string, unknown> = { state: STATE[s.state] };
  if (where && 'ref' in where) body.ref = where.ref;
  body.context = s.context;
  body.target_url = s.targetUrl ?? '';
  body.description = redact(s.description ?? '');
  if (where && 'pipelineId' in where) body.pipeline_id = where.pipelineId;
  return body;
}

export async function setGitlabStatus(
  o: StatusWriterOptions,
  repo: string,
  sha: string,
  status: CommitStatus,
  headRef: string | undefined,
): Promise<void> {
  const waits = pipelineLookWaits(o.statusRetryEnabled, o.random);
  let where: { pipelineId: number } | { ref: string } | undefined;
  for (let look = 0; ; look++) {
    const commit = await o.client.getCommit(repo, sha);
    if (commit.last_pipeline) {
      where = { pipelineId: commit.last_pipeline.id };
      break;
    }
    const wait = waits[look];
    if (wait === undefined) {
      // No pipeline: name the branch (GitLab then makes one); without a branch, GitLab picks one holding the commit.
      if (headRef !== undefined) where = { ref: headRef };
      break;
    }
    await o.sleep(wait);
  }
  const body = statusBody(status, where, (t) => o.client.redact(t));
  for (let attempt = 1; ; attempt++) {
    try {
      await o.client.setCommitStatus(repo, sha, body);
      return;
    } catch (e) {
      if (!(e instanceof GitLabApiError)) throw e;
      if (body.state === 'running' && e.gitlabMessage.includes(ALREADY_RUNNING)) {
        o.logger.debug('GitLab commit status already running', { repo, context: status.context });
        return;
      }
      if (e.status !== 409 || attempt >= 10) throw e;
      const wait = Math.round((o.random ?? Math.random)() * 1000);
      o.logger.warn('GitLab returned 409 Conflict when updating a commit status: trying again', { repo, context: status.context, attempt });
      await o.sleep(wait);
    }
  }
}
