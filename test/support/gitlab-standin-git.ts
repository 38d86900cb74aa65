// What the GitLab stand-in reads from its projects' bare repositories, as GitLab reads its own:
// commits (GET /repository/commits/:sha), the branches holding a commit (the ref a commit
// status joins when none is given), a merge request's diff (GET .../diffs, changes_count) and
// raw files (GET /repository/files/:path/raw). Every call is a short synchronous git command
// on a small test repository.
import { execFileSync } from 'node:child_process';

const SAFE_REV = /^[\w./-]+$/;

function git(bareDir: string, args: string[]): string {
  return execFileSync('git', args, {
    cwd: bareDir,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { PATH: process.env.PATH, GIT_CONFIG_NOSYSTEM: '1', GIT_CONFIG_GLOBAL: '/dev/null' },
    maxBuffer: 64 * 1024 * 1024,
  }).toString();
}

function safeRev(rev: string): boolean {
  return SAFE_REV.test(rev) && !rev.startsWith('-') && !rev.includes('..');
}

export interface CommitInfo {
  id: string;
  parentIds: string[];
  authorName: string;
  authorEmail: string;
  authoredDate: string;
  committerName: string;
  committerEmail: string;
  committedDate: string;
  title: string;
  message: string;
}

/** The commit `rev` (a SHA, a branch or a tag) names, or undefined. */
export function readCommit(bareDir: string, rev: string): CommitInfo | undefined {
  if (!safeRev(rev)) return undefined;
  try {
    const out = git(bareDir, ['show', '-s', '--format=%H%x00%P%x00%an%x00%ae%x00%aI%x00%cn%x00%ce%x00%cI%x00%B', `${rev}^{commit}`, '--']);
    const [id, parents, an, ae, ad, cn, ce, cd, ...rest] = out.split('\0');
    const message = rest.join('\0').replace(/\n+$/, '\n');
    return {
      id: id!.trim(),
      parentIds: parents!.trim() === '' ? [] : parents!.trim().split(' '),
      authorName: an!,
      authorEmail: ae!,
      authoredDate: ad!,
      committerName: cn!,
      committerEmail: ce!,
      committedDate: cd!,
      title: message.split('\n')[0] ?? '',
      message,
    };
  } catch {
    return undefined;
  }
}

/** Branch names whose head contains `sha`, sorted (GitLab's `branch_names_contains`). */
export function branchesContaining(bareDir: string, sha: string): string[] {
  if (!safeRev(sha)) return [];
  try {
    const out = git(bareDir, ['for-each-ref', '--format=%(refname:short)', '--contains', sha, 'refs/heads/']);
    return out.split('\n').filter((l) => l !== '');
  } catch {
    return [];
  }
}

export interface DiffEntry {
  old_path: string;
  new_path: string;
  a_mode: string;
  b_mode: string;
  diff: string;
  new_file: boolean;
  renamed_file: boolean;
  deleted_file: boolean;
  generated_file: boolean;
}

/** The merge-base of `a` and `b`, or undefined. */
export function mergeBase(bareDir: string, a: string, b: string): string | undefined {
  if (!safeRev(a) || !safeRev(b)) return undefined;
  try {
    return git(bareDir, ['merge-base', a, b]).trim();
  } catch {
    return undefined;
  }
}

/** A merge request's changes: from the merge-base of the target branch and the head to the head, renames found. */
export function mergeRequestDiff(bareDir: string, targetBranch: string, headSha: string): DiffEntry[] {
  const base = mergeBase(bareDir, `refs/heads/${targetBranch}`, headSha);
  if (!base) return [];
  const raw = git(bareDir, ['diff', '--raw', '-z', '-M', '--no-abbrev', base, headSha]);
  const fields = raw.split('\0').filter((f) => f !== '');
  const out: DiffEntry[] = [];
  for (let i = 0; i < fields.length; ) {
    // :<old mode> <new mode> <old sha> <new sha> <status>\0<path>[\0<new path>]
    const meta = fields[i++]!.slice(1).split(' ');
    const status = meta[4]!;
    const oldPath = fields[i++]!;
    const renamed = status.startsWith('R');
    const newPath = renamed ? fields[i++]! : oldPath;
    const patch = git(bareDir, ['diff', '-M', '--no-color', base, headSha, '--', ...(renamed ? [oldPath, newPath] : [newPath])]);
    // GitLab's `diff` is the patch from the first hunk header on.
    const hunk = patch.indexOf('\n@@');
    out.push({
      old_path: oldPath,
      new_path: newPath,
      a_mode: meta[0] === '000000' ? '0' : meta[0]!,
      b_mode: meta[1] === '000000' ? '0' : meta[1]!,
      diff: hunk < 0 ? '' : patch.slice(hunk + 1),
      new_file: status === 'A',
      renamed_file: renamed,
      deleted_file: status === 'D',
      generated_file: false,
    });
  }
  return out;
}

/** The bytes of `file` at `ref`, or undefined when either does not exist (or `file` is a directory). */
export function rawFile(bareDir: string, file: string, ref: string): Buffer | undefined {
  if (!safeRev(ref) || file.split('/').includes('..') || file.startsWith('/')) return undefined;
  try {
    const spec = `${ref}:${file}`;
    if (git(bareDir, ['cat-file', '-t', spec]).trim() !== 'blob') return undefined;
    return execFileSync('git', ['cat-file', 'blob', spec], {
      cwd: bareDir,
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { PATH: process.env.PATH, GIT_CONFIG_NOSYSTEM: '1', GIT_CONFIG_GLOBAL: '/dev/null' },
    });
  } catch {
    return undefined;
  }
}

/** Points `ref` at `sha` (GitLab keeps `refs/merge-requests/<iid>/head` for every merge request). */
export function updateRef(bareDir: string, ref: string, sha: string): void {
  git(bareDir, ['update-ref', ref, sha]);
}

/** Copies the objects of `fromBareDir`'s `ref` into `bareDir` as `toRef` (a fork's branch into the target project). */
export function fetchInto(bareDir: string, fromBareDir: string, ref: string, toRef: string): void {
  git(bareDir, ['fetch', '-q', fromBareDir, `+${ref}:${toRef}`]);
}
