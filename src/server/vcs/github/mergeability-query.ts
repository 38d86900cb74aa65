// The PR mergeability GraphQL query of --gh-allow-mergeable-bypass-apply, asked as Atlantis
// asks it (vcs/github/client.go GetPullRequestMergeabilityInfo); the decision is pure, in
// mergeability.ts.
import type { MergeabilityInfo } from './mergeability.js';
import { GitHubApiError, type GitHubClient } from './client.js';

/**
 * What blocks a PR besides its merge conflicts, as Atlantis asks GraphQL for it with
 * --gh-allow-mergeable-bypass-apply: review decision, branch protection's and active
 * rulesets' required checks, approvals and workflows, and the head commit's check runs and
 * statuses. One page of 100 each; more than that throws (the command fails, as in Atlantis when
 * GitHub cannot tell).
 */
export async function getMergeabilityInfo(github: GitHubClient, repo: string, pull: number): Promise<MergeabilityInfo> {
  const query = `query($owner: String!, $name: String!, $number: Int!) { repository(owner: $owner, name: $name) { pullRequest(number: $number) {
reviewDecision latestOpinionatedReviews(first: 100) { nodes { state } }
baseRef { branchProtectionRule { requiredStatusChecks { context } }
  rules(first: 100) { pageInfo { hasNextPage } nodes { type repositoryRuleset { enforcement } parameters {
    ... on RequiredStatusChecksParameters { requiredStatusChecks { context } }
    ... on WorkflowsParameters { workflows { path } }
    ... on PullRequestParameters { requiredApprovingReviewCount } } } } }
commits(last: 1) { nodes { commit { statusCheckRollup { contexts(first: 100) { pageInfo { hasNextPage } nodes {
  __typename ... on CheckRun { name conclusion checkSuite { workflowRun { runNumber } } } ... on StatusContext { context state } } } } } } }
} } }`;
  const [owner, name] = repo.split('/');
  const r = await github.graphql(query, { owner, name, number: pull });
  const fail = (msg: string) => new GitHubApiError('POST', r.path, r.status, msg);
  type Rule = { type?: string; repositoryRuleset?: { enforcement?: string }; parameters?: Record<string, unknown> | null };
  type Ctx = {
    __typename?: string;
    name?: string;
    conclusion?: string | null;
    checkSuite?: { workflowRun?: { runNumber?: number } | null };
    context?: string;
    state?: string;
  };
  const j = (r.json ?? {}) as {
    data?: {
      repository?: {
        pullRequest?: {
          reviewDecision?: string | null;
          latestOpinionatedReviews?: { nodes?: Array<{ state?: string }> };
          baseRef?: {
            branchProtectionRule?: { requiredStatusChecks?: Array<{ context?: string }> } | null;
            rules?: { pageInfo?: { hasNextPage?: boolean }; nodes?: Rule[] };
          } | null;
          commits?: {
            nodes?: Array<{
              commit?: { statusCheckRollup?: { contexts?: { pageInfo?: { hasNextPage?: boolean }; nodes?: Ctx[] } } | null };
            }>;
          };
        } | null;
      } | null;
    };
    errors?: Array<{ message?: unknown }>;
  };
  const pr = j.data?.repository?.pullRequest;
  if (j.errors?.length || !pr) throw fail(String(j.errors?.[0]?.message ?? 'no pull request in the answer'));
  const commit = pr.commits?.nodes?.[0]?.commit;
  if (!commit) throw fail('no commits found on PR');
  const contexts = commit.statusCheckRollup?.contexts;
  if (pr.baseRef?.rules?.pageInfo?.hasNextPage || contexts?.pageInfo?.hasNextPage) throw fail('more than 100 rules or checks');
  const info: MergeabilityInfo = {
    reviewDecision: pr.reviewDecision ?? '',
    requiredApprovals: 0,
    approvals: (pr.latestOpinionatedReviews?.nodes ?? []).filter((n) => n.state === 'APPROVED').length,
    requiredChecks: [],
    requiredWorkflows: 0,
    checkRuns: [],
    statusContexts: [],
  };
  const required = new Set<string>();
  for (const c of pr.baseRef?.branchProtectionRule?.requiredStatusChecks ?? []) if (c.context) required.add(c.context);
  for (const rule of pr.baseRef?.rules?.nodes ?? []) {
    if (rule.repositoryRuleset?.enforcement !== 'ACTIVE') continue;
    const p = rule.parameters ?? {};
    if (rule.type === 'REQUIRED_STATUS_CHECKS')
      for (const c of (p.requiredStatusChecks ?? []) as Array<{ context?: string }>) if (c.context) required.add(c.context);
    if (rule.type === 'WORKFLOWS') info.requiredWorkflows += ((p.workflows ?? []) as unknown[]).length;
    if (rule.type === 'PULL_REQUEST')
      info.requiredApprovals = Math.max(info.requiredApprovals, Number(p.requiredApprovingReviewCount ?? 0));
  }
  info.requiredChecks = [...required];
  for (const c of contexts?.nodes ?? []) {
    if (c.__typename === 'CheckRun') {
      const run: MergeabilityInfo['checkRuns'][number] = { name: c.name ?? '', conclusion: c.conclusion ?? '' };
      const n = c.checkSuite?.workflowRun?.runNumber;
      if (typeof n === 'number') run.runNumber = n;
      info.checkRuns.push(run);
    } else if (c.__typename === 'StatusContext') info.statusContexts.push({ context: c.context ?? '', state: c.state ?? '' });
    else throw fail(`unknown type of status check, "${c.__typename}"`);
  }
  return info;
}
