// The texts the parser answers with, word for word as Atlantis writes them (help, usage of a
// command, errors in a usage block), and the comments the server suggests users type under
// plan results. Pure.
import { type CommandName, commandSpec } from './commands.js';

export const DID_YOU_MEAN_COMMENT = (exe: string, given: string): string => `Did you mean to use \`${exe}\` instead of \`${given}\`?`;

export const UNLOCK_USAGE = (exe: string): string =>
  '`Usage of unlock:`\n\n ```cmake\n' +
  `${exe} unlock

  Unlocks the entire PR and discards all plans in this PR.
  Arguments or flags are not supported at the moment.
  If you need to unlock a specific project please use the atlantis UI.` +
  '\n```';

// Same column width Atlantis passes to pflag's FlagUsagesWrapped.
const USAGE_COLS = 90;

// ---------------------------------------------------------------------------------------
// pflag-compatible usage rendering (FlagUsagesWrapped), so usage texts match Atlantis's.

function wrapN(i: number, slop: number, s: string): [string, string] {
  if (i + slop > s.length) return [s, ''];
  const head = s.slice(0, i);
  const w = Math.max(head.lastIndexOf(' '), head.lastIndexOf('\t'), head.lastIndexOf('\n'));
  if (w <= 0) return [s, ''];
  const nl = head.lastIndexOf('\n');
  if (nl > 0 && nl < w) return [s.slice(0, nl), s.slice(nl + 1)];
  return [s.slice(0, w), s.slice(w + 1)];
}

function wrap(indent: number, width: number, s: string): string {
  let i = indent;
  let room = width - i;
  let r = '';
  if (room < 24) {
    i = 16;
    room = width - i;
    r += '\n' + ' '.repeat(i);
  }
  if (room < 24) return s.split('\n').join(r);
  const slop = 5;
  room -= slop;
  const pad = '\n' + ' '.repeat(i);
  let [l, rest] = wrapN(room, slop, s);
  r += l.split('\n').join(pad);
  let guard = 0;
  while (rest !== '' && guard++ < 10_000) {
    let t: string;
    [t, rest] = wrapN(room, slop, rest);
    r += pad + t.split('\n').join(pad);
  }
  return r;
}

/** The flag table Atlantis prints under "Usage of <cmd>:", one flag per line. */
export function flagUsages(name: CommandName): string {
  const defs = [...commandSpec(name).flags].sort((a, b) => (a.long < b.long ? -1 : a.long > b.long ? 1 : 0));
  const lines = defs.map((f) => {
    let line = f.short ? `  -${f.short}, --${f.long}` : `      --${f.long}`;
    if (f.kind === 'string') line += ' string';
    return line;
  });
  const maxlen = Math.max(0, ...lines.map((l) => l.length + 1));
  let out = '';
  defs.forEach((f, idx) => {
    const head = lines[idx] ?? '';
    const spacing = ' '.repeat(maxlen - head.length);
    out += `${head} ${spacing} ${wrap(maxlen + 2, USAGE_COLS, f.usage)}\n`;
  });
  return out;
}

export function errMarkdown(msg: string, cmd: string, name: CommandName): string {
  return '```\nError: ' + msg + '.\nUsage of ' + cmd + ':\n' + flagUsages(name) + '```';
}

/** Atlantis's help comment, listing only the allowed commands. */
export function helpComment(executableName: string, allowCommands: readonly string[]): string {
  const exe = executableName;
  const allow = (c: string): boolean => allowCommands.includes(c);
  let s = '```cmake\natlantis\nTerraform Pull Request Automation\n\nUsage:\n';
  s += `  ${exe} <command> [options] -- [terraform options]\n\nExamples:\n  # show atlantis help\n  ${exe} help`;
  if (allow('plan'))
    s += `\n\n  # run plan in the root directory passing the -target flag to terraform\n  ${exe} plan -d . -- -target=resource`;
  if (allow('apply')) {
    s += `\n\n  # apply all unapplied plans from this pull request\n  ${exe} apply`;
    s += `\n\n  # apply the plan for the root directory and staging workspace\n  ${exe} apply -d . -w staging`;
  }
  s += '\n\nCommands:';
  if (allow('plan'))
    s +=
      "\n  plan     Runs 'terraform plan' for the changes in this pull request.\n           To plan a specific project, use the -d, -w and -p flags.";
  if (allow('apply'))
    s +=
      "\n  apply    Runs 'terraform apply' on all unapplied plans from this pull request.\n           To only apply a specific plan, use the -d, -w and -p flags.";
  if (allow('cancel'))
    s += '\n  cancel   Cancels all queued commands for this pull request.\n           Already running commands are not interrupted.';
  if (allow('unlock'))
    s +=
      '\n  unlock   Removes all atlantis locks and discards all plans for this PR.\n           To unlock a specific plan you can use the Atlantis UI.';
  if (allow('approve_policies')) s += '\n  approve_policies\n           Approves all current policy checking failures for the PR.';
  if (allow('version')) s += "\n  version  Print the output of 'terraform version'";
  if (allow('import'))
    s +=
      "\n  import ADDRESS ID\n           Runs 'terraform import' for the passed address resource.\n           To import a specific project, use the -d, -w and -p flags.";
  if (allow('state'))
    s +=
      "\n  state rm ADDRESS...\n           Runs 'terraform state rm' for the passed address resource.\n           To remove a specific project resource, use the -d, -w and -p flags.";
  s += `\n  help     View help.\n\nFlags:\n  -h, --help   help for atlantis\n\nUse "${exe} [command] --help" for more information about a command.`;
  return s + '\n```';
}

/** The comment a user types to plan a project again (shown under plan results). */
export function buildPlanComment(
  exe: string,
  dir: string,
  workspace: string,
  project: string | undefined,
  extraArgs: string[] = [],
): string {
  // As Atlantis: one double quote is dropped from each end of every arg.
  const unquoted = extraArgs.map((a) => a.replace(/^"/, '').replace(/"$/, ''));
  const tail = extraArgs.length > 0 ? ` -- ${unquoted.join(' ')}` : '';
  return `${exe} plan${buildFlags(dir, workspace, project, false)}${tail}`;
}

/** The comment a user types to apply a project (shown under plan results). */
export function buildApplyComment(
  exe: string,
  dir: string,
  workspace: string,
  project: string | undefined,
  autoMergeDisabled = false,
  autoMergeMethod = '',
): string {
  return `${exe} apply${buildFlags(dir, workspace, project, autoMergeDisabled, autoMergeMethod)}`;
}

function buildFlags(dir: string, workspace: string, project: string | undefined, autoMergeDisabled: boolean, autoMergeMethod = ''): string {
  const d = dir.includes(' ') ? JSON.stringify(dir) : dir;
  let flags: string;
  if (project) flags = ` -p ${project}`;
  else if (d === '.' && workspace === 'default') flags = ' -d .';
  else if (d === '.') flags = ` -w ${workspace}`;
  else if (workspace === 'default') flags = ` -d ${d}`;
  else flags = ` -d ${d} -w ${workspace}`;
  if (autoMergeDisabled) flags += ' --auto-merge-disabled';
  if (autoMergeMethod !== '') flags += ` --auto-merge-method ${autoMergeMethod}`;
  return flags;
}
