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
import type { Logger } from '../../log.js';
import { processRedactor } from '../secrets/redact.js';
import type { ProcessHost } from '../terraform/process-host.js';

export interface CheckoutRequest {
  repo: string;
  pull: number;
  workspace: string;
  cloneUrl: string;
  headRef: string;
  headSha: string;
}

export class WorkingCopies {
  constructor(
    private readonly dataDir: string,
    /** Read before each git command: a rotated token file or a new App installation token. */
    private readonly token: () => string | Promise<string>,
    private readonly logger: Logger,
    private readonly host: ProcessHost,
  ) {}

  dirFor(repo: string, pull: number, workspace: string): string {
    return path.join(this.dataDir, 'repos', repo, String(pull), workspace);
  }

  /** Ensures a checkout of headSha; reuses the existing one when it is already there. */
  async checkout(req: CheckoutRequest): Promise<string> {
    const dir = this.dirFor(req.repo, req.pull, req.workspace);
    if (existsSync(path.join(dir, '.git')) && (await this.headOf(dir)) === req.headSha) return dir;
    rmSync(dir, { recursive: true, force: true });
    mkdirSync(path.dirname(dir), { recursive: true });
    // Credentials a PR's clone URL may carry are dropped: ours come from the helper only.
    const url = withoutCredentials(req.cloneUrl);
    this.logger.info('Cloning pull request', { repo: req.repo, pull: req.pull, workspace: req.workspace, url, headSha: req.headSha });
    await this.git(path.dirname(dir), ['clone', '--quiet', '--no-tags', '--branch', req.headRef, '--single-branch', url, dir], url);
    if ((await this.headOf(dir)) !== req.headSha) {
      // The branch moved on since the event (or the ref is not a branch): fetch the exact commit.
      await this.git(dir, ['fetch', '--quiet', url, req.headSha], url);
      await this.git(dir, ['checkout', '--quiet', '--detach', req.headSha], url);
    }
    return dir;
  }

  /** Removes all working copies of a pull request (PR closed). */
  remove(repo: string, pull: number): void {
    rmSync(path.join(this.dataDir, 'repos', repo, String(pull)), { recursive: true, force: true });
  }

  private async headOf(dir: string): Promise<string | undefined> {
    // Every command asks, usually of an unchanged checkout: read it from .git rather than start
    // a git process each time.
    const fromFiles = readHead(dir);
    if (fromFiles) return fromFiles;
    const r = await this.host.spawn({ command: 'git', args: ['rev-parse', 'HEAD'], cwd: dir, output: 'capture' });
    return r.exitCode === 0 ? r.stdout?.trim() : undefined;
  }

  private async git(cwd: string, args: string[], cloneUrl: string): Promise<void> {
    // The token is read now: a rotated --gh-token-file takes effect on the next git command.
    const auth = gitAuth(cloneUrl, await this.token());
    const r = await this.host.spawn({
      command: 'git',
      args: [...auth.args, ...args],
      cwd,
      env: { GIT_TERMINAL_PROMPT: '0', ...auth.env },
      output: 'capture',
    });
    if (r.exitCode !== 0) {
      // stderr, or why git never ran (not installed, process host lost); scrubbed of secrets
      const safe = (s: string) => processRedactor.redact(s.split(auth.env[TOKEN_VAR] || '\u0000').join('[REDACTED]'));
      throw new Error(
        `git ${safe(args.filter((a) => !a.includes('://')).join(' '))} for ${withoutCredentials(cloneUrl)} failed: ${safe((r.stderr || r.error || '').trim())}`,
      );
    }
  }
}

/** The variables, in one git process's environment only, that the credential helper reads. */
const TOKEN_VAR = 'ATO_GIT_TOKEN';
const HOST_VAR = 'ATO_GIT_HOST';

/**
 * git's credential helper: for a `get` about an https URL on the clone URL's host (git says
 * which on stdin; a redirect elsewhere gets nothing), prints the token as GitHub wants it.
 * The helper list from any git config file is cleared first, so no stored credential is used
 * and the token is never handed to a `store` helper.
 */
const CREDENTIAL_HELPER =
  '!f() { test "$1" = get || exit 0; p=; h=; ' +
  // biome-ignore lint/suspicious/noTemplateCurlyInString: ${l#...} is shell parameter expansion for git's credential helper, not a template
  'while IFS= read -r l && test -n "$l"; do case "$l" in protocol=*) p="${l#protocol=}";; host=*) h="${l#host=}";; esac; done; ' +
  `test "$p" = https && test "$h" = "$${HOST_VAR}" || exit 0; printf 'username=x-access-token\\npassword=%s\\n' "$${TOKEN_VAR}"; }; f`;

/**
 * How one git command authenticates (pure): `-c` options for the command line and variables
 * for that git process's environment. The token is only given for an https clone URL; never
 * in the arguments.
 */
export function gitAuth(cloneUrl: string, token: string): { args: string[]; env: Record<string, string> } {
  const args = ['-c', 'credential.helper='];
  let url: URL;
  try {
    url = new URL(cloneUrl);
  } catch {
    return { args, env: {} };
  }
  if (!token || url.protocol !== 'https:') return { args, env: {} };
  return { args: [...args, '-c', `credential.helper=${CREDENTIAL_HELPER}`], env: { [TOKEN_VAR]: token, [HOST_VAR]: url.host } };
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
