// The plan command (autoplan and `atlantis plan`): which projects, their locks and plans,
// the per-project and PR-wide plan statuses, and the result comment.
import { randomUUID } from 'node:crypto';
import { rmSync } from 'node:fs';
import { planDiffSummary } from '../../locks/pull-status.js';
import { fileSha256 } from '../../locks/plan-file.js';
import { lockId, lockPath } from '../../locks/lock-id.js';
import type { ParsedCommand } from '../comment-parser/index.js';
import type { PullContext } from './context.js';
import { lockedByMessage } from '../pr/messages.js';
import { formatPlanOutput } from '../pr/plan-output.js';
import { commandLocks } from '../repo-config/lock-policy.js';
import { type ProjectRun, keyOf, outcomes, summarize, target, targeted } from './project-runs.js';
import type { ProjectSpec } from '../checkout/projects.js';
import { DirNotExistError } from '../checkout/checkout-paths.js';
import { mergeAgainPerWorkspace } from '../checkout/merge-again.js';
import { buildApplyComment, buildPlanComment } from '../comment-parser/usage.js';
import { CANCELLED_PROJECT_ERROR } from '../repo-config/execution-order.js';
import { readHostFacts, requirementRefusal } from './requirement-checks.js';
import type { ProjectJobs } from './project-job.js';
import { runPolicyChecks } from './policy-checks.js';

/** The project's error when the fencing check fails before the plan is saved. */
export const leaseLostError = (exe: string): string =>
  `this server lost its hold on the project while terraform ran (another server may have run terraform in it since), so the plan may be stale and was not saved; comment \`${exe} plan\` to plan again`;

export async function plan(j: ProjectJobs, pull: PullContext, c: ParsedCommand | undefined, autoplan: boolean): Promise<string> {
  // As Atlantis: on a host that reads them so, approval and mergeability once, before anything else.
  const ctx: PullContext = { ...pull, hostFacts: await readHostFacts(j.d.host, pull, j.d.logger) };
  const selected = j.selection(ctx, c);
  // As Atlantis: a comment's plan withdraws the approvals (--discard-approval-on-plan), once the projects are known.
  const discard = j.d.host.discardApprovals?.bind(j.d.host);
  if (!autoplan && !ctx.api && j.d.config.discardApprovalOnPlan && discard) {
    await selected.catch(() => undefined);
    await discard(ctx.repo, ctx.pull).catch((e: unknown) =>
      j.d.logger.error('Failed to remove approvals', { repo: ctx.repo, pull: ctx.pull, error: (e as Error).message }),
    );
  }
  const { projects, config } = await selected;
  const t = target(ctx);
  const generic = autoplan || !targeted(c);
  const cfg = j.d.config;
  if (projects.length === 0 && generic) {
    // As Atlantis: the PR's older plans and their locks go, and the 0/0 successes are set
    // (branch protection may require them) unless silenced; an autoplan says nothing more,
    // nor does a comment with --silence-no-projects.
    await j.discardPlans(ctx, await j.d.store.listPlans(ctx.repo, ctx.pull));
    await j.d.store.updatePullStatus(ctx.repo, ctx.pull, ctx.headSha, [], { replace: true });
    if (!autoplan && !cfg.silenceNoProjects) await j.postResults(ctx, 'plan', [], c);
    const silenced = autoplan
      ? cfg.silenceVcsStatusNoPlans || cfg.silenceVcsStatusNoProjects
      : cfg.silenceNoProjects && cfg.silenceVcsStatusNoProjects;
    if (!silenced) await j.statuses.noProjects(t, autoplan || cfg.silenceNoProjects);
    return 'success';
  }
  if (projects.length === 0) {
    // A -d/-p naming none of atlantis.yaml's projects under --silence-no-projects: another
    // server's; as Atlantis, no comment, and the plan status is put back as it was.
    if (!cfg.silenceVcsStatusNoProjects) await j.statuses.resetPlan(t);
    return 'success';
  }
  if (!cfg.silenceVcsStatusNoProjects) void j.statuses.combined(t, 'plan', 'pending');
  if (generic) {
    // A plan of the whole PR replaces all its plans (as Atlantis, on every autoplan and plain
    // `plan`): older ones go, and so do the locks of the projects about to be planned.
    await j.discardPlans(ctx, await j.d.store.listPlans(ctx.repo, ctx.pull), projects);
  }
  const merged = await mergeAgainPerWorkspace(
    j.d.copies,
    j.checkoutMutex,
    ctx,
    projects.map((p) => p.workspace),
  );
  const runs = await j.scheduler.ordered('plan', ctx, projects, {
    parallel: config?.parallelPlan ?? j.d.config.parallelPlan,
    abortOnFail: config?.abortOnExecutionOrderFail ?? false,
    run: (p) => j.measured('plan', ctx, p, () => planProject(j, ctx, p, c, merged.get(p.workspace))),
    cancelled: (p) => j.error(p, CANCELLED_PROJECT_ERROR),
  });
  // As Atlantis: the API never automerges.
  if (!ctx.api) await j.automerger.afterPlan(ctx, config, projects, !runs.every((r) => r.status === 'success'));
  await j.postResults(ctx, 'plan', runs, c);
  await j.statuses.afterPlan(t, outcomes('plan', runs));
  // As Atlantis: a plan that went through runs the policy checks (policy-checks.ts); the API's runs none.
  if (!ctx.api && runs.every((r) => r.status === 'success')) await runPolicyChecks(j, ctx, projects, c, autoplan);
  return summarize(runs);
}

async function planProject(
  j: ProjectJobs,
  ctx: PullContext,
  p: ProjectSpec,
  c: ParsedCommand | undefined,
  merged?: boolean | Error,
): Promise<ProjectRun> {
  const jobId = randomUUID();
  const t = target(ctx);
  void j.statuses.project(t, 'plan', keyOf(p), 'pending', jobId);
  const run = merged instanceof Error ? j.error(p, merged.message) : await planProjectRun(j, ctx, p, c, jobId, merged === true);
  const ok = run.view.outcome.type === 'success';
  const summary = run.view.outcome.type === 'success' ? planDiffSummary(run.view.outcome.output) : undefined;
  await j.statuses.project(t, 'plan', keyOf(p), ok ? 'success' : 'failure', jobId, summary);
  return run;
}

async function planProjectRun(
  j: ProjectJobs,
  ctx: PullContext,
  p: ProjectSpec,
  c: ParsedCommand | undefined,
  jobId: string,
  mergedAgain: boolean,
): Promise<ProjectRun> {
  // Refused input must not leave a lock behind (job() checks again, for every command).
  try {
    await j.checkedProjectDir(await j.checkout(ctx, p.workspace), p, c?.extraArgs ?? []);
  } catch (e) {
    return { ...j.error(p, (e as Error).message), ...(e instanceof DirNotExistError ? { dirMissing: true as const } : {}) };
  }
  const key = { repo: ctx.repo, dir: p.dir, workspace: p.workspace };
  const locks = commandLocks(j.lockMode(p), 'plan');
  if (locks) {
    // One atomic call per project, which never waits for a lock: a plan of several projects
    // needs no all-or-nothing step. The awaits up to savePlan were there before the store was
    // async (terraform runs in between); a lock released meanwhile (the PR closed) is handled
    // by the plugin's release at the command's end.
    const lock = await j.d.store.tryLock(key, { pull: ctx.pull, user: ctx.user, project: p.name });
    if (!lock.acquired)
      return j.failure(p, lockedByMessage(lock.holder.pull, j.d.config.executableName, j.d.host.pullLink?.bind(j.d.host)));
  }
  const refused = await requirementRefusal(j.requirementSources, ctx, 'plan', p.planRequirements, p);
  if (refused) {
    // As Atlantis: a refused plan leaves neither a stale plan nor the lock behind.
    const old = await j.d.store.deletePlan(ctx.repo, ctx.pull, p.dir, p.workspace);
    if (old) rmSync(old.planPath, { force: true });
    if (locks) await j.d.store.unlockIfOwnedBy(key, ctx.pull);
    return j.failure(p, refused);
  }
  return j.job(ctx, p, 'plan', c?.extraArgs ?? [], jobId, async (jobCtx, lease) => {
    const r = await j.d.projectRunner.runSteps(p.workflow.plan, jobCtx);
    if (!r.ok) {
      // As Atlantis: a failed plan gives back this PR's lock, and its older plan is no
      // longer the one shown on the PR.
      if (locks) await j.d.store.unlockIfOwnedBy(key, ctx.pull);
      const old = await j.d.store.deletePlan(ctx.repo, ctx.pull, p.dir, p.workspace);
      if (old) rmSync(old.planPath, { force: true });
    }
    if (r.interrupted) return j.interrupted(p);
    if (!r.ok) return j.error(p, r.output);
    // The hash is checked before apply. A workflow whose steps write no plan file records none.
    const planSha256 = await fileSha256(jobCtx.planFile).catch((e: NodeJS.ErrnoException) => {
      if (e.code === 'ENOENT') return undefined;
      throw e;
    });
    if (!(await lease.stillHeld())) {
      // The fencing check: the lease expired while terraform ran (this replica cut off from
      // Redis, say), so another replica may have run in the project since. This plan may be
      // stale: it is not saved, and its file goes (the store's record, if any, is not ours).
      rmSync(jobCtx.planFile, { force: true });
      j.d.logger.error('Plan not saved: the project lease was lost while terraform ran', { ...key, pull: ctx.pull, jobId });
      return j.error(p, leaseLostError(j.d.config.executableName));
    }
    await j.d.store.savePlan({
      repo: ctx.repo,
      pull: ctx.pull,
      dir: p.dir,
      workspace: p.workspace,
      project: p.name,
      planPath: jobCtx.planFile,
      headSha: ctx.headSha,
      planSha256,
    });
    const exe = j.d.config.executableName;
    return {
      status: 'success',
      view: {
        dir: p.dir,
        workspace: p.workspace,
        projectName: p.name,
        outcome: {
          type: 'success',
          output: formatPlanOutput(r.output),
          applyCmd: buildApplyComment(exe, p.dir, p.workspace, p.name),
          replanCmd: buildPlanComment(exe, p.dir, p.workspace, p.name, c?.extraArgs ?? []),
          // No lock, no link to delete it (Atlantis hides the line with --disable-repo-locking).
          ...(j.d.config.disableRepoLocking
            ? {}
            : { lockUrl: `${j.d.config.atlantisUrl}${lockPath(lockId(key.repo, key.dir, key.workspace, p.name))}` }),
          mergedAgain,
        },
      },
    };
  });
}
