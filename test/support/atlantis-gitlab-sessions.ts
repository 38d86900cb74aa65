// The sessions of the GitLab differential test, each one server process with its own flags
// (runner: atlantis-gitlab-session.ts). `scenario` is the GitHub differential's scenario
// (atlantis-scenario.ts's STEPS: plan, apply, locks, unlock, autoplan, close) on GitLab; the
// others record what GitLab adds: webhook tokens and forks, the group allowlist, mergeability,
// approvals, a plan longer than a note, automerge and hidden comments, commit status retries,
// a self-managed GitLab under a path (atlantis-gitlab-sessions-more.ts).
import { DIRS_REPO, NAMED_ATLANTIS_YAML, NAMED_REPO, STEPS, type Step } from './atlantis-scenario.js';
import { type GlSession, type GlStep, type SessionCtx, type Webhook, addProjectRepo, pushBranch } from './atlantis-gitlab-session.js';
import { terraformConfig, type FileChanges } from './git-repos.js';
import type { GlMergeRequest } from './gitlab-standin-model.js';
import { mergeRequestHook, noteHook } from './gitlab-standin-webhooks.js';

/** The base branch of the sessions' repositories: two plain project dirs and a README. */
export const BASE_FILES: Record<string, string> = {
  'README.md': '# infra\n',
  'dir1/main.tf': terraformConfig({ marker: 'dir1-v1' }),
  'dir2/main.tf': terraformConfig({ marker: 'dir2-v1' }),
};

export interface OpenOptions {
  author?: string;
  draft?: boolean;
  /** The fork the branch is pushed to (default the project itself). */
  sourceProject?: string;
  comments?: number;
  statuses?: number;
  /** After the merge request is opened, before GitLab's webhook (e.g. CI starts a pipeline). */
  then?: (ctx: SessionCtx, mr: GlMergeRequest) => void;
  token?: string | null;
}

/** Pushes a branch and opens merge request !iid from it: GitLab sends a Merge Request Hook `open`. */
export function openStep(name: string, project: string, iid: number, branch: string, files: FileChanges, o: OpenOptions = {}): GlStep {
  const source = o.sourceProject ?? project;
  return {
    name,
    did: `${project}!${iid}: opened from ${source === project ? '' : `${source}:`}${branch}${o.draft ? ' as a draft' : ''} with ${Object.keys(files).join(', ')} changed`,
    comments: o.comments ?? 1,
    ...(o.statuses !== undefined ? { statuses: o.statuses } : {}),
    async prepare(ctx) {
      await pushBranch(ctx, source, branch, files);
      const mr = ctx.gl.openMergeRequest(project, {
        sourceBranch: branch,
        ...(source !== project ? { sourceProject: source } : {}),
        author: o.author ?? 'dev',
        iid,
        draft: o.draft ?? false,
        title: `${o.draft ? 'Draft: ' : ''}Change ${branch}`,
      });
      o.then?.(ctx, mr);
      return [
        {
          event: 'Merge Request Hook',
          payload: mergeRequestHook(ctx.gl, mr, { action: 'open' }),
          ...(o.token !== undefined ? { token: o.token } : {}),
        },
      ];
    },
  };
}

export interface CommentOptions {
  user?: string;
  comments?: number;
  statuses?: number;
  token?: string | null;
  /** Before the note is written (e.g. a reviewer approves, a pipeline finishes). */
  before?: (ctx: SessionCtx, mr: GlMergeRequest) => void;
  /** What the step did beyond the comment, for the fixture's reader. */
  also?: string;
}

/** Someone writes a note on merge request !iid: GitLab sends a Note Hook. */
export function commentStep(name: string, project: string, iid: number, body: string, o: CommentOptions = {}): GlStep {
  return {
    name,
    did: `${project}!${iid}: ${o.also ? `${o.also}; ` : ''}${o.user ?? 'dev'} comments "${body}"${o.token === null ? ' (no X-Gitlab-Token)' : o.token !== undefined ? ' (wrong X-Gitlab-Token)' : ''}`,
    comments: o.comments ?? 1,
    ...(o.statuses !== undefined ? { statuses: o.statuses } : {}),
    async prepare(ctx) {
      const mr = ctx.gl.mergeRequest(project, iid);
      o.before?.(ctx, mr);
      const note = ctx.gl.addNote(mr, body, o.user ?? 'dev');
      return [{ event: 'Note Hook', payload: noteHook(ctx.gl, note), ...(o.token !== undefined ? { token: o.token } : {}) }];
    },
  };
}

/** Merge request !iid is closed (`close`) or merged (`merge`, after an automerge): GitLab sends a Merge Request Hook. */
export function closeStep(name: string, project: string, iid: number, o: { comments?: number; merged?: boolean } = {}): GlStep {
  return {
    name,
    did: `${project}!${iid}: ${o.merged ? 'merged (GitLab sends action merge)' : 'closed (not merged)'}`,
    comments: o.comments ?? 0,
    async prepare(ctx): Promise<Webhook[]> {
      const mr = ctx.gl.mergeRequest(project, iid);
      const now = ctx.gl.now();
      if (!o.merged) {
        mr.state = 'closed';
        mr.closedAt = now;
      }
      mr.updatedAt = now;
      return [{ event: 'Merge Request Hook', payload: mergeRequestHook(ctx.gl, mr, { action: o.merged ? 'merge' : 'close' }) }];
    },
  };
}

/** One of the GitHub differential's steps, done on GitLab. */
function fromGithubStep(s: Step): GlStep {
  const a = s.action;
  const statuses = s.statuses !== undefined ? { statuses: s.statuses } : {};
  if (a.kind === 'open') return openStep(s.name, s.repo, s.pull, a.branch, a.files, { comments: s.comments, ...statuses });
  if (a.kind === 'close') return closeStep(s.name, s.repo, s.pull, { comments: s.comments });
  return commentStep(s.name, s.repo, s.pull, a.body, { comments: s.comments, ...statuses });
}

/** The GitHub differential's scenario on GitLab: the same repositories, steps and step names. */
export const SCENARIO_SESSION: GlSession = {
  name: 'scenario',
  about:
    "The GitHub differential's scenario (test/support/atlantis-scenario.ts STEPS) on GitLab: autoplan, plan, apply, locks, unlock, help, errors, close.",
  flags: [],
  async setup(ctx) {
    await addProjectRepo(ctx, DIRS_REPO, BASE_FILES);
    await addProjectRepo(ctx, NAMED_REPO, { ...BASE_FILES, 'atlantis.yaml': NAMED_ATLANTIS_YAML });
  },
  steps: STEPS.map(fromGithubStep),
};

/** A project with one dir (fewer statuses per step). */
export const ONE_DIR_FILES: Record<string, string> = {
  'README.md': '# infra\n',
  'dir1/main.tf': terraformConfig({ marker: 'dir1-v1' }),
};

export const dir1Change = (marker: string): FileChanges => ({ 'dir1/main.tf': terraformConfig({ marker }) });
