// plan/apply/import requirements and depends_on, decided as Atlantis v0.47 decides them
// (server/events/command_requirement_handler.go, vcs/github/client.go PullIsMergeable).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { type MergeabilityInfo, approvedByReviews, mergeableMinusApply, mergeableStatus } from '../src/server/vcs/github/mergeability.js';
import {
  PullProjectStates,
  type ProjectState,
  type RequirementFacts,
  dependencyFailure,
  requirementFailure,
} from '../src/server/workflow/repo-config/requirements.js';
import type { ApplyRequirement } from '../src/server/workflow/repo-config/types.js';

describe('mergeableStatus (GitHub mergeable_state as Atlantis maps it)', () => {
  const rows: Array<[boolean, string, { mergeable: boolean; reason?: string }]> = [
    [false, 'clean', { mergeable: true }],
    [false, 'unstable', { mergeable: true }],
    [false, 'has_hooks', { mergeable: true }],
    [false, 'blocked', { mergeable: false, reason: 'PR is in state blocked' }],
    [false, 'dirty', { mergeable: false, reason: 'PR is in state dirty' }],
    [false, 'behind', { mergeable: false, reason: 'PR is in state behind' }],
    [false, 'unknown', { mergeable: false, reason: 'PR is in state unknown' }],
    [false, '', { mergeable: false, reason: 'PR is in state <unknown>' }],
    [true, 'clean', { mergeable: false, reason: 'PR is a draft' }],
  ];
  for (const [draft, state, want] of rows)
    it(`${draft ? 'draft, ' : ''}${state || '(empty)'}`, () => assert.deepEqual(mergeableStatus({ draft, mergeableState: state }), want));
});

describe('approvedByReviews (Atlantis: any review in state APPROVED)', () => {
  const rows: Array<[string[], boolean]> = [
    [[], false],
    [['COMMENTED', 'CHANGES_REQUESTED'], false],
    [['DISMISSED'], false],
    [['APPROVED'], true],
    // Atlantis does not look at what the same reviewer did after approving.
    [['APPROVED', 'CHANGES_REQUESTED'], true],
  ];
  for (const [states, want] of rows)
    it(JSON.stringify(states), () => assert.equal(approvedByReviews(states.map((state) => ({ user: 'u', state }))), want));
});

describe('mergeableStatus with --gh-allow-mergeable-bypass-apply', () => {
  it('only a blocked PR is decided by what blocks it besides atlantis/apply', () => {
    assert.deepEqual(mergeableStatus({ draft: false, mergeableState: 'blocked' }, { minusApply: true }), { mergeable: true });
    assert.deepEqual(mergeableStatus({ draft: false, mergeableState: 'blocked' }, { minusApply: false }), {
      mergeable: false,
      reason: 'PR is in state blocked, and cannot bypass mergeable requirements',
    });
    assert.deepEqual(mergeableStatus({ draft: false, mergeableState: 'dirty' }, { minusApply: true }), {
      mergeable: false,
      reason: 'PR is in state dirty',
    });
    assert.deepEqual(mergeableStatus({ draft: true, mergeableState: 'blocked' }, { minusApply: true }), {
      mergeable: false,
      reason: 'PR is a draft',
    });
  });
});

describe('mergeableMinusApply (Atlantis IsMergeableMinusApply)', () => {
  const base: MergeabilityInfo = {
    reviewDecision: '',
    requiredApprovals: 0,
    approvals: 0,
    requiredChecks: ['ci/build', 'atlantis/apply', 'atlantis/apply: app/default', 'lint'],
    requiredWorkflows: 0,
    checkRuns: [{ name: 'lint', conclusion: 'SUCCESS' }],
    statusContexts: [
      { context: 'ci/build', state: 'SUCCESS' },
      { context: 'atlantis/apply', state: 'PENDING' },
    ],
  };
  const rows: Array<[string, Partial<MergeabilityInfo>, boolean]> = [
    ['only atlantis/apply checks are pending', {}, true],
    ['review decision APPROVED', { reviewDecision: 'APPROVED' }, true],
    ['review required', { reviewDecision: 'REVIEW_REQUIRED' }, false],
    ['changes requested', { reviewDecision: 'CHANGES_REQUESTED' }, false],
    ['ruleset approvals missing', { requiredApprovals: 2, approvals: 1 }, false],
    ['ruleset approvals met', { requiredApprovals: 1, approvals: 1 }, true],
    ['a required status failing', { statusContexts: [{ context: 'ci/build', state: 'FAILURE' }] }, false],
    ['a required check never reported', { requiredChecks: ['ci/missing'] }, false],
    ['a check run neutral', { checkRuns: [{ name: 'lint', conclusion: 'NEUTRAL' }] }, true],
    ['a check run failed', { checkRuns: [{ name: 'lint', conclusion: 'FAILURE' }] }, false],
    [
      'the latest workflow run decides',
      {
        checkRuns: [
          { name: 'lint', conclusion: 'FAILURE', runNumber: 1 },
          { name: 'lint', conclusion: 'SUCCESS', runNumber: 2 },
        ],
      },
      true,
    ],
    ['required workflows of a ruleset block (not evaluated here)', { requiredWorkflows: 1 }, false],
  ];
  for (const [what, patch, want] of rows) it(what, () => assert.equal(mergeableMinusApply({ ...base, ...patch }), want));
});

describe('requirementFailure', () => {
  const ok: RequirementFacts = { approved: true, mergeable: { mergeable: true }, diverged: false };
  const rows: Array<[string, 'plan' | 'apply' | 'import', ApplyRequirement[], RequirementFacts, string | undefined]> = [
    ['nothing required', 'apply', [], {}, undefined],
    ['all met', 'apply', ['approved', 'mergeable', 'undiverged'], ok, undefined],
    [
      'not approved',
      'apply',
      ['approved'],
      { approved: false },
      "Pull request must be approved according to the project's approval rules before running apply.",
    ],
    [
      'plan names its command',
      'plan',
      ['approved'],
      { approved: false },
      "Pull request must be approved according to the project's approval rules before running plan.",
    ],
    [
      'not mergeable, with the reason',
      'apply',
      ['mergeable'],
      { mergeable: { mergeable: false, reason: 'PR is in state blocked' } },
      'Pull request must be mergeable before running apply (PR is in state blocked).',
    ],
    [
      'not mergeable, no reason',
      'import',
      ['mergeable'],
      { mergeable: { mergeable: false } },
      'Pull request must be mergeable before running import.',
    ],
    ['diverged', 'apply', ['undiverged'], { diverged: true }, 'Default branch must be rebased onto pull request before running apply.'],
    [
      'the first unmet in the listed order',
      'apply',
      ['mergeable', 'approved'],
      { approved: false, mergeable: { mergeable: false, reason: 'PR is a draft' } },
      'Pull request must be mergeable before running apply (PR is a draft).',
    ],
  ];
  for (const [what, cmd, reqs, facts, want] of rows) it(what, () => assert.equal(requirementFailure(cmd, reqs, facts), want));
});

describe('dependencyFailure (depends_on)', () => {
  const states = new Map<string, ProjectState>([
    ['applied', 'applied'],
    ['nochange', 'planned_no_changes'],
    ['planned', 'planned'],
    ['broken', 'errored'],
    ['imported', 'discarded'],
  ]);
  const rows: Array<[string[], string | undefined]> = [
    [[], undefined],
    [['applied', 'nochange'], undefined],
    [['unknown'], undefined],
    [['applied', 'planned'], "Can't apply your project unless you apply its dependencies: [planned]"],
    [['broken'], "Can't apply your project unless you apply its dependencies: [broken]"],
    [['imported'], "Can't apply your project unless you apply its dependencies: [imported]"],
  ];
  for (const [deps, want] of rows) it(JSON.stringify(deps), () => assert.equal(dependencyFailure(deps, states), want));

  it('project states reset when the head commit changes', () => {
    const s = new PullProjectStates();
    s.get('acme/infra', 1, 'sha1').set('net', 'applied');
    assert.equal(s.get('acme/infra', 1, 'sha1').get('net'), 'applied');
    assert.equal(s.get('acme/infra', 1, 'sha2').get('net'), undefined);
    s.get('acme/infra', 1, 'sha2').set('net', 'planned');
    s.forget('acme/infra', 1);
    assert.equal(s.get('acme/infra', 1, 'sha2').size, 0);
  });
});
