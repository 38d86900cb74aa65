// The commit statuses of a pull request, as Atlantis sets them: the PR-wide `atlantis/plan`
// and `atlantis/apply` (derived from the PR's recorded plan status, pull-status.ts), and one
// status per project (`atlantis/plan: dir1/default`) linking to the project's job page.
// I/O only: what to post is decided by the pure functions of locks/pull-status.ts.
import type { Logger } from '../../../log.js';
import {
  type CombinedState,
  type ProjectKey,
  type ProjectCounts,
  type ProjectOutcome,
  type PullStatus,
  applyCombinedStatus,
  combinedDescription,
  countsDescription,
  noProjectStatuses,
  planCombinedStatus,
  projectStatusContext,
  truncateContext,
} from '../../locks/pull-status.js';
import type { StateStore } from '../../locks/state-store.js';
import type { ServerMetrics } from '../../metrics.js';
import type { VcsHost } from '../../vcs/host.js';

export interface StatusTarget {
  repo: string;
  pull: number;
  headSha: string;
  /** The pull request's head branch (a host may name it with the status: VcsHost.setStatus's `on`). */
  headRef?: string;
}

export interface PrStatusDeps {
  host: VcsHost;
  store: StateStore;
  metrics: ServerMetrics;
  logger: Logger;
  atlantisUrl: string;
  /** --vcs-status-name: `<name>/plan`, `<name>/plan: dir/ws`; default atlantis. */
  statusName?: string;
}

export class PrStatuses {
  private readonly chains = new Map<string, Promise<void>>();

  constructor(private readonly d: PrStatusDeps) {}

  /** A job's page, where a per-project status links (as Atlantis links its job URL). */
  jobUrl(jobId: string): string {
    return `${this.d.atlantisUrl}/jobs/${jobId}`;
  }

  /**
   * Posts one status. Statuses of one commit go through a chain, so a "pending" posted
   * without waiting still reaches GitHub before the final state, which callers await.
   * A failure is logged and counted, never thrown: statuses must not stop terraform.
   * PR-wide statuses have an empty target URL, as Atlantis sends them.
   */
  post(t: StatusTarget, context: string, state: CombinedState, description: string, targetUrl = ''): Promise<void> {
    const key = `${t.repo}@${t.headSha}`;
    const next = (this.chains.get(key) ?? Promise.resolve()).then(async () => {
      try {
        const on = t.headRef === undefined ? undefined : { pull: t.pull, headRef: t.headRef };
        await this.d.host.setStatus(t.repo, t.headSha, { state, context, description, targetUrl }, on);
      } catch (e) {
        this.d.metrics.githubRequestFailures.inc({ operation: 'set_status' });
        this.d.logger.warn('Could not set commit status', { repo: t.repo, pull: t.pull, context, error: (e as Error).message });
      }
    });
    this.chains.set(key, next);
    void next.then(() => {
      if (this.chains.get(key) === next) this.chains.delete(key);
    });
    return next;
  }

  /** A PR-wide status's context: `atlantis/plan` (--vcs-status-name's word first). */
  context(cmd: 'plan' | 'apply' | 'policy_check'): string {
    return truncateContext(`${this.d.statusName ?? 'atlantis'}/${cmd}`);
  }

  /** `atlantis/plan`, `atlantis/apply` or `atlantis/policy_check` without counts: "Plan in progress...", "Apply failed.". */
  combined(t: StatusTarget, cmd: 'plan' | 'apply' | 'policy_check', state: CombinedState): Promise<void> {
    return this.post(t, this.context(cmd), state, combinedDescription(cmd, state));
  }

  /** A PR-wide status with counts ("1/1 projects had policies checked successfully."). */
  combinedCount(t: StatusTarget, cmd: 'plan' | 'apply' | 'policy_check', state: CombinedState, counts: ProjectCounts): Promise<void> {
    return this.post(t, this.context(cmd), state, countsDescription(cmd, state, counts));
  }

  /** A project's own status; `description` defaults to Atlantis's words for the state. */
  project(t: StatusTarget, cmd: 'plan' | 'apply', p: ProjectKey, state: CombinedState, jobId: string, description?: string): Promise<void> {
    return this.post(
      t,
      projectStatusContext(cmd, p, this.d.statusName),
      state,
      description ?? combinedDescription(cmd, state),
      this.jobUrl(jobId),
    );
  }

  /**
   * After a plan: records the results and sets `atlantis/plan` and `atlantis/apply` from the
   * whole PR (Atlantis leaves `atlantis/apply` alone while plans wait to be applied).
   * `replace`: the plan found no projects, so the PR's earlier records go.
   */
  async afterPlan(t: StatusTarget, outcomes: ProjectOutcome[], opts: { replace?: boolean } = {}): Promise<PullStatus> {
    const ps = await this.d.store.updatePullStatus(t.repo, t.pull, t.headSha, outcomes, opts);
    const plan = planCombinedStatus(ps);
    await this.post(t, this.context('plan'), plan.state, plan.description);
    const apply = applyCombinedStatus(ps, 'plan');
    if (apply) await this.post(t, this.context('apply'), apply.state, apply.description);
    return ps;
  }

  /** `atlantis/plan` as the PR's records say (0/0 success without any), for a command that ran nothing. */
  async resetPlan(t: StatusTarget): Promise<void> {
    const ps = await this.d.store.getPullStatus(t.repo, t.pull);
    const plan = planCombinedStatus(ps ?? { headSha: t.headSha, projects: [] });
    await this.post(t, this.context('plan'), plan.state, plan.description);
  }

  /** After an apply: records the results and sets `atlantis/apply` from the whole PR. */
  async afterApply(t: StatusTarget, outcomes: ProjectOutcome[]): Promise<void> {
    const ps = await (outcomes.length > 0
      ? this.d.store.updatePullStatus(t.repo, t.pull, t.headSha, outcomes)
      : this.d.store.getPullStatus(t.repo, t.pull));
    const apply = applyCombinedStatus(ps ?? { headSha: t.headSha, projects: [] }, 'apply');
    if (apply) await this.post(t, this.context('apply'), apply.state, apply.description);
  }

  /**
   * A PR whose plan found no projects: 0/0 successes, so branch protection can pass. In
   * Atlantis's order: plan, policy_check, apply after an autoplan; plan, apply, then
   * policy_check after a comment.
   */
  async noProjects(t: StatusTarget, autoplan: boolean): Promise<void> {
    const all = noProjectStatuses();
    const ordered = autoplan
      ? all
      : [...all.filter((s) => s.context !== 'policy_check'), ...all.filter((s) => s.context === 'policy_check')];
    for (const s of ordered) await this.post(t, this.context(s.context), s.status.state, s.status.description);
  }
}
