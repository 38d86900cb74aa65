// The PR-wide plan status and the commit statuses derived from it: Atlantis v0.47's rules
// and texts (cases after its commit_status_updater, plan/apply runner and apply validation
// tests, written as tables here).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  type ProjectPlanStatus,
  type PullStatus,
  applyCombinedStatus,
  combinedDescription,
  countsDescription,
  genericApplyProblem,
  mergePullStatus,
  noPlanFoundError,
  noProjectStatuses,
  planCombinedStatus,
  policyCheckCombinedStatus,
  planDiffSummary,
  planHasNoChanges,
  projectStatusContext,
  truncateContext,
} from '../src/server/locks/pull-status.js';

const rec = (dir: string, status: ProjectPlanStatus, project = '') => ({ dir, workspace: 'default', project, status });
const ps = (...projects: ReturnType<typeof rec>[]): PullStatus => ({ headSha: 'a'.repeat(40), projects });

describe('status descriptions', () => {
  const rows: [Parameters<typeof countsDescription>, string][] = [
    [['plan', 'pending', { success: 0, total: 2, errored: 0, noChanges: 0 }], '0/2 projects planned.'],
    [['plan', 'failure', { success: 1, total: 2, errored: 1, noChanges: 0 }], '1/2 projects failed to plan.'],
    [['plan', 'success', { success: 2, total: 2, errored: 0, noChanges: 0 }], '2/2 projects planned successfully.'],
    [['policy_check', 'failure', { success: 1, total: 2, errored: 1, noChanges: 0 }], '1/2 projects failed policy checks.'],
    [['apply', 'failure', { success: 0, total: 2, errored: 2, noChanges: 0 }], '2/2 projects failed to apply.'],
    [['apply', 'failure', { success: 2, total: 3, errored: 1, noChanges: 0 }], '1/3 projects failed to apply.'],
    [['apply', 'pending', { success: 1, total: 2, errored: 0, noChanges: 0 }], '1/2 projects applied.'],
    [['apply', 'success', { success: 2, total: 2, errored: 0, noChanges: 0 }], '2/2 projects applied successfully.'],
    [['apply', 'success', { success: 2, total: 2, errored: 0, noChanges: 2 }], '2/2 projects up to date.'],
    [['apply', 'success', { success: 3, total: 3, errored: 0, noChanges: 1 }], '2/3 projects applied successfully (1 up to date).'],
    [['apply', 'pending', { success: 1, total: 2, errored: 0, noChanges: 1 }], '0/2 projects applied (1 up to date).'],
    [['apply', 'pending', { success: 2, total: 3, errored: 0, noChanges: 1 }], '1/3 projects applied (1 up to date).'],
    [['apply', 'success', { success: 0, total: 0, errored: 0, noChanges: 0 }], '0/0 projects applied successfully.'],
  ];
  for (const [args, want] of rows) it(want, () => assert.equal(countsDescription(...args), want));

  it('without counts', () => {
    assert.equal(combinedDescription('plan', 'pending'), 'Plan in progress...');
    assert.equal(combinedDescription('plan', 'failure'), 'Plan failed.');
    assert.equal(combinedDescription('apply', 'success'), 'Apply succeeded.');
  });
});

describe('PR-wide statuses from the plan records', () => {
  const rows: {
    name: string;
    status: PullStatus;
    plan: [string, string];
    applyAfterPlan?: [string, string];
    applyAfterApply: [string, string];
  }[] = [
    {
      name: 'two planned',
      status: ps(rec('dir1', 'planned'), rec('dir2', 'planned')),
      plan: ['success', '2/2 projects planned successfully.'],
      applyAfterApply: ['pending', '0/2 projects applied.'],
    },
    {
      name: 'dir1 applied, dir2 still planned',
      status: ps(rec('dir1', 'applied'), rec('dir2', 'planned')),
      plan: ['success', '2/2 projects planned successfully.'],
      applyAfterApply: ['pending', '1/2 projects applied.'],
    },
    {
      name: 'both applied',
      status: ps(rec('dir1', 'applied'), rec('dir2', 'applied')),
      plan: ['success', '2/2 projects planned successfully.'],
      applyAfterPlan: ['success', '2/2 projects applied successfully.'],
      applyAfterApply: ['success', '2/2 projects applied successfully.'],
    },
    {
      name: 'no-change plans count as applied',
      status: ps(rec('dir1', 'planned_no_changes'), rec('dir2', 'planned_no_changes')),
      plan: ['success', '2/2 projects planned successfully.'],
      applyAfterPlan: ['success', '2/2 projects up to date.'],
      applyAfterApply: ['success', '2/2 projects up to date.'],
    },
    {
      name: 'a plan error fails atlantis/plan',
      status: ps(rec('dir1', 'planned'), rec('dir2', 'plan_errored')),
      plan: ['failure', '1/2 projects failed to plan.'],
      applyAfterApply: ['pending', '0/2 projects applied.'],
    },
    {
      name: 'an apply error fails atlantis/apply but is a plan success',
      status: ps(rec('dir1', 'apply_errored'), rec('dir2', 'applied')),
      plan: ['success', '2/2 projects planned successfully.'],
      applyAfterPlan: ['failure', '1/2 projects failed to apply.'],
      applyAfterApply: ['failure', '1/2 projects failed to apply.'],
    },
    {
      name: 'no projects',
      status: ps(),
      plan: ['success', '0/0 projects planned successfully.'],
      applyAfterPlan: ['success', '0/0 projects applied successfully.'],
      applyAfterApply: ['success', '0/0 projects applied successfully.'],
    },
  ];
  for (const r of rows) {
    it(r.name, () => {
      const p = planCombinedStatus(r.status);
      assert.deepEqual([p.state, p.description], r.plan);
      const ap = applyCombinedStatus(r.status, 'plan');
      assert.deepEqual(ap && [ap.state, ap.description], r.applyAfterPlan, 'after a plan');
      const aa = applyCombinedStatus(r.status, 'apply');
      assert.deepEqual(aa && [aa.state, aa.description], r.applyAfterApply, 'after an apply');
    });
  }

  it('a PR without projects gets the three 0/0 success statuses', () => {
    assert.deepEqual(
      noProjectStatuses().map((s) => [s.context, s.status.state, s.status.description]),
      [
        ['plan', 'success', '0/0 projects planned successfully.'],
        ['policy_check', 'success', '0/0 projects had policies checked successfully.'],
        ['apply', 'success', '0/0 projects applied successfully.'],
      ],
    );
  });
});

describe('merging results into the PR status', () => {
  const head = 'a'.repeat(40);
  const k = (dir: string, project = '') => ({ dir, workspace: 'default', project });
  it('a newer head replaces the records', () => {
    const next = mergePullStatus(ps(rec('dir1', 'applied')), 'b'.repeat(40), [{ ...k('dir2'), command: 'plan', ok: true }]);
    assert.deepEqual(next, { headSha: 'b'.repeat(40), projects: [rec('dir2', 'planned')] });
  });
  it('the same head merges: apply -d dir1 keeps dir2', () => {
    const next = mergePullStatus(ps(rec('dir1', 'planned'), rec('dir2', 'planned')), head, [{ ...k('dir1'), command: 'apply', ok: true }]);
    assert.deepEqual(next.projects, [rec('dir1', 'applied'), rec('dir2', 'planned')]);
  });
  it('statuses per command and outcome', () => {
    const rows: [Parameters<typeof mergePullStatus>[2][number], ProjectPlanStatus][] = [
      [{ ...k('d'), command: 'plan', ok: true }, 'planned'],
      [{ ...k('d'), command: 'plan', ok: true, noChanges: true }, 'planned_no_changes'],
      [{ ...k('d'), command: 'plan', ok: false }, 'plan_errored'],
      [{ ...k('d'), command: 'apply', ok: true }, 'applied'],
      [{ ...k('d'), command: 'apply', ok: false }, 'apply_errored'],
      [{ ...k('d'), command: 'import', ok: true }, 'plan_discarded'],
      [{ ...k('d'), command: 'state', ok: false }, 'plan_errored'],
    ];
    for (const [o, want] of rows) assert.equal(mergePullStatus(undefined, head, [o]).projects[0]?.status, want, JSON.stringify(o));
  });
  it('named projects at one dir are distinct', () => {
    const next = mergePullStatus(undefined, head, [
      { ...k('.', 'alpha'), command: 'plan', ok: true },
      { ...k('.', 'beta'), command: 'plan', ok: false },
    ]);
    assert.deepEqual(next.projects, [rec('.', 'planned', 'alpha'), rec('.', 'plan_errored', 'beta')]);
  });
});

describe('generic apply checks (Atlantis texts)', () => {
  const head = 'a'.repeat(40);
  const key = (dir: string) => ({ dir, workspace: 'default', project: '' });
  const rows: [string, PullStatus | undefined, string[], string, string | undefined][] = [
    ['never planned', undefined, [], head, 'no current plan status found; run `atlantis plan` before apply'],
    ['plans without a status', undefined, ['dir1'], head, 'no recorded plan status found; run `atlantis plan` before apply'],
    [
      'status of an older head',
      { headSha: 'b'.repeat(40), projects: [] },
      [],
      head,
      'recorded plan status is from commit bbbbbbb but current head is aaaaaaa; run `atlantis plan` before apply',
    ],
    [
      'plans of an older head',
      { headSha: 'b'.repeat(40), projects: [rec('dir1', 'planned')] },
      ['dir1'],
      head,
      'plans are from commit bbbbbbb but current head is aaaaaaa; run `atlantis plan` before apply',
    ],
    [
      'an errored plan',
      ps(rec('dir1', 'planned'), rec('dir2', 'plan_errored')),
      ['dir1'],
      head,
      'plan for dir "dir2" workspace "default" project "" errored and cannot be applied without a plan file; run `atlantis plan`',
    ],
    [
      'a planned project whose plan was discarded by unlock',
      ps(rec('dir1', 'planned')),
      [],
      head,
      'plan file is missing for dir "dir1" workspace "default" project "" with status "planned"; run `atlantis plan`',
    ],
    [
      'a plan of an applied project',
      ps(rec('dir1', 'applied')),
      ['dir1'],
      head,
      'plan for dir "dir1" workspace "default" project "" has status "applied" and cannot be applied; run `atlantis plan`',
    ],
    ['all applied, nothing left', ps(rec('dir1', 'applied'), rec('dir2', 'planned_no_changes')), [], head, undefined],
    ['a PR without projects', ps(), [], head, undefined],
    ['one planned, one applied', ps(rec('dir1', 'applied'), rec('dir2', 'planned')), ['dir2'], head, undefined],
    // Policy checks: a failed check still builds the apply (its requirement refuses it), as Atlantis.
    ['a failed policy check with its plan', ps(rec('dir1', 'policy_check_errored')), ['dir1'], head, undefined],
    ['a passed policy check with its plan', ps(rec('dir1', 'policy_check_passed')), ['dir1'], head, undefined],
    [
      'a passed policy check whose plan is gone',
      ps(rec('dir1', 'policy_check_passed')),
      [],
      head,
      'plan file is missing for dir "dir1" workspace "default" project "" with status "policy_check_passed"; run `atlantis plan`',
    ],
  ];
  for (const [name, status, plans, h, want] of rows) it(name, () => assert.equal(genericApplyProblem(status, plans.map(key), h), want));

  it('apply -d of a project without a plan', () => {
    assert.equal(noPlanFoundError('dir1', 'default'), 'no plan found at path "dir1" and workspace "default"–did you run plan?');
  });
});

describe('per-project status contexts', () => {
  it('name, or dir/workspace', () => {
    assert.equal(projectStatusContext('plan', { dir: 'dir1', workspace: 'default', project: '' }), 'atlantis/plan: dir1/default');
    assert.equal(projectStatusContext('apply', { dir: 'dir1', workspace: 'default', project: 'alpha' }), 'atlantis/apply: alpha');
  });
  it('long contexts keep 255 characters and stay distinct', () => {
    const a = truncateContext(`atlantis/plan: ${'x'.repeat(300)}a`);
    const b = truncateContext(`atlantis/plan: ${'x'.repeat(300)}b`);
    assert.equal(Array.from(a).length, 255);
    assert.match(a, /-[0-9a-f]{12}$/);
    assert.notEqual(a, b);
    assert.equal(truncateContext('atlantis/plan'), 'atlantis/plan');
  });
});

describe('plan summaries (the project status description)', () => {
  const rows: [string, string, boolean][] = [
    ['Terraform will perform...\nPlan: 1 to add, 2 to change, 3 to destroy.\n', 'Plan: 1 to add, 2 to change, 3 to destroy.', false],
    ['Plan: 2 to import, 1 to add, 0 to change, 0 to destroy.', 'Plan: 2 to import, 1 to add, 0 to change, 0 to destroy.', false],
    ['Plan: 0 to add, 0 to change, 1 to destroy, 2 to forget.', 'Plan: 0 to add, 0 to change, 1 to destroy, 2 to forget.', false],
    [
      'Plan: 1 to add, 0 to change, 0 to destroy.\nPlan: 2 to add, 1 to change, 0 to destroy.',
      'Plan: 3 to add, 1 to change, 0 to destroy.',
      false,
    ],
    [
      'No changes. Your infrastructure matches the configuration.\n\nTerraform has compared...',
      'No changes. Your infrastructure matches the configuration.',
      true,
    ],
    ['No changes. Infrastructure is up-to-date.', 'No changes. Infrastructure is up-to-date.', true],
    ['Changes to Outputs:\n  + x = 1', '', false],
  ];
  for (const [out, summary, none] of rows) {
    it(JSON.stringify(out.slice(0, 40)), () => {
      assert.equal(planDiffSummary(out), summary);
      assert.equal(planHasNoChanges(out), none);
    });
  }
});

describe('atlantis/policy_check from the PR records', () => {
  it('passed over all; any failure fails it', () => {
    assert.deepEqual(policyCheckCombinedStatus(ps(rec('dir1', 'policy_check_passed'), rec('dir2', 'policy_check_errored'))), {
      state: 'failure',
      description: '1/2 projects failed policy checks.',
    });
    assert.deepEqual(policyCheckCombinedStatus(ps(rec('dir1', 'policy_check_passed'))), {
      state: 'success',
      description: '1/1 projects had policies checked successfully.',
    });
    assert.equal(
      mergePullStatus(undefined, 'h', [{ ...rec('d', 'planned'), command: 'approve_policies', ok: true }]).projects[0]?.status,
      'policy_check_passed',
    );
  });
});
