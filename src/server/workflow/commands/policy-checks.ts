// Policy checks of a pull request, as Atlantis v0.47 runs them (events/policy_check_command_runner.go,
// approve_policies_command_runner.go, the policy parts of project_command_runner.go):
// - after a plan with no error, each planned project whose policy checks are on runs its
//   workflow's policy_check stage (default: show, then policy_check) as a job: conftest over the
//   plan, one result per policy set; `atlantis/policy_check` goes pending, then counts the PR's
//   projects that passed; the comment is posted unless --quiet-policy-checks and nothing failed;
// - `approve_policies` weighs the commenter against each set's owners (policy/approvals.ts)
//   for the projects with a plan, or the -p/-d/-w ones;
// - `policies_passed`, an apply requirement of every project whose policies are checked: every
//   configured set passed or is approved enough for the plan's head. Unlike Atlantis (which lets
//   a project without any recorded policy result through), no result is a refusal.
import { randomUUID } from 'node:crypto';
import { type ProjectOutcome, type PullStatus, policyCheckCombinedStatus, sameProject } from '../../locks/pull-status.js';
import { NEEDS_APPROVAL, approvePolicies } from '../../policy/approvals.js';
import { type PolicyLayout, type PolicyProjectView, renderPolicyComment } from '../../policy/policy-comments.js';
import {
  type PolicySetResult,
  type PolicySetStatus,
  currentApprovals,
  hasFailures,
  newPolicySetResult,
  policyCleared,
  statusOf,
} from '../../policy/policy-results.js';
import { type PolicySets, hasTeamOwners } from '../../policy/policy-sets.js';
import type { ParsedCommand } from '../comment-parser/index.js';
import type { PullContext } from './context.js';
import { buildApplyComment, buildPlanComment } from '../comment-parser/usage.js';
import { lockedByMessage } from '../pr/messages.js';
import type { ProjectJobs } from './project-job.js';
import { keyOf, target, targeted } from './project-runs.js';
import type { ProjectSpec } from '../checkout/projects.js';
import { projectForPlan } from '../checkout/projects.js';
import { DEFAULT_POLICY_CHECK_STAGE } from '../repo-config/types.js';
import { lockId, lockPath } from '../../locks/lock-id.js';
import { parseResultsJson } from '../jobs/policy-check-step.js';

export const POLICIES_MUST_PASS = 'All policies must pass for project before running apply.';
export const SOME_POLICIES_FAILED = 'Some policy sets did not pass.';

/** Whether the project's policies are checked: the server's flag, its policies, the repo's and project's policy_check. */
export function checksPolicies(j: ProjectJobs, p: Pick<ProjectSpec, 'policyCheck'>): boolean {
  return j.d.config.policy.enablePolicyChecks && j.d.serverRepoConfig?.policies !== undefined && p.policyCheck !== false;
}

interface PolicyRun {
  view: PolicyProjectView;
  outcome: ProjectOutcome | undefined;
  interrupted?: boolean;
}

const layout = (j: ProjectJobs, c: ParsedCommand | undefined): PolicyLayout => ({
  executableName: j.d.config.executableName,
  disableApplyAll: j.d.config.disableApplyAll || !j.d.config.allowCommands.includes('apply'),
  disableMarkdownFolding: j.d.config.disableMarkdownFolding,
  quietPolicyChecks: j.d.config.policy.quietPolicyChecks,
  ...(c?.verbose ? { verbose: true } : {}),
});

function commands(j: ProjectJobs, p: ProjectSpec, c: ParsedCommand | undefined, ctx: PullContext) {
  const exe = j.d.config.executableName;
  const key = { repo: ctx.repo, dir: p.dir, workspace: p.workspace, project: p.name };
  return {
    lockUrl: `${j.d.config.atlantisUrl}${lockPath(lockId(key.repo, key.dir, key.workspace, key.project))}`,
    applyCmd: buildApplyComment(exe, p.dir, p.workspace, p.name),
    replanCmd: buildPlanComment(exe, p.dir, p.workspace, p.name, c?.extraArgs ?? []),
    // Atlantis's approve_policies command names the project as its apply command does.
    approvePoliciesCmd: buildApplyComment(exe, p.dir, p.workspace, p.name).replace(`${exe} apply`, `${exe} approve_policies`),
  };
}

const label = (p: ProjectSpec) => ({ dir: p.dir, workspace: p.workspace, ...(p.name ? { projectName: p.name } : {}) });

/**
 * Splits the stage's outputs as Atlantis's doPolicyCheck: conftest's JSON is the first output
 * that parses; the ones before and after it are shown as they are. A custom policy check maps
 * each output, in order, to a configured set (conftest-like text: a failure count or FAIL fails it).
 */
export function policyResultsOf(
  raw: readonly string[],
  sets: PolicySets,
  custom: boolean,
): { results: PolicySetResult[]; pre: string; post: string } | { error: string } {
  // A run step's output as Atlantis keeps it: its lines joined, without the last newline.
  const outputs = raw.map((o) => o.replace(/\n$/, ''));
  if (custom) {
    const results = outputs.map((o, i) => {
      const set = sets.policySets[i];
      const name = set?.name ?? 'Custom';
      const regex = set?.policyItemRegex ?? sets.policyItemRegex;
      const count = set?.approveCount ?? Math.max(1, sets.approveCount);
      if (o === '')
        return newPolicySetResult(
          name,
          'WARNING: Policy check produced no output. This may indicate a misconfiguration.',
          false,
          count,
          regex,
        );
      const passed = !hasFailures(o) && !o.trim().startsWith('FAIL');
      return newPolicySetResult(name, o, passed, count, regex);
    });
    if (results.length === 0 && sets.policySets.length > 0)
      return { error: 'custom policy check produced no results despite configured policy sets' };
    return { results, pre: '', post: '' };
  }
  for (let i = 0; i < outputs.length; i++) {
    const results = parseResultsJson(outputs[i] ?? '');
    if (results) return { results, pre: outputs.slice(0, i).join('\n'), post: outputs.slice(i + 1).join('\n') };
  }
  return { error: 'unable to unmarshal conftest output' };
}

/** Sticky sets keep the approvals recorded before, as long as their item regex is the same. */
function carrySticky(results: PolicySetResult[], sets: PolicySets, before: readonly PolicySetStatus[]): void {
  for (const st of before) {
    const set = sets.policySets.find((s) => s.name === st.policySetName);
    if (!set?.stickyApprovals) continue;
    if (st.policyItemRegex !== '' && st.policyItemRegex !== set.policyItemRegex) continue;
    const r = results.find((x) => x.policySetName === st.policySetName);
    if (r) r.approvals = st.approvals;
  }
}

async function checkProject(
  j: ProjectJobs,
  ctx: PullContext,
  p: ProjectSpec,
  c: ParsedCommand | undefined,
  before: PullStatus | undefined,
): Promise<PolicyRun> {
  const sets = j.d.serverRepoConfig?.policies as PolicySets;
  const view: PolicyProjectView = label(p);
  const outcome = (ok: boolean, policyStatus?: PolicySetStatus[]): ProjectOutcome => ({
    ...keyOf(p),
    command: 'policy_check',
    ok,
    ...(policyStatus ? { policyStatus } : {}),
  });
  // As Atlantis: the plan's lock, taken again if it went meanwhile.
  const lock = await j.d.store.tryLock(
    { repo: ctx.repo, dir: p.dir, workspace: p.workspace },
    { pull: ctx.pull, user: ctx.user, project: p.name },
  );
  if (!lock.acquired)
    return { view: { ...view, failure: lockedByMessage(lock.holder.pull, j.d.config.executableName) }, outcome: outcome(false) };
  let result: PolicyRun | undefined;
  const run = await j.job(ctx, p, 'policy_check', [], randomUUID(), async (jobCtx) => {
    const r = await j.d.projectRunner.runSteps(p.workflow.policyCheck ?? [...DEFAULT_POLICY_CHECK_STAGE], jobCtx);
    if (r.interrupted) {
      result = {
        view: { ...view, error: 'the policy check was interrupted: the server shut down' },
        outcome: outcome(false),
        interrupted: true,
      };
      return j.interrupted(p);
    }
    if (!r.ok) {
      result = { view: { ...view, error: r.output.trim() }, outcome: outcome(false) };
      return j.error(p, r.output);
    }
    const parsed = policyResultsOf(r.outputs, sets, p.customPolicyCheck === true);
    if ('error' in parsed) {
      result = { view: { ...view, error: parsed.error }, outcome: outcome(false) };
      return j.error(p, parsed.error);
    }
    const recorded = before?.projects.find((x) => sameProject(x, keyOf(p)))?.policyStatus ?? [];
    carrySticky(parsed.results, sets, recorded);
    const cleared = policyCleared(parsed.results);
    result = {
      view: {
        ...view,
        results: {
          sets: parsed.results,
          ...(parsed.pre ? { preConftestOutput: parsed.pre } : {}),
          ...(parsed.post ? { postConftestOutput: parsed.post } : {}),
          ...commands(j, p, c, ctx),
        },
        ...(cleared ? {} : { failure: SOME_POLICIES_FAILED }),
      },
      outcome: outcome(cleared, parsed.results.map(statusOf)),
    };
    return cleared
      ? { status: 'success', view: { dir: p.dir, workspace: p.workspace, projectName: p.name, outcome: { type: 'success', output: '' } } }
      : j.failure(p, SOME_POLICIES_FAILED);
  });
  return (
    result ?? {
      view: { ...view, error: run.view.outcome.type === 'error' ? run.view.outcome.error : 'the policy check did not run' },
      outcome: outcome(false),
    }
  );
}

/**
 * The policy checks after a plan (`projects`: the ones planned, none failed). With no project
 * whose policies are checked, a comment's plan sets the 0/0 success an autoplan does not (as Atlantis).
 */
export async function runPolicyChecks(
  j: ProjectJobs,
  ctx: PullContext,
  projects: ProjectSpec[],
  c: ParsedCommand | undefined,
  autoplan: boolean,
): Promise<void> {
  const t = target(ctx);
  const checked = projects.filter((p) => checksPolicies(j, p));
  if (checked.length === 0) {
    if (!autoplan && !j.d.config.silenceVcsStatusNoProjects)
      await j.statuses.combinedCount(t, 'policy_check', 'success', { success: 0, total: 0, errored: 0, noChanges: 0 });
    return;
  }
  await j.statuses.combined(t, 'policy_check', 'pending');
  const before = await j.d.store.getPullStatus(ctx.repo, ctx.pull);
  const runs: PolicyRun[] = [];
  for (const p of checked) runs.push(await checkProject(j, ctx, p, c, before));
  const failed = runs.some((r) => r.view.error !== undefined || r.view.failure !== undefined);
  if (failed || !j.d.config.policy.quietPolicyChecks)
    await j
      .comment(
        ctx,
        renderPolicyComment(
          'policy_check',
          runs.map((r) => r.view),
          layout(j, c),
        ),
        'policy_check',
      )
      .catch(() => undefined);
  await afterPolicyCommand(j, ctx, runs);
}

async function afterPolicyCommand(j: ProjectJobs, ctx: PullContext, runs: PolicyRun[]): Promise<void> {
  const outcomes = runs.flatMap((r) => (r.outcome ? [r.outcome] : []));
  const ps = await j.d.store.updatePullStatus(ctx.repo, ctx.pull, ctx.headSha, outcomes);
  const s = policyCheckCombinedStatus(ps);
  await j.statuses.post(target(ctx), j.statuses.context('policy_check'), s.state, s.description);
}

/** `atlantis approve_policies` (-p/-d/-w, --policy-set, --clear-policy-approval). */
export async function approvePoliciesCommand(j: ProjectJobs, ctx: PullContext, c: ParsedCommand): Promise<string> {
  const t = target(ctx);
  const sets = j.d.serverRepoConfig?.policies;
  let projects: ProjectSpec[];
  try {
    if (targeted(c)) projects = (await j.selection(ctx, c)).projects;
    else {
      const { config, defaults } = j.repoSettings(ctx, await j.checkout(ctx, 'default'));
      projects = (await j.d.store.listPlans(ctx.repo, ctx.pull)).map((pl) => projectForPlan(config, pl.dir, pl.workspace, defaults));
    }
  } catch (e) {
    await j.statuses.combined(t, 'policy_check', 'failure');
    throw e;
  }
  await j.statuses.combined(t, 'policy_check', 'pending');
  if (projects.length === 0 && j.d.config.silenceNoProjects) {
    if (!j.d.config.silenceVcsStatusNoProjects)
      await j.statuses.combinedCount(t, 'policy_check', 'success', { success: 0, total: 0, errored: 0, noChanges: 0 });
    return 'success';
  }
  const status = await j.d.store.getPullStatus(ctx.repo, ctx.pull);
  const askTeams = sets !== undefined && hasTeamOwners(sets);
  const runs: PolicyRun[] = [];
  for (const p of projects) {
    const view: PolicyProjectView = label(p);
    const lock = await j.d.store.tryLock(
      { repo: ctx.repo, dir: p.dir, workspace: p.workspace },
      { pull: ctx.pull, user: ctx.user, project: p.name },
    );
    if (!lock.acquired) {
      runs.push({ view: { ...view, failure: lockedByMessage(lock.holder.pull, j.d.config.executableName) }, outcome: undefined });
      continue;
    }
    // As Atlantis: the commenter's teams are asked for each project once it is locked; a host
    // that cannot tell fails that project.
    let teams: string[] = [];
    if (askTeams)
      try {
        teams = await userTeamsOf(j, ctx.repo, ctx.user);
      } catch (e) {
        j.d.logger.error('unable to get team membership for user', { user: ctx.user, error: (e as Error).message });
        runs.push({ view: { ...view, error: (e as Error).message }, outcome: undefined });
        continue;
      }
    const recorded = status?.headSha === ctx.headSha ? (status.projects.find((x) => sameProject(x, keyOf(p)))?.policyStatus ?? []) : [];
    const decided = sets
      ? approvePolicies({
          sets,
          statuses: recorded,
          user: ctx.user,
          userTeams: teams,
          author: ctx.author ?? '',
          target: c.policySet ?? '',
          clear: c.clearPolicyApproval === true,
        })
      : { results: [] };
    const ok = decided.error === undefined && decided.failure === undefined;
    runs.push({
      view: {
        ...view,
        results: { sets: decided.results, ...commands(j, p, c, ctx) },
        ...(decided.error !== undefined ? { error: decided.error } : {}),
        ...(decided.failure !== undefined ? { failure: decided.failure } : {}),
      },
      outcome: { ...keyOf(p), command: 'approve_policies', ok, policyStatus: decided.results.map(statusOf) },
    });
  }
  await j
    .comment(
      ctx,
      renderPolicyComment(
        'approve_policies',
        runs.map((r) => r.view),
        layout(j, c),
      ),
      'approve_policies',
    )
    .catch(() => undefined);
  await afterPolicyCommand(j, ctx, runs);
  return runs.every((r) => r.outcome?.ok === true) ? 'success' : 'failure';
}

/** The commenter's teams in the repo's organisation, as the host tells them (none on a host without teams). */
async function userTeamsOf(j: ProjectJobs, repo: string, user: string): Promise<string[]> {
  return (await j.d.host.userTeams?.(repo, user)) ?? [];
}

/**
 * The `policies_passed` apply requirement of one project: its recorded results for the PR's
 * head cover every configured set, each passed or approved enough.
 */
export async function policiesPassedRefusal(j: ProjectJobs, ctx: PullContext, p: ProjectSpec): Promise<string | undefined> {
  if (!checksPolicies(j, p)) return undefined;
  const sets = j.d.serverRepoConfig?.policies as PolicySets;
  const status = await j.d.store.getPullStatus(ctx.repo, ctx.pull);
  const recorded = status?.headSha === ctx.headSha ? status.projects.find((x) => sameProject(x, keyOf(p)))?.policyStatus : undefined;
  if (!recorded || recorded.length === 0) return POLICIES_MUST_PASS;
  for (const set of sets.policySets) {
    const st = recorded.find((s) => s.policySetName === set.name);
    if (!st) return POLICIES_MUST_PASS;
    if (!st.passed && currentApprovals(st) < set.approveCount) return POLICIES_MUST_PASS;
  }
  return undefined;
}

export { NEEDS_APPROVAL };
