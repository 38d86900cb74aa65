// When the projects of a PR's commands run: the pool that bounds how many run at once
// across all PRs (--parallel-pool-size), the mutex that keeps two commands of one PR off
// the same project, and Atlantis's execution order inside one plan or apply (groups,
// parallel or one by one, abort on failure, `atlantis cancel`).
import { KeyedMutex, Semaphore } from '../../../concurrency.js';
import { CancellationTracker, type Scheduled, runInExecutionOrder } from '../repo-config/execution-order.js';
import type { ProjectOutcome } from '../pr/messages.js';
import { planHasNoChanges } from '../pr/plan-output.js';
import { PullProjectStates } from '../repo-config/requirements.js';

export interface ProjectKey {
  repo: string;
  pull: number;
  dir: string;
  workspace: string;
}

/** What the scheduler needs of a project and of its result. */
type Project = Scheduled & { name?: string; dir: string; workspace: string };
type Run = { status: string; view: { outcome: ProjectOutcome } };

export class ProjectScheduler {
  private readonly pool: Semaphore;
  private readonly projectMutex = new KeyedMutex();
  /** PRs on which `atlantis cancel` was commented (cleared after each run and on close). */
  readonly cancellations = new CancellationTracker();
  /** Project states of each PR, for depends_on (in memory; forgotten when the PR closes). */
  readonly projectStates = new PullProjectStates();

  constructor(poolSize: number) {
    this.pool = new Semaphore(poolSize);
  }

  /** Serializes per project of this PR and bounds parallelism by the pool. */
  guarded<T>(k: ProjectKey, fn: () => Promise<T>): Promise<T> {
    return this.projectMutex.run(`${k.repo}#${k.pull}#${k.dir}#${k.workspace}`, () => this.pool.run(fn));
  }

  /**
   * Runs a plan's or apply's projects in Atlantis's execution order, each guarded; a project
   * cancelled before it started gets `cancelled(p)`. The cancel mark ends with the run and the
   * PR's project states are updated after each group, as in Atlantis.
   */
  async ordered<P extends Project, R extends Run>(
    cmd: 'plan' | 'apply',
    pr: { repo: string; pull: number; headSha: string },
    projects: P[],
    o: { parallel: boolean; abortOnFail: boolean; run: (p: P) => Promise<R>; cancelled: (p: P) => R },
  ): Promise<R[]> {
    const { repo, pull } = pr;
    try {
      return await runInExecutionOrder(projects, {
        parallel: o.parallel,
        abortOnFail: o.abortOnFail,
        isCancelled: () => this.cancellations.isCancelled(repo, pull),
        run: (p, gate) =>
          this.guarded({ repo, pull, dir: p.dir, workspace: p.workspace }, () => (gate() ? o.run(p) : Promise.resolve(o.cancelled(p)))),
        failed: (r) => r.status !== 'success',
        cancelled: o.cancelled,
        groupDone: (ps, runs) => {
          const states = this.projectStates.get(repo, pull, pr.headSha);
          ps.forEach((p, i) => {
            const out = runs[i]?.view.outcome;
            if (p.name === undefined || out === undefined) return;
            if (out.type !== 'success') states.set(p.name, 'errored');
            else if (cmd === 'apply') states.set(p.name, 'applied');
            else states.set(p.name, planHasNoChanges(out.output) ? 'planned_no_changes' : 'planned');
          });
        },
      });
    } finally {
      this.cancellations.clear(repo, pull);
    }
  }

  /**
   * Atlantis's order for `version`, `import` and `state rm`: groups in order, parallel only
   * when asked; `run` guards each project itself; no cancel. An import or state rm leaves the
   * project's plan discarded (errored when it failed), as Atlantis records it.
   */
  inOrder<P extends Project, R extends Run>(
    cmd: 'version' | 'import' | 'state',
    pr: { repo: string; pull: number; headSha: string },
    projects: P[],
    o: { parallel: boolean; abortOnFail: boolean; run: (p: P) => Promise<R> },
  ): Promise<R[]> {
    return runInExecutionOrder<P, R>(projects, {
      groupDone: (ps, runs) => {
        if (cmd === 'version') return;
        const states = this.projectStates.get(pr.repo, pr.pull, pr.headSha);
        ps.forEach((p, i) => {
          if (p.name !== undefined && runs[i]) states.set(p.name, runs[i].status === 'success' ? 'discarded' : 'errored');
        });
      },
      parallel: o.parallel,
      abortOnFail: o.abortOnFail,
      isCancelled: () => false,
      run: (p) => o.run(p),
      failed: (r) => r.status !== 'success',
      cancelled: () => {
        throw new Error('never cancelled');
      },
    });
  }

  /** A closed PR: its cancel mark and project states go with it. */
  forget(repo: string, pull: number): void {
    this.cancellations.clear(repo, pull);
    this.projectStates.forget(repo, pull);
  }
}
