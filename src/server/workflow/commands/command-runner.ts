// Runs one accepted command of a pull request (autoplan, plan, apply, unlock, version,
// import, state rm, cancel, approve_policies): base-branch and team checks, the reaction,
// pre/post workflow hooks, and the command's own module (plan-command.ts, apply-command.ts,
// other-commands.ts) over the shared project-job machinery (project-job.ts). Called inside
// a tracked operation; everything here is I/O orchestration, the decisions live in pure modules.
import type { Logger } from '../../../log.js';
import type { ParsedCommand } from '../comment-parser/index.js';
import type { CommandRunnerDeps } from './command-deps.js';
import type { CommandRequest, PullContext } from './context.js';
import { commandErrorComment } from '../pr/messages.js';
import { hookRunFor, preHookFailedComment } from './hooks.js';
import { target } from './project-runs.js';
import { baseBranchAllowed } from '../repo-config/server-side.js';
import { teamPermits } from './team-gate.js';
import { type RequirementSources, requirementSourcesFor } from './requirement-checks.js';
import { ProjectJobs } from './project-job.js';
import { plan } from './plan-command.js';
import { apply } from './apply-command.js';
import { cancel, simple, unlock } from './other-commands.js';
import { approvePoliciesCommand } from './policy-checks.js';

export class CommandRunner {
  private readonly requirementSources: RequirementSources;
  private readonly jobs: ProjectJobs;

  constructor(private readonly d: CommandRunnerDeps) {
    this.requirementSources = requirementSourcesFor(d);
    this.jobs = new ProjectJobs(d, this.requirementSources);
  }

  async run(req: CommandRequest): Promise<void> {
    const name = req.kind === 'autoplan' ? 'plan' : req.command.name;
    const log = this.d.logger.child({ repo: req.ctx.repo, pull: req.ctx.pull, command: name });
    if (!baseBranchAllowed(this.d.serverRepoConfig, `${this.d.host.hostname}/${req.ctx.repo}`, req.ctx.baseRef)) {
      log.info("command was run on a pull request which doesn't match base branches");
      return;
    }
    // As Atlantis: a reaction only with --emoji-reaction, given before the team check. It is
    // cosmetic: it must not delay terraform, only the end of the operation.
    const emoji = this.d.config.emojiReaction;
    // A host without reactions gets none.
    const react = this.d.host.react?.bind(this.d.host);
    const reaction =
      react && req.kind === 'comment' && req.commentId !== undefined && emoji !== ''
        ? react(req.ctx.repo, req.ctx.pull, req.commentId, emoji).catch((e: unknown) =>
            log.warn('Failed to react to comment', { error: (e as Error).message }),
          )
        : Promise.resolve();
    const refuse = (body: string) => this.jobs.comment(req.ctx, body, name).catch(() => undefined);
    // The API has no user: its team rule is decided before it runs (http/api.ts).
    if (!req.ctx.api && !(await teamPermits(this.d, req, name, log, refuse))) return void (await reaction);
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
      if (req.ctx.api) req.ctx.api.error = (e as Error).message;
      // As Atlantis: a command that fails before running its projects (bad -p, bad config,
      // nothing to apply) fails its PR-wide status and answers "**Plan Error**" with the error.
      if (name === 'plan' || name === 'apply') await this.jobs.statuses.combined(target(req.ctx), name, 'failure');
      await this.jobs.comment(req.ctx, commandErrorComment(name, (e as Error).message), name).catch(() => undefined);
      commandHasErrors = true;
      await reaction;
    }
    // As Atlantis: post hooks run after the command whatever its outcome; their failure is only logged.
    await this.d.hooks?.run(hookRunFor(req, 'post', () => this.jobs.checkout(req.ctx, 'default'), commandHasErrors));
  }

  /**
   * Pre workflow hooks, before the command reads atlantis.yaml. A failure is logged; with
   * --fail-on-pre-workflow-hook-error it stops the command with Atlantis's comment and a
   * failed plan/apply status. False when the command must not run.
   */
  private async preHooks(req: CommandRequest, name: string, log: Logger): Promise<boolean> {
    const error = await this.d.hooks?.run(hookRunFor(req, 'pre', () => this.jobs.checkout(req.ctx, 'default')));
    if (error === undefined) return true;
    log.error('Error running pre-workflow hooks', { error });
    if (!this.d.config.failOnPreWorkflowHookError) return true;
    this.d.metrics.commandsTotal.inc({ command: name, result: 'error' });
    if (req.ctx.api) req.ctx.api.error = `pre-workflow hook failed: ${error}`;
    await this.jobs.comment(req.ctx, preHookFailedComment(error), name).catch(() => undefined);
    if (name === 'plan' || name === 'apply') await this.jobs.statuses.combined(target(req.ctx), name, 'failure');
    return false;
  }

  private async dispatch(req: CommandRequest): Promise<string> {
    if (req.kind === 'autoplan') return plan(this.jobs, req.ctx, undefined, true);
    const c = req.command;
    switch (c.name) {
      case 'cancel':
        return cancel(this.jobs, req.ctx);
      case 'plan':
        return plan(this.jobs, req.ctx, c, false);
      case 'apply':
        return apply(this.jobs, req.ctx, c);
      case 'unlock':
        return unlock(this.jobs, req.ctx);
      case 'version':
        return simple(this.jobs, req.ctx, c, 'version');
      case 'import':
        return simple(this.jobs, req.ctx, c, 'import');
      case 'state':
        return simple(this.jobs, req.ctx, c, 'state');
      case 'approve_policies':
        return approvePoliciesCommand(this.jobs, req.ctx, c);
    }
  }

  /**
   * The projects a command would run on, without running anything (the API checks every
   * target of a request before the first runs): the PR's checkout, its repo config, the target.
   */
  async projectsFor(ctx: PullContext, command: ParsedCommand): Promise<number> {
    return (await this.jobs.selection(ctx, command)).projects.length;
  }

  /** A closed PR: forget its cancel mark and project states. */
  forgetPull(repo: string, pull: number): void {
    this.jobs.scheduler.forget(repo, pull);
  }
}
