// The PR comment texts the server posts, worded and laid out as Atlantis's markdown
// templates (so users switching from Atlantis see the same comments), plus the few texts
// that are ours (drain queue, shutdown interruption). Pure functions.
import { diffMarkdownFormat, planHasNoChanges, planSummary } from './plan-output.js';

export const SHUTTING_DOWN_COMMENT = 'Atlantis server is shutting down, please try again later.';

/** Atlantis's reply to a command on a PR from a fork (its two spaces before "or" included). */
export const FORK_PR_COMMENT =
  "Atlantis commands can't be run on fork pull requests. To enable, set --allow-fork-prs  or, to disable this message, set --silence-fork-pr-errors";
/** Atlantis's reply to a command other than unlock on a closed PR. */
export const CLOSED_PR_COMMENT = "Atlantis commands can't be run on closed pull requests";
export const UNLOCKED_COMMENT = 'All Atlantis locks for this PR have been unlocked and plans discarded';

export type ResultCommand = 'plan' | 'apply' | 'version' | 'import' | 'state' | 'unlock';

export function commandTitle(cmd: ResultCommand, subName?: string): string {
  const t = cmd.charAt(0).toUpperCase() + cmd.slice(1);
  return subName ? `${t} ${subName}` : t;
}

/** The text Atlantis gives when another PR holds the project's lock; `link`: how the host links a pull request (`#1`, GitLab's `!1`). */
export function lockedByMessage(lockingPull: number, executableName = 'atlantis', link: (pull: number) => string = (n) => `#${n}`): string {
  return (
    `This project is currently locked by an unapplied plan from pull ${link(lockingPull)}. ` +
    `To continue, delete the lock from ${link(lockingPull)} or apply that plan and merge the pull request.\n\n` +
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

/** Why a run stopped before terraform finished (ours: Atlantis has no such comment). */
export type InterruptionCause = 'drain-deadline' | 'server-crash';

/**
 * Ours: the failure text of a project whose run was interrupted, worded the same whether the
 * drain deadline passed or the server died (found in the journal after a restart); only the
 * cause sentence differs. Rendered as `**<Command> Interrupted**: <this>` in the result comment.
 */
export function interruptedReason(cmd: ResultCommand, cause: InterruptionCause, executableName = 'atlantis'): string {
  const why =
    cause === 'drain-deadline'
      ? 'the Atlantis server shut down before this run finished: its drain deadline passed, so terraform was ' +
        'interrupted (SIGINT, so it could save its state and release its state lock).'
      : 'the Atlantis server stopped unexpectedly while this ran (it was not drained): terraform may have left its ' +
        'state partly written and its state lock held.';
  // An interrupted apply keeps the lock on both paths, so nobody plans on a half-applied state.
  const lock = cmd === 'apply' ? ' The project stays locked by this pull request.' : '';
  const next =
    cmd === 'version' ? `comment \`${executableName} version\` to run it again` : `comment \`${executableName} plan\` to plan again`;
  return `${why}${lock} Check the state (and \`terraform force-unlock\` if needed), then ${next}.`;
}

const RESULT_COMMANDS: readonly ResultCommand[] = ['plan', 'apply', 'version', 'import', 'state', 'unlock'];

/**
 * The comment for a job the journal shows running when the previous server died: the same
 * result comment an interrupted run gets at a drain deadline, with the crash as its cause.
 */
export function crashedJobComment(
  job: { command: string; dir?: string; workspace?: string; project?: string },
  executableName = 'atlantis',
): string {
  const command = RESULT_COMMANDS.find((c) => c === job.command) ?? 'plan';
  const view: ProjectResultView = {
    dir: job.dir ?? '.',
    workspace: job.workspace ?? 'default',
    outcome: { type: 'interrupted', cause: 'server-crash' },
  };
  if (job.project) view.projectName = job.project;
  return renderResults({ command, results: [view], executableName });
}

/** The title Atlantis gives a command's results: `Plan`, `Apply`, `Approve Policies`. */
const titleOf = (name: string): string =>
  name
    .split('_')
    .map((w) => w.charAt(0).toUpperCase() + w.slice(1))
    .join(' ');

/**
 * Ours: a command the journal shows begun (it may have reacted or commented) when the previous
 * server died, with no job of it left running: its result was never posted. Worded as the
 * crashed job's comment; the command is not run again by itself (it may have had effects).
 */
export function interruptedCommandComment(name: string, commandLine: string): string {
  const title = titleOf(name === 'autoplan' ? 'plan' : name);
  const check = name === 'apply' ? ' Check the state (and `terraform force-unlock` if needed), then comment' : ' Comment';
  return (
    `**${title} Interrupted**: the Atlantis server stopped unexpectedly while running \`${commandLine}\` (it was not drained), ` +
    `before it posted a result.${check} \`${commandLine}\` to run it again.`
  );
}

/** Ours: a command accepted while the state store answered, which could not be marked started. */
export function storeUnavailableComment(name: string, commandLine: string): string {
  return `**${titleOf(name === 'autoplan' ? 'plan' : name)} Error**: Atlantis cannot reach its state store, so \`${commandLine}\` did not run. Comment it again once the store is back.`;
}

export type ProjectOutcome =
  | {
      type: 'success';
      /** terraform's output as the step gave it; the renderer trims it, as Atlantis does. */
      output: string;
      /** plan: the command to apply this project (`atlantis apply -d x`). */
      applyCmd?: string;
      /** plan, import, state rm: the command to plan it again. */
      replanCmd?: string;
      /** plan: the lock page link (lock-url.ts); no line when absent. */
      lockUrl?: string;
      /** plan, checkout strategy merge: the base branch moved and was merged again. */
      mergedAgain?: boolean;
    }
  /** The command could not run (lock held, requirement not met...). */
  | { type: 'failure'; reason: string }
  /** terraform or a step failed. */
  | { type: 'error'; error: string }
  /** The run was cut short by the server stopping. */
  | { type: 'interrupted'; cause: InterruptionCause };

export interface ProjectResultView {
  dir: string;
  workspace: string;
  projectName?: string;
  outcome: ProjectOutcome;
}

/** Server settings that change how Atlantis lays out its comments. */
export interface LayoutOptions {
  executableName?: string;
  /** --disable-apply-all: no "apply all" footer. */
  disableApplyAll?: boolean;
  /** --disable-apply: no apply line under a plan and no "apply all" footer. */
  disableApply?: boolean;
  /** --disable-repo-locking (or repo_locks disabled): no lock link under a plan. */
  disableRepoLocking?: boolean;
  /** --disable-markdown-folding: long output is never folded into <details>. */
  disableMarkdownFolding?: boolean;
  /** --hide-unchanged-plan-comments: multi-project plans leave out the sections of projects without changes. */
  hideUnchangedPlanComments?: boolean;
  /** --enable-diff-markdown-format: plan output reformatted so every changed line is coloured. */
  enableDiffMarkdownFormat?: boolean;
  /** How the host names a pull request in the footers (GitLab: `Merge Request`); default `Pull Request`. */
  pullRequestName?: string;
}

export interface RenderOptions extends LayoutOptions {
  command: ResultCommand;
  /** `rm` for `state rm`. */
  subName?: string;
  results: ProjectResultView[];
  /** Automerge dropped this command's plans because one failed. */
  plansDeleted?: boolean;
  verbose?: boolean;
  log?: string;
}

// The texts are Atlantis's markdown templates, rendered by hand: each template's output is
// trimmed of surrounding whitespace, as Atlantis does, so no comment ends with a newline.

const MERGED_AGAIN = ':twisted_rightwards_arrows: Upstream was modified, a new merge was performed.';
const PLAN_FILE_DISCARDED = ':put_litter_in_its_place: A plan file was discarded. Re-plan would be required before applying.';
const PLANS_DELETED = 'This plan was not saved because one or more projects failed and automerge requires all plans pass.';

/** Atlantis folds output with more than this many newlines into a <details> block. */
export const MAX_UNWRAPPED_LINES = 12;

function folded(opts: LayoutOptions, text: string): boolean {
  if (opts.disableMarkdownFolding) return false;
  return text.split('\n').length - 1 > MAX_UNWRAPPED_LINES;
}

function shellBlock(cmd: string): string {
  return `  \`\`\`shell\n  ${cmd}\n  \`\`\`\n`;
}

function logBlock(opts: RenderOptions): string {
  return opts.verbose ? `<details><summary>Log</summary>\n<p>\n\n\`\`\`\n${opts.log ?? ''}\`\`\`\n</p></details>\n` : '';
}

function projectLabel(r: ProjectResultView): string {
  return `${r.projectName ? `project: \`${r.projectName}\` ` : ''}dir: \`${r.dir}\` workspace: \`${r.workspace}\``;
}

function applyAllFooter(exe: string, pullRequest = 'Pull Request'): string {
  return (
    `* :fast_forward: To **apply** all unapplied plans from this ${pullRequest}, comment:\n${shellBlock(`${exe} apply`)}` +
    `* :put_litter_in_its_place: To **delete** all plans and locks from this ${pullRequest}, comment:\n${shellBlock(`${exe} unlock`)}`
  );
}

type Rendered = { text: string; planSuccess: boolean; noChanges: boolean; kind: 'success' | 'failure' | 'error' };

function renderPlanSuccess(opts: RenderOptions, o: Extract<ProjectOutcome, { type: 'success' }>): string {
  const out = o.output.trim();
  const wrap = folded(opts, out);
  // Folding and the summary go by terraform's own text, as in Atlantis.
  const shown = opts.enableDiffMarkdownFormat ? diffMarkdownFormat(out) : out;
  let s = wrap
    ? `<details><summary>Show Output</summary>\n\n\`\`\`diff\n${shown}\n\`\`\`\n</details>\n\n`
    : `\`\`\`diff\n${shown}\n\`\`\`\n\n`;
  if (opts.plansDeleted) s += `${PLANS_DELETED}\n`;
  else {
    if (!opts.disableApply && o.applyCmd !== undefined)
      s += `* :arrow_forward: To **apply** this plan, comment:\n${shellBlock(o.applyCmd)}`;
    if (!opts.disableRepoLocking && o.lockUrl !== undefined)
      s += `* :put_litter_in_its_place: To **delete** this plan and lock, click [here](${o.lockUrl})\n`;
    if (o.replanCmd !== undefined) s += `* :repeat: To **plan** this project again, comment:\n${shellBlock(o.replanCmd)}`;
  }
  if (wrap) s += `${planSummary(out)}\n`;
  if (o.mergedAgain) s += `${MERGED_AGAIN}\n`;
  return s.trim();
}

function renderProject(opts: RenderOptions, r: ProjectResultView): Rendered {
  const title = commandTitle(opts.command);
  const o = r.outcome;
  if (o.type === 'failure') return { text: `**${title} Failed**: ${o.reason}`, planSuccess: false, noChanges: false, kind: 'failure' };
  if (o.type === 'interrupted') {
    const text = `**${title} Interrupted**: ${interruptedReason(opts.command, o.cause, opts.executableName)}`;
    return { text, planSuccess: false, noChanges: false, kind: 'failure' };
  }
  if (o.type === 'error') {
    const text = folded(opts, o.error)
      ? `**${title} Error**\n<details><summary>Show Output</summary>\n\n\`\`\`\n${o.error}\n\`\`\`\n</details>`
      : `**${title} Error**\n\`\`\`\n${o.error}\n\`\`\``;
    return { text: text.trim(), planSuccess: false, noChanges: false, kind: 'error' };
  }
  const out = o.output.trim();
  const done = (text: string): Rendered => ({ text: text.trim(), planSuccess: false, noChanges: false, kind: 'success' });
  switch (opts.command) {
    case 'plan':
      return { text: renderPlanSuccess(opts, o), planSuccess: true, noChanges: planHasNoChanges(out), kind: 'success' };
    case 'apply':
      // Atlantis decides the folding on the untrimmed apply output.
      return done(
        folded(opts, o.output)
          ? `<details><summary>Show Output</summary>\n\n\`\`\`diff\n${out}\n\`\`\`\n\n</details>`
          : `\`\`\`diff\n${out}\n\`\`\``,
      );
    case 'import':
    case 'state': {
      const replan = `* :repeat: To **plan** this project again, comment:\n${shellBlock(o.replanCmd ?? '')}`;
      return done(
        folded(opts, out)
          ? `<details><summary>Show Output</summary>\n\n\`\`\`diff\n${out}\n\`\`\`\n</details>\n${PLAN_FILE_DISCARDED}\n\n${replan}`
          : `\`\`\`diff\n${out}\n\`\`\`\n\n${PLAN_FILE_DISCARDED}\n\n${replan}`,
      );
    }
    default:
      return done(
        folded(opts, out) ? `<details><summary>Show Output</summary>\n\n\`\`\`\n${out}\n\`\`\`\n\n</details>` : `\`\`\`\n${out}\n\`\`\``,
      );
  }
}

/** The result comment of a command over its projects, laid out as Atlantis v0.47 lays it out. */
export function renderResults(opts: RenderOptions): string {
  const exe = opts.executableName ?? 'atlantis';
  const title = commandTitle(opts.command);
  const results = opts.results;
  const rendered = results.map((r) => renderProject(opts, r));
  const applyAll = !(opts.disableApplyAll || opts.disableApply);
  const log = logBlock(opts);
  if (results.length === 1) {
    const r = results[0] as ProjectResultView;
    const p = rendered[0] as Rendered;
    const label = projectLabel(r);
    switch (opts.command) {
      case 'plan':
        // Atlantis's header of an unsuccessful single plan has no project name.
        if (!p.planSuccess) return `Ran ${title} for dir: \`${r.dir}\` workspace: \`${r.workspace}\`\n\n${p.text}\n${log}`.trim();
        return `Ran ${title} for ${label}\n\n${p.text}\n${applyAll ? `\n---\n${applyAllFooter(exe, opts.pullRequestName)}` : ''}${log}`.trim();
      case 'version':
        if (p.kind !== 'success') return `Ran ${title} for dir: \`${r.dir}\` workspace: \`${r.workspace}\`\n\n${p.text}\n${log}`.trim();
        return `Ran ${title} for ${label}\n\n${p.text}${log}`.trim();
      case 'state':
        return `Ran ${title} \`${opts.subName ?? 'rm'}\` for ${label}\n\n${p.text}\n${log}`.trim();
      default:
        return `Ran ${title} for ${label}\n\n${p.text}\n${log}`.trim();
    }
  }
  let s = `Ran ${title} for ${results.length} projects:\n\n`;
  for (const r of results) s += `1. ${projectLabel(r)}\n`;
  if (results.length > 0) s += '---\n\n';
  results.forEach((r, i) => {
    const p = rendered[i] as Rendered;
    if (opts.command === 'plan' && opts.hideUnchangedPlanComments && p.noChanges) return;
    s += `### ${i + 1}. ${projectLabel(r)}\n${p.text}\n\n---\n`;
  });
  if (opts.command === 'plan' && results.length > 0) {
    const ok = rendered.filter((p) => p.planSuccess);
    const noChanges = ok.filter((p) => p.noChanges).length;
    s += `### Plan Summary\n\n${results.length} projects, ${ok.length - noChanges} with changes, ${noChanges} with no changes, ${results.length - ok.length} failed\n`;
    if (!opts.plansDeleted && applyAll) s += `\n${applyAllFooter(exe, opts.pullRequestName)}`;
  }
  if (opts.command === 'apply' && results.length > 1) {
    const n = (k: Rendered['kind']) => rendered.filter((p) => p.kind === k).length;
    s += `### Apply Summary\n\n${results.length} projects, ${n('success')} successful, ${n('failure')} failed, ${n('error')} errored\n`;
  }
  return (s + log).trim();
}

/** Atlantis's comment for a command that failed as a whole before any project ran (`**Plan Error**` and its code block). */
export function renderCommandError(command: ResultCommand, error: string, opts: { verbose?: boolean; log?: string } = {}): string {
  return `**${commandTitle(command)} Error**\n\`\`\`\n${error}\n\`\`\`\n${logBlock({ command, results: [], ...opts })}`.trim();
}

/** Atlantis's comment for a command refused as a whole (`**Apply Failed**: <reason>`). */
export function renderCommandFailure(command: ResultCommand, failure: string, opts: { verbose?: boolean; log?: string } = {}): string {
  return `**${commandTitle(command)} Failed**: ${failure}\n${logBlock({ command, results: [], ...opts })}`.trim();
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
