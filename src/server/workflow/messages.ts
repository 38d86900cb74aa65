// The PR comment texts the server posts, worded and laid out as Atlantis's markdown
// templates (so users switching from Atlantis see the same comments), plus the few texts
// that are ours (drain queue, shutdown interruption). Pure functions.

export const SHUTTING_DOWN_COMMENT = 'Atlantis server is shutting down, please try again later.';

/** Atlantis's reply to a command on a PR from a fork (its two spaces before "or" included). */
export const FORK_PR_COMMENT =
  "Atlantis commands can't be run on fork pull requests. To enable, set --allow-fork-prs  or, to disable this message, set --silence-fork-pr-errors";
/** Atlantis's reply to a command other than unlock on a closed PR. */
export const CLOSED_PR_COMMENT = "Atlantis commands can't be run on closed pull requests";
export const UNLOCKED_COMMENT = 'All Atlantis locks for this PR have been unlocked and plans discarded';
export const APPROVAL_REQUIRED = "Pull request must be approved according to the project's approval rules before running apply.";
export const MERGEABLE_REQUIRED = 'Pull request must be mergeable before running apply.';
/** Atlantis folds output longer than this many lines into a <details> block. */
export const MAX_UNWRAPPED_LINES = 12;

export type ResultCommand = 'plan' | 'apply' | 'version' | 'import' | 'state' | 'unlock';

export function commandTitle(cmd: ResultCommand, subName?: string): string {
  const t = cmd.charAt(0).toUpperCase() + cmd.slice(1);
  return subName ? `${t} ${subName}` : t;
}

/** The text Atlantis gives when another PR holds the project's lock (GitHub pull link form). */
export function lockedByMessage(lockingPull: number, executableName = 'atlantis'): string {
  return (
    `This project is currently locked by an unapplied plan from pull #${lockingPull}. ` +
    `To continue, delete the lock from #${lockingPull} or apply that plan and merge the pull request.\n\n` +
    `Once the lock is released, comment \`${executableName} plan\` here to re-plan.`
  );
}

/** Ours: a command received while draining with --queue-during-drain. */
export function queuedDuringDrainComment(commandLine: string): string {
  return (
    `Atlantis server is shutting down; \`${commandLine}\` has been queued and will run when the server is back.\n\n` +
    'You do not need to comment again.'
  );
}

/** Ours: the queued command is now running on the new server. */
export function queuedCommandStartingComment(commandLine: string): string {
  return `Atlantis server is back; running the queued command \`${commandLine}\` now.`;
}

/** Ours: terraform was interrupted because the drain deadline passed. */
export function interruptedByShutdownComment(
  cmd: ResultCommand,
  dir: string,
  workspace: string,
  project?: string,
  executableName = 'atlantis',
): string {
  const what = `${project ? `project: \`${project}\` ` : ''}dir: \`${dir}\` workspace: \`${workspace}\``;
  const again = cmd === 'apply' ? `${executableName} plan` : `${executableName} ${cmd}`;
  return (
    `**${commandTitle(cmd)} Interrupted** for ${what}\n\n` +
    'The Atlantis server was shut down before this run finished: its drain deadline passed, so terraform was ' +
    'interrupted (SIGINT, so it could save state and release its state lock).\n\n' +
    `Check the state, then comment \`${again}\` to run it again.`
  );
}

/**
 * The summary line Atlantis shows under a folded plan: the `Plan: ...` or `No changes.`
 * line, preceded by a note when objects changed outside of terraform.
 */
export function planSummary(output: string): string {
  let note = '';
  const n = /Note: Objects have changed outside of Terraform/.exec(output);
  if (n) note = `\n**${n[0]}**\n`;
  const m =
    /Plan: \d+ to import, \d+ to add, \d+ to change, \d+ to destroy\.|Plan: \d+ to add, \d+ to change, \d+ to destroy\.|Changes to Outputs:|No changes\. (Infrastructure is up-to-date|Your infrastructure matches the configuration)\./.exec(
      output,
    );
  return note + (m ? m[0] : '');
}

export function planHasChanges(output: string): boolean {
  return !/No changes\. (Infrastructure is up-to-date|Your infrastructure matches the configuration)\./.test(output);
}

/** Drops terraform's "Refreshing state..." noise before the plan, as Atlantis does. */
export function cleanPlanOutput(output: string): string {
  const lines = output.replace(/\r\n/g, '\n').split('\n');
  const start = lines.findIndex((l) =>
    /^(Terraform used the selected providers|An execution plan has been generated|No changes\.|Terraform will perform|Changes to Outputs:)/.test(
      l,
    ),
  );
  return (start > 0 ? lines.slice(start) : lines).join('\n').trim();
}

export type ProjectOutcome =
  | {
      type: 'success';
      output: string;
      /** plan only: the command to apply this project (`atlantis apply -d x`). */
      applyCmd?: string;
      /** plan only: the command to plan it again. */
      replanCmd?: string;
      /** plan only: where the lock can be deleted; no line when absent. */
      lockUrl?: string;
    }
  /** The command could not run (lock held, requirement not met...). */
  | { type: 'failure'; reason: string }
  /** terraform or a step failed. */
  | { type: 'error'; error: string };

export interface ProjectResultView {
  dir: string;
  workspace: string;
  projectName?: string;
  outcome: ProjectOutcome;
}

export interface RenderOptions {
  command: ResultCommand;
  subName?: string;
  results: ProjectResultView[];
  executableName?: string;
  /** Atlantis's --disable-apply-all: no "apply all" footer. */
  disableApplyAll?: boolean;
  verbose?: boolean;
  log?: string;
}

function wrapped(output: string): boolean {
  return output.split('\n').length > MAX_UNWRAPPED_LINES;
}

function renderProject(opts: RenderOptions, r: ProjectResultView): string {
  const title = commandTitle(opts.command, opts.subName);
  const o = r.outcome;
  if (o.type === 'failure') return `**${title} Failed**: ${o.reason}`;
  if (o.type === 'error') {
    if (wrapped(o.error)) return `**${title} Error**\n<details><summary>Show Output</summary>\n\n\`\`\`\n${o.error}\n\`\`\`\n</details>`;
    return `**${title} Error**\n\`\`\`\n${o.error}\n\`\`\``;
  }
  if (opts.command === 'plan') {
    const out = o.output;
    let actions = '';
    if (o.applyCmd) actions += `* :arrow_forward: To **apply** this plan, comment:\n  \`\`\`shell\n  ${o.applyCmd}\n  \`\`\`\n`;
    if (o.lockUrl) actions += `* :put_litter_in_its_place: To **delete** this plan and lock, click [here](${o.lockUrl})\n`;
    if (o.replanCmd) actions += `* :repeat: To **plan** this project again, comment:\n  \`\`\`shell\n  ${o.replanCmd}\n  \`\`\`\n`;
    if (wrapped(out)) {
      return `<details><summary>Show Output</summary>\n\n\`\`\`diff\n${out}\n\`\`\`\n</details>\n\n${actions}${planSummary(out)}\n`;
    }
    return `\`\`\`diff\n${out}\n\`\`\`\n\n${actions}`;
  }
  const fence = opts.command === 'apply' ? '```diff' : '```';
  if (wrapped(o.output)) return `<details><summary>Show Output</summary>\n\n${fence}\n${o.output}\n\`\`\`\n</details>`;
  return `${fence}\n${o.output}\n\`\`\``;
}

function logBlock(opts: RenderOptions): string {
  if (!opts.verbose) return '';
  return `\n<details><summary>Log</summary>\n  <p>\n\n\`\`\`\n${opts.log ?? ''}\`\`\`\n</p></details>\n`;
}

function projectLabel(r: ProjectResultView): string {
  return `${r.projectName ? `project: \`${r.projectName}\` ` : ''}dir: \`${r.dir}\` workspace: \`${r.workspace}\``;
}

/** The result comment of a command over one or more projects, as Atlantis lays it out. */
export function renderResults(opts: RenderOptions): string {
  const exe = opts.executableName ?? 'atlantis';
  const title = commandTitle(opts.command, opts.subName);
  const results = opts.results;
  if (results.length === 0) return `Ran ${title} for 0 projects:\n\n`;
  if (results.length === 1) {
    const r = results[0] as ProjectResultView;
    let s = `Ran ${title} for ${projectLabel(r)}\n\n${renderProject(opts, r)}\n`;
    if (opts.command === 'plan' && r.outcome.type === 'success' && !opts.disableApplyAll) {
      s +=
        '\n---\n* :fast_forward: To **apply** all unapplied plans from this pull request, comment:\n' +
        `    * \`${exe} apply\`\n` +
        '* :put_litter_in_its_place: To delete all plans and locks for the PR, comment:\n' +
        `    * \`${exe} unlock\`\n`;
    }
    return s + logBlock(opts);
  }
  let s = `Ran ${title} for ${results.length} projects:\n\n`;
  for (const r of results) s += `1. ${projectLabel(r)}\n`;
  if (opts.command !== 'plan') s += '\n';
  results.forEach((r, i) => {
    s += `### ${i + 1}. ${projectLabel(r)}\n${renderProject(opts, r)}\n\n---\n`;
  });
  if (opts.command === 'plan') {
    const ok = results.filter((r) => r.outcome.type === 'success');
    const withChanges = ok.filter((r) => r.outcome.type === 'success' && planHasChanges(r.outcome.output)).length;
    const failed = results.length - ok.length;
    s += `### Plan Summary\n\n${results.length} projects, ${withChanges} with changes, ${ok.length - withChanges} with no changes, ${failed} failed\n`;
    if (!opts.disableApplyAll) {
      s +=
        '\n* :fast_forward: To **apply** all unapplied plans from this pull request, comment:\n' +
        `  \`\`\`shell\n  ${exe} apply\n  \`\`\`\n` +
        '* :put_litter_in_its_place: To **delete** all plans and locks from this pull request, comment:\n' +
        `  \`\`\`shell\n  ${exe} unlock\n  \`\`\`\n`;
    }
  }
  return s + logBlock(opts);
}

/**
 * Atlantis's answer to a command that failed before running its projects (a bad -p, a bad
 * atlantis.yaml, an apply with nothing valid to apply): the error in a code block.
 */
export function commandErrorComment(cmd: string, error: string): string {
  return `**${commandTitle(cmd as ResultCommand)} Error**\n\`\`\`\n${error}\n\`\`\``;
}

/**
 * Atlantis's comment when a closed PR's locks are released: one line per dir (sorted), its
 * workspaces sorted and joined, `workspace:` for one and `workspaces:` for several.
 */
export function pullClosedComment(locks: { dir: string; workspace: string }[]): string {
  const byDir = new Map<string, Set<string>>();
  for (const l of locks) byDir.set(l.dir, (byDir.get(l.dir) ?? new Set()).add(l.workspace));
  let s = 'Locks and plans deleted for the projects and workspaces modified in this pull request:\n';
  for (const dir of [...byDir.keys()].sort()) {
    const ws = [...(byDir.get(dir) as Set<string>)].sort();
    s += `\n- dir: \`${dir}\` ${ws.length === 1 ? 'workspace' : 'workspaces'}: \`${ws.join('`, `')}\``;
  }
  return s;
}
