// What a policy check found, per policy set, and what approvals count, as Atlantis v0.47's
// models (server/events/models: PolicySetResult, PolicySetStatus, PolicyCheckResults). An
// approval covers the set's current output: the output is cut into items by the set's
// policy_item_regex (default: the whole output), each item hashed (sha256); an approval counts
// while its hashes cover every current item, so a changed policy failure needs a new approval.
// Pure.
import { createHash } from 'node:crypto';

export interface PolicySetApproval {
  approver: string;
  hashes: string[];
}

/** One policy set's result for one project, as stored in the PR's status and shown in comments. */
export interface PolicySetResult {
  policySetName: string;
  policyOutput: string;
  passed: boolean;
  reqApprovalCount: number;
  approvals: PolicySetApproval[];
  hashes: string[];
  policyItemRegex: string;
}

/** What the PR's status keeps of a set (Atlantis's PolicySetStatus: no output). */
export type PolicySetStatus = Omit<PolicySetResult, 'policyOutput' | 'reqApprovalCount'>;

/**
 * A policy_item_regex, written for Go's RE2, as a JS regex: leading inline flags (`(?s)`,
 * `(?i)`, `(?m)`, combined) become flags; global, so every item is found.
 */
export function compileItemRegex(source: string): RegExp {
  let flags = 'gu';
  let body = source;
  const m = /^\(\?([ims]+)\)/.exec(body);
  if (m) {
    for (const f of new Set(m[1])) flags += f;
    body = body.slice(m[0].length);
  }
  return new RegExp(body, flags);
}

export const hashItem = (item: string): string => createHash('sha256').update(item, 'utf8').digest('hex');

/** The items a regex finds in an output (non-empty matches, in order, as Go's FindAllString). */
export function policyItems(output: string, regex: string): string[] {
  const re = compileItemRegex(regex);
  const out: string[] = [];
  for (const m of output.matchAll(re)) if (m[0] !== '') out.push(m[0]);
  return out;
}

/** Distinct hashes of the items in first-seen order; with none, the hash of the whole output. */
export function policyItemHashes(output: string, regex: string): string[] {
  const hashes = [...new Set(policyItems(output, regex).map(hashItem))];
  return hashes.length > 0 ? hashes : [hashItem(output)];
}

export function newPolicySetResult(
  name: string,
  output: string,
  passed: boolean,
  reqApprovalCount: number,
  regex: string,
): PolicySetResult {
  return {
    policySetName: name,
    policyOutput: output,
    passed,
    reqApprovalCount,
    approvals: [],
    hashes: policyItemHashes(output, regex),
    policyItemRegex: regex,
  };
}

const covers = (approval: readonly string[], required: readonly string[]): boolean =>
  required.length === 0 || required.every((h) => approval.includes(h));

/** Approvals that cover every current item. */
export function currentApprovals(s: Pick<PolicySetStatus, 'approvals' | 'hashes'>): number {
  return s.approvals.filter((a) => covers(a.hashes, s.hashes)).length;
}

export function ownerHasFullyApproved(s: Pick<PolicySetStatus, 'approvals' | 'hashes'>, owner: string): boolean {
  return s.approvals.some((a) => a.approver === owner && covers(a.hashes, s.hashes));
}

/** Every hash any approval covered (to show which items were approved before). */
export function approvedHashes(s: Pick<PolicySetStatus, 'approvals'>): string[] {
  return [...new Set(s.approvals.flatMap((a) => a.hashes))];
}

/** Passed, or approved enough: Atlantis's PolicyCleared over a project's results. */
export function policyCleared(results: readonly PolicySetResult[]): boolean {
  return results.every((r) => r.passed || currentApprovals(r) >= r.reqApprovalCount);
}

/** Atlantis's PolicySummary, one line per set. */
export function policyApprovalSummary(results: readonly PolicySetResult[]): string {
  return results
    .map((r) => {
      if (r.passed) return `policy set: ${r.policySetName}: passed.`;
      const have = currentApprovals(r);
      if (have >= r.reqApprovalCount) return `policy set: ${r.policySetName}: approved.`;
      return `policy set: ${r.policySetName}: requires: ${r.reqApprovalCount} approval(s), have: ${have}.`;
    })
    .join('\n');
}

/** Atlantis's Summary: conftest's count line of each set ("1 test, 0 passed, ..."). */
export function conftestSummary(results: readonly PolicySetResult[]): string {
  const lines: string[] = [];
  for (const r of results) {
    const m = /\d+ tests?, \d+ passed, \d+ warnings?, \d+ failures?, \d+ exceptions?(, \d skipped)?/.exec(r.policyOutput);
    if (m) lines.push(`policy set: ${r.policySetName}: ${m[0]}`);
  }
  return lines.join('\n');
}

/** Atlantis's CombinedOutput (what decides whether the comment folds): each output after a newline. */
export function combinedOutput(results: readonly PolicySetResult[]): string {
  return results.map((r) => `\n${r.policyOutput}`).join('');
}

/** What conftest printed is its own report (Atlantis's isValidConftestOutput), not an error of conftest. */
export const isConftestReport = (output: string): boolean => /^(WARN|FAIL|\[)/.test(output);

/**
 * A report with a failure in it (Atlantis's hasFailures, `([1-9][0-9]* failure|failures": \[)`,
 * also for `--no-fail` and JSON output): a run of digits with one not 0 right before " failure",
 * or a JSON failures list. A scan, not that regex: the output carries what the PR put in its
 * plan, and a backtracking engine spends quadratic time on a long run of digits.
 */
export function hasFailures(output: string): boolean {
  if (output.includes('failures": [')) return true;
  for (let i = output.indexOf(' failure'); i !== -1; i = output.indexOf(' failure', i + 1)) {
    // A digit run precedes at most one " failure": each digit is looked at once.
    for (let j = i - 1; j >= 0; j--) {
      const c = output.charCodeAt(j);
      if (c < 48 || c > 57) break;
      if (c !== 48) return true;
    }
  }
  return false;
}

/** The stored status of a set's result. */
export const statusOf = (r: PolicySetResult): PolicySetStatus => ({
  policySetName: r.policySetName,
  passed: r.passed,
  approvals: r.approvals,
  hashes: r.hashes,
  policyItemRegex: r.policyItemRegex,
});
