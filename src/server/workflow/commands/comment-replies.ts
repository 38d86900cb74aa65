// The comments of the two commands that run no terraform here, word for word as Atlantis
// v0.47.1 posts them. Pure.

/**
 * Atlantis's answer to `cancel`, posted whether or not anything was queued (Atlantis does
 * not tell the two apart). The runner that cancels queued execution-order groups posts it
 * after cancelling.
 */
export const CANCEL_COMMENT =
  'Cancelled all queued operations and released working directory locks for this pull request.\n' +
  'New operations can now be started. Currently running operations will continue to completion.';

export interface ApprovedProject {
  dir: string;
  workspace: string;
  project?: string;
}

/**
 * Atlantis's answer to `approve_policies` when policy checks are off (no policy set can
 * fail, so every project it selects is approved): its approve_all_projects template.
 */
export function approvePoliciesComment(projects: readonly ApprovedProject[]): string {
  let s = `Approved Policies for ${projects.length} projects:\n\n`;
  for (const p of projects) {
    s += `1. ${p.project ? `project: \`${p.project}\` ` : ''}dir: \`${p.dir}\` workspace: \`${p.workspace}\`\n`;
  }
  // Atlantis trims the rendered template.
  return s.trim();
}
