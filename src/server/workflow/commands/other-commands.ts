// The commands besides plan and apply: cancel, unlock, and version,
// import and state rm, which run one workflow stage in each selected project (approve_policies:
// policy-checks.ts).
import { randomUUID } from 'node:crypto';
import { sameProject } from '../../locks/pull-status.js';
import type { ParsedCommand } from '../comment-parser/index.js';
import type { PullContext } from './context.js';
import { UNLOCKED_COMMENT } from '../pr/messages.js';
import { outcomes, summarize, targeted } from './project-runs.js';
import { type ProjectSpec, projectForPlan } from '../checkout/projects.js';
import type { RepoConfig } from '../repo-config/types.js';
import { buildPlanComment } from '../comment-parser/usage.js';
import { CANCEL_COMMENT } from './comment-replies.js';
import { readHostFacts, requirementRefusal } from './requirement-checks.js';
import type { ProjectJobs } from './project-job.js';

/**
 * `atlantis cancel`, as Atlantis: projects of this PR's running plan or apply that have not
 * started yet are cancelled; running ones finish. Always answered with Atlantis's comment.
 */
export async function cancel(j: ProjectJobs, ctx: PullContext): Promise<string> {
  j.scheduler.cancellations.cancel(ctx.repo, ctx.pull);
  await j.comment(ctx, CANCEL_COMMENT, 'cancel');
  return 'success';
}

export async function unlock(j: ProjectJobs, ctx: PullContext): Promise<string> {
  // As Atlantis: the PR's locks go with the plans of the locked projects (a plan without a
  // lock, as in repo_locks mode on_apply, stays).
  // The locks go first, atomically; the plans are this PR's own, read after: a plan of this
  // PR saved in between is discarded as if it had been saved before the unlock.
  const { locks } = await j.d.store.unlockAllForPull(ctx.repo, ctx.pull);
  const plans = await j.d.store.listPlans(ctx.repo, ctx.pull);
  await j.discardPlans(
    ctx,
    plans.filter((pl) => locks.some((l) => l.dir === pl.dir && l.workspace === pl.workspace)),
    [],
  );
  // As Atlantis: with --silence-no-projects, nothing to unlock means nothing to say.
  if (locks.length === 0 && j.d.config.silenceNoProjects) return 'success';
  await j.comment(ctx, UNLOCKED_COMMENT, 'unlock');
  return 'success';
}

export async function simple(j: ProjectJobs, pull: PullContext, c: ParsedCommand, cmd: 'version' | 'import' | 'state'): Promise<string> {
  // As Atlantis: an import reads approval and mergeability once, first, on a host that reads them so.
  const ctx: PullContext = cmd === 'import' ? { ...pull, hostFacts: await readHostFacts(j.d.host, pull, j.d.logger) } : pull;
  let projects: ProjectSpec[];
  let config: RepoConfig | undefined;
  if (cmd === 'version' && !targeted(c)) {
    // As Atlantis: `version` runs in the projects with a plan; with none it posts nothing.
    const settings = j.repoSettings(ctx, await j.checkout(ctx, 'default'));
    config = settings.config;
    projects = (await j.d.store.listPlans(ctx.repo, ctx.pull))
      .filter((pl) => pl.unverified === undefined)
      .map((pl) => projectForPlan(settings.config, pl.dir, pl.workspace, settings.defaults));
    if (projects.length === 0) return 'success';
  } else ({ projects, config } = await j.selection(ctx, c));
  // As Atlantis: an import that finds no project says nothing under --silence-no-projects.
  if (projects.length === 0 && cmd === 'import' && j.d.config.silenceNoProjects) return 'success';
  // As Atlantis: one project after another; only `version` follows parallel_plan.
  const parallel = cmd === 'version' && (config?.parallelPlan ?? j.d.config.parallelPlan);
  const runs = await j.scheduler.inOrder(cmd, ctx, projects, {
    parallel,
    abortOnFail: config?.abortOnExecutionOrderFail ?? false,
    run: (p) =>
      j.measured(cmd, ctx, p, () =>
        j.guarded(ctx, p, async () => {
          const refused =
            cmd === 'import' ? await requirementRefusal(j.requirementSources, ctx, 'import', p.importRequirements, p) : undefined;
          if (refused) return j.failure(p, refused);
          return j.job(ctx, p, cmd, c.extraArgs, randomUUID(), async (jobCtx) => {
            const init = j.d.projectRunner.isInitialised(jobCtx.projectDir) ? [] : p.workflow.plan.filter((s) => s.kind === 'init');
            const extra = cmd === 'version' ? { version: true } : cmd === 'import' ? { importArgs: c.args } : { stateRmArgs: c.args };
            const stage = cmd === 'import' ? p.workflow.import : cmd === 'state' ? p.workflow.stateRm : undefined;
            const r = await j.d.projectRunner.runSteps(stage ?? init, jobCtx, stage ? { ...extra, customStage: true } : extra);
            if (r.interrupted) return j.interrupted(p);
            if (!r.ok) return j.error(p, r.output);
            if (cmd !== 'version') await j.d.store.deletePlan(ctx.repo, ctx.pull, p.dir, p.workspace); // state changed: plan is stale
            // After import or state rm the plan is stale: the comment says how to plan again (without the args).
            const replan =
              cmd === 'version' ? {} : { replanCmd: buildPlanComment(j.d.config.executableName, p.dir, p.workspace, p.name, []) };
            const outcome = { type: 'success' as const, output: r.output, ...replan };
            return { status: 'success', view: { dir: p.dir, workspace: p.workspace, projectName: p.name, outcome } };
          });
        }),
      ),
  });
  await j.postResults(ctx, cmd, runs, c);
  // As Atlantis: a successful import or state rm marks the plan discarded.
  const ps = cmd === 'version' ? undefined : await j.d.store.getPullStatus(ctx.repo, ctx.pull);
  if (ps?.headSha === ctx.headSha) {
    // Read, then write: a status recorded in between for a newer head would be replaced by
    // this head's. Harmless: the records can then only say "plan again" (an apply on the newer
    // head refuses a status of another head, and automerge waits for every project applied).
    const done = outcomes(cmd as 'import' | 'state', runs).filter((o) => o.ok && ps.projects.some((p) => sameProject(p, o)));
    if (done.length > 0) await j.d.store.updatePullStatus(ctx.repo, ctx.pull, ctx.headSha, done);
  }
  return summarize(runs);
}
