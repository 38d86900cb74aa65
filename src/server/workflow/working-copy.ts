// Working copies of pull requests under the data dir: one git checkout of the PR head per
// repo, pull and workspace (as Atlantis: workspaces of one dir must not share .terraform).
// The clone URL carries the token only for https remotes, and it is never logged: logs and
// errors show the URL without credentials. git is started by the process host's worker
// process, so its spawns never fork the server.
import { existsSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import type { Logger } from '../../log.js';
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
  constructor(private readonly dataDir: string, private readonly token: () => string, private readonly logger: Logger, private readonly host: ProcessHost) {}

  dirFor(repo: string, pull: number, workspace: string): string {
    return path.join(this.dataDir, 'repos', repo, String(pull), workspace);
  }

  /** Ensures a checkout of headSha; reuses the existing one when it is already there. */
  async checkout(req: CheckoutRequest): Promise<string> {
    const dir = this.dirFor(req.repo, req.pull, req.workspace);
    if (existsSync(path.join(dir, '.git')) && (await this.headOf(dir)) === req.headSha) return dir;
    rmSync(dir, { recursive: true, force: true });
    mkdirSync(path.dirname(dir), { recursive: true });
    const url = this.authenticated(req.cloneUrl);
    this.logger.info('Cloning pull request', { repo: req.repo, pull: req.pull, workspace: req.workspace, url: redact(req.cloneUrl), headSha: req.headSha });
    await this.git(path.dirname(dir), ['clone', '--quiet', '--no-tags', '--branch', req.headRef, '--single-branch', url, dir], req.cloneUrl);
    // Keep the token out of .git/config on disk: later fetches pass the URL explicitly.
    await this.git(dir, ['remote', 'set-url', 'origin', redact(req.cloneUrl)], req.cloneUrl);
    if ((await this.headOf(dir)) !== req.headSha) {
      // The branch moved on since the event (or the ref is not a branch): fetch the exact commit.
      await this.git(dir, ['fetch', '--quiet', url, req.headSha], req.cloneUrl);
      await this.git(dir, ['checkout', '--quiet', '--detach', req.headSha], req.cloneUrl);
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

  private authenticated(cloneUrl: string): string {
    const token = this.token();
    if (!token || !cloneUrl.startsWith('https://')) return cloneUrl;
    const u = new URL(cloneUrl);
    u.username = 'x-access-token';
    u.password = token;
    return u.toString();
  }

  private async git(cwd: string, args: string[], cloneUrl: string): Promise<void> {
    const r = await this.host.spawn({ command: 'git', args, cwd, env: { GIT_TERMINAL_PROMPT: '0' }, output: 'capture' });
    if (r.exitCode !== 0) {
      const safe = (s: string) => s.split(this.token() || '\u0000').join('[REDACTED]');
      // stderr, or why git never ran (not installed, process host lost); the token is redacted from both
      throw new Error(`git ${safe(args.filter((a) => !a.includes('://')).join(' '))} for ${redact(cloneUrl)} failed: ${safe((r.stderr || r.error || '').trim())}`);
    }
  }
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

function redact(url: string): string {
  try {
    const u = new URL(url);
    u.username = '';
    u.password = '';
    return u.toString();
  } catch {
    return url;
  }
}
