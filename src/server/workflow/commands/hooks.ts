// Server-side pre_workflow_hooks and post_workflow_hooks (repos.yaml), as Atlantis v0.47 runs
// them: before a command (so a hook may write the atlantis.yaml the command then reads) and
// after it, each as `shell shellArgs run` in the root of the PR's checkout, with its own
// commit status `atlantis/<pre|post>_workflow_hook: <description>` linking to its job page.
// The decisions and texts are pure functions below; WorkflowHooks does the I/O.
import { createHash, randomUUID } from 'node:crypto';
import { constants, promises as fsp } from 'node:fs';
import path from 'node:path';
import type { Logger } from '../../../log.js';
import type { VcsHost } from '../../vcs/host.js';
import type { ProcessRunner, RunResult } from '../../terraform/runner.js';
import type { CommandRequest } from './context.js';
import type { JobRegistry } from '../jobs/jobs.js';
import { type ServerSideRepoConfig, branchMatches, ruleMatches } from '../repo-config/server-side.js';
import type { WorkflowHook } from '../repo-config/types.js';

export type HookKind = 'pre' | 'post';

/**
 * The hooks of a kind for a PR, in config order, from every matching rule (Atlantis appends
 * them; it does not take the last rule as for other settings). Post hooks also need the
 * rule's `branch` to match the base branch; pre hooks do not (as Atlantis).
 */
export function hooksFor(server: ServerSideRepoConfig | undefined, kind: HookKind, repoId: string, baseBranch: string): WorkflowHook[] {
  const out: WorkflowHook[] = [];
  for (const r of server?.repos ?? []) {
    if (!ruleMatches(r, repoId)) continue;
    if (kind === 'post' && !branchMatches(r, baseBranch)) continue;
    out.push(...(kind === 'pre' ? r.preWorkflowHooks : r.postWorkflowHooks));
  }
  return out;
}

/** Atlantis's `commands` test: a substring of the comma list (so `plan, apply` holds `plan`). */
export function hookRunsFor(hook: WorkflowHook, commandName: string): boolean {
  return hook.commands === undefined || hook.commands === '' || hook.commands.includes(commandName);
}

/** The hook's description, or Atlantis's `Pre workflow hook #<index>`. */
export function hookDescription(hook: WorkflowHook, kind: HookKind, index: number): string {
  if (hook.description) return hook.description;
  return `${kind === 'pre' ? 'Pre' : 'Post'} workflow hook #${index}`;
}

/** GitHub's limit on a status context; longer ones get a 422. */
const MAX_STATUS_CONTEXT = 255;

/**
 * `atlantis/pre_workflow_hook: <description>`; over 255 characters, cut and suffixed with
 * `-` and the first 6 bytes of its SHA-256 in hex, as Atlantis keeps long contexts unique.
 */
export function hookStatusContext(kind: HookKind, description: string, statusName = 'atlantis'): string {
  const s = `${statusName}/${kind}_workflow_hook: ${description}`;
  const chars = [...s];
  if (chars.length <= MAX_STATUS_CONTEXT) return s;
  const suffix = `-${createHash('sha256').update(s).digest('hex').slice(0, 12)}`;
  return chars.slice(0, MAX_STATUS_CONTEXT - suffix.length).join('') + suffix;
}

export type HookState = 'pending' | 'success' | 'failure';

/** The status description: the hook's OUTPUT_STATUS_FILE text, else Atlantis's words. */
export function hookStatusDescription(state: HookState, custom = ''): string {
  if (custom !== '') return custom;
  return state === 'pending' ? 'in progress...' : state === 'success' ? 'succeeded.' : 'failed.';
}

/** Atlantis's COMMENT_ARGS: every character of every arg backslash-escaped, args joined by commas. */
export function escapedCommentArgs(args: readonly string[]): string {
  return args.map((a) => [...a].map((ch) => `\\${ch}`).join('')).join(',');
}

export interface HookCommand {
  /** `plan` for autoplan, as Atlantis names it to hooks. */
  name: string;
  /** The comment's args after `--`. */
  extraArgs: readonly string[];
  /** `-p`, or empty. */
  project: string;
}

export interface HookPull {
  repo: string;
  pull: number;
  user: string;
  author: string;
  headRepo: string;
  headSha: string;
  headRef: string;
  baseRef: string;
  url: string;
}

/** The env Atlantis documents for hooks (on top of the children's env, which holds no server secret). */
export function hookEnv(kind: HookKind, p: HookPull, cmd: HookCommand, repoDir: string, commandHasErrors: boolean): Record<string, string> {
  const [baseOwner = '', baseName = ''] = p.repo.split('/');
  const [headOwner = '', headName = ''] = p.headRepo.split('/');
  const env: Record<string, string> = {
    BASE_BRANCH_NAME: p.baseRef,
    BASE_REPO_NAME: baseName,
    BASE_REPO_OWNER: baseOwner,
    COMMENT_ARGS: escapedCommentArgs(cmd.extraArgs),
    DIR: repoDir,
    HEAD_BRANCH_NAME: p.headRef,
    HEAD_COMMIT: p.headSha,
    HEAD_REPO_NAME: headName,
    HEAD_REPO_OWNER: headOwner,
    PULL_AUTHOR: p.author,
    PULL_NUM: String(p.pull),
    PULL_URL: p.url,
    USER_NAME: p.user,
    OUTPUT_STATUS_FILE: path.join(repoDir, 'OUTPUT_STATUS_FILE'),
    COMMAND_NAME: cmd.name,
    PROJECT_NAME: cmd.project,
  };
  if (kind === 'post') env.COMMAND_HAS_ERRORS = String(commandHasErrors);
  return env;
}

/** Go's %q of a string (strconv.Quote), for error texts worded as Atlantis words them. */
export function goQuote(s: string): string {
  let out = '"';
  for (const ch of s) {
    const c = ch.codePointAt(0) as number;
    if (ch === '"' || ch === '\\') out += `\\${ch}`;
    else if (ch === '\n') out += '\\n';
    else if (ch === '\t') out += '\\t';
    else if (ch === '\r') out += '\\r';
    else if (ch === '\x07') out += '\\a';
    else if (ch === '\b') out += '\\b';
    else if (ch === '\f') out += '\\f';
    else if (ch === '\v') out += '\\v';
    else if (c < 0x20 || c === 0x7f) out += `\\x${c.toString(16).padStart(2, '0')}`;
    else if ((c >= 0x80 && c < 0xa0) || c === 0xad || c === 0xfeff) out += `\\u${c.toString(16).padStart(4, '0')}`;
    else out += ch;
  }
  return `${out}"`;
}

/** Go's text of a failed process: `exit status 1`, `signal: killed`. */
function goExitText(r: Pick<RunResult, 'exitCode' | 'signal'>): string {
  if (r.signal) return `signal: ${GO_SIGNAL_NAMES[r.signal] ?? r.signal.toLowerCase()}`;
  return `exit status ${r.exitCode ?? -1}`;
}
const GO_SIGNAL_NAMES: Record<string, string> = {
  SIGKILL: 'killed',
  SIGINT: 'interrupt',
  SIGTERM: 'terminated',
  SIGHUP: 'hangup',
  SIGSEGV: 'segmentation fault',
  SIGABRT: 'aborted',
  SIGPIPE: 'broken pipe',
};

/** The error of a failed hook, as Atlantis's hook runner words it. */
export function hookErrorText(r: Pick<RunResult, 'exitCode' | 'signal'>, hook: WorkflowHook, repoDir: string, output: string): string {
  const cmd = `${hook.shell || 'sh'} ${hook.shellArgs || '-c'} ${hook.run}`;
  return `${goExitText(r)}: running ${goQuote(cmd)} in ${goQuote(repoDir)}: \n${output}`;
}

/** GitHub refuses comments over 65,536 characters; the head of a huge hook output goes. */
const MAX_ERROR_CHARS = 60_000;

/** Atlantis's comment when --fail-on-pre-workflow-hook-error stops a command. */
export function preHookFailedComment(error: string): string {
  const e = error.length > MAX_ERROR_CHARS ? `...${error.slice(-MAX_ERROR_CHARS)}` : error;
  return `\`\`\`\nError: Pre-workflow hook failed: ${e}\n\`\`\``;
}

/** What the hooks need from the rest of the server. */
export interface WorkflowHooksDeps {
  server: ServerSideRepoConfig | undefined;
  runner: ProcessRunner;
  jobs: JobRegistry;
  jobLogPath: (jobId: string) => string;
  atlantisUrl: string;
  /** The code host: its name in repos.yaml ids, the pull request's page, its commit statuses. */
  host: Pick<VcsHost, 'hostname' | 'pullUrl' | 'setStatus'>;
  logger: Logger;
  /** --vcs-status-name; default atlantis. */
  statusName?: string;
}

export interface HookRun {
  kind: HookKind;
  pull: Omit<HookPull, 'url'>;
  command: HookCommand;
  /** The PR's checkout (default workspace), made on demand: no hooks, no checkout. */
  checkout: () => Promise<string>;
  commandHasErrors?: boolean;
}

/** The most of OUTPUT_STATUS_FILE read; GitHub keeps 140 characters of a description. */
const MAX_STATUS_FILE_BYTES = 4096;

export class WorkflowHooks {
  constructor(private readonly d: WorkflowHooksDeps) {}

  /** True when hooks of this kind are configured for the PR's repo (whatever the command). */
  configured(kind: HookKind, repo: string, baseRef: string): boolean {
    return hooksFor(this.d.server, kind, `${this.d.host.hostname}/${repo}`, baseRef).length > 0;
  }

  /**
   * Runs the hooks in order; the first failure stops the rest and is returned as Atlantis's
   * error text (undefined when every hook succeeded or none applies).
   */
  async run(h: HookRun): Promise<string | undefined> {
    const hooks = hooksFor(this.d.server, h.kind, `${this.d.host.hostname}/${h.pull.repo}`, h.pull.baseRef);
    const todo = hooks.map((hook, i) => ({ hook, i })).filter(({ hook }) => hookRunsFor(hook, h.command.name));
    if (todo.length === 0) return undefined;
    const log = this.d.logger.child({ repo: h.pull.repo, pull: h.pull.pull, hooks: h.kind });
    let repoDir: string;
    try {
      repoDir = await h.checkout();
    } catch (e) {
      log.error('Could not check out the pull request for its workflow hooks', { error: (e as Error).message });
      return (e as Error).message;
    }
    const pull: HookPull = { ...h.pull, url: this.d.host.pullUrl(h.pull.repo, h.pull.pull) };
    const env = hookEnv(h.kind, pull, h.command, repoDir, h.commandHasErrors === true);
    for (const { hook, i } of todo) {
      const error = await this.runOne(h, hook, i, repoDir, env, log);
      if (error !== undefined) return error;
    }
    return undefined;
  }

  private async runOne(
    h: HookRun,
    hook: WorkflowHook,
    index: number,
    repoDir: string,
    env: Record<string, string>,
    log: Logger,
  ): Promise<string | undefined> {
    const description = hookDescription(hook, h.kind, index);
    const id = randomUUID();
    const status = async (state: HookState, custom?: string): Promise<string | undefined> => {
      try {
        await this.d.host.setStatus(
          h.pull.repo,
          h.pull.headSha,
          {
            state,
            context: hookStatusContext(h.kind, description, this.d.statusName),
            description: hookStatusDescription(state, custom),
            targetUrl: `${this.d.atlantisUrl}/jobs/${id}`,
          },
          { pull: h.pull.pull, headRef: h.pull.headRef },
        );
        return undefined;
      } catch (e) {
        log.warn(`unable to update ${h.kind} workflow hook status`, { error: (e as Error).message });
        return (e as Error).message;
      }
    };
    // As Atlantis: a pre hook whose status cannot be set counts as failed; a post hook runs on.
    const pendingError = await status('pending');
    if (pendingError !== undefined && h.kind === 'pre') return pendingError;
    this.d.jobs.start({
      id,
      command: `${h.kind}_workflow_hook`,
      repo: h.pull.repo,
      pull: h.pull.pull,
      project: description,
      dir: '.',
      workspace: 'default',
    });
    log.info('Running workflow hook', { description, command: h.command.name, jobId: id });
    const r = await this.d.runner.run({
      jobId: id,
      command: hook.shell || 'sh',
      // Atlantis splits shellArgs on single spaces, then appends the command.
      args: [...(hook.shellArgs || '-c').split(' '), hook.run],
      cwd: repoDir,
      env,
      logFile: this.d.jobLogPath(id),
      onOutput: (chunk) => this.d.jobs.append(id, chunk),
    });
    const ok = r.exitCode === 0 && !r.interrupted;
    await this.d.jobs.finish(id, ok ? 'success' : r.interrupted ? 'interrupted' : 'failure');
    if (!ok) {
      log.warn('Workflow hook failed', { description, exitCode: r.exitCode, signal: r.signal, jobId: id });
      await status('failure');
      return hookErrorText(r, hook, repoDir, r.output);
    }
    const custom = await readStatusFile(env.OUTPUT_STATUS_FILE as string);
    const successError = await status('success', custom);
    log.info('Workflow hook succeeded', { description, jobId: id });
    return h.kind === 'pre' ? successError : undefined;
  }
}

/** The hook's custom status text, trailing newlines trimmed; '' without one. Never follows a symlink. */
async function readStatusFile(file: string): Promise<string> {
  let fh: import('node:fs/promises').FileHandle;
  try {
    fh = await fsp.open(file, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch {
    return '';
  }
  try {
    if (!(await fh.stat()).isFile()) return '';
    const buf = Buffer.alloc(MAX_STATUS_FILE_BYTES);
    const { bytesRead } = await fh.read(buf, 0, buf.length, 0);
    return buf
      .subarray(0, bytesRead)
      .toString('utf8')
      .replace(/^\n+|\n+$/g, '');
  } finally {
    await fh.close();
  }
}

/** The hook run of a command request (autoplan is `plan` to hooks, as in Atlantis). */
export function hookRunFor(req: CommandRequest, kind: HookKind, checkout: () => Promise<string>, commandHasErrors?: boolean): HookRun {
  const c = req.ctx;
  const command: HookCommand =
    req.kind === 'autoplan'
      ? { name: 'plan', extraArgs: [], project: '' }
      : { name: req.command.name, extraArgs: req.command.extraArgs, project: req.command.project ?? '' };
  return {
    kind,
    pull: {
      repo: c.repo,
      pull: c.pull,
      user: c.user,
      author: c.author ?? c.user,
      headRepo: c.headRepo ?? c.repo,
      headSha: c.headSha,
      headRef: c.headRef,
      baseRef: c.baseRef,
    },
    command,
    checkout,
    commandHasErrors,
  };
}
