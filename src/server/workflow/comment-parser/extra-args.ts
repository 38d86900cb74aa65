// Which terraform arguments a pull request may add (after `--` in a comment, or as
// `extra_args` of a workflow in the repo's own atlantis.yaml). Pure decisions, table-tested;
// the caller resolves real paths (checkout-paths.ts) and posts the refusal.
//
// terraform parses its flags with Go's flag package: `-f`, `--f`, `-f=v`, `--f=v` and, for a
// flag taking a value, `-f v`. A blocked entry `b` matches an argument equal to `b` or
// starting with `b=` (Atlantis's --blocked-extra-args rule), so listing both dash forms of a
// name refuses every spelling.

import { flagsWithRule } from './terraform-flags.js';

/** Atlantis v0.47's default --blocked-extra-args. */
export const ATLANTIS_BLOCKED_EXTRA_ARGS: readonly string[] = ['-chdir', '--chdir', '-plugin-dir', '--plugin-dir'];

/**
 * Flags whose value the server sets itself, or that make terraform write files the server
 * owns: the plan file (`-out`), the state and its backup, whether terraform may prompt.
 * An extra arg naming one would replace the server's value (Go's flag package keeps the
 * last one), e.g. `-out=` pointing at another PR's approved plan or the SQLite store.
 * They are refused whatever --blocked-extra-args says.
 */
export const SERVER_SET_FLAGS: readonly string[] = flagsWithRule('server-set');

/**
 * Refused whatever --blocked-extra-args says: the server-set flags, and flags that read from
 * anywhere on the server's disk with no path to check (`init -from-module`). See
 * terraform-flags.ts for every flag's rule.
 */
export const ALWAYS_REFUSED_FLAGS: readonly string[] = [...SERVER_SET_FLAGS, ...flagsWithRule('refused')];

const bothDashes = (names: readonly string[]): string[] => names.flatMap((n) => [`-${n}`, `--${n}`]);

/** The server's default --blocked-extra-args: Atlantis's list plus the server-set flags. */
export const DEFAULT_BLOCKED_EXTRA_ARGS: readonly string[] = [
  ...ATLANTIS_BLOCKED_EXTRA_ARGS,
  ...bothDashes(SERVER_SET_FLAGS.filter((n) => n !== 'chdir')),
];

/** What is refused: the configured list plus, always, ALWAYS_REFUSED_FLAGS. */
export function effectiveBlocked(configured: readonly string[]): string[] {
  const out = configured.filter((b) => b !== '');
  for (const b of bothDashes(ALWAYS_REFUSED_FLAGS)) if (!out.includes(b)) out.push(b);
  return out;
}

/** Atlantis's rule: the arg is the blocked flag itself or the flag followed by `=`. */
export function isBlockedArg(arg: string, blocked: readonly string[]): boolean {
  return blocked.some((b) => b !== '' && (arg === b || arg.startsWith(b + '=')));
}

/** The first argument refused by `blocked` (already made effective by the caller), if any. */
export function firstBlockedArg(args: readonly string[], blocked: readonly string[]): string | undefined {
  return args.find((a) => isBlockedArg(a, blocked));
}

/** Atlantis's refusal text (rendered in its usage block by the comment parser). */
export const blockedArgMessage = (arg: string): string => `flag ${JSON.stringify(arg)} is not allowed in extra args`;

/**
 * Flags whose value names a file or dir terraform reads or writes (terraform-flags.ts). A
 * value outside the PR's working copy could read a server file into an error message
 * (`-var-file=/proc/self/environ`, `import -config=/etc`) or write next to other PRs' data.
 * `-var` is not here: its value is a literal, never read as a file. `-backend-config` takes
 * either `key=value` or a file; only the file form is a path.
 */
const PATH_FLAGS: readonly string[] = flagsWithRule('path');

export interface PathArg {
  /** The argument(s) as written, for the refusal message. */
  arg: string;
  flag: string;
  value: string;
}

/** The file paths named by `args`, in both `-f=v` and `-f v` forms, with one or two dashes. */
export function pathArgs(args: readonly string[]): PathArg[] {
  const out: PathArg[] = [];
  for (let i = 0; i < args.length; i++) {
    const a = args[i] as string;
    const m = /^--?([a-z-]+)(?:=(.*))?$/s.exec(a);
    if (!m || !PATH_FLAGS.includes(m[1] as string)) continue;
    const flag = m[1] as string;
    let value = m[2];
    let arg = a;
    if (value === undefined) {
      const next = args[i + 1];
      if (next === undefined) continue;
      value = next;
      arg = `${a} ${next}`;
      i++;
    }
    if (flag === 'backend-config' && value.includes('=')) continue;
    out.push({ arg, flag, value });
  }
  return out;
}

/** Lexically: is `target` (absolute, normalised) `root` itself or below it? */
export function isInside(root: string, target: string): boolean {
  const r = root.endsWith('/') ? root.slice(0, -1) : root;
  return target === r || target.startsWith(r + '/');
}

const DIR_FLAGS: readonly string[] = ['config', 'test-directory'];

/** The refusal of a path argument that leaves the working copy. */
export const pathOutsideMessage = (p: PathArg): string =>
  `flag ${JSON.stringify(p.arg)} is not allowed in extra args: ${p.flag} must name a ${DIR_FLAGS.includes(p.flag) ? 'dir' : 'file'} inside this pull request's checkout`;
