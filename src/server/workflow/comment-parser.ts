// Parses pull-request comments into Atlantis commands, with Atlantis's grammar and its
// exact reply texts, so that users switching from Atlantis see the same behaviour. Pure: no
// I/O; the caller posts the reply or runs the command. Every comment is hostile input.
//
// Grammar: `<executable> <command> [flags] [-- extra args]` where executable is `atlantis`
// (or the configured --executable-name), `run`, or `@<gh-user>`. The pieces: the command
// table (commands.ts), shell splitting (comment-parser/shell-split.ts), pflag's flag rules
// (comment-parser/pflag.ts), the reply texts (comment-parser/usage.ts), the dir rule
// (repo-dir.ts) and the extra-args rules (extra-args.ts).
import { type CommandName, DEFAULT_ALLOW_COMMANDS, RUNNABLE_COMMANDS, commandSpec, isRunnableCommand } from './commands.js';
import { parseFlags } from './comment-parser/pflag.js';
import { shellSplit } from './comment-parser/shell-split.js';
import { DID_YOU_MEAN_COMMENT, UNLOCK_USAGE, errMarkdown, flagUsages, helpComment } from './comment-parser/usage.js';
import { cleanRepoDir, isValidWorkspace } from './repo-dir.js';
import {
  DEFAULT_BLOCKED_EXTRA_ARGS,
  blockedArgMessage,
  effectiveBlocked,
  firstBlockedArg,
  pathArgs,
  pathOutsideMessage,
} from './extra-args.js';

export interface ParsedCommand {
  name: CommandName;
  /** Subcommand, only for `state` (currently always `rm`). */
  subName?: 'rm';
  /** Repo-relative, cleaned dir (`.` for the root); undefined when -d was not given. */
  dir?: string;
  /** Undefined when -w was not given (the project's own workspace applies). */
  workspace?: string;
  project?: string;
  verbose: boolean;
  autoMergeDisabled: boolean;
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
  ghUser: string;
  allowCommands?: readonly string[];
  blockedExtraArgs?: readonly string[];
}

/** Edit distance, for Atlantis's "did you mean" answer to a near-miss of the executable name. */
function levenshtein(a: string, b: string): number {
  const prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    let diag = prev[0] as number;
    prev[0] = i;
    for (let j = 1; j <= b.length; j++) {
      const up = prev[j] as number;
      prev[j] = Math.min(up + 1, (prev[j - 1] as number) + 1, diag + (a[i - 1] === b[j - 1] ? 0 : 1));
      diag = up;
    }
  }
  return prev[b.length] as number;
}

const MULTI_LINE = /\r?\n[^\r\n]/;

/** Parses one PR comment. Never throws. */
export function parseComment(rawComment: string, opts: ParseOptions): ParseResult {
  const exe = opts.executableName && opts.executableName !== '' ? opts.executableName : 'atlantis';
  const allowed = (opts.allowCommands ?? DEFAULT_ALLOW_COMMANDS).filter(isRunnableCommand);
  // Keep Atlantis's canonical order for the "Available commands" list.
  const allowList = RUNNABLE_COMMANDS.filter((c) => allowed.includes(c));
  const blocked = effectiveBlocked(opts.blockedExtraArgs ?? DEFAULT_BLOCKED_EXTRA_ARGS);

  const comment = rawComment.trim();
  if (MULTI_LINE.test(comment)) return { kind: 'ignore' };
  const fields = comment.split(/\s+/).filter((f) => f !== '');
  const first = fields[0];
  if (first === undefined) return { kind: 'ignore' };

  if (first === 'terraform' && exe !== 'terraform') {
    return { kind: 'reply', body: DID_YOU_MEAN_COMMENT(exe, 'terraform'), error: true };
  }
  const dist = levenshtein(first, exe);
  if (dist > 0 && dist < 3) return { kind: 'reply', body: DID_YOU_MEAN_COMMENT(exe, first), error: true };

  const names = new Set(['run', exe, 'atlantis']);
  if (opts.ghUser) names.add('@' + opts.ghUser);
  if (!names.has(first)) return { kind: 'ignore' };

  let args: string[];
  try {
    args = shellSplit(comment);
  } catch (e) {
    return { kind: 'reply', body: '```\nError parsing command: ' + (e as Error).message + '\n```', error: true };
  }
  if (args.length < 1) return { kind: 'ignore' };
  const help = helpComment(exe, allowList);
  if (args.length === 1) return { kind: 'reply', body: help, error: false };
  const cmd = args[1] as string;
  if (cmd === 'help' || cmd === '-h' || cmd === '--help') return { kind: 'reply', body: help, error: false };

  if (!(allowList as readonly string[]).includes(cmd)) {
    return {
      kind: 'reply',
      body:
        '```\nError: unknown command ' +
        JSON.stringify(cmd) +
        `.\nRun '${exe} --help' for usage.\nAvailable commands(--allow-commands): ${allowList.join(', ')}\n` +
        '```',
      error: true,
    };
  }
  const name = cmd as CommandName;
  const spec = commandSpec(name);
  const parsed = parseFlags(spec.flags, args.slice(2));
  if ('help' in parsed) {
    return { kind: 'reply', body: '```\nUsage of ' + spec.usage + ':\n' + flagUsages(name) + '\n```', error: false };
  }
  if ('error' in parsed) {
    if (name === 'unlock') return { kind: 'reply', body: UNLOCK_USAGE(exe), error: true };
    return { kind: 'reply', body: errMarkdown(parsed.error, name, name), error: true };
  }
  const { values, positional, argsLenAtDash } = parsed.ok;
  let commandArgs = argsLenAtDash === -1 ? positional : positional.slice(0, argsLenAtDash);
  const extraArgs = argsLenAtDash === -1 ? [] : positional.slice(argsLenAtDash);

  let subName: 'rm' | undefined;
  if (name === 'state') {
    if (commandArgs.length < 1) return { kind: 'reply', body: errMarkdown('subcommand required', name, name), error: true };
    const sub = commandArgs[0] as string;
    if (sub !== 'rm') return { kind: 'reply', body: errMarkdown(`invalid subcommand ${sub} (not rm)`, name, name), error: true };
    subName = 'rm';
    commandArgs = commandArgs.slice(1);
  }
  const countOk = name === 'import' ? commandArgs.length === 2 : name === 'state' ? commandArgs.length >= 1 : commandArgs.length === 0;
  if (!countOk) {
    if (name === 'unlock') return { kind: 'reply', body: UNLOCK_USAGE(exe), error: true };
    return {
      kind: 'reply',
      body: errMarkdown(`unknown argument(s) – ${commandArgs.join(' ')}`, spec.usage, name),
      error: true,
    };
  }

  const rawDir = (values.get('dir') as string | undefined) ?? '';
  const workspace = (values.get('workspace') as string | undefined) ?? '';
  const project = (values.get('project') as string | undefined) ?? '';
  let dir: string | undefined;
  if (rawDir !== '') {
    const cleaned = cleanRepoDir(rawDir, 'from-root');
    if ('refused' in cleaned) {
      const why =
        cleaned.refused === 'control-characters'
          ? `invalid dir ${JSON.stringify(rawDir)}: control characters are not allowed`
          : `using a relative path ${JSON.stringify(rawDir)} with -d/--dir is not allowed`;
      return { kind: 'reply', body: errMarkdown(why, name, name), error: true };
    }
    dir = cleaned.dir;
  }
  if (!isValidWorkspace(workspace)) {
    return { kind: 'reply', body: errMarkdown(`invalid workspace: ${JSON.stringify(workspace)}`, name, name), error: true };
  }
  if (project !== '' && (workspace !== '' || dir !== undefined)) {
    return {
      kind: 'reply',
      body: errMarkdown('cannot use -p/--project at same time as -d/--dir or -w/--workspace', name, name),
      error: true,
    };
  }
  // As Atlantis, command args (import ADDRESS ID) are checked with the extra args: both
  // reach terraform's command line.
  const all = [...extraArgs, ...commandArgs];
  const bad = firstBlockedArg(all, blocked);
  if (bad !== undefined) return { kind: 'reply', body: errMarkdown(blockedArgMessage(bad), name, name), error: true };
  // An absolute file path can only be outside the checkout; relative ones (and symlinks)
  // are resolved against the checkout before terraform runs.
  const absolute = pathArgs(all).find((p) => p.value.startsWith('/'));
  if (absolute) return { kind: 'reply', body: errMarkdown(pathOutsideMessage(absolute), name, name), error: true };

  const command: ParsedCommand = {
    name,
    verbose: values.get('verbose') === true,
    autoMergeDisabled: values.get('auto-merge-disabled') === true,
    extraArgs,
    args: commandArgs,
  };
  if (subName) command.subName = subName;
  if (dir !== undefined) command.dir = dir;
  if (workspace !== '') command.workspace = workspace;
  if (project !== '') command.project = project;
  return { kind: 'command', command };
}
