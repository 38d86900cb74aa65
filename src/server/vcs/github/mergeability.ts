// The `mergeable` and `approved` requirements as Atlantis v0.47's GitHub client judges them
// (PullIsMergeable, PullIsApproved): GitHub's mergeable_state, what its GraphQL says blocks a
// pull request with --gh-allow-mergeable-bypass-apply, and its reviews. Pure; the calls are in
// client.ts and mergeability-query.ts.
import type { MergeableStatus } from '../host.js';

/**
 * Atlantis's mapping of a GitHub pull request to "mergeable": not a draft, and
 * mergeable_state clean, unstable or has_hooks. `blocked` stays blocked unless
 * --gh-allow-mergeable-bypass-apply is set: then `minusApply` (what blocks it besides the
 * atlantis/apply status itself, see mergeableMinusApply) decides.
 */
export function mergeableStatus(pr: { draft: boolean; mergeableState: string }, bypass?: { minusApply: boolean }): MergeableStatus {
  if (pr.draft) return { mergeable: false, reason: 'PR is a draft' };
  const state = pr.mergeableState === '' ? '<unknown>' : pr.mergeableState;
  if (state === 'clean' || state === 'unstable' || state === 'has_hooks') return { mergeable: true };
  if (state === 'blocked' && bypass) {
    return bypass.minusApply
      ? { mergeable: true }
      : { mergeable: false, reason: 'PR is in state blocked, and cannot bypass mergeable requirements' };
  }
  return { mergeable: false, reason: `PR is in state ${state}` };
}

/** What GitHub's GraphQL says blocks a PR (branch protection, rulesets, the head's checks). */
export interface MergeabilityInfo {
  /** '' when GitHub gives none (no review rule, or reviews required through rulesets). */
  reviewDecision: string;
  /** Approvals a ruleset's pull_request rule asks for, and how many latest reviews approve. */
  requiredApprovals: number;
  approvals: number;
  requiredChecks: string[];
  /** Required workflows of active rulesets (not evaluated here: they always block). */
  requiredWorkflows: number;
  checkRuns: Array<{ name: string; conclusion: string; runNumber?: number }>;
  statusContexts: Array<{ context: string; state: string }>;
}

const PASSED_CONCLUSIONS = ['SUCCESS', 'SKIPPED', 'NEUTRAL'];

/**
 * Atlantis's IsMergeableMinusApply: mergeable but for the `<status name>/apply` checks (and the
 * checks of the other Atlantis servers named by --ignore-vcs-status-names). The
 * review decision must be APPROVED or empty, ruleset approvals met, and every other required
 * check passed: the check run of that name (the latest workflow run's when several), else the
 * commit status of that context.
 */
export function mergeableMinusApply(info: MergeabilityInfo, statusName = 'atlantis', ignoreStatusNames: readonly string[] = []): boolean {
  if (info.reviewDecision !== '' && info.reviewDecision !== 'APPROVED') return false;
  if (info.requiredApprovals > 0 && info.approvals < info.requiredApprovals) return false;
  for (const check of info.requiredChecks) {
    if (check.startsWith(`${statusName}/apply`)) continue;
    // --ignore-vcs-status-names: another Atlantis's statuses (`<name>/...`) do not hold this one's apply.
    if (ignoreStatusNames.includes(check.split('/')[0] ?? '')) continue;
    if (!checkPassed(check, info)) return false;
  }
  return info.requiredWorkflows === 0;
}

function checkPassed(name: string, info: MergeabilityInfo): boolean {
  const runs = info.checkRuns.filter((r) => r.name === name);
  const plain = runs.find((r) => r.runNumber === undefined);
  if (plain) return PASSED_CONCLUSIONS.includes(plain.conclusion);
  const latest = runs.sort((a, b) => (b.runNumber ?? 0) - (a.runNumber ?? 0))[0];
  if (latest) return PASSED_CONCLUSIONS.includes(latest.conclusion);
  const status = info.statusContexts.find((s) => s.context === name);
  return status?.state === 'SUCCESS';
}

/**
 * Atlantis's `approved`: some review of the PR is in state APPROVED, whatever came after it
 * from the same reviewer (GitHub turns a dismissed review's state into DISMISSED).
 */
export function approvedByReviews(reviews: ReadonlyArray<{ state: string }>): boolean {
  return reviews.some((r) => r.state === 'APPROVED');
}
