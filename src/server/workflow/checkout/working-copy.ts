// Working copies of pull requests under the data dir: one git checkout of the PR head per
// repo, pull and workspace (as Atlantis: workspaces of one dir must not share .terraform).
// git is started by the process host's worker process, so its spawns never fork the server.
//
// The token never appears in git's argv (readable by any process in /proc/<pid>/cmdline),
// in a URL, in .git/config or in any file: git asks a credential helper given on its command
// line, which prints the token from a variable set in that one git process's environment
// (see gitAuth). terraform and run steps never have it (secrets/child-env.ts).
import { existsSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import type { Logger } from '../../../log.js';
import { processRedactor } from '../../secrets/redact.js';
import { workspaceProblem } from '../go-compat/repo-dir.js';
import { divergedFilesArgs } from './undiverged.js';
import type { ProcessHost } from '../../terraform/process-host.js';

export interface CheckoutRequest {
  repo: string;
  pull: number;
  workspace: string;
  /** The head repository's clone URL (a fork's for a fork PR). */
  cloneUrl: string;
  headRef: string;
  headSha: string;
  /** The base branch; needed by the merge strategy. */
  baseRef?: string;
  /** The base repository's clone URL (merge strategy); default cloneUrl. */
  baseCloneUrl?: string;
  /** Overrides --checkout-strategy for this working copy (the API's run of a ref without a pull request: branch). */
  strategy?: CheckoutStrategy;
}

/** The request for one workspace of a pull request (from the command's pull context). */
export function checkoutRequest(ctx: Omit<CheckoutRequest, 'workspace'>, workspace: string): CheckoutRequest {
  const { repo, pull, cloneUrl, baseCloneUrl, headRef, headSha, baseRef, strategy } = ctx;
  return { repo, pull, workspace, cloneUrl, baseCloneUrl, headRef, headSha, baseRef, ...(strategy ? { strategy } : {}) };
}

/** --checkout-strategy and --checkout-depth, as Atlantis. */
export type CheckoutStrategy = 'branch' | 'merge';
export interface CheckoutOptions {
  strategy: CheckoutStrategy;
  /** Commits fetched of the base and head (merge strategy only); 0 = all. */
  depth: number;
}

/** The remote the PR head is fetched from in a merge checkout (Atlantis's name). */
export const HEAD_REMOTE = 'source';
/** Author of the merge commit, as Atlantis sets it (git refuses to commit without one). */
const MERGE_ENV = { EMAIL: 'atlantis@runatlantis.io', GIT_AUTHOR_NAME: 'atlantis', GIT_COMMITTER_NAME: 'atlantis' };

/** Pure: the clone of a fresh working copy (URLs given without credentials). */
export function cloneArgs(o: CheckoutOptions, req: CheckoutRequest, dir: string): string[] {
  const common = ['clone', '--quiet', '--no-tags'];
  if (o.strategy === 'branch')
    return [...common, '--depth=1', '--branch', req.headRef, '--single-branch', withoutCredentials(req.cloneUrl), dir];
  const depth = o.depth > 0 ? ['--depth', String(o.depth)] : [];
  return [...common, ...depth, '--branch', baseRefOf(req), '--single-branch', withoutCredentials(baseUrlOf(req)), dir];
}

/** Pure: the fetch of the PR head into a merge checkout (`+refs/heads/<head>:`, or a commit). */
export function headFetchArgs(o: CheckoutOptions, what: string): string[] {
  return ['fetch', '--quiet', '--no-tags', ...(o.depth > 0 ? ['--depth', String(o.depth)] : []), HEAD_REMOTE, what];
}

/** Pure: the merge commit, with --no-ff so HEAD^2 is always the PR head (Atlantis's check). */
export function mergeArgs(sha: string): string[] {
  return ['-c', 'commit.gpgsign=false', 'merge', '-q', '--no-ff', '-m', 'atlantis-merge', sha];
}

/**
 * Pure: is a working copy what the request wants? Branch: HEAD is the head commit. Merge:
 * HEAD's second parent is (HEAD a merge of the head into the base branch), and the base
 * branch is the one we cloned (a PR retargeted to another base needs a new clone).
 */
export function isAtTarget(
  o: CheckoutOptions,
  req: CheckoutRequest,
  seen: { head?: string; secondParent?: string; hasBaseRemoteRef?: boolean },
): boolean {
  if (o.strategy === 'branch') return seen.head === req.headSha;
  return seen.secondParent === req.headSha && seen.hasBaseRemoteRef === true;
}

/** Pure: from `git rev-list --left-right --count HEAD...origin/<base>`: both sides have commits. */
export function hasDiverged(leftRightCount: string): boolean {
  const [ours, theirs] = leftRightCount.trim().split(/\s+/).map(Number);
  return (ours ?? 0) > 0 && (theirs ?? 0) > 0;
}

const baseRefOf = (req: CheckoutRequest): string => {
  if (!req.baseRef) throw new Error('the merge checkout strategy needs the base branch of the pull request');
  return req.baseRef;
};
const baseUrlOf = (req: CheckoutRequest): string => req.baseCloneUrl ?? req.cloneUrl;

export class WorkingCopies {
  private readonly options: CheckoutOptions;
  /** The user name git sends with the token (the code host's, vcs/host.ts); x-access-token is GitHub's. */
  private readonly gitUser: string;

  constructor(
    private readonly dataDir: string,
    /** Read before each git command: a rotated token file or a new App installation token. */
    private readonly token: () => string | Promise<string>,
    private readonly logger: Logger,
    private readonly host: ProcessHost,
    options?: Partial<CheckoutOptions> & { gitUser?: string },
  ) {
    this.options = { strategy: options?.strategy ?? 'branch', depth: options?.depth ?? 0 };
    this.gitUser = options?.gitUser ?? 'x-access-token';
  }

  /** Each working copy's revision: a new number whenever git rewrites it (a clone, a merge again). */
  private readonly revisions = new Map<string, number>();
  private lastRevision = 0;
  /** The revision at which each working copy passed `verifyOnce`'s check. */
  private readonly verified = new Map<string, number>();

  private changed(dir: string): void {
    this.revisions.set(dir, ++this.lastRevision);
  }

  /**
   * Runs `check` on the working copy at `dir` unless it passed at the copy's current revision
   * already: a PR touching fifty projects walks its checkout once, not once per project job.
   * What terraform writes into the copy afterwards is not the PR's input (the PR's code could
   * write it anyway while terraform runs).
   */
  async verifyOnce(dir: string, check: (dir: string) => Promise<void>): Promise<void> {
    const rev = this.revisions.get(dir) ?? 0;
    if (this.verified.get(dir) === rev) return;
    await check(dir);
    this.verified.set(dir, rev);
  }

  /**
   * The checkout dir of one workspace. Refuses a workspace that is not a safe name (Atlantis's
   * rule, repo-dir.ts) before any path is built: `.` would be the pull's own directory, so a
   * checkout there would delete every workspace of the PR. The parser refuses these already;
   * this is the second line.
   */
  dirFor(repo: string, pull: number, workspace: string): string {
    const problem = workspace === '' ? 'cannot be empty' : workspaceProblem(workspace);
    if (problem !== undefined) throw new Error(`invalid workspace ${JSON.stringify(workspace)}: ${problem}`);
    return path.join(this.dataDir, 'repos', repo, String(pull), workspace);
  }

  /**
   * Ensures a working copy of headSha (branch strategy) or of headSha merged into the base
   * branch (merge strategy); reuses the existing one when it already is that.
   */
  async checkout(req: CheckoutRequest): Promise<string> {
    const dir = this.dirFor(req.repo, req.pull, req.workspace);
    const o = this.optionsFor(req);
    if (existsSync(path.join(dir, '.git')) && isAtTarget(o, req, await this.seen(dir, req))) return dir;
    this.changed(dir);
    rmSync(dir, { recursive: true, force: true });
    mkdirSync(path.dirname(dir), { recursive: true });
    // Credentials a PR's clone URL may carry are dropped: ours come from the helper only.
    const url = withoutCredentials(req.cloneUrl);
    const strategy = o.strategy;
    this.logger.info('Cloning pull request', {
      repo: req.repo,
      pull: req.pull,
      workspace: req.workspace,
      url,
      headSha: req.headSha,
      strategy,
    });
    if (strategy === 'merge') {
      await this.git(path.dirname(dir), cloneArgs(o, req, dir), baseUrlOf(req));
      await this.git(dir, ['remote', 'add', HEAD_REMOTE, url], url);
      await this.mergeHead(dir, req);
      return dir;
    }
    await this.git(path.dirname(dir), cloneArgs(o, req, dir), url);
    if ((await this.headOf(dir)) !== req.headSha) {
      // The branch moved on since the event (or the ref is not a branch): fetch the exact commit.
      await this.git(dir, ['fetch', '--quiet', '--depth=1', url, req.headSha], url);
      await this.git(dir, ['checkout', '--quiet', '--detach', req.headSha], url);
    }
    return dir;
  }

  /**
   * Merge strategy only, before a plan (Atlantis's MergeAgain): when the base branch moved on
   * since the working copy was merged, merges the head into the new base. True when it did.
   */
  async mergeAgain(req: CheckoutRequest): Promise<boolean> {
    if (this.optionsFor(req).strategy !== 'merge') return false;
    const dir = this.dirFor(req.repo, req.pull, req.workspace);
    // Not cloned yet: its first checkout merges into the newest base anyway.
    if (!existsSync(path.join(dir, '.git'))) return false;
    const base = baseRefOf(req);
    const baseUrl = baseUrlOf(req);
    await this.git(dir, ['fetch', '--quiet', '--no-tags', 'origin'], baseUrl);
    const count = await this.gitOut(dir, ['rev-list', '--left-right', '--count', `HEAD...refs/remotes/origin/${base}`], baseUrl);
    if (!hasDiverged(count)) return false;
    this.logger.info('Base branch was updated, merging again', { repo: req.repo, pull: req.pull, workspace: req.workspace });
    this.changed(dir);
    await this.git(dir, ['reset', '--quiet', '--hard', `refs/remotes/origin/${base}`], baseUrl);
    await this.mergeHead(dir, req);
    return true;
  }

  /**
   * Merge strategy only (Atlantis's HasDiverged, for the undiverged requirement): fetches the
   * base branch and lists the files of its commits that the working copy does not have yet,
   * from HEAD (apply, import) or from the PR head, HEAD^2 (plan: a plan merged the base in
   * already, so what counts is what the PR branch lacks). Undefined for the branch strategy:
   * there a project never diverges.
   */
  async divergedFiles(req: CheckoutRequest, fromPullHead: boolean): Promise<string[] | undefined> {
    if (this.optionsFor(req).strategy !== 'merge') return undefined;
    const dir = this.dirFor(req.repo, req.pull, req.workspace);
    const baseUrl = baseUrlOf(req);
    await this.git(dir, ['fetch', '--quiet', '--no-tags', 'origin'], baseUrl);
    const fromHead = fromPullHead && (await this.ok(dir, ['rev-parse', '--verify', '--quiet', 'HEAD^2']));
    const out = await this.git(dir, divergedFilesArgs(baseRefOf(req), fromHead), baseUrl);
    return out.split('\n').filter((f) => f.trim() !== '');
  }

  /** Fetches the PR head into a merge checkout (the whole history if depth was too short) and merges it. */
  private async mergeHead(dir: string, req: CheckoutRequest): Promise<void> {
    const url = withoutCredentials(req.cloneUrl);
    await this.git(dir, headFetchArgs(this.options, `+refs/heads/${req.headRef}:`), url);
    if ((await this.gitOut(dir, ['rev-parse', 'FETCH_HEAD'], url)) !== req.headSha) {
      // The branch moved on since the event: merge the commit the event was about.
      await this.git(dir, headFetchArgs(this.options, req.headSha), url);
    }
    // HEAD is the base branch's tip here (refs only after it: a branch name is never an option)
    if (!(await this.ok(dir, ['merge-base', 'HEAD', req.headSha]))) {
      // Not enough history for a merge base at this depth: fetch all of it, as Atlantis does.
      await this.git(dir, ['fetch', '--quiet', '--no-tags', '--unshallow', 'origin'], baseUrlOf(req));
      // then the head again, now without a depth: its history joins the whole one
      await this.git(dir, headFetchArgs({ ...this.options, depth: 0 }, req.headSha), url);
    }
    await this.git(dir, mergeArgs(req.headSha), url, MERGE_ENV);
  }

  /**
   * The commit a branch of a repository points at now (`git ls-remote`), or undefined when it
   * has no such branch: the API's run of a ref without a pull request starts from it.
   */
  async branchHead(cloneUrl: string, branch: string): Promise<string | undefined> {
    const out = await this.git(
      this.dataDir,
      ['ls-remote', '--heads', '--', withoutCredentials(cloneUrl), `refs/heads/${branch}`],
      cloneUrl,
    );
    const line = out.split('\n').find((l) => l.endsWith(`\trefs/heads/${branch}`));
    const sha = line?.split('\t')[0];
    return sha && SHA.test(sha) ? sha : undefined;
  }

  private optionsFor(req: CheckoutRequest): CheckoutOptions {
    return req.strategy ? { ...this.options, strategy: req.strategy } : this.options;
  }

  /** Removes all working copies of a pull request (PR closed). */
  remove(repo: string, pull: number): void {
    const prefix = path.join(this.dataDir, 'repos', repo, String(pull)) + path.sep;
    for (const dir of this.revisions.keys()) if (dir.startsWith(prefix)) this.revisions.delete(dir);
    for (const dir of this.verified.keys()) if (dir.startsWith(prefix)) this.verified.delete(dir);
    rmSync(path.join(this.dataDir, 'repos', repo, String(pull)), { recursive: true, force: true });
  }

  private async seen(dir: string, req: CheckoutRequest): Promise<{ head?: string; secondParent?: string; hasBaseRemoteRef?: boolean }> {
    if (this.optionsFor(req).strategy === 'branch') return { head: await this.headOf(dir) };
    const r = await this.host.spawn({ command: 'git', args: ['rev-parse', '--verify', '--quiet', 'HEAD^2'], cwd: dir, output: 'capture' });
    const ref = req.baseRef ? `refs/remotes/origin/${req.baseRef}` : undefined;
    const hasRef = ref !== undefined && (await this.ok(dir, ['show-ref', '--verify', '--quiet', ref]));
    return { secondParent: r.exitCode === 0 ? r.stdout?.trim() : undefined, hasBaseRemoteRef: hasRef };
  }

  private async headOf(dir: string): Promise<string | undefined> {
    // Every command asks, usually of an unchanged checkout: read it from .git rather than start
    // a git process each time.
    const fromFiles = readHead(dir);
    if (fromFiles) return fromFiles;
    const r = await this.host.spawn({ command: 'git', args: ['rev-parse', 'HEAD'], cwd: dir, output: 'capture' });
    return r.exitCode === 0 ? r.stdout?.trim() : undefined;
  }

  /** A local git command that only answers yes or no (exit code). */
  private async ok(cwd: string, args: string[]): Promise<boolean> {
    const r = await this.host.spawn({ command: 'git', args, cwd, env: { GIT_TERMINAL_PROMPT: '0' }, output: 'capture' });
    return r.exitCode === 0;
  }

  private async gitOut(cwd: string, args: string[], cloneUrl: string): Promise<string> {
    return (await this.git(cwd, args, cloneUrl)).trim();
  }

  private async git(cwd: string, args: string[], cloneUrl: string, env: Record<string, string> = {}): Promise<string> {
    // The token is read now: a rotated --gh-token-file takes effect on the next git command.
    const auth = gitAuth(cloneUrl, await this.token(), this.gitUser);
    const r = await this.host.spawn({
      command: 'git',
      args: [...auth.args, ...args],
      cwd,
      env: { GIT_TERMINAL_PROMPT: '0', ...env, ...auth.env },
      output: 'capture',
    });
    if (r.exitCode !== 0) {
      // stderr (stdout for a merge conflict), or why git never ran (not installed, process host lost); scrubbed of secrets
      const safe = (s: string) => processRedactor.redact(s.split(auth.env[TOKEN_VAR] || '\u0000').join('[REDACTED]'));
      throw new Error(
        `git ${safe(args.filter((a) => !a.includes('://')).join(' '))} for ${withoutCredentials(cloneUrl)} failed: ${safe((r.stderr || r.stdout || r.error || '').trim())}`,
      );
    }
    return r.stdout ?? '';
  }
}

/** The variables, in one git process's environment only, that the credential helper reads. */
const TOKEN_VAR = 'ATO_GIT_TOKEN';
const HOST_VAR = 'ATO_GIT_HOST';
const USER_VAR = 'ATO_GIT_USER';

/**
 * git's credential helper: for a `get` about an https URL on the clone URL's host (git says
 * which on stdin; a redirect elsewhere gets nothing), prints the user name and the token.
 * The helper list from any git config file is cleared first, so no stored credential is used
 * and the token is never handed to a `store` helper.
 */
const CREDENTIAL_HELPER =
  '!f() { test "$1" = get || exit 0; p=; h=; ' +
  // biome-ignore lint/suspicious/noTemplateCurlyInString: ${l#...} is shell parameter expansion for git's credential helper, not a template
  'while IFS= read -r l && test -n "$l"; do case "$l" in protocol=*) p="${l#protocol=}";; host=*) h="${l#host=}";; esac; done; ' +
  `test "$p" = https && test "$h" = "$${HOST_VAR}" || exit 0; printf 'username=%s\\npassword=%s\\n' "$${USER_VAR}" "$${TOKEN_VAR}"; }; f`;

/**
 * How one git command authenticates (pure): `-c` options for the command line and variables
 * for that git process's environment. The token is only given for an https clone URL; never
 * in the arguments.
 */
export function gitAuth(cloneUrl: string, token: string, user = 'x-access-token'): { args: string[]; env: Record<string, string> } {
  const args = ['-c', 'credential.helper='];
  let url: URL;
  try {
    url = new URL(cloneUrl);
  } catch {
    return { args, env: {} };
  }
  if (!token || url.protocol !== 'https:') return { args, env: {} };
  return {
    args: [...args, '-c', `credential.helper=${CREDENTIAL_HELPER}`],
    env: { [TOKEN_VAR]: token, [HOST_VAR]: url.host, [USER_VAR]: user },
  };
}

const SHA = /^[0-9a-f]{40}(?:[0-9a-f]{24})?$/;

/**
 * HEAD of a working copy from its .git files: detached (a SHA), or a branch as a loose ref or
 * in packed-refs. Undefined for anything else (git rev-parse decides then).
 */
export function readHead(dir: string): string | undefined {
  try {
    const git = path.join(dir, '.git');
    const head = readFileSync(path.join(git, 'HEAD'), 'utf8').trim();
    if (SHA.test(head)) return head;
    const ref = /^ref: (refs\/heads\/[^\s.][^\s]*)$/.exec(head)?.[1];
    if (!ref || ref.includes('..')) return undefined;
    if (existsSync(path.join(git, ref))) {
      const sha = readFileSync(path.join(git, ref), 'utf8').trim();
      return SHA.test(sha) ? sha : undefined;
    }
    for (const line of readFileSync(path.join(git, 'packed-refs'), 'utf8').split('\n')) {
      const [sha, name] = line.split(' ');
      if (name === ref && sha && SHA.test(sha)) return sha;
    }
    return undefined;
  } catch {
    return undefined;
  }
}

/** The URL without user and password, for argv, .git/config and logs. */
export function withoutCredentials(url: string): string {
  try {
    const u = new URL(url);
    u.username = '';
    u.password = '';
    return u.toString();
  } catch {
    return url;
  }
}
