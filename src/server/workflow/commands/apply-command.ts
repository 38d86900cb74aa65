// The apply command: the PR's saved plans (or the -p/-d/-w ones), checked against the
// recorded plan status, requirements, dependencies and locks, then applied as jobs.
import { randomUUID } from 'node:crypto';
import { rmSync } from 'node:fs';
import { genericApplyProblem, noPlanFoundError } from '../../locks/pull-status.js';
import { fileSha256, planFileProblem } from '../../locks/plan-file.js';
import type { PlanRecord } from '../../locks/state-store.js';
import type { ParsedCommand } from '../comment-parser/index.js';
import type { PullContext } from './context.js';
import { lockedByMessage } from '../pr/messages.js';
import { commandLocks } from '../repo-config/lock-policy.js';
import { type ProjectRun, keyOf, outcomes, planKey, summarize, target, targeted } from './project-runs.js';
import { type ProjectSpec, projectForPlan, selectProjects } from '../checkout/projects.js';
import { CANCELLED_PROJECT_ERROR } from '../repo-config/execution-order.js';
import { readHostFacts, requirementRefusal } from './requirement-checks.js';
import { checkApplyLock } from './apply-lock.js';
import { dependencyFailure } from '../repo-config/requirements.js';
import type { ProjectJobs } from './project-job.js';
import { policiesPassedRefusal } from './policy-checks.js';

/** Atlantis's reply to `apply` without -p/-d/-w under --disable-apply-all, word for word. */
export const APPLY_ALL_DISABLED_COMMENT =
  '**Error:** Running `atlantis apply` without flags is disabled.' +
  ' You must specify which project to apply via the `-d <dir>`, `-w <workspace>` or `-p <project name>` flags.';

export async function apply(j: ProjectJobs, pull: PullContext, c: ParsedCommand): Promise<string> {
  let ctx = pull;
  // As Atlantis: the global apply lock first, then the apply-all rule.
  const gate = await checkApplyLock(j.d.store, j.d.config.disableGlobalApplyLock);
  if (gate.kind === 'refuse') {
    j.d.logger.info(gate.log, { repo: ctx.repo, pull: ctx.pull, ...(gate.error ? { error: gate.error } : {}) });
    if (gate.failStatus) await j.statuses.combined(target(ctx), 'apply', 'failure');
    await j.comment(ctx, gate.comment, 'apply');
    return 'refused';
  }
  if (j.d.config.disableApplyAll && !targeted(c)) {
    await j.comment(ctx, APPLY_ALL_DISABLED_COMMENT, 'apply');
    return 'refused';
  }
  // As Atlantis: on a host that reads them so, approval and mergeability once, before any status of the apply.
  ctx = { ...ctx, hostFacts: await readHostFacts(j.d.host, ctx, j.d.logger) };
  const checkout = await j.checkout(ctx, 'default');
  const { config, defaults } = j.repoSettings(ctx, checkout);
  // Both asked at once (SQLite answers both in the same tick, as one snapshot): the plans and
  // the status they are checked against, never a status recorded after the plans were read.
  const [plans, status] = await Promise.all([
    j.d.store.listPlans(ctx.repo, ctx.pull),
    targeted(c) ? undefined : j.d.store.getPullStatus(ctx.repo, ctx.pull),
  ]);
  await refuseUnverifiedPlans(j, ctx, plans);
  let work: Array<ProjectSpec & { plan?: PlanRecord }>;
  if (!targeted(c)) {
    // As Atlantis: the PR's plans, checked against its recorded plan status first.
    const problem = genericApplyProblem(status, plans.map(planKey), ctx.headSha);
    if (problem) throw new Error(problem);
    work = plans.map((plan) => j.withLockMode(ctx, config, { ...projectForPlan(config, plan.dir, plan.workspace, defaults), plan }));
  } else {
    work = selectProjects(config, checkout, [], c, defaults).map((p) => {
      const plan = plans.find((pl) => pl.dir === p.dir && pl.workspace === p.workspace);
      return j.withLockMode(ctx, config, plan ? { ...p, plan } : { ...p });
    });
  }
  const t = target(ctx);
  const cfg = j.d.config;
  if (work.length === 0) {
    // As Atlantis: with --silence-no-projects nothing is said; the apply status is put back
    // (or 0/0 success for a whole-PR apply) unless statuses are silenced too.
    if (!cfg.silenceNoProjects) await j.postResults(ctx, 'apply', [], c);
    if (!cfg.silenceNoProjects || !cfg.silenceVcsStatusNoProjects) await j.statuses.afterApply(t, []);
    return 'success';
  }
  if (!cfg.silenceVcsStatusNoProjects) void j.statuses.combined(t, 'apply', 'pending');
  const jobIds = new Map(work.map((w) => [w, randomUUID()] as const));
  const ran = new Map<ProjectRun, ProjectSpec>();
  const runs = await j.scheduler.ordered('apply', ctx, work, {
    parallel: config?.parallelApply ?? j.d.config.parallelApply,
    abortOnFail: config?.abortOnExecutionOrderFail ?? false,
    run: async (w) => {
      const r = await j.measured('apply', ctx, w, () => applyProject(j, ctx, w, w.plan, jobIds.get(w) ?? randomUUID()));
      ran.set(r, w);
      return r;
    },
    cancelled: (w) => j.error(w, CANCELLED_PROJECT_ERROR),
  });
  await j.postResults(ctx, 'apply', runs, c);
  // As Atlantis: a project's apply success is posted once the command is done.
  for (const r of runs) {
    const w = ran.get(r);
    if (w && r.status === 'success') await j.statuses.project(t, 'apply', keyOf(w), 'success', jobIds.get(w) ?? '');
  }
  await j.statuses.afterApply(t, outcomes('apply', runs));
  // As Atlantis: the API never automerges.
  if (!ctx.api)
    await j.automerger.afterApply(
      ctx,
      config,
      plans,
      c,
      runs.every((r) => r.status === 'success'),
    );
  return summarize(runs);
}

async function applyProject(
  j: ProjectJobs,
  ctx: PullContext,
  p: ProjectSpec,
  plan: PlanRecord | undefined,
  jobId: string,
): Promise<ProjectRun> {
  const t = target(ctx);
  void j.statuses.project(t, 'apply', keyOf(p), 'pending', jobId);
  const run = await applyProjectRun(j, ctx, p, plan, jobId);
  if (run.status !== 'success') await j.statuses.project(t, 'apply', keyOf(p), 'failure', jobId);
  return run;
}

async function applyProjectRun(
  j: ProjectJobs,
  ctx: PullContext,
  p: ProjectSpec,
  plan: PlanRecord | undefined,
  jobId: string,
): Promise<ProjectRun> {
  if (!plan) return j.error(p, noPlanFoundError(p.dir, p.workspace));
  const refused =
    (await requirementRefusal(j.requirementSources, ctx, 'apply', p.applyRequirements, p)) ??
    // policies_passed comes after the repo's requirements, as Atlantis appends it.
    (await policiesPassedRefusal(j, ctx, p)) ??
    dependencyFailure(p.dependsOn, j.scheduler.projectStates.get(ctx.repo, ctx.pull, ctx.headSha));
  if (refused) return j.failure(p, refused);
  if (plan.headSha !== ctx.headSha) {
    return j.failure(
      p,
      `the pull request was updated after this plan was made; comment \`${j.d.config.executableName} plan\` to plan again`,
    );
  }
  const key = { repo: ctx.repo, dir: p.dir, workspace: p.workspace };
  if (commandLocks(j.lockMode(p), 'apply')) {
    // on_apply: the lock is taken here; on_plan: the PR must still hold it (or take it back
    // when free). Either way it is held until the PR closes (lock-policy.ts).
    const lock = await j.d.store.tryLock(key, { pull: ctx.pull, user: ctx.user, project: p.name });
    if (!lock.acquired)
      return j.failure(p, lockedByMessage(lock.holder.pull, j.d.config.executableName, j.d.host.pullLink?.bind(j.d.host)));
  }
  return j.job(ctx, p, 'apply', [], jobId, async (jobCtx) => {
    // A shared store brings the file back when this replica lacks it; the hash is checked after.
    const tampered =
      (await j.d.store.restorePlanFile(plan)) ??
      planFileProblem(plan, await fileSha256(plan.planPath).catch(() => undefined), j.d.config.executableName);
    if (tampered) {
      // Never apply a plan other than the one shown on the PR; it cannot be used again.
      await j.d.store.deletePlan(ctx.repo, ctx.pull, p.dir, p.workspace);
      j.d.logger.warn('Refused apply: plan file does not match its recorded hash', {
        repo: ctx.repo,
        pull: ctx.pull,
        dir: p.dir,
        workspace: p.workspace,
      });
      return j.failure(p, tampered);
    }
    // A working copy re-cloned after a restart has no .terraform yet.
    const steps = j.d.projectRunner.isInitialised(jobCtx.projectDir)
      ? p.workflow.apply
      : [...p.workflow.plan.filter((s) => s.kind === 'init'), ...p.workflow.apply];
    const r = await j.d.projectRunner.runSteps(steps, { ...jobCtx, planFile: plan.planPath });
    await notifyApply(j, ctx, p, r.ok && !r.interrupted);
    if (r.interrupted) {
      // The saved plan is stale after a partial apply; the lock stays so nobody else
      // plans on top of a half-applied state.
      await j.d.store.deletePlan(ctx.repo, ctx.pull, p.dir, p.workspace);
      return j.interrupted(p);
    }
    if (!r.ok) return j.error(p, r.output);
    // As Atlantis: the applied plan is used up, but the lock stays until the PR is merged
    // or closed (or unlocked), so no other PR plans on top of unmerged applied changes.
    await j.d.store.deletePlan(ctx.repo, ctx.pull, p.dir, p.workspace);
    rmSync(plan.planPath, { force: true });
    return {
      status: 'success',
      view: { dir: p.dir, workspace: p.workspace, projectName: p.name, outcome: { type: 'success', output: r.output } },
    };
  });
}

/**
 * A shared store's plan records that failed their check against the shared state key: the
 * whole apply is refused before anything runs (someone changed this PR's plans in Redis), and
 * those records are dropped so the PR can plan again.
 */
async function refuseUnverifiedPlans(j: ProjectJobs, ctx: PullContext, plans: PlanRecord[]): Promise<void> {
  const bad = plans.filter((p) => p.unverified !== undefined);
  if (bad.length === 0) return;
  for (const p of bad) {
    j.d.logger.warn('Refused apply: a saved plan in the shared store failed its check against the shared state key', {
      repo: ctx.repo,
      pull: ctx.pull,
      dir: p.dir,
      workspace: p.workspace,
      problem: p.unverified,
    });
    await j.d.store.deletePlan(ctx.repo, ctx.pull, p.dir, p.workspace);
  }
  const which = bad.map((p) => `dir ${p.dir} workspace ${p.workspace}: ${p.unverified}`).join('\n');
  throw new Error(
    `the saved plans of this pull request failed their check against the shared state key, so nothing was applied:\n${which}\n` +
      `Those records were dropped; comment \`${j.d.config.executableName} plan\` to plan again.`,
  );
}

/** The --config file's webhooks, as Atlantis sends them once a project's apply steps ran. */
async function notifyApply(j: ProjectJobs, ctx: PullContext, p: ProjectSpec, success: boolean): Promise<void> {
  const hooks = j.d.applyWebhooks;
  if (!hooks?.enabled) return;
  await hooks.send({
    repo: ctx.repo,
    hostname: j.d.host.hostname,
    hostType: j.d.host.typeName,
    pullUrl: j.d.host.pullUrl(ctx.repo, ctx.pull),
    vcsUser: j.d.host.user,
    pull: ctx.pull,
    headSha: ctx.headSha,
    headRef: ctx.headRef,
    baseRef: ctx.baseRef,
    author: ctx.author ?? '',
    user: ctx.user,
    workspace: p.workspace,
    dir: p.dir,
    projectName: p.name ?? '',
    success,
  });
}
