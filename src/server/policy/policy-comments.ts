// The comments of `policy_check` (after a plan) and `approve_policies`, laid out as Atlantis
// v0.47's templates (policy_check.tmpl, policy_check_results_*.tmpl, multi_project_policy*.tmpl,
// single_project_policy_unsuccessful.tmpl, approve_all_projects.tmpl), whitespace included:
// the differential fixtures (test/fixtures/atlantis-v0.47/policy-scenario.json) hold what
// Atlantis posts. Pure.
import {
  type PolicySetResult,
  approvedHashes,
  combinedOutput,
  conftestSummary,
  hashItem,
  policyApprovalSummary,
  policyCleared,
  policyItems,
} from './policy-results.js';

/** Atlantis folds output with more than this many newlines. */
const MAX_UNWRAPPED_LINES = 12;

export type PolicyCommand = 'policy_check' | 'approve_policies';

/** One project's policy results, or why it has none. */
export interface PolicyProjectView {
  dir: string;
  workspace: string;
  projectName?: string;
  /** Present when the check ran (or approvals were weighed). */
  results?: {
    sets: PolicySetResult[];
    /** Output of the stage's steps before conftest's (run steps), and after. */
    preConftestOutput?: string;
    postConftestOutput?: string;
    lockUrl: string;
    applyCmd: string;
    replanCmd: string;
    approvePoliciesCmd: string;
  };
  /** The project's error (conftest could not run, an approval refused). */
  error?: string;
  /** The project's failure (policies failed, approvals missing, the lock held). */
  failure?: string;
}

export interface PolicyLayout {
  executableName?: string;
  disableApplyAll?: boolean;
  disableMarkdownFolding?: boolean;
  /** --quiet-policy-checks: projects that passed are left out of a multi-project comment. */
  quietPolicyChecks?: boolean;
  verbose?: boolean;
  log?: string;
}

const TITLES: Record<PolicyCommand, string> = { policy_check: 'Policy Check', approve_policies: 'Approve Policies' };

const shell = (cmd: string): string => `  \`\`\`shell\n  ${cmd}\n  \`\`\``;

const label = (v: PolicyProjectView): string =>
  `${v.projectName ? `project: \`${v.projectName}\` ` : ''}dir: \`${v.dir}\` workspace: \`${v.workspace}\``;

function logBlock(o: PolicyLayout): string {
  return o.verbose ? `<details><summary>Log</summary>\n<p>\n\n\`\`\`\n${o.log ?? ''}\`\`\`\n</p></details>\n` : '';
}

/** policy_check.tmpl: every set's output, or its unapproved items with the approved ones folded. */
function policySetsBlock(sets: readonly PolicySetResult[]): string {
  let s = '\n';
  for (const ps of sets) {
    s += `\n#### Policy Set: \`${ps.policySetName}\``;
    const approved = approvedHashes(ps);
    if (ps.policyItemRegex !== '' && approved.length > 0) {
      const done: string[] = [];
      const open: string[] = [];
      for (const item of policyItems(ps.policyOutput, ps.policyItemRegex)) (approved.includes(hashItem(item)) ? done : open).push(item);
      if (open.length > 0) s += `\n\`\`\`diff\n${open.join('\n')}\n\`\`\``;
      if (done.length > 0)
        s += `\n<details><summary>:white_check_mark: ${done.length} previously approved ${done.length === 1 ? 'item' : 'items'}</summary>\n\n\`\`\`diff\n${done.join('\n')}\n\`\`\`\n</details>`;
    } else s += `\n\`\`\`diff\n${ps.policyOutput}\n\`\`\``;
    s += '\n';
  }
  return `${s}\n`;
}

/** policy_check_results_(un)wrapped.tmpl, trimmed as Atlantis's renderTemplateTrimSpace. */
function renderResults(cmd: PolicyCommand, r: NonNullable<PolicyProjectView['results']>, o: PolicyLayout): string {
  const cleared = policyCleared(r.sets);
  const wrapped = !o.disableMarkdownFolding && (combinedOutput(r.sets).match(/\n/g)?.length ?? 0) > MAX_UNWRAPPED_LINES;
  let s = wrapped ? '<details><summary>Show Output</summary>' : '';
  if (cmd === 'policy_check') {
    if (r.preConftestOutput) s += `${wrapped ? '\n' : ''}\n\`\`\`diff\n${r.preConftestOutput}\n\`\`\``;
    s += policySetsBlock(r.sets);
    if (r.postConftestOutput) s += `\n\`\`\`diff\n${r.postConftestOutput}\n\`\`\`\n`;
  }
  if (cleared) s += `\n* :arrow_forward: To **apply** this plan, comment:\n${shell(r.applyCmd)}`;
  else
    s +=
      `${wrapped ? '\n</details>\n' : ''}\n#### Policy Approval Status:\n\`\`\`\n${policyApprovalSummary(r.sets)}\n\`\`\`\n` +
      `* :heavy_check_mark: To **approve** this project, comment:\n${shell(r.approvePoliciesCmd)}`;
  s += `\n* :put_litter_in_its_place: To **delete** this plan and lock, click [here](${r.lockUrl})`;
  s += `\n* :repeat: To re-run policies **plan** this project again by commenting:\n${shell(r.replanCmd)}`;
  if (wrapped && cmd === 'policy_check') {
    const summary = conftestSummary(r.sets);
    if (summary !== '') s += `\n\`\`\`\n${summary}\n\`\`\``;
  }
  return s.trim();
}

function renderedProject(cmd: PolicyCommand, v: PolicyProjectView, o: PolicyLayout): string {
  const context = v.results ? renderResults(cmd, v.results, o) : '';
  const title = TITLES[cmd];
  if (v.error !== undefined) {
    const wrapped = !o.disableMarkdownFolding && (v.error.match(/\n/g)?.length ?? 0) > MAX_UNWRAPPED_LINES;
    if (wrapped)
      return `**${title} Error**\n<details><summary>Show Output</summary>\n\n\`\`\`\n${v.error}\n\`\`\`${context !== '' ? `\n${context}` : ''}\n</details>`.trim();
    return `**${title} Error**\n\`\`\`\n${v.error}\n\`\`\`\n${context !== '' ? `${context}\n` : ''}`.trim();
  }
  if (v.failure !== undefined) return `**${title} Failed**: ${v.failure}${context !== '' ? `\n${context}` : ''}\n`.trim();
  return context;
}

const succeeded = (v: PolicyProjectView): boolean => v.error === undefined && v.failure === undefined;

function header(title: string, views: readonly PolicyProjectView[]): string {
  let s = `Ran ${title} for ${views.length} projects:\n\n`;
  for (const v of views) s += `1. ${label(v)}\n`;
  return views.length > 0 ? `${s}---\n\n` : s;
}

function unsuccessfulFooter(exe: string): string {
  return (
    `* :heavy_check_mark: To **approve** all unapplied plans from this Pull Request, comment:\n${shell(`${exe} approve_policies`)}\n` +
    `* :put_litter_in_its_place: To **delete** all plans and locks from this Pull Request, comment:\n${shell(`${exe} unlock`)}\n` +
    `* :repeat: To re-run policies **plan** this project again by commenting:\n${shell(`${exe} plan`)}\n`
  );
}

function successFooter(exe: string): string {
  return (
    `* :fast_forward: To **apply** all unapplied plans from this Pull Request, comment:\n${shell(`${exe} apply`)}\n` +
    `* :put_litter_in_its_place: To **delete** all plans and locks from this Pull Request, comment:\n${shell(`${exe} unlock`)}\n`
  );
}

/** The comment of a policy_check or approve_policies over its projects. */
export function renderPolicyComment(cmd: PolicyCommand, views: readonly PolicyProjectView[], o: PolicyLayout = {}): string {
  const exe = o.executableName ?? 'atlantis';
  const title = TITLES[cmd];
  const rendered = views.map((v) => renderedProject(cmd, v, o));
  const allOk = views.every(succeeded);
  const log = logBlock(o);
  if (cmd === 'policy_check' && views.length === 1) {
    const v = views[0] as PolicyProjectView;
    const head = `Ran ${title} for ${label(v)}\n\n${rendered[0]}\n`;
    if (allOk) return `${head}${o.disableApplyAll ? '' : `\n---\n${successFooter(exe)}`}${log}`.trim();
    return `${head}${o.disableApplyAll ? '' : `---\n${unsuccessfulFooter(exe)}`}${log}`.trim();
  }
  if (cmd === 'approve_policies' && allOk) {
    let s = `Approved Policies for ${views.length} projects:\n\n`;
    for (const v of views) s += `1. ${label(v)}\n`;
    return `${s}${log}`.trim();
  }
  let s = header(title, views);
  views.forEach((v, i) => {
    if (o.quietPolicyChecks && succeeded(v)) return;
    s += `### ${i + 1}. ${label(v)}\n${rendered[i]}\n\n${o.disableApplyAll ? '' : '---\n'}`;
  });
  if (!o.disableApplyAll && views.length > 0) s += cmd === 'policy_check' && allOk ? successFooter(exe) : unsuccessfulFooter(exe);
  return `${s}${log}`.trim();
}
