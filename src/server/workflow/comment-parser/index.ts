// Parses pull-request comments into Atlantis commands, with Atlantis's grammar and its
// exact reply texts, so that users switching from Atlantis see the same behaviour. Pure: no
// I/O; the caller posts the reply or runs the command. Every comment is hostile input.
//
// Grammar: `<executable> <command> [flags] [-- extra args]` where executable is the
// --executable-name (`atlantis` by default), `run`, or `@<gh-user>`; executable and command
// are matched in lower case, and backticks around the whole comment are dropped. The pieces:
// the command table (commands.ts), Go's string rules (go-compat/go-text.ts), shlex's
// splitting (go-compat/shell-split.ts), pflag's flag rules (comment-parser/pflag.ts),
// glob -d (go-compat/dir-glob.ts), the reply texts (comment-parser/usage.ts), the dir
// and workspace rules (repo-dir.ts) and the extra-args rules (extra-args.ts).
import { type CommandName, DEFAULT_ALLOW_COMMANDS, RUNNABLE_COMMANDS, commandSpec, isRunnableCommand } from './commands.js';
import { isDirGlob, isValidGlob } from '../go-compat/dir-glob.js';
import { goFields, goQuote, goToLower, goTrimChar, levenshtein } from '../go-compat/go-text.js';
import { parseFlags } from './pflag.js';
import { shellSplit } from '../go-compat/shell-split.js';
import { DID_YOU_MEAN_COMMENT, UNLOCK_USAGE, errMarkdown, flagUsages, helpComment } from './usage.js';
import { effectiveBlocked, firstBlockedArg, pathArgs, pathOutsideMessage, DEFAULT_BLOCKED_EXTRA_ARGS } from './extra-args.js';
import { goTrimSpace } from '../go-compat/go-paths.js';
import { cleanRepoDir, workspaceProblem } from '../go-compat/repo-dir.js';

export interface ParsedCommand {
  name: CommandName;
  /** Subcommand, only for `state` (currently always `rm`). */
  subName?: 'rm';
  /**
   * Repo-relative, cleaned dir (`.` for the root), or a glob pattern as written (see
   * go-compat/dir-glob.ts: it selects projects); undefined when -d was not given.
   */
  dir?: string;
  /** Undefined when -w was not given (the project's own workspace applies). */
  workspace?: string;
  project?: string;
  verbose: boolean;
  autoMergeDisabled: boolean;
  /** apply's --auto-merge-method (merge, squash, rebase; checked when merging). */
  autoMergeMethod?: string;
  /** approve_policies' --policy-set. */
  policySet?: string;
  /** approve_policies' --clear-policy-approval. */
  clearPolicyApproval?: boolean;
  /** Arguments after `--`, passed to terraform before `args`. */
  extraArgs: string[];
  /** Positional arguments: `import ADDRESS ID`, `state rm ADDRESS...`; empty otherwise. */
  args: string[];
}

export type ParseResult =
  | { kind: 'ignore' }
  /** Post `body` as a PR comment and run nothing. `error` is false for help output. */
  | { kind: 'reply'; body: string; error: boolean }
  | { kind: 'command'; command: ParsedCommand };

export interface ParseOptions {
  executableName?: string;
  /** The user the server acts as on the code host: `@<user>` starts a command as the executable name does; '' for none. */
  vcsUser: string;
  allowCommands?: readonly string[];
  blockedExtraArgs?: readonly string[];
}

// A second line that is not empty: Atlantis ignores multi-line comments (a trailing blank
// line from copy and paste is fine).
const MULTI_LINE = /\r?\n[^\r\n]/;

/** Atlantis's executable name when --executable-name is not set. */
const DEFAULT_EXECUTABLE = 'atlantis';

const reply = (body: string, error = true): ParseResult => ({ kind: 'reply', body, error });

/** Parses one PR comment as Atlantis v0.47.1 does. Never throws. */
export function parseComment(rawComment: string, opts: ParseOptions): ParseResult {
  const exe = opts.executableName && opts.executableName !== '' ? opts.executableName : DEFAULT_EXECUTABLE;
  const allowed = (opts.allowCommands ?? DEFAULT_ALLOW_COMMANDS).filter(isRunnableCommand);
  // Keep Atlantis's canonical order for the "Available commands" list.
  const allowList = RUNNABLE_COMMANDS.filter((c) => allowed.includes(c));
  const blocked = effectiveBlocked(opts.blockedExtraArgs ?? DEFAULT_BLOCKED_EXTRA_ARGS);

  // Backticks around the command (GitLab and markdown copy and paste) are dropped.
  const comment = goTrimChar(goTrimSpace(rawComment), '`');
  if (MULTI_LINE.test(comment)) return { kind: 'ignore' };
  const fields = goFields(comment);
  const first = fields[0];
  if (first === undefined) return { kind: 'ignore' };
  // Lower case, as Atlantis (phones capitalise the first word).
  const word = goToLower(first);

  if (word === 'terraform' && exe !== 'terraform') return reply(DID_YOU_MEAN_COMMENT(exe, 'terraform'));
  // Only under the default name: servers given their own names (several on one repo) would
  // answer each other's comments otherwise.
  if (exe === DEFAULT_EXECUTABLE) {
    const dist = levenshtein(word, exe);
    if (dist > 0 && dist < 3) return reply(DID_YOU_MEAN_COMMENT(exe, first));
  }
  // As Atlantis, the configured names are compared as written: a name with capitals never
  // matches the lowered word. A server with another name ignores `atlantis ...`.
  if (word !== 'run' && word !== exe && word !== '@' + opts.vcsUser) return { kind: 'ignore' };

  let args: string[];
  try {
    args = shellSplit(comment);
  } catch (e) {
    return reply('```\nError parsing command: ' + (e as Error).message + '\n```');
  }
  if (args.length < 1) return { kind: 'ignore' };
  const help = helpComment(exe, allowList);
  if (args.length === 1) return reply(help, false);
  const cmd = goToLower(args[1] as string);
  if (cmd === 'help' || cmd === '-h' || cmd === '--help') return reply(help, false);

  if (!(allowList as readonly string[]).includes(cmd)) {
    return reply(
      '```\nError: unknown command ' +
        goQuote(cmd) +
        `.\nRun '${exe} --help' for usage.\nAvailable commands(--allow-commands): ${allowList.join(', ')}\n` +
        '```',
    );
  }
  const name = cmd as CommandName;
  const spec = commandSpec(name);
  const parsed = parseFlags(spec.flags, args.slice(2));
  if ('help' in parsed) return reply('```\nUsage of ' + spec.usage + ':\n' + flagUsages(name) + '\n```', false);
  if ('error' in parsed) {
    // Only a flag error gets unlock's own usage; an argument gets the common error below.
    if (name === 'unlock') return reply(UNLOCK_USAGE(exe));
    return reply(errMarkdown(parsed.error, name, name));
  }
  const { values, positional, argsLenAtDash } = parsed.ok;
  let commandArgs = argsLenAtDash === -1 ? positional : positional.slice(0, argsLenAtDash);
  const extraArgs = argsLenAtDash === -1 ? [] : positional.slice(argsLenAtDash);

  let subName: 'rm' | undefined;
  if (name === 'state') {
    if (commandArgs.length < 1) return reply(errMarkdown('subcommand required', name, name));
    const sub = commandArgs[0] as string;
    if (sub !== 'rm') return reply(errMarkdown(`invalid subcommand ${sub} (not rm)`, name, name));
    subName = 'rm';
    commandArgs = commandArgs.slice(1);
  }
  const countOk = name === 'import' ? commandArgs.length === 2 : name === 'state' ? commandArgs.length >= 1 : commandArgs.length === 0;
  if (!countOk) return reply(errMarkdown(`unknown argument(s) – ${commandArgs.join(' ')}`, spec.usage, name));
  // As Atlantis, command args (import ADDRESS ID) are checked with the extra args: both
  // reach terraform's command line.
  const all = [...extraArgs, ...commandArgs];
  const bad = firstBlockedArg(all, blocked);
  if (bad !== undefined) return reply(errMarkdown(`flag ${goQuote(bad)} is not allowed in extra args`, name, name));

  const rawDir = (values.get('dir') as string | undefined) ?? '';
  const workspace = (values.get('workspace') as string | undefined) ?? '';
  const project = (values.get('project') as string | undefined) ?? '';
  const autoMergeMethod = (values.get('auto-merge-method') as string | undefined) ?? '';
  const autoMergeDisabled = values.get('auto-merge-disabled') === true;
  const dir = commentDir(rawDir);
  if (typeof dir === 'object') return reply(errMarkdown(dir.error, name, name));
  const wsProblem = workspaceProblem(workspace);
  if (wsProblem !== undefined) return reply(errMarkdown(`invalid workspace ${goQuote(workspace)}: ${wsProblem}`, name, name));
  if (project !== '' && (workspace !== '' || dir !== '')) {
    return reply(errMarkdown('cannot use -p/--project at same time as -d/--dir or -w/--workspace', name, name));
  }
  if (autoMergeMethod !== '' && autoMergeDisabled) {
    return reply(errMarkdown('cannot use --auto-merge-method at the same time as --auto-merge-disabled', name, name));
  }
  // Ours, beyond Atlantis: an absolute file path can only be outside the checkout (relative
  // ones, and symlinks, are resolved against the checkout before terraform runs).
  const absolute = pathArgs(all).find((p) => p.value.startsWith('/'));
  if (absolute) return reply(errMarkdown(pathOutsideMessage(absolute), name, name));

  const command: ParsedCommand = { name, verbose: values.get('verbose') === true, autoMergeDisabled, extraArgs, args: commandArgs };
  if (subName) command.subName = subName;
  if (dir !== '') command.dir = dir;
  if (workspace !== '') command.workspace = workspace;
  if (project !== '') command.project = project;
  if (autoMergeMethod !== '') command.autoMergeMethod = autoMergeMethod;
  const policySet = (values.get('policy-set') as string | undefined) ?? '';
  if (policySet !== '') command.policySet = policySet;
  if (values.get('clear-policy-approval') === true) command.clearPolicyApproval = true;
  return { kind: 'command', command };
}

/**
 * Atlantis's -d rule: a glob is kept as written (minus a leading `./` or `/`) but may not
 * hold `..` and must be a valid pattern; a dir is cleaned from the repo root and may not
 * leave it. Ours on top: no control characters. '' when -d was not given.
 */
function commentDir(raw: string): string | { error: string } {
  if (raw === '') return '';
  if (isDirGlob(raw)) {
    if (raw.includes('..')) return { error: `using '..' in glob pattern ${goQuote(raw)} with -d/--dir is not allowed` };
    if (!isValidGlob(raw)) return { error: `invalid glob pattern ${goQuote(raw)} with -d/--dir` };
  }
  const cleaned = cleanRepoDir(raw, 'from-root');
  if ('refused' in cleaned) {
    return {
      error:
        cleaned.refused === 'control-characters'
          ? `invalid dir ${goQuote(raw)}: control characters are not allowed`
          : `using a relative path ${goQuote(raw)} with -d/--dir is not allowed`,
    };
  }
  if (!isDirGlob(raw)) {
    // Atlantis refuses any cleaned dir starting `..`, even a dir named `..x`.
    if (cleaned.dir.startsWith('..')) return { error: `using a relative path ${goQuote(raw)} with -d/--dir is not allowed` };
    return cleaned.dir;
  }
  let glob = raw.startsWith('./') ? raw.slice(2) : raw;
  glob = glob.startsWith('/') ? glob.slice(1) : glob;
  return glob === '' ? '.' : glob;
}
