// The API's plan and apply (POST /api/plan, /api/apply; http/api.ts answers) through the same
// command code as a comment (command-runner.ts): working copies, repo config, locks, plans,
// statuses, hooks, the project lease. As Atlantis v0.47's APIController: no PR comment, the
// results are the answer; /api/apply plans its targets first and answers the apply's results;
// every target is checked before the first runs. A pull request number runs on that PR (its
// head must be the ref) and keeps what it took, as a comment's plan does: the locks stay with
// the plans until the PR closes or is unlocked. Without one the ref runs in a working copy of
// its own under a pull number of its own (negative, as Atlantis's), and everything of it
// (locks, plans, plan status, working copy) goes at the end, as Atlantis releases it.
// Atlantis v0.47 releases every lock of a PR at the end of a PR's API run too, which left its
// plans applicable without the lock (another PR could lock and plan the project meanwhile): a
// deliberate difference (docs/server.md).
import { randomInt } from 'node:crypto';
import { rmSync } from 'node:fs';
import type { Logger } from '../../../log.js';
import type { ServerConfig } from '../../config.js';
import type { ApiRequest, ApiTarget } from '../../http/api-request.js';
import type { StateStore } from '../../locks/state-store.js';
import type { PullRequest, VcsHost } from '../../vcs/host.js';
import type { ParsedCommand } from '../comment-parser/index.js';
import type { CommandRunner } from './command-runner.js';
import type { ApiRun, PullContext } from './context.js';
import type { ProjectRun } from './project-runs.js';
import { gatePull } from './pull-gate.js';
import type { WorkingCopies } from '../checkout/working-copy.js';

export interface ApiCommandDeps {
  config: Pick<ServerConfig, 'allowForkPrs' | 'silenceForkPrErrors' | 'apiSecret' | 'teamAllowlist' | 'disableGlobalApplyLock'>;
  runner: CommandRunner;
  store: StateStore;
  host: VcsHost;
  copies: WorkingCopies;
  logger: Logger;
  /** The plugin's count of a PR's running commands: a close meanwhile releases what they take after it. */
  began: (repo: string, pull: number) => void;
  ended: (repo: string, pull: number) => Promise<void>;
}

/**
 * Releases everything a run without a pull request left (locks, plans, plan status, working
 * copy): nobody else would, no pull request of it ever closes.
 */
export async function releasePullless(d: Pick<ApiCommandDeps, 'store' | 'copies' | 'runner'>, repo: string, pull: number): Promise<void> {
  const { plans } = await d.store.unlockAllForPull(repo, pull, { discardPlans: true });
  for (const p of plans) rmSync(p.planPath, { force: true });
  await d.store.deletePullStatus(repo, pull);
  d.copies.remove(repo, pull);
  d.runner.forgetPull(repo, pull);
}

export type ApiOutcome =
  | { kind: 'result'; runs: ProjectRun[] }
  /** Nothing ran (400, 403), or a command stopped before or between its projects (500). */
  | { kind: 'error'; status: 400 | 403 | 500; message: string };

type Refusal = Extract<ApiOutcome, { kind: 'error' }>;
const refusal = (status: Refusal['status'], message: string): Refusal => ({ kind: 'error', status, message });

/** A pull number of its own for a run without a pull request: negative, so never a PR's. */
export function pulllessNumber(): number {
  return -randomInt(1, 2 ** 31);
}

export function commandFor(name: 'plan' | 'apply', t: ApiTarget): ParsedCommand {
  const c: ParsedCommand = { name, verbose: false, autoMergeDisabled: false, extraArgs: [], args: [] };
  if (t.project !== undefined) c.project = t.project;
  if (t.dir !== undefined) c.dir = t.dir;
  if (t.workspace !== undefined) c.workspace = t.workspace;
  return c;
}

/** The pull request's context, or why the request cannot run on it. */
async function pullContext(d: ApiCommandDeps, command: 'plan' | 'apply', req: ApiRequest): Promise<PullContext | Refusal> {
  const repo = req.repository;
  let pr: PullRequest;
  try {
    pr = await d.host.getPull(repo, req.pull);
  } catch (e) {
    if (d.host.isNotFound(e)) return refusal(400, `PR: ${repo} has no pull request #${req.pull}`);
    throw e;
  }
  const gate = gatePull({ state: pr.state, headRepo: pr.headRepo, baseRepo: pr.baseRepo }, command, d.config);
  if (gate.kind === 'refuse')
    return refusal(
      403,
      gate.reason === 'fork'
        ? `PR: pull request #${req.pull} comes from a fork, and --allow-fork-prs is off`
        : `PR: pull request #${req.pull} is not open`,
    );
  // The PR's working copies hold its head: another ref would run other code under its locks.
  if (req.ref !== pr.headRef && req.ref !== pr.headSha)
    return refusal(
      400,
      `Ref: ${JSON.stringify(req.ref)} is not the head of pull request #${req.pull} (its head branch is ${JSON.stringify(pr.headRef)})`,
    );
  return {
    repo,
    pull: req.pull,
    user: '',
    cloneUrl: pr.headCloneUrl ?? (await d.host.cloneUrl(repo)),
    baseCloneUrl: pr.baseCloneUrl ?? pr.headCloneUrl,
    headSha: pr.headSha,
    headRef: pr.headRef,
    baseRef: pr.baseRef,
    author: pr.author,
    headRepo: pr.headRepo ?? repo,
  };
}

/** A ref without a pull request: its own pull number and working copy, the ref checked out as it is now. */
async function refContext(d: ApiCommandDeps, req: ApiRequest): Promise<PullContext | Refusal> {
  const repo = req.repository;
  let cloneUrl: string;
  try {
    cloneUrl = await d.host.cloneUrl(repo);
  } catch (e) {
    if (d.host.isNotFound(e)) return refusal(400, `Repository: ${repo} was not found`);
    throw e;
  }
  const headSha = await d.copies.branchHead(cloneUrl, req.ref);
  if (!headSha) return refusal(400, `Ref: ${repo} has no branch ${JSON.stringify(req.ref)}`);
  return {
    repo,
    pull: pulllessNumber(),
    user: '',
    cloneUrl,
    headSha,
    headRef: req.ref,
    // As Atlantis without base_branch: the ref is its own base (server-side branch rules, hooks).
    baseRef: req.ref,
    headRepo: repo,
    strategy: 'branch',
  };
}

/** Runs the request's command; the outcome is the answer. Throws only on an unexpected failure (500). */
export async function runApiCommand(d: ApiCommandDeps, command: 'plan' | 'apply', req: ApiRequest): Promise<ApiOutcome> {
  const ctx = req.pull > 0 ? await pullContext(d, command, req) : await refContext(d, req);
  if ('kind' in ctx) return ctx;
  const api: ApiRun = { runs: [] };
  const run: PullContext = { ...ctx, api };
  const { repo, pull } = run;
  const log = d.logger.child({ repo, pull, command: `api ${command}` });
  d.began(repo, pull);
  try {
    const plans = req.targets.map((t) => commandFor('plan', t));
    for (const c of plans) {
      try {
        await d.runner.projectsFor(run, c);
      } catch (e) {
        // Atlantis's words (getCommands); nothing has run.
        return refusal(500, `failed to build command: ${(e as Error).message}`);
      }
    }
    const stopped = await runAll(d, run, plans);
    if (stopped) return stopped;
    if (command === 'apply') {
      // As Atlantis: the answer of /api/apply is the apply's, after the plan of the same targets.
      api.runs = [];
      const applyStopped = await runAll(
        d,
        run,
        req.targets.map((t) => commandFor('apply', t)),
      );
      if (applyStopped) return applyStopped;
    }
    log.info('API command finished', { projects: api.runs.length, failed: api.runs.filter((r) => r.status !== 'success').length });
    return { kind: 'result', runs: api.runs };
  } finally {
    // A PR's run keeps its locks and plans; a ref's pull number and all it left go.
    if (pull <= 0)
      await releasePullless(d, repo, pull).catch((e: Error) =>
        log.error('Could not release what an API command took', { error: e.message }),
      );
    await d.ended(repo, pull).catch((e: Error) => log.error('Could not release a closed pull request', { error: e.message }));
  }
}

/** Runs each command in turn; an error that stopped one ends the request there (500, as Atlantis). */
async function runAll(d: ApiCommandDeps, ctx: PullContext, commands: ParsedCommand[]): Promise<Refusal | undefined> {
  for (const c of commands) {
    await d.runner.run({ kind: 'comment', ctx, command: c });
    const error = ctx.api?.error;
    if (error !== undefined) return refusal(500, error);
  }
  return undefined;
}
