// The one rule for a directory a pull request names relative to its repo (a comment's -d,
// atlantis.yaml's dir, a project dir before terraform runs in it): cleaned as Go's
// filepath.Clean does, never above the repo root, never with control characters. Lexical
// only; symlinks are resolved against the checkout in checkout-paths.ts.
import { goClean } from './go-paths.js';

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

// Go's url.PathEscape leaves exactly these bytes alone; Atlantis refuses any workspace that
// PathEscape would change (so no `/`, spaces, `%`, non-ASCII...). A workspace becomes a path
// segment under the data dir, hence `..` is refused too.
const WORKSPACE_OK = /^[A-Za-z0-9\-_.~$&+:=@]*$/;

/** A workspace name from a comment's -w or atlantis.yaml (the empty name means none given). */
export function isValidWorkspace(ws: string): boolean {
  return WORKSPACE_OK.test(ws) && !ws.includes('..');
}

/** The cleaned dir, or undefined when the rule refuses it. */
export function cleanedRepoDir(dir: string, absolute: AbsoluteDir): string | undefined {
  const c = cleanRepoDir(dir, absolute);
  return 'dir' in c ? c.dir : undefined;
}
