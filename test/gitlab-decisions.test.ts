// GitLab's pure decisions, table-tested: the `mergeable` requirement as Atlantis v0.47's GitLab
// client judges a merge request (vcs/gitlab/mergeability.ts), a commit status's request body
// and the waits between looks for the commit's pipeline (vcs/gitlab/statuses.ts), and an
// apply that may ignore other projects' plan statuses (workflow/repo-config/requirements.ts).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { blockingStatuses, gitlabMergeable, hasDetailedMergeStatus } from '../src/server/vcs/gitlab/mergeability.js';
import { pipelineLookWaits, statusBody } from '../src/server/vcs/gitlab/statuses.js';
import type { GlCommitStatus, GlMergeRequest, GlProject } from '../src/server/vcs/gitlab/types.js';
import { mergeableIgnoringOtherProjectPlans } from '../src/server/workflow/repo-config/requirements.js';

const MR: GlMergeRequest = {
  iid: 7,
  project_id: 1,
  source_project_id: 1,
  target_project_id: 1,
  state: 'opened',
  sha: 'abc',
  source_branch: 'feature',
  target_branch: 'main',
  web_url: 'https://gitlab.example/acme/infra/-/merge_requests/7',
  blocking_discussions_resolved: true,
  detailed_merge_status: 'mergeable',
  merge_status: 'can_be_merged',
};
const PROJECT: GlProject = { id: 1, path_with_namespace: 'acme/infra', http_url_to_repo: '', only_allow_merge_if_pipeline_succeeds: true };
const st = (name: string, status: string, o: Partial<GlCommitStatus> = {}): GlCommitStatus => ({ name, status, ref: 'feature', ...o });

describe('GitLab mergeability as Atlantis judges it', () => {
  const rows: Array<[string, Partial<GlMergeRequest>, Partial<GlProject>, GlCommitStatus[], boolean, string | undefined]> = [
    ['clean', {}, {}, [], true, undefined],
    ['a draft', { draft: true }, {}, [], false, 'Work in progress'],
    ['an unresolved blocking thread', { blocking_discussions_resolved: false }, {}, [], false, 'Blocking discussions unresolved'],
    ['a skipped pipeline', { head_pipeline: { id: 1, status: 'skipped' } }, {}, [], false, 'Pipeline was skipped'],
    [
      'a skipped pipeline, skipping allowed',
      { head_pipeline: { id: 1, status: 'skipped' } },
      { allow_merge_on_skipped_pipeline: true },
      [],
      true,
      undefined,
    ],
    ['conflicts', { detailed_merge_status: 'conflict' }, {}, [], false, 'Merge status is conflict'],
    ['CI still running counts', { detailed_merge_status: 'ci_still_running' }, {}, [], true, undefined],
    ['a failed job', {}, {}, [st('test', 'failed')], false, 'Pipeline test has status failed'],
    ['a failed job allowed to fail', {}, {}, [st('test', 'failed', { allow_failure: true })], true, undefined],
    [
      'a failed job, no successful pipeline asked',
      {},
      { only_allow_merge_if_pipeline_succeeds: false },
      [st('test', 'failed')],
      true,
      undefined,
    ],
    [
      "Atlantis's own apply status",
      {},
      {},
      [st('atlantis/apply', 'running'), st('atlantis/apply: dir1/default', 'failed')],
      true,
      undefined,
    ],
    ['another branch', {}, {}, [st('test', 'failed', { ref: 'other' })], true, undefined],
    ['first by name', {}, {}, [st('zz', 'failed'), st('aa', 'running')], false, 'Pipeline aa has status running'],
  ];
  for (const [what, mr, project, statuses, mergeable, reason] of rows)
    it(what, () => {
      const m = gitlabMergeable({ ...MR, ...mr }, { ...PROJECT, ...project }, statuses, { detailed: true, statusName: 'atlantis' });
      assert.equal(m.mergeable, mergeable);
      assert.equal(m.reason, reason);
    });

  it("the merge request's own refs win over the branch's statuses", () => {
    const statuses = [st('test', 'failed'), st('test', 'success', { ref: 'refs/merge-requests/7/head' })];
    assert.deepEqual(blockingStatuses(MR, PROJECT, statuses, 'atlantis'), []);
  });

  it('GitLab before 15.6: the legacy merge_status', () => {
    assert.equal(hasDetailedMergeStatus('15.4.2-ee'), false);
    assert.equal(hasDetailedMergeStatus('15.6.0'), true);
    assert.equal(hasDetailedMergeStatus('17.11.1-ee'), true);
    const m = gitlabMergeable({ ...MR, merge_status: 'cannot_be_merged' }, PROJECT, [], { detailed: false, statusName: 'atlantis' });
    assert.deepEqual(m, { mergeable: false, reason: 'Merge status is cannot_be_merged' });
  });

  it('an apply ignores other projects plan statuses, never its own or CI', () => {
    const own = 'atlantis/plan: dir1/default';
    const m = (names: string[]) => ({ mergeable: false, blockingStatuses: names });
    assert.equal(mergeableIgnoringOtherProjectPlans(m(['atlantis/plan: dir2/default']), own), true);
    assert.equal(mergeableIgnoringOtherProjectPlans(m(['atlantis/plan', 'atlantis/plan: dir2/default']), own), true);
    assert.equal(mergeableIgnoringOtherProjectPlans(m([own]), own), false);
    assert.equal(mergeableIgnoringOtherProjectPlans(m(['atlantis/plan: dir2/default', 'test']), own), false);
    assert.equal(mergeableIgnoringOtherProjectPlans(m(['atlantis/plan']), own), false);
    assert.equal(mergeableIgnoringOtherProjectPlans(m(['ci/plan: dir2/default']), 'ci/plan: dir1/default', 'ci'), true);
  });
});

describe('GitLab commit statuses as Atlantis sets them', () => {
  it("the body in the library's field order, GitLab's states, a pipeline or the branch", () => {
    const s = { state: 'pending' as const, context: 'atlantis/plan', description: 'Plan in progress...', targetUrl: '' };
    assert.deepEqual(Object.entries(statusBody(s, { pipelineId: 5 }, (t) => t)), [
      ['state', 'running'],
      ['context', 'atlantis/plan'],
      ['target_url', ''],
      ['description', 'Plan in progress...'],
      ['pipeline_id', 5],
    ]);
    assert.deepEqual(Object.keys(statusBody({ ...s, state: 'failure' }, { ref: 'feature' }, (t) => t)), [
      'state',
      'ref',
      'context',
      'target_url',
      'description',
    ]);
    assert.equal(statusBody({ ...s, state: 'error' }, undefined, (t) => t).state, 'failed');
    assert.equal(
      statusBody({ ...s, description: 'token glpat-x' }, undefined, (t) => t.replace('glpat-x', '[REDACTED]')).description,
      'token [REDACTED]',
    );
  });

  it('looks for the pipeline twice 2 s apart, or five times 2 to 5 s apart with retries', () => {
    assert.deepEqual(pipelineLookWaits(false), [2000]);
    assert.deepEqual(
      pipelineLookWaits(true, () => 0),
      [2000, 2000, 2000, 2000],
    );
    assert.deepEqual(
      pipelineLookWaits(true, () => 1),
      [2000, 4000, 5000, 5000],
    );
  });
});
