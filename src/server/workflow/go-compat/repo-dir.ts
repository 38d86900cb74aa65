// The one rule for a directory a pull request names relative to its repo (a comment's -d,
// atlantis.yaml's dir, a project dir before terraform runs in it): cleaned as Go's
// filepath.Clean does, never above the repo root, never with control characters. Lexical
// only; symlinks are resolved against the checkout in checkout-paths.ts.
import { goClean, isGoSpace } from './go-paths.js';

export type RepoDirRefusal = 'control-characters' | 'outside-repo' | 'absolute';

export type CleanedRepoDir = { dir: string } | { refused: RepoDirRefusal };

/**
 * How a leading `/` reads: `from-root` as the repo root (Atlantis's -d: `/a/b` is `a/b`),
 * `refused` as an error (atlantis.yaml, where an absolute dir is a mistake worth reporting).
 */
export type AbsoluteDir = 'from-root' | 'refused';

// biome-ignore lint/suspicious/noControlCharactersInRegex: matching control characters is the point (a dir with one is refused)
const CONTROL = /[\u0000-\u001f\u007f]/;

export function cleanRepoDir(dir: string, absolute: AbsoluteDir): CleanedRepoDir {
  // No directory of a checkout has a control character (NUL above all) in its name.
  if (CONTROL.test(dir)) return { refused: 'control-characters' };
  let d = goClean(dir);
  if (d.startsWith('/')) {
    if (absolute === 'refused') return { refused: 'absolute' };
    d = goClean('.' + d);
  }
  if (d === '..' || d.startsWith('../')) return { refused: 'outside-repo' };
  return { dir: d };
}

/**
 * Why a workspace name (a comment's -w, atlantis.yaml's workspace) is refused, in Atlantis
 * v0.47.1's words (valid.ValidateWorkspaceName), or undefined when it is fine. The name
 * becomes a path segment under the data dir and an argument of terraform: no separators,
 * no `..`, not `.` (the pull's own directory), no leading `-` (a flag) or `~`, no `$`
 * (expanded), no white space or control characters. '' means none was given.
 */
export function workspaceProblem(ws: string): string | undefined {
  if (ws === '') return undefined;
  if (/[/\\]/.test(ws)) return "cannot contain '/' or '\\'";
  if (ws.includes('..')) return "cannot contain '..'";
  if (ws === '.') return "cannot be '.'";
  if (ws.startsWith('-')) return "cannot start with '-'";
  if (ws.startsWith('~')) return "cannot start with '~'";
  if (ws.includes('$')) return "cannot contain '$'";
  for (let i = 0; i < ws.length; i++) {
    const u = ws.charCodeAt(i);
    if (isGoSpace(u) || u < 0x20 || (u >= 0x7f && u <= 0x9f)) return 'cannot contain whitespace or control characters';
  }
  return undefined;
}

/** A workspace name from a comment's -w or atlantis.yaml (the empty name means none given). */
export function isValidWorkspace(ws: string): boolean {
  return workspaceProblem(ws) === undefined;
}

/** The cleaned dir, or undefined when the rule refuses it. */
export function cleanedRepoDir(dir: string, absolute: AbsoluteDir): string | undefined {
  const c = cleanRepoDir(dir, absolute);
  return 'dir' in c ? c.dir : undefined;
}
