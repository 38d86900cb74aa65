// The GitLab differential's sessions beyond the shared scenario (atlantis-gitlab-sessions.ts):
// each records one thing GitLab adds, with the flags it needs.
import { type GlSession, type GlStep, type SessionCtx, addProjectRepo, forkProject } from './atlantis-gitlab-session.js';
import { terraformConfig } from './git-repos.js';
import { BASE_FILES, ONE_DIR_FILES, SCENARIO_SESSION, closeStep, commentStep, dir1Change, openStep } from './atlantis-gitlab-sessions.js';
import type { GlMergeRequest, JobStatus } from './gitlab-standin-model.js';
import { noteHook, projectHook } from './gitlab-standin-webhooks.js';

const INFRA = 'acme/infra';
const FORK = 'forker/infra';

const applyRequirements = (req: string): string[] => [
  '--repo-config-json',
  JSON.stringify({ repos: [{ id: '/.*/', apply_requirements: [req] }] }),
];

/** CI runs a pipeline with one job `test` on the merge request's head. */
const ciPipeline =
  (status: JobStatus) =>
  (ctx: SessionCtx, mr: GlMergeRequest): void => {
    ctx.gl.addPipeline(ctx.gl.project(mr.projectId).path, { sha: mr.sha, ref: mr.sourceBranch, jobs: [{ name: 'test', status }] });
  };

/** A Note Hook for a comment on a commit (not a merge request), which Atlantis ignores. */
function commitNoteStep(): GlStep {
  return {
    name: 'a note on a commit',
    did: `${INFRA}: dev comments "atlantis plan" on a commit (noteable_type Commit)`,
    comments: 0,
    async prepare(ctx) {
      const mr = ctx.gl.mergeRequest(INFRA, 1);
      const payload = noteHook(ctx.gl, ctx.gl.addNote(mr, 'atlantis plan', 'dev')) as Record<string, Record<string, unknown>>;
      payload.object_attributes = { ...payload.object_attributes, noteable_type: 'Commit', noteable_id: null, commit_id: mr.sha };
      const commit = (payload.merge_request as Record<string, unknown>).last_commit;
      delete payload.merge_request;
      return [{ event: 'Note Hook', payload: { ...payload, commit } }];
    },
  };
}

function pushHookStep(): GlStep {
  return {
    name: 'a push hook',
    did: `${INFRA}: a Push Hook (an event Atlantis does not handle)`,
    comments: 0,
    async prepare(ctx) {
      const p = ctx.gl.mustProject(INFRA);
      const sha = ctx.repos.get(INFRA)!.baseSha;
      const payload = {
        object_kind: 'push',
        event_name: 'push',
        before: '0000000000000000000000000000000000000000',
        after: sha,
        ref: 'refs/heads/main',
        ref_protected: true,
        checkout_sha: sha,
        user_id: 3,
        user_name: 'dev',
        user_username: 'dev',
        project_id: p.id,
        project: projectHook(ctx.gl, p),
        commits: [],
        total_commits_count: 0,
      };
      return [{ event: 'Push Hook', payload }];
    },
  };
}

const WEBHOOK_AUTH_SESSION: GlSession = {
  name: 'webhook-auth',
  about:
    'Webhooks with a wrong or missing X-Gitlab-Token (what Atlantis answers; nothing runs), events Atlantis ignores, and a fork merge request without --allow-fork-prs.',
  flags: [],
  async setup(ctx) {
    await addProjectRepo(ctx, INFRA, ONE_DIR_FILES);
    await forkProject(ctx, INFRA, FORK, ONE_DIR_FILES);
  },
  steps: [
    openStep('wrong token', INFRA, 1, 'change-dir1', dir1Change('dir1-v2'), { comments: 0, token: 'not-the-secret' }),
    commentStep('missing token', INFRA, 1, 'atlantis plan', { comments: 0, token: null }),
    commentStep('right token', INFRA, 1, 'atlantis help'),
    commitNoteStep(),
    pushHookStep(),
    openStep('fork merge request', INFRA, 2, 'from-fork', dir1Change('dir1-fork'), { sourceProject: FORK, author: 'forker' }),
    commentStep('plan on a fork', INFRA, 2, 'atlantis plan', { user: 'forker' }),
  ],
};

const FORK_SESSION: GlSession = {
  name: 'fork',
  about: 'A merge request from a fork with --allow-fork-prs: planned and applied from the fork, closed.',
  flags: ['--allow-fork-prs'],
  async setup(ctx) {
    await addProjectRepo(ctx, INFRA, ONE_DIR_FILES);
    await forkProject(ctx, INFRA, FORK, ONE_DIR_FILES);
  },
  steps: [
    openStep('fork autoplan', INFRA, 1, 'from-fork', dir1Change('dir1-fork'), { sourceProject: FORK, author: 'forker' }),
    commentStep('fork apply', INFRA, 1, 'atlantis apply', { user: 'forker' }),
    closeStep('fork close', INFRA, 1, { comments: 1 }),
  ],
};

const GROUP_ALLOWLIST_SESSION: GlSession = {
  name: 'group-allowlist',
  about:
    '--gitlab-group-allowlist: a member of an allowed group, a user in no group, a member of the parent group only (GET /groups/:id/members/:user_id lists direct members), and a listed group GitLab does not have.',
  flags: ['--gitlab-group-allowlist', 'acme/platform:plan,acme/platform:apply,acme/ghost:plan'],
  async setup(ctx) {
    for (const u of ['alice', 'mallory', 'carol']) ctx.gl.addUser(u);
    ctx.gl.addGroup('acme', [{ username: 'carol' }]);
    ctx.gl.addGroup('acme/platform', [{ username: 'alice' }]);
    await addProjectRepo(ctx, INFRA, ONE_DIR_FILES);
  },
  steps: [
    openStep('autoplan by a member', INFRA, 1, 'change-dir1', dir1Change('dir1-v2'), { author: 'alice' }),
    commentStep('member plans', INFRA, 1, 'atlantis plan', { user: 'alice' }),
    commentStep('non-member plans', INFRA, 1, 'atlantis plan', { user: 'mallory' }),
    commentStep('parent-group member plans', INFRA, 1, 'atlantis plan', { user: 'carol' }),
    commentStep('non-member unlocks', INFRA, 1, 'atlantis unlock', { user: 'mallory' }),
    commentStep('member applies', INFRA, 1, 'atlantis apply', { user: 'alice' }),
  ],
};

const CI = 'acme/ci';
const CI_SKIP_OK = 'acme/ci-skip-ok';

/** A new project dir per case, so that no case waits on another's lock. */
const caseDir = (iid: number): Record<string, string> => ({ [`case${iid}/main.tf`]: terraformConfig({ marker: `case-${iid}` }) });

/** Opens !iid with CI's pipeline (or none), autoplans, then `atlantis apply` under apply_requirements [mergeable]. */
function mergeableCase(
  label: string,
  project: string,
  iid: number,
  o: { pipeline?: JobStatus; beforeApply?: (ctx: SessionCtx, mr: GlMergeRequest) => void; also?: string },
): GlStep[] {
  return [
    openStep(`${label}: autoplan`, project, iid, `case-${iid}`, caseDir(iid), o.pipeline ? { then: ciPipeline(o.pipeline) } : {}),
    commentStep(`${label}: apply`, project, iid, 'atlantis apply', {
      ...(o.beforeApply ? { before: o.beforeApply } : {}),
      ...(o.also ? { also: o.also } : {}),
    }),
  ];
}

const MERGEABLE_SESSION: GlSession = {
  name: 'mergeable',
  about:
    'apply_requirements [mergeable] as Atlantis judges a GitLab merge request: CI pipelines failed, running, succeeded, skipped (with and without allow_merge_on_skipped_pipeline), none, an unresolved thread, conflicts, a draft.',
  flags: applyRequirements('mergeable'),
  async setup(ctx) {
    const settings = { onlyAllowMergeIfPipelineSucceeds: true, onlyAllowMergeIfAllDiscussionsAreResolved: true };
    await addProjectRepo(ctx, CI, ONE_DIR_FILES, { settings });
    await addProjectRepo(ctx, CI_SKIP_OK, ONE_DIR_FILES, { settings: { ...settings, allowMergeOnSkippedPipeline: true } });
  },
  steps: [
    ...mergeableCase('pipeline failed', CI, 1, { pipeline: 'failed' }),
    ...mergeableCase('pipeline running', CI, 2, { pipeline: 'running' }),
    ...mergeableCase('pipeline succeeded', CI, 3, { pipeline: 'success' }),
    ...mergeableCase('unresolved thread', CI, 4, {
      pipeline: 'success',
      beforeApply: (ctx, mr) => void ctx.gl.addNote(mr, 'Please explain this change.', 'reviewer', { resolvable: true }),
      also: 'reviewer opens a thread (unresolved)',
    }),
    ...mergeableCase('pipeline skipped', CI, 5, { pipeline: 'skipped' }),
    ...mergeableCase('skipped pipeline after the plan', CI, 6, {
      beforeApply: ciPipeline('skipped'),
      also: 'CI adds a skipped pipeline on the head',
    }),
    ...mergeableCase('pipeline skipped, skipped allowed', CI_SKIP_OK, 1, { pipeline: 'skipped' }),
    ...mergeableCase('no CI pipeline', CI, 7, {}),
    ...mergeableCase('conflicts', CI, 9, {
      pipeline: 'success',
      beforeApply: (_ctx, mr) => {
        mr.hasConflicts = true;
      },
      also: 'the target branch moved on: conflicts',
    }),
    openStep('draft: opened', CI, 8, 'case-8', caseDir(8), { draft: true, comments: 0 }),
    commentStep('draft: plan', CI, 8, 'atlantis plan'),
    commentStep('draft: apply', CI, 8, 'atlantis apply'),
  ],
};

const APPROVED_SESSION: GlSession = {
  name: 'approved',
  about:
    "apply_requirements [approved] with --discard-approval-on-plan (the token is a bot user's, which may reset approvals): one approval owed, then given, then reset by a plan; a merge request whose project asks for none (GitLab Free: approvals_left 0).",
  flags: [...applyRequirements('approved'), '--discard-approval-on-plan'],
  standin: { botIsBotUser: true },
  async setup(ctx) {
    ctx.gl.addUser('reviewer');
    await addProjectRepo(ctx, INFRA, ONE_DIR_FILES);
  },
  steps: [
    openStep('needs an approval: autoplan', INFRA, 1, 'change-1', dir1Change('approved-1'), {
      then: (_ctx, mr) => {
        mr.approvalsRequired = 1;
      },
    }),
    commentStep('needs an approval: apply before it', INFRA, 1, 'atlantis apply'),
    commentStep('needs an approval: apply after it', INFRA, 1, 'atlantis apply', {
      before: (ctx, mr) => ctx.gl.approve(mr, 'reviewer'),
      also: 'reviewer approves',
    }),
    commentStep('a plan resets the approval', INFRA, 1, 'atlantis plan'),
    commentStep('apply after the reset', INFRA, 1, 'atlantis apply'),
    openStep('no approval rule: autoplan', INFRA, 2, 'change-2', caseDir(2)),
    commentStep('no approval rule: apply', INFRA, 2, 'atlantis apply'),
  ],
};

/** A plan whose output is longer than GitLab's longest note (1,000,000 characters). */
const LONG_CONFIG = `resource "terraform_data" "long" {
  # range() makes at most 1024 numbers: 26 x 1000 lines.
  input = join("\\n", flatten([for i in range(26) : [for j in range(1000) : format("line %05d of a plan long enough to be split over several notes", i * 1000 + j)]]))
}
`;

const LONG_COMMENT_SESSION: GlSession = {
  name: 'long-comment',
  about:
    "A plan comment longer than GitLab's note limit, split by Atlantis at 999,900 characters (the fixture keeps long bodies by length).",
  flags: [],
  async setup(ctx) {
    await addProjectRepo(ctx, 'acme/long', ONE_DIR_FILES);
  },
  steps: [openStep('long plan', 'acme/long', 1, 'long', { 'long/main.tf': LONG_CONFIG }, { comments: 2 })],
};

const AUTOMERGE_SESSION: GlSession = {
  name: 'automerge',
  about:
    '--automerge with --hide-prev-plan-comments: a second plan hides the first (notes edited), the apply merges the merge request, GitLab then sends action merge.',
  flags: ['--automerge', '--hide-prev-plan-comments', '--emoji-reaction', 'eyes'],
  async setup(ctx) {
    await addProjectRepo(ctx, INFRA, BASE_FILES);
  },
  steps: [
    openStep('autoplan', INFRA, 1, 'change-both', {
      ...dir1Change('auto-1'),
      'dir2/main.tf': BASE_FILES['dir2/main.tf']!.replace('dir2-v1', 'auto-2'),
    }),
    commentStep('plan again', INFRA, 1, 'atlantis plan'),
    commentStep('apply and automerge', INFRA, 1, 'atlantis apply', { comments: 2 }),
    closeStep('merged', INFRA, 1, { merged: true, comments: 1 }),
  ],
};

const STATUS_RETRY_SESSION: GlSession = {
  name: 'status-retry',
  about:
    '--gitlab-status-retry-enabled: five lookups of the commit for a pipeline before the first status, a 409 from POST /statuses retried, a 400 "Cannot transition status via :run from :running" taken as done.',
  flags: ['--gitlab-status-retry-enabled'],
  async setup(ctx) {
    await addProjectRepo(ctx, INFRA, ONE_DIR_FILES);
  },
  steps: [
    openStep('autoplan, a status answered 409', INFRA, 1, 'change-dir1', dir1Change('retry-1'), {
      then: (ctx) =>
        ctx.gl.failNext(
          1,
          { kind: 'status', status: 409, body: { message: 'Another update to this commit status is in progress' } },
          { method: 'POST', path: /\/statuses\// },
        ),
    }),
    commentStep('plan, a running status refused', INFRA, 1, 'atlantis plan', {
      before: (ctx) =>
        ctx.gl.failNext(
          1,
          {
            kind: 'status',
            status: 400,
            body: { message: 'Cannot transition status via :run from :running (Reason(s): Status cannot transition via "run")' },
          },
          { method: 'POST', path: /\/statuses\// },
        ),
      also: 'the next POST /statuses is answered 400 (already running)',
    }),
  ],
};

const SELF_MANAGED_SESSION: GlSession = {
  name: 'self-managed',
  about:
    'A self-managed GitLab 15.4 under a relative URL root (--gitlab-hostname host:port/gitlab): API, clones and clone-URL checks under the path; mergeability from the legacy merge_status (before 15.6).',
  flags: applyRequirements('mergeable'),
  standin: { relativeRoot: '/gitlab', version: '15.4.6-ee' },
  async setup(ctx) {
    await addProjectRepo(ctx, INFRA, ONE_DIR_FILES);
  },
  steps: [openStep('autoplan', INFRA, 1, 'change-dir1', dir1Change('self-1')), commentStep('apply', INFRA, 1, 'atlantis apply')],
};

/** Every session, in recording order. */
export const SESSIONS: GlSession[] = [
  SCENARIO_SESSION,
  WEBHOOK_AUTH_SESSION,
  FORK_SESSION,
  GROUP_ALLOWLIST_SESSION,
  MERGEABLE_SESSION,
  APPROVED_SESSION,
  LONG_COMMENT_SESSION,
  AUTOMERGE_SESSION,
  STATUS_RETRY_SESSION,
  SELF_MANAGED_SESSION,
];
