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
import { KeyedMutex, Semaphore } from './concurrency.js';
import type { JobRegistry } from './jobs.js';
import {
  APPROVAL_REQUIRED,
  MERGEABLE_REQUIRED,
  type ResultCommand,
  UNLOCKED_COMMENT,
  cleanPlanOutput,
  commandErrorComment,
  interruptedByShutdownComment,
  lockedByMessage,
  renderResults,
} from './messages.js';
import { type RepoLocksMode, commandLocks, projectLockMode } from './lock-policy.js';
import { PrStatuses } from './pr-statuses.js';
import { lockPath } from './web-ui.js';
import { type ProjectRun, keyOf, outcomes, planKey, projectsOf, summarize, target, targeted } from './project-runs.js';
import { type ProjectSpec, defaultsFor, projectForPlan, readRepoConfig, selectProjects } from './projects.js';
import { type ServerSideRepoConfig, serverLockSettingsFor } from './repo-config/server-side.js';
import type { RepoConfig, Workflow } from './repo-config/types.js';
import { DirNotExistError, assertNoEscapingSymlink, assertPathArgsInside, projectDirInside } from './checkout-paths.js';
import { blockedArgMessage, effectiveBlocked, firstBlockedArg } from './extra-args.js';
import type { ProjectRunner } from './project-runner.js';
import type { WorkingCopies } from './working-copy.js';
import { buildApplyComment, buildPlanComment } from './comment-parser/usage.js';
import { noPermissionComment, teamAllows } from './team-allowlist.js';

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
  headSha: string;
  headRef: string;
  baseRef: string;
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
}

export class CommandRunner {
  private readonly pool: Semaphore;
  private readonly projectMutex = new KeyedMutex();
  private readonly checkoutMutex = new KeyedMutex();
  /** Workflows defined by a repo's own atlantis.yaml: their extra_args are PR input. */
  private readonly repoWorkflows = new WeakSet<Workflow>();
  /** Each selected project's repo_locks mode (lock-policy.ts), set where projects are selected. */
  private readonly lockModes = new WeakMap<ProjectSpec, RepoLocksMode>();
  private readonly statuses: PrStatuses;

  constructor(private readonly d: CommandRunnerDeps) {
    this.pool = new Semaphore(d.config.parallelPoolSize);
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
    // As Atlantis: a reaction only with --emoji-reaction, given before the team check. It is
    // cosmetic: it must not delay terraform, only the end of the operation.
    const emoji = this.d.config.emojiReaction;
    const reaction =
      req.kind === 'comment' && req.commentId !== undefined && emoji !== ''
        ? this.d.github
            .addReaction(req.ctx.repo, req.commentId, emoji as ReactionContent)
            .catch((e: unknown) => log.warn('Failed to react to comment', { error: (e as Error).message }))
        : Promise.resolve();
    if (!(await this.teamPermits(req, name, log))) return void (await reaction);
    try {
      const result = await this.dispatch(req);
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
      await reaction;
    }
  }

  /**
   * --gh-team-allowlist, as Atlantis: the user's teams in the repo's organisation come from
   * GitHub; a refused comment gets Atlantis's comment, a refused autoplan only a log line,
   * and when GitHub cannot tell, nothing runs.
   */
  private async teamPermits(req: CommandRequest, name: string, log: Logger): Promise<boolean> {
    const rules = this.d.config.ghTeamAllowlist;
    if (rules.length === 0) return true;
    const { repo, user } = req.ctx;
    let teams: string[];
    try {
      teams = await this.d.github.listUserTeams(repo.split('/')[0]!, user);
    } catch (e) {
      this.d.metrics.commandsTotal.inc({ command: name, result: 'error' });
      log.error('Unable to fetch user teams, command not run', { user, error: (e as Error).message });
      return false;
    }
    if (teamAllows(rules, teams, name)) return true;
    this.d.metrics.commandsTotal.inc({ command: name, result: 'refused' });
    log.warn('User is not in a team allowed to run the command', { user, teams });
    if (req.kind === 'comment') await this.comment(req.ctx, noPermissionComment(user, name), name).catch(() => undefined);
    return false;
  }

  private async dispatch(req: CommandRequest): Promise<string> {
    if (req.kind === 'autoplan') return this.plan(req.ctx, undefined, true);
    const c = req.command;
    switch (c.name) {
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
    }
  }

  // ---- plan -----------------------------------------------------------------------------

  private async plan(ctx: PullContext, c: ParsedCommand | undefined, autoplan: boolean): Promise<string> {
    const projects = await this.projectsFor(ctx, c);
    const t = target(ctx);
    const generic = autoplan || !targeted(c);
    if (projects.length === 0 && generic) {
      // As Atlantis: the PR's older plans and their locks go, and the 0/0 successes are set
      // (branch protection may require them); an autoplan says nothing more.
      this.discardPlans(ctx, this.d.store.listPlans(ctx.repo, ctx.pull));
      this.d.store.updatePullStatus(ctx.repo, ctx.pull, ctx.headSha, [], { replace: true });
      if (!autoplan)
        await this.comment(ctx, renderResults({ command: 'plan', results: [], executableName: this.d.config.executableName }), 'plan');
      await this.statuses.noProjects(t, autoplan);
      return 'success';
    }
    void this.statuses.combined(t, 'plan', 'pending');
    if (generic) {
      // A plan of the whole PR replaces all its plans (as Atlantis, on every autoplan and plain
      // `plan`): older ones go, and so do the locks of the projects about to be planned.
      this.discardPlans(ctx, this.d.store.listPlans(ctx.repo, ctx.pull), projects);
    }
    const runs = await Promise.all(projects.map((p) => this.guarded(ctx, p, () => this.planProject(ctx, p, c))));
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

  private async planProject(ctx: PullContext, p: ProjectSpec, c: ParsedCommand | undefined): Promise<ProjectRun> {
    const jobId = randomUUID();
    const t = target(ctx);
    void this.statuses.project(t, 'plan', keyOf(p), 'pending', jobId);
    const run = await this.planProjectRun(ctx, p, c, jobId);
    const ok = run.view.outcome.type === 'success';
    const summary = run.view.outcome.type === 'success' ? planDiffSummary(run.view.outcome.output) : undefined;
    await this.statuses.project(t, 'plan', keyOf(p), ok ? 'success' : 'failure', jobId, summary);
    return run;
  }

  private async planProjectRun(ctx: PullContext, p: ProjectSpec, c: ParsedCommand | undefined, jobId: string): Promise<ProjectRun> {
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
    return this.job(ctx, p, 'plan', c?.extraArgs ?? [], jobId, async (jobCtx) => {
      const r = await this.d.projectRunner.runSteps(p.workflow.plan, jobCtx);
      if (!r.ok) {
        // As Atlantis: a failed plan gives back this PR's lock, and its older plan is no
        // longer the one shown on the PR.
        if (locks) this.d.store.unlockIfOwnedBy(key, ctx.pull);
        const old = this.d.store.deletePlan(ctx.repo, ctx.pull, p.dir, p.workspace);
        if (old) rmSync(old.planPath, { force: true });
      }
      if (r.interrupted) return this.interrupted(p, 'plan');
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
            output: cleanPlanOutput(r.output),
            applyCmd: buildApplyComment(exe, p.dir, p.workspace, p.name),
            replanCmd: buildPlanComment(exe, p.dir, p.workspace, p.name, c?.extraArgs ?? []),
            // No lock, no link to delete it (Atlantis hides the line with --disable-repo-locking).
            ...(this.d.config.disableRepoLocking
              ? {}
              : { lockUrl: `${this.d.config.atlantisUrl}${lockPath({ ...key, project: p.name })}` }),
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
    let work: { p: ProjectSpec; plan?: PlanRecord }[];
    if (!targeted(c)) {
      // As Atlantis: the PR's plans, checked against its recorded plan status first.
      const problem = genericApplyProblem(this.d.store.getPullStatus(ctx.repo, ctx.pull), plans.map(planKey), ctx.headSha);
      if (problem) throw new Error(problem);
      work = plans.map((plan) => ({ p: this.withLockMode(ctx, config, projectForPlan(config, plan.dir, plan.workspace, defaults)), plan }));
    } else {
      const specs = selectProjects(config, checkout, [], c, defaults).map((p) => this.withLockMode(ctx, config, p));
      work = specs.map((p) => ({ p, plan: plans.find((pl) => pl.dir === p.dir && pl.workspace === p.workspace) }));
    }
    const t = target(ctx);
    if (work.length === 0) {
      await this.comment(ctx, renderResults({ command: 'apply', results: [], executableName: this.d.config.executableName }), 'apply');
      await this.statuses.afterApply(t, []);
      return 'success';
    }
    void this.statuses.combined(t, 'apply', 'pending');
    const jobIds = work.map(() => randomUUID());
    const runs = await Promise.all(work.map((w, i) => this.guarded(ctx, w.p, () => this.applyProject(ctx, w.p, w.plan, jobIds[i]!))));
    await this.postResults(ctx, 'apply', runs, c);
    // As Atlantis: a project's apply success is posted once the command is done.
    for (const [i, r] of runs.entries())
      if (r.status === 'success') await this.statuses.project(t, 'apply', keyOf(work[i]!.p), 'success', jobIds[i]!);
    await this.statuses.afterApply(t, outcomes('apply', runs));
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
    for (const req of p.applyRequirements) {
      if (req === 'approved' && !(await this.d.github.isApproved(ctx.repo, ctx.pull))) return this.failure(p, APPROVAL_REQUIRED);
      if (req === 'mergeable' && !(await this.d.github.isMergeable(ctx.repo, ctx.pull))) return this.failure(p, MERGEABLE_REQUIRED);
    }
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
        return this.interrupted(p, 'apply');
      }
      if (!r.ok) return this.error(p, r.output);
      // As Atlantis: the applied plan is used up, but the lock stays until the PR is merged
      // or closed (or unlocked), so no other PR plans on top of unmerged applied changes.
      this.d.store.deletePlan(ctx.repo, ctx.pull, p.dir, p.workspace);
      rmSync(plan.planPath, { force: true });
      return {
        status: 'success',
        view: { dir: p.dir, workspace: p.workspace, projectName: p.name, outcome: { type: 'success', output: r.output.trim() } },
      };
    });
  }

  // ---- unlock, version, import, state rm ---------------------------------------------------

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

  private async simple(ctx: PullContext, c: ParsedCommand, cmd: 'version' | 'import' | 'state'): Promise<string> {
    let projects: ProjectSpec[];
    if (cmd === 'version' && !targeted(c)) {
      // As Atlantis: `version` runs in the projects with a plan; with none it posts nothing.
      const { config, defaults } = this.repoSettings(ctx, await this.checkout(ctx, 'default'));
      projects = this.d.store.listPlans(ctx.repo, ctx.pull).map((pl) => projectForPlan(config, pl.dir, pl.workspace, defaults));
      if (projects.length === 0) return 'success';
    } else projects = await this.projectsFor(ctx, c);
    const runs = await Promise.all(
      projects.map((p) =>
        this.guarded(ctx, p, () =>
          this.job(ctx, p, cmd, c.extraArgs, randomUUID(), async (jobCtx) => {
            const init = this.d.projectRunner.isInitialised(jobCtx.projectDir) ? [] : p.workflow.plan.filter((s) => s.kind === 'init');
            const extra = cmd === 'version' ? { version: true } : cmd === 'import' ? { importArgs: c.args } : { stateRmArgs: c.args };
            const r = await this.d.projectRunner.runSteps(init, jobCtx, extra);
            if (r.interrupted) return this.interrupted(p, cmd);
            if (!r.ok) return this.error(p, r.output);
            if (cmd !== 'version') this.d.store.deletePlan(ctx.repo, ctx.pull, p.dir, p.workspace); // state changed: plan is stale
            return {
              status: 'success',
              view: { dir: p.dir, workspace: p.workspace, projectName: p.name, outcome: { type: 'success', output: r.output.trim() } },
            };
          }),
        ),
      ),
    );
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

  /** Projects of a command: from -p/-d/-w, or the ones the PR modifies. */
  private async projectsFor(ctx: PullContext, c: ParsedCommand | undefined): Promise<ProjectSpec[]> {
    const checkout = await this.checkout(ctx, 'default');
    const { config, defaults } = this.repoSettings(ctx, checkout);
    const targeted = c !== undefined && (c.dir !== undefined || c.workspace !== undefined || c.project !== undefined);
    const changed = targeted ? [] : await this.d.github.listChangedFiles(ctx.repo, ctx.pull);
    return selectProjects(config, checkout, changed, c, defaults).map((p) => this.withLockMode(ctx, config, p));
  }

  /** Records the project's repo_locks mode (server config, atlantis.yaml, --disable-repo-locking). */
  private withLockMode(ctx: PullContext, config: RepoConfig | undefined, p: ProjectSpec): ProjectSpec {
    const server = serverLockSettingsFor(this.d.serverRepoConfig, `${this.d.config.ghHostname}/${ctx.repo}`);
    this.lockModes.set(p, projectLockMode(this.d.config.disableRepoLocking, server, config, p));
    return p;
  }

  private lockMode(p: ProjectSpec): RepoLocksMode {
    return this.lockModes.get(p) ?? (this.d.config.disableRepoLocking ? 'disabled' : 'on_plan');
  }

  private repoSettings(ctx: PullContext, checkout: string) {
    const repoId = `${this.d.config.ghHostname}/${ctx.repo}`;
    const config = readRepoConfig(checkout, this.d.serverRepoConfig, repoId);
    for (const w of Object.values(config?.workflows ?? {})) this.repoWorkflows.add(w);
    const defaults = defaultsFor(this.d.serverRepoConfig, repoId);
    return { config, defaults };
  }

  /** Serializes per project of this PR and bounds parallelism by the pool. */
  private guarded(ctx: PullContext, p: ProjectSpec, fn: () => Promise<ProjectRun>): Promise<ProjectRun> {
    return this.projectMutex.run(`${ctx.repo}#${ctx.pull}#${p.dir}#${p.workspace}`, () => this.pool.run(fn));
  }

  /** The PR's working copy, refused when a symlink in it leads outside (checked before anything reads it). */
  private async checkout(ctx: PullContext, workspace: string): Promise<string> {
    return this.checkoutMutex.run(`${ctx.repo}#${ctx.pull}#${workspace}`, async () => {
      const dir = await this.d.copies.checkout({
        repo: ctx.repo,
        pull: ctx.pull,
        workspace,
        cloneUrl: ctx.cloneUrl,
        headRef: ctx.headRef,
        headSha: ctx.headSha,
      });
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
      ? [...p.workflow.plan, ...p.workflow.apply].flatMap((s) => ('extraArgs' in s ? s.extraArgs : []))
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
      executableName: this.d.config.executableName,
      verbose: c?.verbose,
    });
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

  private interrupted(p: ProjectSpec, cmd: ResultCommand): ProjectRun {
    return {
      status: 'interrupted',
      view: {
        dir: p.dir,
        workspace: p.workspace,
        projectName: p.name,
        outcome: { type: 'failure', reason: interruptedByShutdownComment(cmd, p.dir, p.workspace, p.name, this.d.config.executableName) },
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
