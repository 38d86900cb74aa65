// The `mergeable` and `approved` requirements as Atlantis v0.47's GitLab client judges a merge
// request (its PullIsMergeable and PullIsApproved). Pure; host.ts reads the merge request, its
// project, its head commit's statuses and GitLab's version, then asks these.
import type { MergeableStatus } from '../host.js';
import type { GlCommitStatus, GlMergeRequest, GlProject } from './types.js';

/** Whether GitLab has `detailed_merge_status` (from 15.6); before it Atlantis reads the legacy `merge_status`. */
export function hasDetailedMergeStatus(version: string): boolean {
  const [major = 0, minor = 0] = (version.split('-')[0] ?? '').split('.').map((n) => Number.parseInt(n, 10) || 0);
  return major > 15 || (major === 15 && minor >= 6);
}

/** Atlantis's own statuses that never block an apply (`<name>/apply…`, policy checks, workflow hooks). */
export function isSkippableAtlantisStatus(name: string, statusName: string): boolean {
  const prefix = `${statusName}/`;
  if (!name.startsWith(prefix)) return false;
  const command = name.slice(prefix.length).split(': ')[0];
  return command === 'apply' || command === 'policy_check' || command === 'pre_workflow_hook' || command === 'post_workflow_hook';
}

/**
 * The statuses of the head commit that block, by name (first seen state), as Atlantis picks
 * them: those of this merge request's refs (refs/merge-requests/<iid>/head or /merge) when it
 * has any, with branch-only statuses of its source branch and statuses without a ref; else the
 * source branch's and those without a ref. Only when the project asks for a successful
 * pipeline; never Atlantis's skippable own ones; allowed failures never block.
 */
export function blockingStatuses(
  mr: Pick<GlMergeRequest, 'iid' | 'source_branch'>,
  project: Pick<GlProject, 'only_allow_merge_if_pipeline_succeeds'>,
  statuses: readonly GlCommitStatus[],
  statusName: string,
): Array<{ name: string; status: string }> {
  const mrRefs = [`refs/merge-requests/${mr.iid}/head`, `refs/merge-requests/${mr.iid}/merge`];
  const onMrRef = statuses.filter((s) => mrRefs.includes(s.ref ?? ''));
  const mrNames = new Set(onMrRef.map((s) => s.name));
  const out = new Map<string, string>();
  for (const s of statuses) {
    const ref = s.ref ?? '';
    if (ref !== '') {
      if (onMrRef.length > 0) {
        const branchOnly = ref === mr.source_branch && !mrNames.has(s.name);
        if (!mrRefs.includes(ref) && !branchOnly) continue;
      } else if (ref !== mr.source_branch) continue;
    }
    if (isSkippableAtlantisStatus(s.name, statusName)) continue;
    if (s.allow_failure !== true && project.only_allow_merge_if_pipeline_succeeds === true && s.status !== 'success') {
      if (!out.has(s.name)) out.set(s.name, s.status);
    }
  }
  return [...out].map(([name, status]) => ({ name, status }));
}

/** Atlantis's judgement of the merge request itself (its isMergeable): the first failing check with its reason. */
export function mergeRequestMergeable(mr: GlMergeRequest, project: GlProject, detailed: boolean): MergeableStatus {
  const skipped = mr.head_pipeline?.status === 'skipped';
  const approvalsOwed = mr.approvals_before_merge ?? 0;
  if (approvalsOwed > 0) return { mergeable: false, reason: `Still require ${approvalsOwed} approvals` };
  if (mr.blocking_discussions_resolved !== true) return { mergeable: false, reason: 'Blocking discussions unresolved' };
  if (mr.draft === true || mr.work_in_progress === true) return { mergeable: false, reason: 'Work in progress' };
  if (skipped && project.allow_merge_on_skipped_pipeline !== true) return { mergeable: false, reason: 'Pipeline was skipped' };
  if (detailed) {
    const d = mr.detailed_merge_status ?? '';
    if (d === 'mergeable' || d === 'ci_still_running' || d === 'ci_must_pass') return { mergeable: true };
    return { mergeable: false, reason: `Merge status is ${d}` };
  }
  const legacy = mr.merge_status ?? '';
  return legacy === 'can_be_merged' ? { mergeable: true } : { mergeable: false, reason: `Merge status is ${legacy}` };
}

/**
 * The `mergeable` requirement: the merge request's own checks first, then the blocking
 * statuses, sorted so the reason names the same one whatever order GitLab lists them in.
 * `blockingStatuses` is set when statuses block, so that a project's apply may ignore other
 * projects' plan statuses (as Atlantis does on GitLab).
 */
export function gitlabMergeable(
  mr: GlMergeRequest,
  project: GlProject,
  statuses: readonly GlCommitStatus[],
  o: { detailed: boolean; statusName: string },
): MergeableStatus {
  const own = mergeRequestMergeable(mr, project, o.detailed);
  if (!own.mergeable) return own;
  const blocking = blockingStatuses(mr, project, statuses, o.statusName).sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  const first = blocking[0];
  if (!first) return own;
  return { mergeable: false, reason: `Pipeline ${first.name} has status ${first.status}`, blockingStatuses: blocking.map((b) => b.name) };
}
