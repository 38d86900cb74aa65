// What the command runner knows about one project's run, and the small pure helpers that
// turn runs into the PR's plan-status outcomes and a command result.
import type { ProjectKey, ProjectOutcome } from '../../locks/pull-status.js';
import { planHasNoChanges } from '../../locks/pull-status.js';
import type { PlanRecord } from '../../locks/state-store.js';
import type { ParsedCommand } from '../comment-parser/index.js';
import type { JobStatus } from '../jobs/jobs.js';
import type { ProjectResultView } from '../pr/messages.js';
import type { StatusTarget } from '../pr/pr-statuses.js';
import type { ProjectSpec } from '../checkout/projects.js';

export interface ProjectRun {
  view: ProjectResultView;
  status: JobStatus;
  /** The project's dir is not in the checkout: as Atlantis, no plan status is kept for it. */
  dirMissing?: true;
}

export const target = (ctx: StatusTarget): StatusTarget => ({
  repo: ctx.repo,
  pull: ctx.pull,
  headSha: ctx.headSha,
  ...(ctx.headRef === undefined ? {} : { headRef: ctx.headRef }),
});

/** A comment naming a project (-p), dir (-d) or workspace (-w), as opposed to the whole PR. */
export const targeted = (c: ParsedCommand | undefined): boolean =>
  c !== undefined && (c.dir !== undefined || c.workspace !== undefined || c.project !== undefined);

export const keyOf = (p: ProjectSpec): ProjectKey => ({ dir: p.dir, workspace: p.workspace, project: p.name ?? '' });
export const planKey = (pl: PlanRecord): ProjectKey => ({ dir: pl.dir, workspace: pl.workspace, project: pl.project ?? '' });

/** Stand-in specs for plans whose project is not selected (only dir and workspace are used). */
export const projectsOf = (plans: PlanRecord[]): ProjectSpec[] =>
  plans.map((pl) => ({
    dir: pl.dir,
    workspace: pl.workspace,
    workflow: { name: '', plan: [], apply: [] },
    applyRequirements: [],
    planRequirements: [],
    importRequirements: [],
    executionOrderGroup: 0,
    dependsOn: [],
    autoplanEnabled: false,
    configured: false,
  }));

/** What each project's run means for the PR's plan status. */
export function outcomes(command: ProjectOutcome['command'], runs: ProjectRun[]): ProjectOutcome[] {
  return runs
    .filter((r) => !r.dirMissing)
    .map((r) => {
      const o = r.view.outcome;
      const out: ProjectOutcome = {
        dir: r.view.dir,
        workspace: r.view.workspace,
        project: r.view.projectName ?? '',
        command,
        ok: r.status === 'success',
      };
      if (command === 'plan' && o.type === 'success') out.noChanges = planHasNoChanges(o.output);
      return out;
    });
}

export function summarize(runs: ProjectRun[]): string {
  if (runs.some((r) => r.status === 'interrupted')) return 'interrupted';
  return runs.every((r) => r.status === 'success') ? 'success' : 'failure';
}
