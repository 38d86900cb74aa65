// `approve_policies` for one project, decided as Atlantis v0.47's doApprovePolicies: for each
// configured policy set (in the config's order) with a recorded status, a set that passed or is
// approved enough is left alone (unless --clear-policy-approval), as is one --policy-set does
// not name; an owner of the set, or of every set (the top-level owners), adds an approval of
// the set's current items, or with --clear-policy-approval removes all its approvals; an owner
// who already approved these items, the PR's author when the set has prevent_self_approve, and
// anyone else get an error naming the set. Pure.
import { type PolicySetResult, type PolicySetStatus, currentApprovals, ownerHasFullyApproved } from './policy-results.js';
import { type PolicySets, isOwner } from './policy-sets.js';

export interface ApproveInput {
  sets: PolicySets;
  /** The project's recorded policy set statuses. */
  statuses: readonly PolicySetStatus[];
  user: string;
  /** The commenter's teams (asked for only when some set has team owners). */
  userTeams: readonly string[];
  /** The pull request's author. */
  author: string;
  /** --policy-set: '' for every set. */
  target: string;
  clear: boolean;
}

export interface ApproveOutcome {
  /** The sets as the comment shows them (no output) and the PR's status records them. */
  results: PolicySetResult[];
  /** One line per refusal (Atlantis joins its errors with newlines). */
  error?: string;
  /** Some set still needs approvals. */
  failure?: string;
}

export const NEEDS_APPROVAL = 'One or more policy sets require additional approval.';

export function approvePolicies(i: ApproveInput): ApproveOutcome {
  const admin = isOwner(i.sets.owners, i.user, i.userTeams);
  const errors: string[] = [];
  const results: PolicySetResult[] = [];
  let allPassed = true;
  const statuses = i.statuses.map((s) => ({ ...s, approvals: [...s.approvals] }));
  for (const set of i.sets.policySets) {
    const st = statuses.find((s) => s.policySetName === set.name);
    if (!st) continue;
    const owner = isOwner(set.owners, i.user, i.userTeams) || admin;
    const settled = st.passed || currentApprovals(st) >= set.approveCount;
    const ignored = (settled && !i.clear) || (i.target !== '' && i.target !== set.name);
    const self = i.user === i.author && set.preventSelfApprove;
    if (owner && !ignored && !self) {
      const already = ownerHasFullyApproved(st, i.user) && currentApprovals(st) < set.approveCount;
      if (already)
        errors.push(
          `policy set: already approved by ${i.user}; need ${set.approveCount - currentApprovals(st)} more approval(s) from a different policy owner`,
        );
      else if (i.clear) st.approvals = [];
      else st.approvals.push({ approver: i.user, hashes: st.hashes });
    } else if (owner && !ignored && self) {
      errors.push(
        `policy set: ${set.name} the author of pr ${i.author} matches the command commenter user ${i.user} - please contact another policy owners to approve failing policies`,
      );
    } else if (!ignored) {
      errors.push(
        `policy set: ${set.name} user ${i.user} is not a policy owner - please contact policy owners to approve failing policies`,
      );
    }
    if (!st.passed && currentApprovals(st) < set.approveCount) allPassed = false;
    results.push({
      policySetName: set.name,
      policyOutput: '',
      passed: st.passed,
      reqApprovalCount: set.approveCount,
      approvals: st.approvals,
      hashes: st.hashes,
      policyItemRegex: set.policyItemRegex,
    });
  }
  return {
    results,
    ...(errors.length > 0 ? { error: errors.join('\n') } : {}),
    ...(allPassed ? {} : { failure: NEEDS_APPROVAL }),
  };
}
