// The policy comments (src/server/policy/policy-comments.ts), the approval rules
// (policy/approvals.ts), the results model (policy/policy-results.ts) and the `policies:`
// config (policy/policy-sets.ts), as tables. The comments are checked against what Atlantis
// v0.47 posted in the policy differential's fixture (test/fixtures/atlantis-v0.47/policy-scenario.json).
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { NEEDS_APPROVAL, approvePolicies } from '../src/server/policy/approvals.js';
import { type PolicyProjectView, renderPolicyComment } from '../src/server/policy/policy-comments.js';
import {
  compileItemRegex,
  currentApprovals,
  hashItem,
  hasFailures,
  isConftestReport,
  newPolicySetResult,
  policyCleared,
  policyItemHashes,
  statusOf,
} from '../src/server/policy/policy-results.js';
import { type PolicySets, hasTeamOwners, isOwner, ownerTeams, parsePolicySets } from '../src/server/policy/policy-sets.js';
import { POLICY_SCENARIO } from './support/atlantis-policy-scenario.js';
import type { Fixture } from './support/atlantis-differential.js';

const fixture = JSON.parse(readFileSync(POLICY_SCENARIO.fixture, 'utf8')) as Fixture;
const commentsOf = (step: string): string[] =>
  fixture.steps.find((s) => s.name === step)!.events.flatMap((e) => (e.kind === 'comment' ? [e.body] : []));

const FAIL_OUT =
  'FAIL - <redacted plan file> - main - terraform_data.marker: the value "forbidden" is not allowed\n\n1 test, 0 passed, 0 warnings, 1 failure, 0 exceptions\n';
const PASS_OUT = '\n1 test, 1 passed, 0 warnings, 0 failures, 0 exceptions\n';
const REGEX = '(?s).+';
const LOCK = (dir: string, project = '') => `<atlantis-url>/lock?id=acme%252Fpolicy%252F${dir}%252Fdefault%252F${project}`;

function view(dir: string, sets: ReturnType<typeof newPolicySetResult>[], extra: Partial<PolicyProjectView> = {}): PolicyProjectView {
  return {
    dir,
    workspace: 'default',
    results: {
      sets,
      lockUrl: LOCK(dir),
      applyCmd: `atlantis apply -d ${dir}`,
      replanCmd: `atlantis plan -d ${dir}`,
      approvePoliciesCmd: `atlantis approve_policies -d ${dir}`,
    },
    ...extra,
  };
}

const SETS = (): PolicySets => ({
  owners: { users: [], teams: ['policy-admins'] },
  approveCount: 1,
  stickyApprovals: false,
  policyItemRegex: REGEX,
  policySets: [
    {
      name: 'no-forbidden',
      path: '/cfg/policies/no-forbidden',
      source: 'local',
      approveCount: 1,
      stickyApprovals: false,
      policyItemRegex: REGEX,
      owners: { users: ['policy-owner'], teams: [] },
      preventSelfApprove: false,
    },
    {
      name: 'no-destroy',
      path: '/cfg/policies/no-destroy',
      source: 'local',
      approveCount: 1,
      stickyApprovals: false,
      policyItemRegex: REGEX,
      owners: { users: [], teams: [] },
      preventSelfApprove: false,
    },
  ],
});

describe('policy comments, as Atlantis v0.47 posted them', () => {
  const failing = () => [
    newPolicySetResult('no-forbidden', FAIL_OUT, false, 1, REGEX),
    newPolicySetResult('no-destroy', PASS_OUT, true, 1, REGEX),
  ];

  it('a failing policy check', () => {
    const body = renderPolicyComment('policy_check', [view('dir1', failing(), { failure: 'Some policy sets did not pass.' })]);
    assert.equal(body, commentsOf('failing autoplan')[1]);
  });

  it('a passing policy check', () => {
    const sets = [newPolicySetResult('no-forbidden', PASS_OUT, true, 1, REGEX), newPolicySetResult('no-destroy', PASS_OUT, true, 1, REGEX)];
    assert.equal(renderPolicyComment('policy_check', [view('dir2', sets)]), commentsOf('passing autoplan')[1]);
  });

  it('approve_policies by a non-owner, then by an owner', () => {
    const statuses = failing().map(statusOf);
    const refused = approvePolicies({ sets: SETS(), statuses, user: 'dev', userTeams: [], author: 'dev', target: '', clear: false });
    assert.equal(
      refused.error,
      'policy set: no-forbidden user dev is not a policy owner - please contact policy owners to approve failing policies',
    );
    assert.equal(refused.failure, NEEDS_APPROVAL);
    const v = view('dir1', refused.results, { error: refused.error!, failure: refused.failure! });
    assert.equal(renderPolicyComment('approve_policies', [v]), commentsOf('approve_policies by a non-owner')[0]);
    const ok = approvePolicies({ sets: SETS(), statuses, user: 'policy-owner', userTeams: [], author: 'dev', target: '', clear: false });
    assert.equal(ok.error, undefined);
    assert.equal(ok.failure, undefined);
    assert.ok(policyCleared(ok.results));
    assert.equal(renderPolicyComment('approve_policies', [view('dir1', ok.results)]), commentsOf('approve_policies by an owner')[0]);
  });

  it('a team owner approves one set; an owner of one set clearing approvals is refused for the other', () => {
    const statuses = failing().map(statusOf);
    const team = approvePolicies({
      sets: SETS(),
      statuses,
      user: 'policy-admin',
      userTeams: ['policy-admins'],
      author: 'dev',
      target: 'no-forbidden',
      clear: false,
    });
    assert.equal(team.error, undefined);
    assert.equal(renderPolicyComment('approve_policies', [view('dir1', team.results)]), commentsOf('approve_policies by a team owner')[0]);
    const cleared = approvePolicies({
      sets: SETS(),
      statuses: team.results.map(statusOf),
      user: 'policy-owner',
      userTeams: [],
      author: 'dev',
      target: '',
      clear: true,
    });
    assert.equal(
      cleared.error,
      'policy set: no-destroy user policy-owner is not a policy owner - please contact policy owners to approve failing policies',
    );
    assert.equal(currentApprovals(cleared.results[0]!), 0);
    const v = view('dir1', cleared.results, { error: cleared.error!, failure: cleared.failure! });
    assert.equal(renderPolicyComment('approve_policies', [v]), commentsOf('clear the approval')[0]);
  });
});

describe('approvals', () => {
  const statuses = () => [newPolicySetResult('no-forbidden', FAIL_OUT, false, 1, REGEX)].map(statusOf);
  const base = { userTeams: [] as string[], author: 'dev', target: '', clear: false };
  it('an owner who approved these items already: an error naming what is still needed', () => {
    const sets = SETS();
    sets.policySets[0]!.approveCount = 2;
    const once = approvePolicies({ ...base, sets, statuses: statuses(), user: 'policy-owner' });
    assert.equal(once.failure, NEEDS_APPROVAL);
    const twice = approvePolicies({ ...base, sets, statuses: once.results.map(statusOf), user: 'policy-owner' });
    assert.equal(twice.error, 'policy set: already approved by policy-owner; need 1 more approval(s) from a different policy owner');
    const other = approvePolicies({ ...base, sets, statuses: once.results.map(statusOf), user: 'x', userTeams: ['policy-admins'] });
    assert.equal(other.failure, undefined);
  });
  it('prevent_self_approve: the author cannot approve', () => {
    const sets = SETS();
    sets.policySets[0]!.preventSelfApprove = true;
    const r = approvePolicies({ ...base, sets, statuses: statuses(), user: 'policy-owner', author: 'policy-owner' });
    assert.match(r.error ?? '', /policy set: no-forbidden the author of pr policy-owner matches the command commenter user policy-owner/);
  });
  it('owners match users and teams in any case', () => {
    assert.ok(isOwner({ users: ['Alice'], teams: [] }, 'alice', []));
    assert.ok(isOwner({ users: [], teams: ['Ops'] }, 'bob', ['ops']));
    assert.ok(!isOwner({ users: ['alice'], teams: ['ops'] }, 'bob', ['dev']));
    assert.ok(hasTeamOwners(SETS()));
    const base = SETS();
    const named = (top: string[], ...sets: string[][]): PolicySets => ({
      ...base,
      owners: { users: [], teams: top },
      policySets: sets.map((teams, i) => ({
        ...(base.policySets[0] as PolicySets['policySets'][number]),
        name: `s${i}`,
        owners: { users: [], teams },
      })),
    });
    assert.deepEqual(
      ownerTeams(named(['b/admins'], ['a/ops', 'b/admins'], ['a/ops', 'c'])),
      ['b/admins', 'a/ops', 'c'],
      'each once, top level first',
    );
    assert.deepEqual(ownerTeams(named([], [])), []);
  });
  it('an approval covers the items it saw: a changed output needs a new one', () => {
    const r = newPolicySetResult('s', 'FAIL a\nFAIL b\n', false, 1, '(?m)^FAIL .*$');
    assert.deepEqual(r.hashes, [hashItem('FAIL a'), hashItem('FAIL b')]);
    const approved = { ...r, approvals: [{ approver: 'o', hashes: r.hashes }] };
    assert.equal(currentApprovals(approved), 1);
    const changed = newPolicySetResult('s', 'FAIL a\nFAIL c\n', false, 1, '(?m)^FAIL .*$');
    assert.equal(currentApprovals({ ...changed, approvals: approved.approvals }), 0);
    assert.deepEqual(policyItemHashes('', '(?s).+'), [hashItem('')], 'no item: the hash of the whole output');
    assert.equal(compileItemRegex('(?is)a.b').flags.split('').sort().join(''), 'gisu');
  });
  it("conftest's output: its report or an error; failures found also in JSON", () => {
    assert.ok(isConftestReport('FAIL - x'));
    assert.ok(isConftestReport('WARN - x'));
    assert.ok(isConftestReport('[{"filename": ""}]'));
    assert.ok(!isConftestReport('Error: load policies: 1 error occurred'));
    assert.ok(hasFailures('1 test, 0 passed, 0 warnings, 1 failure'));
    assert.ok(hasFailures('"failures": [{'));
    assert.ok(!hasFailures('1 test, 1 passed, 0 warnings, 0 failures'));
    assert.ok(hasFailures('10 failures'));
    assert.ok(hasFailures('x01 failure'));
    assert.ok(!hasFailures('00 failures, 1 failed'));
    // Atlantis's regex, on strings that mix its pieces: the scan agrees with it everywhere.
    const atlantis = /([1-9][0-9]* failure|failures": \[)/;
    const parts = ['0', '1', '9', ' ', ' failure', 's', '": [', 'failures', 'x'];
    let seed = 35;
    const next = () => {
      seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
      return seed >>> 16;
    };
    let withFailures = 0;
    for (let n = 0; n < 5000; n++) {
      let s = '';
      for (let k = next() % 8; k >= 0; k--) s += parts[next() % parts.length];
      assert.equal(hasFailures(s), atlantis.test(s), JSON.stringify(s));
      if (atlantis.test(s)) withFailures++;
    }
    assert.ok(withFailures > 500 && withFailures < 4500, `both answers drawn (${withFailures} of 5000 with failures)`);
    // A long run of digits from the PR: linear (the regex takes seconds on this).
    assert.ok(!hasFailures(`${'1'.repeat(200_000)} passed`));
    assert.ok(hasFailures(`${'1'.repeat(200_000)} failure`));
  });
});

describe('policies: in repos.yaml', () => {
  it('reads sets with Atlantis defaults', () => {
    const { sets, problems } = parsePolicySets(
      {
        conftest_version: 'v0.71.1',
        owners: { users: ['a'] },
        policy_sets: [
          { name: 's', path: 'policies/s', source: 'local' },
          { name: 't', path: '/cfg/t', approve_count: 3, sticky_policy_approvals: true },
        ],
      },
      '/cfg',
    );
    assert.deepEqual(problems, []);
    assert.equal(sets!.version, '0.71.1');
    assert.equal(sets!.policySets[0]!.path, '/cfg/policies/s');
    assert.equal(sets!.policySets[0]!.approveCount, 1);
    assert.equal(sets!.policySets[0]!.policyItemRegex, '(?s).+');
    assert.equal(sets!.policySets[1]!.approveCount, 3);
    assert.equal(sets!.policySets[1]!.stickyApprovals, true);
  });
  const bad: Array<[string, unknown, RegExp]> = [
    [
      'a path outside the config dir',
      { policy_sets: [{ name: 's', path: '../elsewhere' }] },
      /policies\.policy_sets\[0\]\.path: "\.\.\/elsewhere" is outside the server's config dir \/cfg/,
    ],
    ['an absolute path outside', { policy_sets: [{ name: 's', path: '/etc/policies' }] }, /is outside the server's config dir/],
    ['no sets', { owners: {} }, /policies\.policy_sets: cannot be empty/],
    ['no name', { policy_sets: [{ path: 'p' }] }, /policy_sets\[0\]\.name: is required/],
    ['no path', { policy_sets: [{ name: 's' }] }, /policy_sets\[0\]\.path: is required/],
    ['a github source', { policy_sets: [{ name: 's', path: 'p', source: 'github' }] }, /github policy sets are not supported/],
    ['another source', { policy_sets: [{ name: 's', path: 'p', source: 's3' }] }, /only 'local' and 'github' source types are supported/],
    ['an unknown key', { policy_sets: [{ name: 's', path: 'p', paht: 'x' }] }, /policy_sets\[0\]\.paht: unknown key/],
    ['a bad regex', { policy_item_regex: '(', policy_sets: [{ name: 's', path: 'p' }] }, /policies\.policy_item_regex: invalid regex/],
    [
      'a bad version',
      { conftest_version: 'latest', policy_sets: [{ name: 's', path: 'p' }] },
      /conftest_version: version "latest" could not be parsed/,
    ],
    [
      'two sets of one name',
      {
        policy_sets: [
          { name: 's', path: 'p' },
          { name: 's', path: 'q' },
        ],
      },
      /another policy set is named "s"/,
    ],
  ];
  for (const [what, raw, re] of bad)
    it(`refused: ${what}`, () => {
      const { sets, problems } = parsePolicySets(raw, '/cfg');
      assert.equal(sets, undefined);
      assert.match(problems.map((p) => `${p.where}: ${p.problem}`).join('\n'), re);
    });
});
