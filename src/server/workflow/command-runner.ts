// Runs one accepted command of a pull request (autoplan, plan, apply, unlock, version,
// import, state rm) across its projects: working copies, locks, workflow steps, the result
// comment and commit statuses. Called inside a tracked operation; everything here is I/O
// orchestration, the decisions (which projects, what text) live in pure modules.
import { randomUUID } from 'node:crypto';
import type { Logger } from '../../log.js';
import type { ServerConfig } from '../config.js';
import { rmSync } from 'node:fs';
import { genericApplyProblem, noPlanFoundError, planDiffSummary, sameProject } from '../locks/pull-status.js';
import { type LockStore, type PlanRecord, fileSha256, planFileProblem } from '../locks/store.js';
import type { ServerMetrics } from '../metrics.js';
import type { GitHubClient, ReactionContent } from '../vcs/github-client.js';
import type { ParsedCommand } from './comment-parser.js';
import { KeyedMutex } from './concurrency.js';
import type { JobRegistry } from './jobs.js';
import { type ResultCommand, UNLOCKED_COMMENT, commandErrorComment, lockedByMessage, renderResults } from './messages.js';
import { formatPlanOutput } from './plan-output.js';
import { SaidOnce, unsupportedKeysComment } from './repo-config/keys.js';
import { type WorkflowHooks, hookRunFor, preHookFailedComment } from './hooks.js';
import { type RepoLocksMode, commandLocks, projectLockMode } from './lock-policy.js';
import { PrStatuses } from './pr-statuses.js';
import { lockPath } from './web-ui.js';
import { type ProjectRun, keyOf, outcomes, planKey, projectsOf, summarize, target, targeted } from './project-runs.js';
import { type ProjectSpec, defaultsFor, projectForPlan, readRepoConfig, selectProjects } from './projects.js';
import { type ServerSideRepoConfig, baseBranchAllowed, serverLockSettingsFor, serverSettingsFor } from './repo-config/server-side.js';
import type { RepoConfig, Workflow } from './repo-config/types.js';
import { DirNotExistError, assertNoEscapingSymlink, assertPathArgsInside, projectDirInside } from './checkout-paths.js';
import { blockedArgMessage, effectiveBlocked, firstBlockedArg } from './extra-args.js';
import type { ProjectRunner } from './project-runner.js';
import { mergeAgainPerWorkspace } from './merge-again.js';
import { type WorkingCopies, checkoutRequest } from './working-copy.js';
import { buildApplyComment, buildPlanComment } from './comment-parser/usage.js';
import { CANCEL_COMMENT, approvePoliciesComment } from './comment-replies.js';
import { hideBeforeResult, layoutOptions } from './result-comment.js';
import { teamPermits } from './team-gate.js';
import { CANCELLED_PROJECT_ERROR } from './execution-order.js';
import { type RequirementSources, notDiverged, requirementRefusal } from './requirement-checks.js';
import { dependencyFailure } from './requirements.js';
import { ProjectScheduler } from './project-scheduler.js';
import { Automerger } from './automerge.js';

/** Atlantis's reply to `apply` without -p/-d/-w under --disable-apply-all, word for word. */
export const APPLY_ALL_DISABLED_COMMENT =
  '**Error:** Running `atlantis apply` without flags is disabled.' +
  ' You must specify which project to apply via the `-d <dir>`, `-w <workspace>` or `-p <project name>` flags.';

/** What the server knows about a pull request when a command starts. */
export interface PullContext {
  repo: string;
  pull: number;
  /** Who asked (comment author, or PR author for autoplan). */
  user: string;
  cloneUrl: string;
  /** The base repository's clone URL (--checkout-strategy=merge); default cloneUrl. */
  baseCloneUrl?: string;
  headSha: string;
  headRef: string;
  baseRef: string;
  /** The PR's author and head repository (`owner/name`), when known (hook env). */
  author?: string;
  headRepo?: string;
}

export type CommandRequest =
  | { kind: 'autoplan'; ctx: PullContext }
  | { kind: 'comment'; ctx: PullContext; command: ParsedCommand; commentId?: number };

export interface CommandRunnerDeps {
  config: ServerConfig;
  store: LockStore;
  github: GitHubClient;
  copies: WorkingCopies;
  jobs: JobRegistry;
  projectRunner: ProjectRunner;
  metrics: ServerMetrics;
  logger: Logger;
  jobLogPath: (jobId: string) => string;
  /** Parsed --repo-config, if any. */
  serverRepoConfig?: ServerSideRepoConfig;
  /** Server-side pre/post workflow hooks. */
  hooks?: WorkflowHooks;
}

export class CommandRunner {
  private readonly scheduler: ProjectScheduler;
  private readonly checkoutMutex = new KeyedMutex();
  /** Workflows defined by a repo's own atlantis.yaml: their extra_args are PR input. */
  private readonly repoWorkflows = new WeakSet<Workflow>();
  private readonly automerger: Automerger;

  private readonly requirementSources: RequirementSources;
  private readonly noticed = new SaidOnce();
  /** Each selected project's repo_locks mode (lock-policy.ts), set where projects are selected. */
  private readonly lockModes = new WeakMap<ProjectSpec, RepoLocksMode>();
  private readonly statuses: PrStatuses;

  constructor(private readonly d: CommandRunnerDeps) {
    this.requirementSources = { github: d.github, bypassApply: d.config.ghAllowMergeableBypassApply, diverged: notDiverged };
    this.scheduler = new ProjectScheduler(d.config.parallelPoolSize);
    this.automerger = new Automerger(d);
    this.statuses = new PrStatuses({
      github: d.github,
      store: d.store,
      metrics: d.metrics,
      logger: d.logger,
      atlantisUrl: d.config.atlantisUrl,
    });
  }

  async run(req: CommandRequest): Promise<void> {
    const name = req.kind === 'autoplan' ? 'plan' : req.command.name;
    const log = this.d.logger.child({ repo: req.ctx.repo, pull: req.ctx.pull, command: name });
    if (!baseBranchAllowed(this.d.serverRepoConfig, `${this.d.config.ghHostname}/${req.ctx.repo}`, req.ctx.baseRef)) {
      log.info("command was run on a pull request which doesn't match base branches");
      return;
    }
    // As Atlantis: a reaction only with --emoji-reaction, given before the team check. It is
    // cosmetic: it must not delay terraform, only the end of the operation.
    const emoji = this.d.config.emojiReaction;
    const reaction =
      req.kind === 'comment' && req.commentId !== undefined && emoji !== ''
        ? this.d.github
            .addReaction(req.ctx.repo, req.commentId, emoji as ReactionContent)
            .catch((e: unknown) => log.warn('Failed to react to comment', { error: (e as Error).message }))
        : Promise.resolve();
    const refuse = (body: string) => this.comment(req.ctx, body, name).catch(() => undefined);
    if (!(await teamPermits(this.d, req, name, log, refuse))) return void (await reaction);
    // No await without pre hooks: the command starts in the same tick as before hooks existed.
    if (this.d.hooks?.configured('pre', req.ctx.repo, req.ctx.baseRef) && !(await this.preHooks(req, name, log)))
      return void (await reaction);
    let commandHasErrors = false;
    try {
      const result = await this.dispatch(req);
      commandHasErrors = result !== 'success';
      await reaction;
      this.d.metrics.commandsTotal.inc({ command: name, result });
      log.info('Command finished', { result });
    } catch (e) {
      this.d.metrics.commandsTotal.inc({ command: name, result: 'error' });
      log.error('Command failed', { error: (e as Error).message });
      // As Atlantis: a command that fails before running its projects (bad -p, bad config,
      // nothing to apply) fails its PR-wide status and answers "**Plan Error**" with the error.
      if (name === 'plan' || name === 'apply') await this.statuses.combined(target(req.ctx), name, 'failure');
      await this.comment(req.ctx, commandErrorComment(name, (e as Error).message), name).catch(() => undefined);
      commandHasErrors = true;
      await reaction;
    }
    // As Atlantis: post hooks run after the command whatever its outcome; their failure is only logged.
    await this.d.hooks?.run(hookRunFor(req, 'post', () => this.checkout(req.ctx, 'default'), commandHasErrors));
  }

  /**
   * Pre workflow hooks, before the command reads atlantis.yaml. A failure is logged; with
   * --fail-on-pre-workflow-hook-error it stops the command with Atlantis's comment and a
   * failed plan/apply status. False when the command must not run.
   */
  private async preHooks(req: CommandRequest, name: string, log: Logger): Promise<boolean> {
    const error = await this.d.hooks?.run(hookRunFor(req, 'pre', () => this.checkout(req.ctx, 'default')));
    if (error === undefined) return true;
    log.error('Error running pre-workflow hooks', { error });
    if (!this.d.config.failOnPreWorkflowHookError) return true;
    this.d.metrics.commandsTotal.inc({ command: name, result: 'error' });
    await this.comment(req.ctx, preHookFailedComment(error), name).catch(() => undefined);
    if (name === 'plan' || name === 'apply') await this.statuses.combined(target(req.ctx), name, 'failure');
    return false;
  }

  private async dispatch(req: CommandRequest): Promise<string> {
    if (req.kind === 'autoplan') return this.plan(req.ctx, undefined, true);
    const c = req.command;
    switch (c.name) {
      case 'cancel':
        return this.cancel(req.ctx);
      case 'plan':
        return this.plan(req.ctx, c, false);
      case 'apply':
        return this.apply(req.ctx, c);
      case 'unlock':
        return this.unlock(req.ctx);
      case 'version':
        return this.simple(req.ctx, c, 'version');
      case 'import':
        return this.simple(req.ctx, c, 'import');
      case 'state':
        return this.simple(req.ctx, c, 'state');
      case 'approve_policies':
        return this.approvePolicies(req.ctx, c);
    }
  }

  // ---- plan -----------------------------------------------------------------------------

  private async plan(ctx: PullContext, c: ParsedCommand | undefined, autoplan: boolean): Promise<string> {
    const { projects, config } = await this.selection(ctx, c);
    const t = target(ctx);
    const generic = autoplan || !targeted(c);
    if (projects.length === 0 && generic) {
      // As Atlantis: the PR's older plans and their locks go, and the 0/0 successes are set
      // (branch protection may require them); an autoplan says nothing more.
      this.discardPlans(ctx, this.d.store.listPlans(ctx.repo, ctx.pull));
      this.d.store.updatePullStatus(ctx.repo, ctx.pull, ctx.headSha, [], { replace: true });
      if (!autoplan) await this.postResults(ctx, 'plan', [], c);
      await this.statuses.noProjects(t, autoplan);
      return 'success';
    }
    void this.statuses.combined(t, 'plan', 'pending');
    if (generic) {
      // A plan of the whole PR replaces all its plans (as Atlantis, on every autoplan and plain
      // `plan`): older ones go, and so do the locks of the projects about to be planned.
      this.discardPlans(ctx, this.d.store.listPlans(ctx.repo, ctx.pull), projects);
    }
    const merged = await mergeAgainPerWorkspace(
      this.d.copies,
      this.checkoutMutex,
      ctx,
      projects.map((p) => p.workspace),
    );
    const runs = await this.scheduler.ordered('plan', ctx, projects, {
      parallel: config?.parallelPlan ?? this.d.config.parallelPlan,
      abortOnFail: config?.abortOnExecutionOrderFail ?? false,
      run: (p) => this.planProject(ctx, p, c, merged.get(p.workspace)),
      cancelled: (p) => this.error(p, CANCELLED_PROJECT_ERROR),
    });
    this.automerger.afterPlan(ctx, config, projects, !runs.every((r) => r.status === 'success'));
    await this.postResults(ctx, 'plan', runs, c);
    await this.statuses.afterPlan(t, outcomes('plan', runs));
    // As Atlantis: a comment's plan that went through runs the (here empty) policy checks.
    if (!autoplan && runs.every((r) => r.status === 'success')) await this.statuses.noPolicyChecks(t);
    return summarize(runs);
  }

  /** Deletes plans (records and files); with `unlockFor`, releases this PR's locks of those projects. */
  private discardPlans(ctx: PullContext, plans: PlanRecord[], unlockFor: ProjectSpec[] = projectsOf(plans)): void {
    for (const pl of plans) {
      this.d.store.deletePlan(ctx.repo, ctx.pull, pl.dir, pl.workspace);
      rmSync(pl.planPath, { force: true });
    }
    for (const p of unlockFor) {
      if (this.lockModes.get(p) === 'on_plan' || !this.lockModes.has(p))
        this.d.store.unlockIfOwnedBy({ repo: ctx.repo, dir: p.dir, workspace: p.workspace }, ctx.pull);
    }
  }

  private async planProject(ctx: PullContext, p: ProjectSpec, c: ParsedCommand | undefined, merged?: boolean | Error): Promise<ProjectRun> {
    const jobId = randomUUID();
    const t = target(ctx);
    void this.statuses.project(t, 'plan', keyOf(p), 'pending', jobId);
    const run = merged instanceof Error ? this.error(p, merged.message) : await this.planProjectRun(ctx, p, c, jobId, merged === true);
    const ok = run.view.outcome.type === 'success';
    const summary = run.view.outcome.type === 'success' ? planDiffSummary(run.view.outcome.output) : undefined;
    await this.statuses.project(t, 'plan', keyOf(p), ok ? 'success' : 'failure', jobId, summary);
    return run;
  }

  private async planProjectRun(
    ctx: PullContext,
    p: ProjectSpec,
    c: ParsedCommand | undefined,
    jobId: string,
    mergedAgain: boolean,
  ): Promise<ProjectRun> {
    // Refused input must not leave a lock behind (job() checks again, for every command).
    try {
      await this.checkedProjectDir(await this.checkout(ctx, p.workspace), p, c?.extraArgs ?? []);
    } catch (e) {
      return { ...this.error(p, (e as Error).message), ...(e instanceof DirNotExistError ? { dirMissing: true as const } : {}) };
    }
    const key = { repo: ctx.repo, dir: p.dir, workspace: p.workspace };
    const locks = commandLocks(this.lockMode(p), 'plan');
    if (locks) {
      const lock = this.d.store.tryLock(key, { pull: ctx.pull, user: ctx.user, project: p.name });
      if (!lock.acquired) return this.failure(p, lockedByMessage(lock.holder.pull, this.d.config.executableName));
    }
    const refused = await requirementRefusal(this.requirementSources, ctx, 'plan', p.planRequirements);
    if (refused) {
      // As Atlantis: a refused plan leaves neither a stale plan nor the lock behind.
      const old = this.d.store.deletePlan(ctx.repo, ctx.pull, p.dir, p.workspace);
      if (old) rmSync(old.planPath, { force: true });
      if (locks) this.d.store.unlockIfOwnedBy(key, ctx.pull);
      return this.failure(p, refused);
    }
    return this.job(ctx, p, 'plan', c?.extraArgs ?? [], jobId, async (jobCtx) => {
      const r = await this.d.projectRunner.runSteps(p.workflow.plan, jobCtx);
      if (!r.ok) {
        // As Atlantis: a failed plan gives back this PR's lock, and its older plan is no
        // longer the one shown on the PR.
        if (locks) this.d.store.unlockIfOwnedBy(key, ctx.pull);
        const old = this.d.store.deletePlan(ctx.repo, ctx.pull, p.dir, p.workspace);
        if (old) rmSync(old.planPath, { force: true });
      }
      if (r.interrupted) return this.interrupted(p);
      if (!r.ok) return this.error(p, r.output);
      // The hash is checked before apply. A workflow whose steps write no plan file records none.
      const planSha256 = await fileSha256(jobCtx.planFile).catch((e: NodeJS.ErrnoException) => {
        if (e.code === 'ENOENT') return undefined;
        throw e;
      });
      this.d.store.savePlan({
        repo: ctx.repo,
        pull: ctx.pull,
        dir: p.dir,
        workspace: p.workspace,
        project: p.name,
        planPath: jobCtx.planFile,
        headSha: ctx.headSha,
        planSha256,
      });
      const exe = this.d.config.executableName;
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
            ...(this.d.config.disableRepoLocking
              ? {}
              : { lockUrl: `${this.d.config.atlantisUrl}${lockPath({ ...key, project: p.name })}` }),
            mergedAgain,
          },
        },
      };
    });
  }

  // ---- apply ----------------------------------------------------------------------------

  private async apply(ctx: PullContext, c: ParsedCommand): Promise<string> {
    if (this.d.config.disableApplyAll && !targeted(c)) {
      await this.comment(ctx, APPLY_ALL_DISABLED_COMMENT, 'apply');
      return 'refused';
    }
    const checkout = await this.checkout(ctx, 'default');
    const { config, defaults } = this.repoSettings(ctx, checkout);
    const plans = this.d.store.listPlans(ctx.repo, ctx.pull);
    let work: Array<ProjectSpec & { plan?: PlanRecord }>;
    if (!targeted(c)) {
      // As Atlantis: the PR's plans, checked against its recorded plan status first.
      const problem = genericApplyProblem(this.d.store.getPullStatus(ctx.repo, ctx.pull), plans.map(planKey), ctx.headSha);
      if (problem) throw new Error(problem);
      work = plans.map((plan) => this.withLockMode(ctx, config, { ...projectForPlan(config, plan.dir, plan.workspace, defaults), plan }));
    } else {
      work = selectProjects(config, checkout, [], c, defaults).map((p) => {
        const plan = plans.find((pl) => pl.dir === p.dir && pl.workspace === p.workspace);
        return this.withLockMode(ctx, config, plan ? { ...p, plan } : { ...p });
      });
    }
    const t = target(ctx);
    if (work.length === 0) {
      await this.postResults(ctx, 'apply', [], c);
      await this.statuses.afterApply(t, []);
      return 'success';
    }
    void this.statuses.combined(t, 'apply', 'pending');
    const jobIds = new Map(work.map((w) => [w, randomUUID()] as const));
    const ran = new Map<ProjectRun, ProjectSpec>();
    const runs = await this.scheduler.ordered('apply', ctx, work, {
      parallel: config?.parallelApply ?? this.d.config.parallelApply,
      abortOnFail: config?.abortOnExecutionOrderFail ?? false,
      run: async (w) => {
        const r = await this.applyProject(ctx, w, w.plan, jobIds.get(w) ?? randomUUID());
        ran.set(r, w);
        return r;
      },
      cancelled: (w) => this.error(w, CANCELLED_PROJECT_ERROR),
    });
    await this.postResults(ctx, 'apply', runs, c);
    // As Atlantis: a project's apply success is posted once the command is done.
    for (const r of runs) {
      const w = ran.get(r);
      if (w && r.status === 'success') await this.statuses.project(t, 'apply', keyOf(w), 'success', jobIds.get(w) ?? '');
    }
    await this.statuses.afterApply(t, outcomes('apply', runs));
    await this.automerger.afterApply(
      ctx,
      config,
      plans,
      c,
      runs.every((r) => r.status === 'success'),
    );
    return summarize(runs);
  }

  private async applyProject(ctx: PullContext, p: ProjectSpec, plan: PlanRecord | undefined, jobId: string): Promise<ProjectRun> {
    const t = target(ctx);
    void this.statuses.project(t, 'apply', keyOf(p), 'pending', jobId);
    const run = await this.applyProjectRun(ctx, p, plan, jobId);
    if (run.status !== 'success') await this.statuses.project(t, 'apply', keyOf(p), 'failure', jobId);
    return run;
  }

  private async applyProjectRun(ctx: PullContext, p: ProjectSpec, plan: PlanRecord | undefined, jobId: string): Promise<ProjectRun> {
    if (!plan) return this.error(p, noPlanFoundError(p.dir, p.workspace));
    const refused =
      (await requirementRefusal(this.requirementSources, ctx, 'apply', p.applyRequirements)) ??
      dependencyFailure(p.dependsOn, this.scheduler.projectStates.get(ctx.repo, ctx.pull, ctx.headSha));
    if (refused) return this.failure(p, refused);
    if (plan.headSha !== ctx.headSha) {
      return this.failure(
        p,
        `the pull request was updated after this plan was made; comment \`${this.d.config.executableName} plan\` to plan again`,
      );
    }
    const key = { repo: ctx.repo, dir: p.dir, workspace: p.workspace };
    if (commandLocks(this.lockMode(p), 'apply')) {
      // repo_locks mode on_apply: the lock is taken here, and held until the PR closes.
      const lock = this.d.store.tryLock(key, { pull: ctx.pull, user: ctx.user, project: p.name });
      if (!lock.acquired) return this.failure(p, lockedByMessage(lock.holder.pull, this.d.config.executableName));
    }
    return this.job(ctx, p, 'apply', [], jobId, async (jobCtx) => {
      const tampered = planFileProblem(plan, await fileSha256(plan.planPath).catch(() => undefined), this.d.config.executableName);
      if (tampered) {
        // Never apply a plan other than the one shown on the PR; it cannot be used again.
        this.d.store.deletePlan(ctx.repo, ctx.pull, p.dir, p.workspace);
        this.d.logger.warn('Refused apply: plan file does not match its recorded hash', {
          repo: ctx.repo,
          pull: ctx.pull,
          dir: p.dir,
          workspace: p.workspace,
        });
        return this.failure(p, tampered);
      }
      // A working copy re-cloned after a restart has no .terraform yet.
      const steps = this.d.projectRunner.isInitialised(jobCtx.projectDir)
        ? p.workflow.apply
        : [...p.workflow.plan.filter((s) => s.kind === 'init'), ...p.workflow.apply];
      const r = await this.d.projectRunner.runSteps(steps, { ...jobCtx, planFile: plan.planPath });
      if (r.interrupted) {
        // The saved plan is stale after a partial apply; the lock stays so nobody else
        // plans on top of a half-applied state.
        this.d.store.deletePlan(ctx.repo, ctx.pull, p.dir, p.workspace);
        return this.interrupted(p);
      }
      if (!r.ok) return this.error(p, r.output);
      // As Atlantis: the applied plan is used up, but the lock stays until the PR is merged
      // or closed (or unlocked), so no other PR plans on top of unmerged applied changes.
      this.d.store.deletePlan(ctx.repo, ctx.pull, p.dir, p.workspace);
      rmSync(plan.planPath, { force: true });
      return {
        status: 'success',
        view: { dir: p.dir, workspace: p.workspace, projectName: p.name, outcome: { type: 'success', output: r.output } },
      };
    });
  }

  // ---- unlock, version, import, state rm ---------------------------------------------------

  /**
   * `atlantis cancel`, as Atlantis: projects of this PR's running plan or apply that have not
   * started yet are cancelled; running ones finish. Always answered with Atlantis's comment.
   */
  private async cancel(ctx: PullContext): Promise<string> {
    this.scheduler.cancellations.cancel(ctx.repo, ctx.pull);
    await this.comment(ctx, CANCEL_COMMENT, 'cancel');
    return 'success';
  }

  /** A closed PR: forget its cancel mark and project states. */
  forgetPull(repo: string, pull: number): void {
    this.scheduler.forget(repo, pull);
  }

  private async unlock(ctx: PullContext): Promise<string> {
    // As Atlantis: the PR's locks go with the plans of the locked projects (a plan without a
    // lock, as in repo_locks mode on_apply, stays).
    const { locks } = this.d.store.unlockAllForPull(ctx.repo, ctx.pull);
    this.discardPlans(
      ctx,
      this.d.store.listPlans(ctx.repo, ctx.pull).filter((pl) => locks.some((l) => l.dir === pl.dir && l.workspace === pl.workspace)),
      [],
    );
    await this.comment(ctx, UNLOCKED_COMMENT, 'unlock');
    return 'success';
  }

  /** Policy checks are off: every selected project (-p/-d/-w, or every planned one) passes. */
  private async approvePolicies(ctx: PullContext, c: ParsedCommand): Promise<string> {
    const targeted = c.dir !== undefined || c.workspace !== undefined || c.project !== undefined;
    const projects = targeted
      ? (await this.selection(ctx, c)).projects.map((p) => ({ dir: p.dir, workspace: p.workspace, project: p.name }))
      : this.d.store.listPlans(ctx.repo, ctx.pull);
    await this.comment(ctx, approvePoliciesComment(projects), 'approve_policies');
    return 'success';
  }

  private async simple(ctx: PullContext, c: ParsedCommand, cmd: 'version' | 'import' | 'state'): Promise<string> {
    let projects: ProjectSpec[];
    let config: RepoConfig | undefined;
    if (cmd === 'version' && !targeted(c)) {
      // As Atlantis: `version` runs in the projects with a plan; with none it posts nothing.
      const settings = this.repoSettings(ctx, await this.checkout(ctx, 'default'));
      config = settings.config;
      projects = this.d.store
        .listPlans(ctx.repo, ctx.pull)
        .map((pl) => projectForPlan(settings.config, pl.dir, pl.workspace, settings.defaults));
      if (projects.length === 0) return 'success';
    } else ({ projects, config } = await this.selection(ctx, c));
    // As Atlantis: one project after another; only `version` follows parallel_plan.
    const parallel = cmd === 'version' && (config?.parallelPlan ?? this.d.config.parallelPlan);
    const runs = await this.scheduler.inOrder(cmd, ctx, projects, {
      parallel,
      abortOnFail: config?.abortOnExecutionOrderFail ?? false,
      run: (p) =>
        this.guarded(ctx, p, async () => {
          const refused =
            cmd === 'import' ? await requirementRefusal(this.requirementSources, ctx, 'import', p.importRequirements) : undefined;
          if (refused) return this.failure(p, refused);
          return this.job(ctx, p, cmd, c.extraArgs, randomUUID(), async (jobCtx) => {
            const init = this.d.projectRunner.isInitialised(jobCtx.projectDir) ? [] : p.workflow.plan.filter((s) => s.kind === 'init');
            const extra = cmd === 'version' ? { version: true } : cmd === 'import' ? { importArgs: c.args } : { stateRmArgs: c.args };
            const stage = cmd === 'import' ? p.workflow.import : cmd === 'state' ? p.workflow.stateRm : undefined;
            const r = await this.d.projectRunner.runSteps(stage ?? init, jobCtx, stage ? { ...extra, customStage: true } : extra);
            if (r.interrupted) return this.interrupted(p);
            if (!r.ok) return this.error(p, r.output);
            if (cmd !== 'version') this.d.store.deletePlan(ctx.repo, ctx.pull, p.dir, p.workspace); // state changed: plan is stale
            // After import or state rm the plan is stale: the comment says how to plan again (without the args).
            const replan =
              cmd === 'version' ? {} : { replanCmd: buildPlanComment(this.d.config.executableName, p.dir, p.workspace, p.name, []) };
            const outcome = { type: 'success' as const, output: r.output, ...replan };
            return { status: 'success', view: { dir: p.dir, workspace: p.workspace, projectName: p.name, outcome } };
          });
        }),
    });
    await this.postResults(ctx, cmd, runs, c);
    // As Atlantis: a successful import or state rm marks the plan discarded.
    const ps = cmd === 'version' ? undefined : this.d.store.getPullStatus(ctx.repo, ctx.pull);
    if (ps?.headSha === ctx.headSha) {
      const done = outcomes(cmd as 'import' | 'state', runs).filter((o) => o.ok && ps.projects.some((p) => sameProject(p, o)));
      if (done.length > 0) this.d.store.updatePullStatus(ctx.repo, ctx.pull, ctx.headSha, done);
    }
    return summarize(runs);
  }

  // ---- shared -----------------------------------------------------------------------------

  /** Projects of a command (from -p/-d/-w, or the ones the PR modifies) and the repo config they come from. */
  private async selection(ctx: PullContext, c: ParsedCommand | undefined) {
    const checkout = await this.checkout(ctx, 'default');
    const { config, defaults } = this.repoSettings(ctx, checkout);
    const targeted = c !== undefined && (c.dir !== undefined || c.workspace !== undefined || c.project !== undefined);
    const changed = targeted ? [] : await this.d.github.listChangedFiles(ctx.repo, ctx.pull);
    const projects = selectProjects(config, checkout, changed, c, defaults).map((p) => this.withLockMode(ctx, config, p));
    return { projects, config };
  }

  /** Records the project's repo_locks mode (server config, atlantis.yaml, --disable-repo-locking). */
  private withLockMode<P extends ProjectSpec>(ctx: PullContext, config: RepoConfig | undefined, p: P): P {
    const server = serverLockSettingsFor(this.d.serverRepoConfig, `${this.d.config.ghHostname}/${ctx.repo}`);
    this.lockModes.set(p, projectLockMode(this.d.config.disableRepoLocking, server, config, p));
    return p;
  }

  private lockMode(p: ProjectSpec): RepoLocksMode {
    return this.lockModes.get(p) ?? (this.d.config.disableRepoLocking ? 'disabled' : 'on_plan');
  }

  private repoSettings(ctx: PullContext, checkout: string) {
    const repoId = `${this.d.config.ghHostname}/${ctx.repo}`;
    const config = readRepoConfig(checkout, this.d.serverRepoConfig, repoId, ctx.baseRef);
    for (const w of Object.values(config?.workflows ?? {})) this.repoWorkflows.add(w);
    const notices = config?.unsupported.filter((u) => u.kind === 'notice') ?? [];
    // One comment per commit naming the keys the command goes on without.
    if (notices.length > 0 && this.noticed.first(`${ctx.repo}#${ctx.pull}@${ctx.headSha}`))
      void this.comment(
        ctx,
        unsupportedKeysComment(serverSettingsFor(this.d.serverRepoConfig, repoId).repoConfigFile ?? 'atlantis.yaml', notices),
        'config',
      ).catch(() => undefined);
    const defaults = defaultsFor(this.d.serverRepoConfig, repoId);
    return { config, defaults };
  }

  private guarded(ctx: PullContext, p: ProjectSpec, fn: () => Promise<ProjectRun>): Promise<ProjectRun> {
    return this.scheduler.guarded({ repo: ctx.repo, pull: ctx.pull, dir: p.dir, workspace: p.workspace }, fn);
  }

  /** The PR's working copy, refused when a symlink in it leads outside (checked before anything reads it). */
  private async checkout(ctx: PullContext, workspace: string): Promise<string> {
    return this.checkoutMutex.run(`${ctx.repo}#${ctx.pull}#${workspace}`, async () => {
      const dir = await this.d.copies.checkout(checkoutRequest(ctx, workspace));
      await assertNoEscapingSymlink(dir);
      return dir;
    });
  }

  /**
   * The project's real dir, after refusing PR input that reaches outside the checkout: a dir
   * through a symlink, blocked flags or outside files in the comment's args or in extra_args
   * of a workflow from the repo's own atlantis.yaml (server-side workflows are trusted).
   */
  private async checkedProjectDir(wc: string, p: ProjectSpec, commentArgs: string[]): Promise<string> {
    const projectDir = await projectDirInside(wc, p.dir);
    const repoArgs = this.repoWorkflows.has(p.workflow)
      ? [...p.workflow.plan, ...p.workflow.apply, ...(p.workflow.import ?? []), ...(p.workflow.stateRm ?? [])].flatMap((s) =>
          'extraArgs' in s ? s.extraArgs : [],
        )
      : [];
    const bad = firstBlockedArg(repoArgs, effectiveBlocked(this.d.config.blockedExtraArgs));
    if (bad !== undefined)
      throw new Error(`${blockedArgMessage(bad)} (extra_args of workflow ${JSON.stringify(p.workflow.name)} in atlantis.yaml)`);
    await assertPathArgsInside(wc, projectDir, [...commentArgs, ...repoArgs]);
    return projectDir;
  }

  /** Runs one project command as a job: journal, live output, log file. */
  private async job(
    ctx: PullContext,
    p: ProjectSpec,
    command: string,
    commentArgs: string[],
    id: string,
    fn: (jc: import('./project-runner.js').ProjectRunContext) => Promise<ProjectRun>,
  ): Promise<ProjectRun> {
    const wc = await this.checkout(ctx, p.workspace);
    const logFile = this.d.jobLogPath(id);
    this.d.jobs.start({ id, command, repo: ctx.repo, pull: ctx.pull, project: p.name ?? null, dir: p.dir, workspace: p.workspace });
    this.d.store.jobStarted({ id, command, repo: ctx.repo, pull: ctx.pull, project: p.name, dir: p.dir, workspace: p.workspace });
    let run: ProjectRun;
    try {
      const projectDir = await this.checkedProjectDir(wc, p, commentArgs);
      run = await fn({
        jobId: id,
        projectDir,
        dir: p.dir,
        workspace: p.workspace,
        projectName: p.name,
        planFile: this.d.store.planPath({ repo: ctx.repo, dir: p.dir, workspace: p.workspace }, ctx.pull, p.name),
        repo: ctx.repo,
        pull: ctx.pull,
        user: ctx.user,
        headSha: ctx.headSha,
        headRef: ctx.headRef,
        baseRef: ctx.baseRef,
        terraformVersion: p.terraformVersion,
        commentArgs,
        logFile,
        onOutput: (chunk) => this.d.jobs.append(id, chunk),
      });
    } catch (e) {
      run = { ...this.error(p, (e as Error).message), ...(e instanceof DirNotExistError ? { dirMissing: true as const } : {}) };
    }
    const final = run.status === 'running' ? 'error' : run.status;
    this.d.jobs.finish(id, final);
    this.d.store.jobFinished(id, final, run.view.outcome.type);
    return run;
  }

  /** The result comment of a command; a lost comment is logged and counted by comment(). */
  private async postResults(ctx: PullContext, cmd: ResultCommand, runs: ProjectRun[], c: ParsedCommand | undefined): Promise<void> {
    const body = renderResults({
      command: cmd,
      subName: c?.subName,
      results: runs.map((r) => r.view),
      ...layoutOptions(this.d.config),
      verbose: c?.verbose,
    });
    await hideBeforeResult(this.d, ctx, cmd, c?.dir);
    await this.comment(ctx, body, cmd).catch(() => undefined);
  }

  private failure(p: ProjectSpec, reason: string): ProjectRun {
    return { status: 'failure', view: { dir: p.dir, workspace: p.workspace, projectName: p.name, outcome: { type: 'failure', reason } } };
  }

  private error(p: ProjectSpec, output: string): ProjectRun {
    return {
      status: 'failure',
      view: { dir: p.dir, workspace: p.workspace, projectName: p.name, outcome: { type: 'error', error: output.trim() } },
    };
  }

  private interrupted(p: ProjectSpec): ProjectRun {
    return {
      status: 'interrupted',
      view: {
        dir: p.dir,
        workspace: p.workspace,
        projectName: p.name,
        outcome: { type: 'interrupted', cause: 'drain-deadline' },
      },
    };
  }

  private async comment(ctx: PullContext, body: string, command: string): Promise<void> {
    try {
      await this.d.github.createComment(ctx.repo, ctx.pull, body, { command });
    } catch (e) {
      this.d.metrics.githubRequestFailures.inc({ operation: 'create_comment' });
      this.d.logger.error('Could not post PR comment', { repo: ctx.repo, pull: ctx.pull, command, error: (e as Error).message });
      throw e;
    }
  }
}
