// The machinery every project command of a pull request shares: the PR's working copies,
// repo config and project selection, each project's repo_locks mode, running one project
// as a job, and the result comment. One instance per server, used by the command modules
// (plan-command.ts, apply-command.ts, other-commands.ts).
import { appendFileSync, mkdirSync, rmSync } from 'node:fs';
import path from 'node:path';
import { sleep } from '../../../async.js';
import { since } from '../../atlantis-metrics.js';
import type { Lease } from '../../locks/project-lease.js';
import type { PlanRecord } from '../../locks/state-store.js';
import type { ParsedCommand } from '../comment-parser/index.js';
import type { CommandRunnerDeps } from './command-deps.js';
import type { PullContext } from './context.js';
import { KeyedMutex } from '../../../concurrency.js';
import { type ResultCommand, renderResults } from '../pr/messages.js';
import { SaidOnce, unsupportedKeysComment } from '../repo-config/keys.js';
import { type RepoLocksMode, projectLockMode } from '../repo-config/lock-policy.js';
import { PrStatuses } from '../pr/pr-statuses.js';
import { type ProjectRun, projectsOf } from './project-runs.js';
import {
  type ProjectSpec,
  defaultsFor,
  readRepoConfig,
  repoConfigFileName,
  repoConfigFromText,
  selectProjects,
} from '../checkout/projects.js';
import { MAX_REMOTE_REPO_CONFIG_BYTES, type RemoteRepoConfig, cloneDecision } from '../checkout/skip-clone.js';
import type { FileContent } from '../../vcs/host.js';
import { serverLockSettingsFor, serverSettingsFor } from '../repo-config/server-side.js';
import type { RepoConfig, Workflow } from '../repo-config/types.js';
import { DirNotExistError, assertNoEscapingSymlink, assertPathArgsInside, projectDirInside } from '../checkout/checkout-paths.js';
import { blockedArgMessage, effectiveBlocked, firstBlockedArg } from '../comment-parser/extra-args.js';
import type { ProjectRunContext } from '../jobs/project-runner.js';
import { checkoutRequest } from '../checkout/working-copy.js';
import { hideBeforeResult, layoutOptions } from '../pr/result-comment.js';
import type { RequirementSources } from './requirement-checks.js';
import { ProjectScheduler } from '../jobs/project-scheduler.js';
import { Automerger } from '../automerge/automerge.js';

/** How long a job waits for another job's terraform in the same project, and how often it asks. */
export const LEASE_WAIT_MS = 10 * 60_000;
const LEASE_POLL_MS = 500;

export class ProjectJobs {
  readonly scheduler: ProjectScheduler;
  readonly checkoutMutex = new KeyedMutex();
  /** Workflows defined by a repo's own atlantis.yaml: their extra_args are PR input. */
  private readonly repoWorkflows = new WeakSet<Workflow>();
  readonly automerger: Automerger;
  private readonly noticed = new SaidOnce();
  /** Each selected project's repo_locks mode (lock-policy.ts), set where projects are selected. */
  private readonly lockModes = new WeakMap<ProjectSpec, RepoLocksMode>();
  readonly statuses: PrStatuses;

  constructor(
    readonly d: CommandRunnerDeps,
    readonly requirementSources: RequirementSources,
  ) {
    this.scheduler = new ProjectScheduler(d.config.parallelPoolSize);
    this.automerger = new Automerger(d);
    this.statuses = new PrStatuses({
      host: d.host,
      store: d.store,
      metrics: d.metrics,
      logger: d.logger,
      atlantisUrl: d.config.atlantisUrl,
      statusName: d.config.vcsStatusName,
    });
  }

  /**
   * Deletes plans (records and files); with `unlockFor`, releases this PR's locks of those
   * projects. Each step is one atomic store call on this PR's own records: a plan of this PR
   * saved between two of them is deleted or kept as if saved just before or just after.
   */
  async discardPlans(ctx: PullContext, plans: PlanRecord[], unlockFor: ProjectSpec[] = projectsOf(plans)): Promise<void> {
    for (const pl of plans) {
      await this.d.store.deletePlan(ctx.repo, ctx.pull, pl.dir, pl.workspace);
      rmSync(pl.planPath, { force: true });
    }
    for (const p of unlockFor) {
      if (this.lockModes.get(p) === 'on_plan' || !this.lockModes.has(p))
        await this.d.store.unlockIfOwnedBy({ repo: ctx.repo, dir: p.dir, workspace: p.workspace }, ctx.pull);
    }
  }

  /** Projects of a command (from -p/-d/-w, or the ones the PR modifies) and the repo config they come from. */
  async selection(ctx: PullContext, c: ParsedCommand | undefined) {
    const targeted = c !== undefined && (c.dir !== undefined || c.workspace !== undefined || c.project !== undefined);
    const changed = targeted ? [] : await this.d.host.changedFiles(ctx.repo, ctx.pull);
    if (!targeted) {
      const unchanged = await this.configWithoutClone(ctx, changed);
      if (unchanged) return { projects: [] as ProjectSpec[], config: this.settingsOf(ctx, unchanged).config };
    }
    const checkout = await this.checkout(ctx, 'default');
    const { config, defaults } = this.repoSettings(ctx, checkout);
    const projects = selectProjects(config, checkout, changed, c, defaults).map((p) => this.withLockMode(ctx, config, p));
    return { projects, config };
  }

  /**
   * --skip-clone-no-changes: the repo config of the PR's head commit read through the host's
   * API, when it shows that no project is modified (skip-clone.ts); undefined: clone. The
   * text is PR input, checked as a cloned one is; a failed read fails the command, as in
   * Atlantis. The head commit, not the branch: what is judged is what the clone would check out.
   */
  private async configWithoutClone(ctx: PullContext, changed: string[]): Promise<RepoConfig | undefined> {
    const read = this.d.host.fileContent?.bind(this.d.host);
    if (!this.d.config.skipCloneNoChanges || !read || !ctx.headRepo || ctx.api) return undefined;
    const repoId = `${this.d.host.hostname}/${ctx.repo}`;
    const file = repoConfigFileName(this.d.serverRepoConfig, repoId);
    const log = this.d.logger.child({ repo: ctx.repo, pull: ctx.pull, headSha: ctx.headSha });
    let got: FileContent;
    try {
      got = await read(ctx.headRepo, ctx.headSha, file, MAX_REMOTE_REPO_CONFIG_BYTES);
    } catch (e) {
      throw new Error(`downloading ${file}: ${(e as Error).message}`);
    }
    const remote: RemoteRepoConfig =
      got.kind === 'file' ? { kind: 'config', config: repoConfigFromText(got.text, this.d.serverRepoConfig, repoId, ctx.baseRef) } : got;
    const decision = cloneDecision(remote, changed, file);
    if (decision.clone) {
      log.info(`Cloning: ${decision.why}`);
      return undefined;
    }
    log.info(`Skipping the clone: no project of the remote ${file} is modified`);
    return remote.kind === 'config' ? remote.config : undefined;
  }

  /** Records the project's repo_locks mode (server config, atlantis.yaml, --disable-repo-locking). */
  withLockMode<P extends ProjectSpec>(ctx: PullContext, config: RepoConfig | undefined, p: P): P {
    const server = serverLockSettingsFor(this.d.serverRepoConfig, `${this.d.host.hostname}/${ctx.repo}`);
    this.lockModes.set(p, projectLockMode(this.d.config.disableRepoLocking, server, config, p));
    return p;
  }

  lockMode(p: ProjectSpec): RepoLocksMode {
    return this.lockModes.get(p) ?? (this.d.config.disableRepoLocking ? 'disabled' : 'on_plan');
  }

  repoSettings(ctx: PullContext, checkout: string) {
    return this.settingsOf(ctx, readRepoConfig(checkout, this.d.serverRepoConfig, `${this.d.host.hostname}/${ctx.repo}`, ctx.baseRef));
  }

  /** The server-side defaults for the PR's repo, with its repo config (the keys it goes on without said once per commit). */
  private settingsOf(ctx: PullContext, config: RepoConfig | undefined) {
    const repoId = `${this.d.host.hostname}/${ctx.repo}`;
    for (const w of Object.values(config?.workflows ?? {})) this.repoWorkflows.add(w);
    const notices = config?.unsupported.filter((u) => u.kind === 'notice') ?? [];
    // One comment per commit naming the keys the command goes on without.
    if (notices.length > 0 && this.noticed.first(`${ctx.repo}#${ctx.pull}@${ctx.headSha}`))
      void this.comment(
        ctx,
        unsupportedKeysComment(serverSettingsFor(this.d.serverRepoConfig, repoId).repoConfigFile ?? 'atlantis.yaml', notices),
        'config',
      ).catch(() => undefined);
    const defaults = {
      ...defaultsFor(this.d.serverRepoConfig, repoId),
      silenceNoProjects: this.d.config.silenceNoProjects,
      enableRegexpCmd: this.d.config.enableRegexpCmd,
    };
    return { config, defaults };
  }

  /** One project of plan, apply, import or state, counted and timed under Atlantis's metric names too. */
  async measured(command: string, ctx: PullContext, p: ProjectSpec, fn: () => Promise<ProjectRun>): Promise<ProjectRun> {
    if (!['plan', 'apply', 'import', 'state'].includes(command)) return fn();
    const started = process.hrtime.bigint();
    const labels = {
      repo: ctx.repo,
      pull: ctx.pull,
      project: p.name ?? '',
      dir: p.dir,
      workspace: p.workspace,
      terraformVersion: p.terraformVersion ?? '',
    };
    try {
      const run = await fn();
      const t = run.view.outcome.type;
      this.d.metrics.atlantis.project(command, labels, t === 'success' ? 'success' : t === 'failure' ? 'failure' : 'error', since(started));
      return run;
    } catch (e) {
      this.d.metrics.atlantis.project(command, labels, 'error', since(started));
      throw e;
    }
  }

  guarded(ctx: PullContext, p: ProjectSpec, fn: () => Promise<ProjectRun>): Promise<ProjectRun> {
    return this.scheduler.guarded({ repo: ctx.repo, pull: ctx.pull, dir: p.dir, workspace: p.workspace }, fn);
  }

  /** The PR's working copy, refused when a symlink in it leads outside (checked before anything reads it). */
  async checkout(ctx: PullContext, workspace: string): Promise<string> {
    return this.checkoutMutex.run(`${ctx.repo}#${ctx.pull}#${workspace}`, async () => {
      const dir = await this.d.copies.checkout(checkoutRequest(ctx, workspace));
      await this.d.copies.verifyOnce(dir, assertNoEscapingSymlink);
      return dir;
    });
  }

  /**
   * The project's real dir, after refusing PR input that reaches outside the checkout: a dir
   * through a symlink, blocked flags or outside files in the comment's args or in extra_args
   * of a workflow from the repo's own atlantis.yaml (server-side workflows are trusted).
   */
  async checkedProjectDir(wc: string, p: ProjectSpec, commentArgs: string[]): Promise<string> {
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
  async job(
    ctx: PullContext,
    p: ProjectSpec,
    command: string,
    commentArgs: string[],
    id: string,
    fn: (jc: ProjectRunContext, lease: Lease) => Promise<ProjectRun>,
  ): Promise<ProjectRun> {
    const wc = await this.checkout(ctx, p.workspace);
    const logFile = this.d.jobLogPath(id);
    this.d.jobs.start({ id, command, repo: ctx.repo, pull: ctx.pull, project: p.name ?? null, dir: p.dir, workspace: p.workspace });
    await this.d.store.jobStarted({ id, command, repo: ctx.repo, pull: ctx.pull, project: p.name, dir: p.dir, workspace: p.workspace });
    let run: ProjectRun;
    let lease: Lease | undefined;
    try {
      // Held from before the first step in the project dir until the job ends, however it ends.
      lease = await this.projectLease(ctx, p, id, logFile);
      const projectDir = await this.checkedProjectDir(wc, p, commentArgs);
      run = await fn(
        {
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
          ...(p.terraformDistribution ? { terraformDistribution: p.terraformDistribution } : {}),
          ...(this.d.serverRepoConfig?.policies ? { policySets: this.d.serverRepoConfig.policies } : {}),
          commentArgs,
          logFile,
          onOutput: (chunk) => this.d.jobs.append(id, chunk),
        },
        lease,
      );
    } catch (e) {
      run = { ...this.error(p, (e as Error).message), ...(e instanceof DirNotExistError ? { dirMissing: true as const } : {}) };
    } finally {
      await lease
        ?.release()
        .catch((e: Error) => this.d.logger.warn('Could not release the project lease', { jobId: id, error: e.message }));
    }
    const final = run.status === 'running' ? 'error' : run.status;
    await this.d.jobs.finish(id, final);
    await this.d.store.jobFinished(id, final, run.view.outcome.type);
    return run;
  }

  /**
   * The project's lease (project-lease.ts): while another job (of any PR, on any replica) runs
   * terraform in this repo + dir + workspace, waits for it, saying so in the job log, up to
   * LEASE_WAIT_MS; then the project fails and nothing ran.
   */
  private async projectLease(ctx: PullContext, p: ProjectSpec, jobId: string, logFile: string): Promise<Lease> {
    const key = { repo: ctx.repo, dir: p.dir, workspace: p.workspace };
    const end = Date.now() + LEASE_WAIT_MS;
    let said = '';
    for (;;) {
      const r = await this.d.leases.acquire(key, { replicaId: this.d.config.replicaId, jobId });
      if (r.held) return r.lease;
      const who = `${r.holder.replicaId} (job ${r.holder.jobId})`;
      if (who !== said) {
        said = who;
        const line = `waiting for ${who} to finish terraform in this project\n`;
        mkdirSync(path.dirname(logFile), { recursive: true, mode: 0o700 });
        appendFileSync(logFile, line, { mode: 0o600 });
        this.d.jobs.append(jobId, line);
        this.d.logger.info('Waiting for the project lease', { ...key, pull: ctx.pull, jobId, holder: r.holder });
      }
      if (Date.now() >= end)
        throw new Error(
          `${who} was still running terraform in this project after a ${LEASE_WAIT_MS / 60_000}-minute wait; nothing was run here, try again when it is done`,
        );
      await sleep(LEASE_POLL_MS);
    }
  }

  /** The result comment of a command; a lost comment is logged and counted by comment(). */
  async postResults(ctx: PullContext, cmd: ResultCommand, runs: ProjectRun[], c: ParsedCommand | undefined): Promise<void> {
    // An API run answers with the results instead (as Atlantis, no comment).
    if (ctx.api) return void ctx.api.runs.push(...runs);
    const body = renderResults({
      command: cmd,
      subName: c?.subName,
      results: runs.map((r) => r.view),
      ...layoutOptions(this.d.config),
      ...(this.d.host.pullRequestName === undefined ? {} : { pullRequestName: this.d.host.pullRequestName }),
      verbose: c?.verbose,
    });
    await hideBeforeResult(this.d, ctx, cmd, c?.dir);
    await this.comment(ctx, body, cmd).catch(() => undefined);
  }

  failure(p: ProjectSpec, reason: string): ProjectRun {
    return { status: 'failure', view: { dir: p.dir, workspace: p.workspace, projectName: p.name, outcome: { type: 'failure', reason } } };
  }

  error(p: ProjectSpec, output: string): ProjectRun {
    return {
      status: 'failure',
      view: { dir: p.dir, workspace: p.workspace, projectName: p.name, outcome: { type: 'error', error: output.trim() } },
    };
  }

  interrupted(p: ProjectSpec): ProjectRun {
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

  async comment(ctx: PullContext, body: string, command: string): Promise<void> {
    // As Atlantis: an API run comments nothing on the PR.
    if (ctx.api) return;
    try {
      await this.d.host.comment(ctx.repo, ctx.pull, body, { command });
    } catch (e) {
      this.d.metrics.githubRequestFailures.inc({ operation: 'create_comment' });
      this.d.logger.error('Could not post PR comment', { repo: ctx.repo, pull: ctx.pull, command, error: (e as Error).message });
      throw e;
    }
  }
}
