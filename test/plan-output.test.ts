// Plan output as Atlantis shows it (diff markers at column 0, refresh preamble dropped), its
// summary line and change counts, --enable-diff-markdown-format, and the lock link. Cases
// from Atlantis v0.47's own tests (plan step runner, PlanSuccess model, router), written here
// as tables. test/fixtures/atlantis-v0.47/diff-markdown-format.json: the inputs of Atlantis's
// TestDiffMarkdownFormattedTerraformOutput with what PlanSuccess.DiffMarkdownFormattedTerraformOutput
// returned for them (recorded as described in test/comment-layout.test.ts; equal to that
// test's expectations).
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { lockId, lockIdFromQuery, lockUrl, parseLockId, queryEscape } from '../src/server/locks/lock-id.js';
import {
  diffMarkdownFormat,
  formatPlanOutput,
  planDiffSummary,
  planHasNoChanges,
  planSummary,
  stripRefreshing,
} from '../src/server/workflow/pr/plan-output.js';

test('diff markers indented by two spaces move to column 0; deeper ones stay', () => {
  const raw = `
Terraform used the selected providers to generate the following execution
plan. Resource actions are indicated with the following symbols:
  + create
  ~ update in-place
  - destroy
-/+ destroy and then create replacement

Terraform will perform the following actions:

  # terraform_data.a will be created
  + resource "terraform_data" "a" {
      + id = (known after apply)
    }

  # terraform_data.b will be updated in-place
  ~ resource "terraform_data" "b" {
      ~ input = "x" -> "y"
    }

  - resource "terraform_data" "c" {}
`;
  const want = `
Terraform used the selected providers to generate the following execution
plan. Resource actions are indicated with the following symbols:
+ create
~ update in-place
- destroy
-/+ destroy and then create replacement

Terraform will perform the following actions:

  # terraform_data.a will be created
+ resource "terraform_data" "a" {
      + id = (known after apply)
    }

  # terraform_data.b will be updated in-place
~ resource "terraform_data" "b" {
      ~ input = "x" -> "y"
    }

- resource "terraform_data" "c" {}
`;
  assert.equal(formatPlanOutput(raw), want);
  assert.equal(formatPlanOutput('a\r\n  + b\r\n'), 'a\n+ b\n');
});

test('the refresh preamble ends at the last "Refreshing state..." line', () => {
  const out = `Terraform v0.14.0
Refreshing Terraform state in-memory prior to plan...
null_resource.hi: Refreshing state... (ID: 217661332516885645)
null_resource.hi[1]: Refreshing state... (ID: 6064510335076839362)

An execution plan has been generated and is shown below.
Resource actions are indicated with the following symbols:
  - destroy

Plan: 0 to add, 0 to change, 1 to destroy.`;
  const stripped = `
An execution plan has been generated and is shown below.
Resource actions are indicated with the following symbols:
  - destroy

Plan: 0 to add, 0 to change, 1 to destroy.`;
  assert.equal(stripRefreshing(out), stripped);
  assert.equal(formatPlanOutput(out), stripped.replace('  - destroy', '- destroy'));
  // As Atlantis: a refresh line that is the first line is not a preamble.
  assert.equal(stripRefreshing('x: Refreshing state...\nrest'), 'x: Refreshing state...\nrest');
  assert.equal(stripRefreshing('no refresh\nat all'), 'no refresh\nat all');
});

const SUMMARIES: Array<[string, string, string]> = [
  // [output, Summary(), DiffSummary()]
  [
    'Note: Objects have changed outside of Terraform\ndummy\nPlan: 0 to add, 1 to change, 2 to destroy.',
    '\n**Note: Objects have changed outside of Terraform**\nPlan: 0 to add, 1 to change, 2 to destroy.',
    'Plan: 0 to add, 1 to change, 2 to destroy.',
  ],
  ['dummy\nPlan: 100 to add, 111 to change, 222 to destroy.', 'Plan: 100 to add, 111 to change, 222 to destroy.', ''],
  ['dummy\nPlan: 42 to import, 53 to add, 64 to change, 75 to destroy.', 'Plan: 42 to import, 53 to add, 64 to change, 75 to destroy.', ''],
  [
    'Note: Objects have changed outside of Terraform\ndummy\nNo changes. Infrastructure is up-to-date.',
    '\n**Note: Objects have changed outside of Terraform**\nNo changes. Infrastructure is up-to-date.',
    'No changes. Infrastructure is up-to-date.',
  ],
  ['dummy\nNo changes. Your infrastructure matches the configuration.', 'No changes. Your infrastructure matches the configuration.', ''],
  [
    'unit1\nPlan: 5 to add, 0 to change, 0 to destroy.\nunit2\nPlan: 3 to add, 2 to change, 1 to destroy.',
    'Plan: 8 to add, 2 to change, 1 to destroy.',
    '',
  ],
  [
    'unit1\nNo changes. Infrastructure is up-to-date.\nunit2\nNo changes. Your infrastructure matches the configuration.',
    'No changes. Infrastructure is up-to-date.',
    '',
  ],
  [
    'unit1\nPlan: 1 to import, 2 to add, 3 to change, 4 to destroy.\nunit2\nPlan: 5 to import, 6 to add, 7 to change, 8 to destroy.',
    'Plan: 6 to import, 8 to add, 10 to change, 12 to destroy.',
    '',
  ],
  ['dummy\nPlan: 0 to add, 0 to change, 0 to destroy, 2 to forget.', 'Plan: 0 to add, 0 to change, 0 to destroy, 2 to forget.', ''],
  [
    'dummy\nPlan: 1 to import, 2 to add, 3 to change, 4 to destroy, 5 to forget.',
    'Plan: 1 to import, 2 to add, 3 to change, 4 to destroy, 5 to forget.',
    '',
  ],
  [
    'unit1\nPlan: 5 to add, 0 to change, 0 to destroy.\nunit2\nNo changes. Infrastructure is up-to-date.',
    'Plan: 5 to add, 0 to change, 0 to destroy.',
    '',
  ],
  ['Changes to Outputs:\n  + x = 1', '', ''],
];

test('summary and diff summary of a plan', () => {
  for (const [out, summary, diff] of SUMMARIES) {
    assert.equal(planSummary(out), summary, out);
    assert.equal(planDiffSummary(out), diff || summary.replace(/^\n\*\*.*\*\*\n/, ''), out);
  }
});

test('a plan has no changes only without a Plan line and with the No changes sentence', () => {
  const table: Array<[string, boolean]> = [
    ['dummy\nNo changes. Infrastructure is up-to-date.', true],
    ['dummy\nPlan: 1 to add, 0 to change, 0 to destroy.', false],
    ['unit1\nNo changes. Infrastructure is up-to-date.\nunit2\nNo changes. Your infrastructure matches the configuration.', true],
    ['unit1\nNo changes. Infrastructure is up-to-date.\nunit2\nPlan: 4 to add, 0 to change, 0 to destroy.', false],
    ['Changes to Outputs:\n  + x = 1', false],
  ];
  for (const [out, want] of table) assert.equal(planHasNoChanges(out), want, out);
});

test('lock id and lock link as Atlantis writes them', () => {
  assert.equal(lockId('lkysow/atlantis-example', '.', 'default'), 'lkysow/atlantis-example/./default/');
  assert.equal(lockId('acme/infra', 'envs/prod/', 'staging', 'prod'), 'acme/infra/envs/prod/staging/prod');
  assert.equal(lockId('acme/infra', '', 'default'), 'acme/infra/./default/');
  // Atlantis's router test, with the v0.47 key (project name part empty).
  const id = 'lkysow/atlantis-example/./default';
  for (const base of ['http://localhost:4141', 'http://localhost:4141/']) {
    assert.equal(lockUrl(base, id), 'http://localhost:4141/lock?id=lkysow%252Fatlantis-example%252F.%252Fdefault');
  }
  assert.equal(
    lockUrl('https://example.com/path/1/', id),
    'https://example.com/path/1/lock?id=lkysow%252Fatlantis-example%252F.%252Fdefault',
  );
  assert.equal(queryEscape("a b!*'()~_-.%+"), 'a+b%21%2A%27%28%29~_-.%25%2B');
  // What a lock page gets after the URL parser decoded the query value once.
  const link = new URL(lockUrl('http://h', 'o/r/d ir/w/p'));
  assert.equal(lockIdFromQuery(link.searchParams.get('id') ?? ''), 'o/r/d ir/w/p');
  // And back into its parts, for a lock page.
  assert.deepEqual(parseLockId('acme/infra/./default/'), { repo: 'acme/infra', dir: '.', workspace: 'default' });
  assert.deepEqual(parseLockId('acme/infra/envs/prod/staging/prod'), {
    repo: 'acme/infra',
    dir: 'envs/prod',
    workspace: 'staging',
    projectName: 'prod',
  });
  for (const bad of ['acme/infra/default/', 'acme/infra//default/x', '/infra/./default/', 'acme/infra/./', 'x']) {
    assert.equal(parseLockId(bad), undefined, bad);
  }
});

test('--enable-diff-markdown-format reformats as Atlantis (its own test cases)', () => {
  const cases = JSON.parse(readFileSync(new URL('./fixtures/atlantis-v0.47/diff-markdown-format.json', import.meta.url), 'utf8')) as Array<{
    name: string;
    input: string;
    expected: string;
  }>;
  assert.equal(cases.length, 14);
  for (const c of cases) assert.equal(diffMarkdownFormat(c.input), c.expected, c.name);
});
