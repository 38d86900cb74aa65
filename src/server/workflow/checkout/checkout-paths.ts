// Keeps everything a pull request names inside its own working copy, by real path: a
// symlink committed in the PR must not take terraform, atlantis.yaml or a -var-file to
// another PR's checkout, the data dir or a server file. One rule for all of them: a working
// copy may not contain a symlink that resolves outside it, a project dir must be the real
// dir it names, and a file argument must resolve inside the checkout. The decisions on
// resolved paths are pure (isInside, pathArgs); this module does the file-system reads.
import { opendir, readlink, realpath } from 'node:fs/promises';
import path from 'node:path';
import { type PathArg, isInside, pathArgs, pathOutsideMessage } from '../comment-parser/extra-args.js';
import { cleanedRepoDir } from '../go-compat/repo-dir.js';

/** Entries looked at in one working copy before giving up (a bound on time, not a policy). */
export const MAX_CHECKOUT_ENTRIES = 200_000;

export class CheckoutPathError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'CheckoutPathError';
  }
}

/** The project dir is not in the checkout; Atlantis's text, and it keeps no plan status for it. */
export class DirNotExistError extends CheckoutPathError {
  constructor(dir: string) {
    super(`dir ${JSON.stringify(dir)} does not exist`);
    this.name = 'DirNotExistError';
  }
}

/** Where a symlink points, resolved; a dangling link is resolved lexically (it reads nothing today). */
async function linkTarget(link: string): Promise<string> {
  try {
    return await realpath(link);
  } catch {
    return path.resolve(path.dirname(link), await readlink(link));
  }
}

/**
 * The first symlink under `root` (repo-relative) that resolves outside it, or undefined.
 * Skips `.git` (git's own) and `.terraform/providers` (terraform init links providers from
 * its plugin cache, outside the checkout, by design).
 */
export async function findEscapingSymlink(root: string): Promise<{ link: string; target: string } | undefined> {
  const realRoot = await realpath(root);
  const stack = [''];
  let seen = 0;
  while (stack.length > 0) {
    const rel = stack.pop() as string;
    const dir = await opendir(path.join(realRoot, rel));
    for await (const e of dir) {
      if (++seen > MAX_CHECKOUT_ENTRIES)
        throw new CheckoutPathError(
          `the pull request's checkout has more than ${MAX_CHECKOUT_ENTRIES} files and directories; refusing to run terraform in it`,
        );
      const childRel = rel === '' ? e.name : `${rel}/${e.name}`;
      if (e.isSymbolicLink()) {
        const target = await linkTarget(path.join(realRoot, childRel));
        if (!isInside(realRoot, target)) return { link: childRel, target };
      } else if (e.isDirectory()) {
        if (childRel === '.git' || (e.name === 'providers' && path.basename(rel) === '.terraform')) continue;
        stack.push(childRel);
      }
    }
  }
  return undefined;
}

/** Refuses a checkout holding a symlink that leaves it (the target is not echoed: it may be a server path). */
export async function assertNoEscapingSymlink(root: string): Promise<void> {
  const found = await findEscapingSymlink(root);
  if (found) {
    throw new CheckoutPathError(
      `the pull request contains the symbolic link ${JSON.stringify(found.link)}, which points outside the repository; remove it (the server runs nothing in a checkout with such a link)`,
    );
  }
}

/**
 * The project's absolute dir inside `checkout`, refusing one reached through a symlink:
 * even a link inside the checkout would run terraform on another project's dir under this
 * dir's lock, bypassing the lock another PR holds on the real one.
 */
export async function projectDirInside(checkout: string, dir: string): Promise<string> {
  // Dirs reach here cleaned by the same rule; one that is not is refused, never joined.
  if (cleanedRepoDir(dir, 'refused') !== dir)
    throw new CheckoutPathError(`dir ${JSON.stringify(dir)} is not a clean directory inside the repository`);
  const realRoot = await realpath(checkout);
  const wanted = dir === '.' ? realRoot : path.join(realRoot, dir);
  let real: string;
  try {
    real = await realpath(wanted);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') throw new DirNotExistError(dir);
    throw e;
  }
  if (!isInside(realRoot, real)) throw new CheckoutPathError(`dir ${JSON.stringify(dir)} resolves outside the repository`);
  if (real !== wanted) {
    const to = path.relative(realRoot, real) || '.';
    throw new CheckoutPathError(
      `dir ${JSON.stringify(dir)} goes through a symbolic link (it is really ${JSON.stringify(to)}); run the command on ${JSON.stringify(to)} instead`,
    );
  }
  return real;
}

/** Refuses file arguments (`-var-file`, ...) that resolve outside `checkout`, read from `projectDir`. */
export async function assertPathArgsInside(checkout: string, projectDir: string, args: readonly string[]): Promise<void> {
  const realRoot = await realpath(checkout);
  for (const p of pathArgs(args)) {
    if (!isInside(realRoot, await resolveArg(projectDir, p))) throw new CheckoutPathError(pathOutsideMessage(p));
  }
}

/**
 * The real path an argument names, resolved one segment at a time as the kernel does (a
 * `..` after a symlink goes up from the link's target, not from the link): path.resolve
 * would fold `link/..` away first. A segment that does not exist (yet) is kept as written.
 */
async function resolveArg(projectDir: string, p: PathArg): Promise<string> {
  let cur = p.value.startsWith('/') ? '/' : await realpath(projectDir);
  for (const seg of p.value.split('/')) {
    if (seg === '' || seg === '.') continue;
    if (seg === '..') {
      cur = path.dirname(cur);
      continue;
    }
    cur = path.join(cur, seg);
    try {
      cur = await realpath(cur);
    } catch {
      // missing (an output file) or a link loop: terraform cannot follow it either
    }
  }
  return cur;
}
