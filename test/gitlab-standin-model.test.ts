// The pure parts of the GitLab stand-in and of its differential, table-tested: a pipeline's
// status from its jobs, the head pipeline, approvals, `detailed_merge_status`, the commit
// status state machine; the normaliser, the events read from recorded calls, and the step
// comparison (with and without a deliberate difference).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { GlNormaliseContext, GlStepRecord } from './support/atlantis-gitlab-session.js';
import { eventsOfGl, gitOf, normaliseGl, normaliseJson, requestsOf } from './support/atlantis-gitlab-session.js';
import { compareGlStep } from './support/atlantis-gitlab-differential.js';
import type { GlRecordedCall } from './support/gitlab-standin.js';
import {
  type GlJob,
  type GlMergeRequest,
  type GlPipeline,
  type GlProject,
  type JobStatus,
  approvals,
  detailedMergeStatus,
  headPipeline,
  pipelineStatus,
  statusTransition,
} from './support/gitlab-standin-model.js';

const job = (status: JobStatus, o: Partial<GlJob> = {}): GlJob => ({
  id: 1,
  projectId: 1,
  pipelineId: 1,
  sha: 'a',
  ref: 'b',
  name: 'j',
  stage: 'test',
  status,
  description: null,
  targetUrl: null,
  coverage: null,
  allowFailure: false,
  authorId: 1,
  retried: false,
  createdAt: '',
  startedAt: null,
  finishedAt: null,
  ...o,
});

describe('pipelineStatus', () => {
  const cases: Array<[string, GlJob[], JobStatus]> = [
    ['no jobs: created', [], 'created'],
    ['all skipped', [job('skipped'), job('skipped')], 'skipped'],
    ['skipped and success: success', [job('skipped'), job('success')], 'success'],
    ['one running', [job('success'), job('running')], 'running'],
    ['one pending', [job('success'), job('pending')], 'pending'],
    ['a failure', [job('success'), job('failed')], 'failed'],
    ['a failure that may fail', [job('success'), job('failed', { allowFailure: true })], 'success'],
    ['a retried failure', [job('failed', { retried: true }), job('success')], 'success'],
    ['canceled', [job('success'), job('canceled')], 'canceled'],
  ];
  for (const [what, jobs, want] of cases) it(what, () => assert.equal(pipelineStatus(jobs), want));
});

const project = (s: Partial<GlProject['settings']> = {}): GlProject => ({
  id: 1,
  path: 'acme/infra',
  defaultBranch: 'main',
  settings: {
    onlyAllowMergeIfPipelineSucceeds: false,
    allowMergeOnSkippedPipeline: false,
    onlyAllowMergeIfAllDiscussionsAreResolved: false,
    mergeMethod: 'merge',
    ...s,
  },
  createdAt: '',
});

const mr = (o: Partial<GlMergeRequest> = {}): GlMergeRequest => ({
  id: 500,
  iid: 1,
  projectId: 1,
  sourceProjectId: 1,
  sourceBranch: 'feature',
  targetBranch: 'main',
  sha: 'abc',
  title: 't',
  description: '',
  state: 'opened',
  draft: false,
  authorId: 3,
  labels: [],
  hasConflicts: false,
  approvalsRequired: 0,
  approvedBy: [],
  createdAt: '',
  updatedAt: '',
  ...o,
});

describe('detailedMergeStatus', () => {
  const unresolved = [
    {
      id: 1,
      projectId: 1,
      mrIid: 1,
      body: '',
      authorId: 3,
      system: false,
      resolvable: true,
      resolved: false,
      discussionId: 'd',
      createdAt: '',
      updatedAt: '',
    },
  ];
  const ci = project({ onlyAllowMergeIfPipelineSucceeds: true });
  const cases: Array<[string, Parameters<typeof detailedMergeStatus>[0], string]> = [
    ['mergeable', { mr: mr(), project: project(), notes: [], headPipelineStatus: undefined }, 'mergeable'],
    ['closed', { mr: mr({ state: 'closed' }), project: project(), notes: [], headPipelineStatus: undefined }, 'not_open'],
    ['a draft', { mr: mr({ draft: true }), project: project(), notes: [], headPipelineStatus: undefined }, 'draft_status'],
    ['conflicts', { mr: mr({ hasConflicts: true }), project: project(), notes: [], headPipelineStatus: undefined }, 'conflict'],
    [
      'an open thread, threads not required',
      { mr: mr(), project: project(), notes: unresolved, headPipelineStatus: undefined },
      'mergeable',
    ],
    [
      'an open thread, threads required',
      { mr: mr(), project: project({ onlyAllowMergeIfAllDiscussionsAreResolved: true }), notes: unresolved, headPipelineStatus: undefined },
      'discussions_not_resolved',
    ],
    ['pipeline required, none', { mr: mr(), project: ci, notes: [], headPipelineStatus: undefined }, 'ci_must_pass'],
    ['pipeline required, running', { mr: mr(), project: ci, notes: [], headPipelineStatus: 'running' }, 'ci_still_running'],
    ['pipeline required, failed', { mr: mr(), project: ci, notes: [], headPipelineStatus: 'failed' }, 'ci_must_pass'],
    ['pipeline required, skipped', { mr: mr(), project: ci, notes: [], headPipelineStatus: 'skipped' }, 'ci_must_pass'],
    [
      'pipeline required, skipped allowed',
      {
        mr: mr(),
        project: project({ onlyAllowMergeIfPipelineSucceeds: true, allowMergeOnSkippedPipeline: true }),
        notes: [],
        headPipelineStatus: 'skipped',
      },
      'mergeable',
    ],
    ['pipeline required, success', { mr: mr(), project: ci, notes: [], headPipelineStatus: 'success' }, 'mergeable'],
    [
      'an approval owed',
      { mr: mr({ approvalsRequired: 1 }), project: project(), notes: [], headPipelineStatus: undefined },
      'not_approved',
    ],
    [
      'approved',
      { mr: mr({ approvalsRequired: 1, approvedBy: [7] }), project: project(), notes: [], headPipelineStatus: undefined },
      'mergeable',
    ],
    [
      'set by the test',
      { mr: mr({ detailedMergeStatus: 'checking' }), project: project(), notes: [], headPipelineStatus: undefined },
      'checking',
    ],
  ];
  for (const [what, facts, want] of cases) it(what, () => assert.equal(detailedMergeStatus(facts), want));
});

describe('approvals', () => {
  it('GitLab Free (no rule): approved with none', () =>
    assert.deepEqual(approvals(mr()), { approved: true, approvalsRequired: 0, approvalsLeft: 0 }));
  it('one owed', () =>
    assert.deepEqual(approvals(mr({ approvalsRequired: 2, approvedBy: [7] })), {
      approved: false,
      approvalsRequired: 2,
      approvalsLeft: 1,
    }));
});

describe('headPipeline', () => {
  const p = (id: number, o: Partial<GlPipeline> = {}): GlPipeline => ({
    id,
    iid: id,
    projectId: 1,
    sha: 'abc',
    ref: 'feature',
    source: 'push',
    createdAt: '',
    updatedAt: '',
    ...o,
  });
  it('the newest pipeline of the head commit on the source branch or the MR ref', () => {
    assert.equal(headPipeline(mr(), [p(1), p(3), p(2)])?.id, 3);
    assert.equal(headPipeline(mr(), [p(1), p(2, { ref: 'refs/merge-requests/1/head' })])?.id, 2);
  });
  it('none for another commit, branch or project', () => {
    assert.equal(headPipeline(mr(), [p(1, { sha: 'old' }), p(2, { ref: 'main' }), p(3, { projectId: 9 })]), undefined);
  });
});

describe('statusTransition (POST /statuses onto a job)', () => {
  const cases: Array<[JobStatus | null, string, JobStatus | string]> = [
    [null, 'pending', 'pending'],
    [null, 'running', 'running'],
    [null, 'success', 'success'],
    ['pending', 'running', 'running'],
    ['running', 'success', 'success'],
    ['running', 'failed', 'failed'],
    ['running', 'running', 'Cannot transition status via :run from :running (Reason(s): Status cannot transition via "run")'],
    ['pending', 'pending', 'Cannot transition status via :enqueue from :pending (Reason(s): Status cannot transition via "enqueue")'],
    [null, 'bogus', 'invalid state'],
  ];
  for (const [from, to, want] of cases) {
    it(`${from ?? 'new'} + ${to}`, () => {
      const got = statusTransition(from, to);
      assert.equal(typeof got === 'string' ? got : got.error, want);
    });
  }
});

const norm: GlNormaliseContext = {
  serverUrl: 'http://127.0.0.1:4141',
  gitlabUrl: 'https://127.0.0.1:40123',
  gitlabHostPort: '127.0.0.1:40123',
  dataDirs: ['/tmp/gl-diff-data-AbC'],
  token: 'glpat-secret123',
};

describe('normaliseGl', () => {
  const cases: Array<[string, string, string]> = [
    ['the server URL and a job UUID', 'http://127.0.0.1:4141/jobs/0f8fad5b-d9cb-469f-a165-70867728950e', '<atlantis-url>/jobs/<uuid>'],
    ["GitLab's URL and host", 'https://127.0.0.1:40123/acme/infra.git 127.0.0.1:40123', '<gitlab-url>/acme/infra.git <gitlab-host>'],
    ['an ssh clone URL', 'git@127.0.0.1:acme/infra.git', 'git@<gitlab-hostname>:acme/infra.git'],
    ['the data dir', "in '/tmp/gl-diff-data-AbC/repos/acme/infra/1/default'", "in '<data-dir>/repos/acme/infra/1/default'"],
    ['the token', 'https://atlantis-bot:glpat-secret123@host', 'https://atlantis-bot:<token>@host'],
    ['times', 'at 2026-12-01T07:12:56.567Z and 2015-05-17 18:21:36 UTC', 'at <time> and <time>'],
    ['a duration', 'Creation complete after 0s', 'Creation complete after <duration>'],
    [
      'SHAs stay (the sessions make the same ones each run)',
      'head 4f3c2a1b0e9d8c7b6a5f4e3d2c1b0a9f8e7d6c5b',
      'head 4f3c2a1b0e9d8c7b6a5f4e3d2c1b0a9f8e7d6c5b',
    ],
  ];
  for (const [what, input, want] of cases) it(what, () => assert.equal(normaliseGl(input, norm), want));
  it('long strings are kept by length', () =>
    assert.deepEqual(normaliseJson({ body: 'x'.repeat(30_000) }, norm), { body: '<long text: 30000 chars>' }));
});

const call = (method: string, path: string, body: unknown, status = 201, answer: unknown = { id: 1 }): GlRecordedCall => ({
  method,
  path,
  query: {},
  headers: { 'private-token': 'glpat-secret123' },
  body,
  status,
  answer,
});

describe('eventsOfGl and requestsOf', () => {
  const sha = 'a'.repeat(40);
  const calls = [
    call('GET', '/api/v4/projects/acme%2Finfra/merge_requests/1', undefined, 200),
    call('POST', `/api/v4/projects/acme%2Finfra/statuses/${sha}`, {
      state: 'running',
      name: 'atlantis/plan',
      description: 'Plan in progress...',
      target_url: '',
    }),
    call('GET', '/acme/infra.git/info/refs', undefined, 200, undefined),
    call('POST', '/api/v4/projects/acme%2Finfra/merge_requests/1/notes/1001/award_emoji', { name: 'eyes' }),
    call('POST', '/api/v4/projects/acme%2Finfra/merge_requests/1/notes', { body: 'see http://127.0.0.1:4141/jobs/1' }),
    call('POST', '/api/v4/projects/acme%2Finfra/merge_requests/1/notes', { body: 'refused' }, 400),
    call('PUT', '/api/v4/projects/acme%2Finfra/merge_requests/1/notes/1002', { body: 'hidden' }, 200),
    call('PUT', '/api/v4/projects/acme%2Finfra/merge_requests/1/merge', { should_remove_source_branch: false }, 200),
  ];
  it("keeps GitLab's writes in order, normalised; drops reads, clones and failures", () => {
    assert.deepEqual(eventsOfGl(calls, norm), [
      { kind: 'status', context: 'atlantis/plan', state: 'running', description: 'Plan in progress...', target_url: '' },
      { kind: 'reaction', content: 'eyes' },
      { kind: 'comment', pull: 1, body: 'see <atlantis-url>/jobs/1' },
      { kind: 'comment-edit', body: 'hidden' },
      { kind: 'call', method: 'PUT', path: '/api/v4/projects/acme%2Finfra/merge_requests/1/merge' },
    ]);
  });
  it('keeps every API request (not git), with its answer by key', () => {
    const answers: Record<string, unknown> = {};
    const reqs = requestsOf(calls, norm, answers);
    assert.equal(reqs.length, 7);
    assert.deepEqual(reqs[0], {
      method: 'GET',
      path: '/api/v4/projects/acme%2Finfra/merge_requests/1',
      auth: 'private-token',
      status: 200,
      answer: reqs[0]!.answer,
    });
    assert.deepEqual(answers[reqs[0]!.answer!], { id: 1 });
  });
});

describe('gitOf', () => {
  it('each distinct git request once, with its service, in the order first seen', () => {
    const g = (method: string, path: string, status: number, service?: string): GlRecordedCall => ({
      ...call(method, path, undefined, status, undefined),
      query: service ? { service } : {},
    });
    const calls = [
      g('GET', '/forker/infra.git/info/refs', 401, 'git-upload-pack'),
      g('GET', '/forker/infra.git/info/refs', 200, 'git-upload-pack'),
      g('POST', '/forker/infra.git/git-upload-pack', 200),
      g('POST', '/forker/infra.git/git-upload-pack', 200),
      call('GET', '/api/v4/version', undefined, 200),
    ];
    assert.deepEqual(gitOf(calls, norm), [
      'GET /forker/infra.git/info/refs?service=git-upload-pack 401',
      'GET /forker/infra.git/info/refs?service=git-upload-pack 200',
      'POST /forker/infra.git/git-upload-pack 200',
    ]);
  });
});

describe('compareGlStep', () => {
  const rec = (body: string): GlStepRecord => ({
    name: 's',
    did: 'd',
    webhooks: [{ status: 200, body: 'Processing...\n' }],
    events: [{ kind: 'comment', pull: 1, body }],
    requests: [
      { method: 'POST', path: '/api/v4/projects/acme%2Finfra/merge_requests/1/notes', auth: 'private-token', body: { body }, status: 201 },
    ],
    git: [],
  });
  it('the same step: no difference', () => assert.deepEqual(compareGlStep(rec('a'), rec('a')), []));
  it('a different comment: a line diff', () => {
    const diff = compareGlStep(rec('a'), rec('b'));
    assert.ok(diff.includes('-   | a') && diff.includes('+   | b'), diff.join('\n'));
  });
  it('a deliberate difference rewrites Atlantis lines', () => {
    assert.deepEqual(
      compareGlStep(rec('a'), rec('b'), {
        why: 'test',
        rewrite: [
          ['\\| a$', '| b'],
          ['"body":"a"', '"body":"b"'],
        ],
      }),
      [],
    );
  });
  it('a deliberate difference no longer needed is reported', () => {
    assert.equal(compareGlStep(rec('a'), rec('a'), { why: 'test', rewrite: [] }).length, 1);
  });
  it('a step not run', () => assert.ok(compareGlStep(rec('a'), undefined).includes('+ (step not run)')));
});
