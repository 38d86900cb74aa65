// Parses pull-request comments into Atlantis commands, with Atlantis's grammar and its
// exact reply texts (help, usage, errors), so that users switching from Atlantis see the
// same behaviour. Pure: no I/O; the caller posts the reply or runs the command.
//
// Grammar: `<executable> <command> [flags] [-- extra args]` where executable is `atlantis`
// (or the configured --executable-name), `run`, or `@<gh-user>`. Flags are parsed the way
// Go's pflag does (Atlantis uses it): `-d x`, `-dx`, `-d=x`, `--dir x`, `--dir=x`,
// interspersed positional args, `--` ends flag parsing.
import { type CommandName, DEFAULT_ALLOW_COMMANDS, type FlagDef, RUNNABLE_COMMANDS, commandSpec, isRunnableCommand } from './commands.js';
import { cleanRepoDir } from './repo-dir.js';
import { DEFAULT_BLOCKED_EXTRA_ARGS, blockedArgMessage, effectiveBlocked, firstBlockedArg, pathArgs, pathOutsideMessage } from './extra-args.js';

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

export const DID_YOU_MEAN_COMMENT = (exe: string, given: string): string =>
  `Did you mean to use \`${exe}\` instead of \`${given}\`?`;

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
    const spacing = ' '.repeat(maxlen - (head.length));
    out += `${head} ${spacing} ${wrap(maxlen + 2, USAGE_COLS, f.usage)}\n`;
  });
  return out;
}

function errMarkdown(msg: string, cmd: string, name: CommandName): string {
  return '```\nError: ' + msg + '.\nUsage of ' + cmd + ':\n' + flagUsages(name) + '```';
}

/** Atlantis's help comment, listing only the allowed commands. */
export function helpComment(executableName: string, allowCommands: readonly string[]): string {
  const exe = executableName;
  const allow = (c: string): boolean => allowCommands.includes(c);
  let s = '```cmake\natlantis\nTerraform Pull Request Automation\n\nUsage:\n';
  s += `  ${exe} <command> [options] -- [terraform options]\n\nExamples:\n  # show atlantis help\n  ${exe} help`;
  if (allow('plan')) s += `\n\n  # run plan in the root directory passing the -target flag to terraform\n  ${exe} plan -d . -- -target=resource`;
  if (allow('apply')) {
    s += `\n\n  # apply all unapplied plans from this pull request\n  ${exe} apply`;
    s += `\n\n  # apply the plan for the root directory and staging workspace\n  ${exe} apply -d . -w staging`;
  }
  s += '\n\nCommands:';
  if (allow('plan')) s += "\n  plan     Runs 'terraform plan' for the changes in this pull request.\n           To plan a specific project, use the -d, -w and -p flags.";
  if (allow('apply')) s += "\n  apply    Runs 'terraform apply' on all unapplied plans from this pull request.\n           To only apply a specific plan, use the -d, -w and -p flags.";
  if (allow('unlock')) s += '\n  unlock   Removes all atlantis locks and discards all plans for this PR.\n           To unlock a specific plan you can use the Atlantis UI.';
  if (allow('version')) s += "\n  version  Print the output of 'terraform version'";
  if (allow('import')) s += "\n  import ADDRESS ID\n           Runs 'terraform import' for the passed address resource.\n           To import a specific project, use the -d, -w and -p flags.";
  if (allow('state')) s += "\n  state rm ADDRESS...\n           Runs 'terraform state rm' for the passed address resource.\n           To remove a specific project resource, use the -d, -w and -p flags.";
  s += `\n  help     View help.\n\nFlags:\n  -h, --help   help for atlantis\n\nUse "${exe} [command] --help" for more information about a command.`;
  return s + '\n```';
}

// ---------------------------------------------------------------------------------------
// Shell-style splitting (the role shlex plays in Atlantis).

class ShlexError extends Error {}

/** Splits like a POSIX shell without expansion: quotes and backslash escapes. */
export function shellSplit(input: string): string[] {
  const out: string[] = [];
  let cur = '';
  let inWord = false;
  let i = 0;
  const n = input.length;
  while (i < n) {
    const c = input[i] as string;
    if (/\s/.test(c)) {
      if (inWord) {
        out.push(cur);
        cur = '';
        inWord = false;
      }
      i++;
      continue;
    }
    inWord = true;
    if (c === '\\') {
      if (i + 1 >= n) throw new ShlexError('EOF found after escape character');
      cur += input[i + 1];
      i += 2;
    } else if (c === "'") {
      const end = input.indexOf("'", i + 1);
      if (end < 0) throw new ShlexError('EOF found when expecting closing quote');
      cur += input.slice(i + 1, end);
      i = end + 1;
    } else if (c === '"') {
      i++;
      let closed = false;
      while (i < n) {
        const d = input[i] as string;
        if (d === '"') {
          closed = true;
          i++;
          break;
        }
        if (d === '\\' && i + 1 < n && '"\\$`\n'.includes(input[i + 1] as string)) {
          cur += input[i + 1];
          i += 2;
          continue;
        }
        cur += d;
        i++;
      }
      if (!closed) throw new ShlexError('EOF found when expecting closing quote');
    } else {
      cur += c;
      i++;
    }
  }
  if (inWord) out.push(cur);
  return out;
}

// ---------------------------------------------------------------------------------------
// pflag-compatible flag parsing.

interface FlagParse {
  values: Map<string, string | boolean>;
  positional: string[];
  /** Number of positional args before `--`, or -1 when there was no `--`. */
  argsLenAtDash: number;
}

type FlagOutcome = { ok: FlagParse } | { help: true } | { error: string };

function parseBool(v: string): boolean | undefined {
  if (['1', 't', 'T', 'TRUE', 'true', 'True'].includes(v)) return true;
  if (['0', 'f', 'F', 'FALSE', 'false', 'False'].includes(v)) return false;
  return undefined;
}

function parseFlags(defs: readonly FlagDef[], args: string[]): FlagOutcome {
  const byLong = new Map(defs.map((d) => [d.long, d]));
  const byShort = new Map(defs.filter((d) => d.short).map((d) => [d.short as string, d]));
  const values = new Map<string, string | boolean>();
  const positional: string[] = [];
  let argsLenAtDash = -1;
  let rest = [...args];
  while (rest.length > 0) {
    const s = rest.shift() as string;
    if (s.length === 0 || s[0] !== '-' || s.length === 1) {
      positional.push(s);
      continue;
    }
    if (s[1] === '-') {
      if (s.length === 2) {
        argsLenAtDash = positional.length;
        positional.push(...rest);
        rest = [];
        break;
      }
      const body = s.slice(2);
      if (body[0] === '-' || body[0] === '=') return { error: `bad flag syntax: ${s}` };
      const eq = body.indexOf('=');
      const name = eq >= 0 ? body.slice(0, eq) : body;
      const def = byLong.get(name);
      if (!def) {
        if (name === 'help') return { help: true };
        return { error: `unknown flag: --${name}` };
      }
      if (eq >= 0) {
        const v = body.slice(eq + 1);
        if (def.kind === 'bool') {
          const b = parseBool(v);
          if (b === undefined) return { error: `invalid argument "${v}" for "--${name}" flag: strconv.ParseBool: parsing "${v}": invalid syntax` };
          values.set(def.long, b);
        } else values.set(def.long, v);
      } else if (def.kind === 'bool') {
        values.set(def.long, true);
      } else if (rest.length > 0) {
        values.set(def.long, rest.shift() as string);
      } else {
        return { error: `flag needs an argument: --${name}` };
      }
      continue;
    }
    // Short flags, possibly combined (`-dfoo`, `-d=foo`).
    let shorthands = s.slice(1);
    while (shorthands.length > 0) {
      const c = shorthands[0] as string;
      const def = byShort.get(c);
      if (!def) {
        if (c === 'h') return { help: true };
        return { error: `unknown shorthand flag: '${c}' in -${shorthands}` };
      }
      if (shorthands.length > 2 && shorthands[1] === '=') {
        const v = shorthands.slice(2);
        if (def.kind === 'bool') {
          const b = parseBool(v);
          if (b === undefined) return { error: `invalid argument "${v}" for "-${c}, --${def.long}" flag: strconv.ParseBool: parsing "${v}": invalid syntax` };
          values.set(def.long, b);
        } else values.set(def.long, v);
        shorthands = '';
      } else if (def.kind === 'bool') {
        values.set(def.long, true);
        shorthands = shorthands.slice(1);
      } else if (shorthands.length > 1) {
        values.set(def.long, shorthands.slice(1));
        shorthands = '';
      } else if (rest.length > 0) {
        values.set(def.long, rest.shift() as string);
        shorthands = '';
      } else {
        return { error: `flag needs an argument: '${c}' in -${shorthands}` };
      }
    }
  }
  return { ok: { values, positional, argsLenAtDash } };
}

// ---------------------------------------------------------------------------------------

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

// Go's url.PathEscape leaves exactly these bytes alone; Atlantis refuses any workspace that
// PathEscape would change (so no `/`, spaces, `%`, non-ASCII...).
const WORKSPACE_OK = /^[A-Za-z0-9\-_.~$&+:=@]*$/;

export function isValidWorkspace(ws: string): boolean {
  return WORKSPACE_OK.test(ws) && !ws.includes('..');
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
      body: '```\nError: unknown command ' + JSON.stringify(cmd) + `.\nRun '${exe} --help' for usage.\nAvailable commands(--allow-commands): ${allowList.join(', ')}\n` + '```',
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
  const countOk =
    name === 'import' ? commandArgs.length === 2 : name === 'state' ? commandArgs.length >= 1 : commandArgs.length === 0;
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
      const why = cleaned.refused === 'control-characters'
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

/** The comment a user types to plan a project again (shown under plan results). */
export function buildPlanComment(exe: string, dir: string, workspace: string, project: string | undefined, extraArgs: string[] = []): string {
  const tail = extraArgs.length > 0 ? ` -- ${extraArgs.join(' ')}` : '';
  return `${exe} plan${buildFlags(dir, workspace, project, false)}${tail}`;
}

/** The comment a user types to apply a project (shown under plan results). */
export function buildApplyComment(exe: string, dir: string, workspace: string, project: string | undefined, autoMergeDisabled = false): string {
  return `${exe} apply${buildFlags(dir, workspace, project, autoMergeDisabled)}`;
}

function buildFlags(dir: string, workspace: string, project: string | undefined, autoMergeDisabled: boolean): string {
  const d = dir.includes(' ') ? JSON.stringify(dir) : dir;
  let flags: string;
  if (project) flags = ` -p ${project}`;
  else if (d === '.' && workspace === 'default') flags = ' -d .';
  else if (d === '.') flags = ` -w ${workspace}`;
  else if (workspace === 'default') flags = ` -d ${d}`;
  else flags = ` -d ${d} -w ${workspace}`;
  if (autoMergeDisabled) flags += ' --auto-merge-disabled';
  return flags;
}
