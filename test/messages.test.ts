// PR comment texts: exact Atlantis wording and layout.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  commandErrorComment,
  pullClosedComment,
  SHUTTING_DOWN_COMMENT,
  UNLOCKED_COMMENT,
  lockedByMessage,
  planSummary,
  planHasChanges,
  cleanPlanOutput,
  renderResults,
  queuedDuringDrainComment,
  queuedCommandStartingComment,
  interruptedByShutdownComment,
  commandTitle,
} from '../src/server/workflow/messages.js';

const PLAN_OUT = `Terraform will perform the following actions:

  # terraform_data.x will be created
  + resource "terraform_data" "x" {
      + id = (known after apply)
    }

Plan: 1 to add, 0 to change, 0 to destroy.`;

test('exact fixed texts', () => {
  assert.equal(SHUTTING_DOWN_COMMENT, 'Atlantis server is shutting down, please try again later.');
  assert.equal(UNLOCKED_COMMENT, 'All Atlantis locks for this PR have been unlocked and plans discarded');
  assert.equal(
    lockedByMessage(12),
    'This project is currently locked by an unapplied plan from pull #12. To continue, delete the lock from #12 or apply that plan and merge the pull request.\n\nOnce the lock is released, comment `atlantis plan` here to re-plan.',
  );
  assert.match(lockedByMessage(3, 'infra'), /comment `infra plan` here to re-plan\.$/);
});

test('planSummary / planHasChanges / cleanPlanOutput', () => {
  assert.equal(planSummary(PLAN_OUT), 'Plan: 1 to add, 0 to change, 0 to destroy.');
  assert.equal(
    planSummary('x\nNo changes. Your infrastructure matches the configuration.\n'),
    'No changes. Your infrastructure matches the configuration.',
  );
  assert.equal(
    planSummary('Plan: 1 to import, 2 to add, 0 to change, 0 to destroy.'),
    'Plan: 1 to import, 2 to add, 0 to change, 0 to destroy.',
  );
  assert.equal(
    planSummary('Note: Objects have changed outside of Terraform\n...\nPlan: 0 to add, 1 to change, 0 to destroy.'),
    '\n**Note: Objects have changed outside of Terraform**\nPlan: 0 to add, 1 to change, 0 to destroy.',
  );
  assert.equal(planSummary('garbage'), '');
  assert.equal(planHasChanges(PLAN_OUT), true);
  assert.equal(planHasChanges('No changes. Your infrastructure matches the configuration.'), false);
  assert.equal(cleanPlanOutput('terraform_data.a: Refreshing state... [id=1]\n\n' + PLAN_OUT + '\n'), PLAN_OUT);
  assert.equal(cleanPlanOutput('only text'), 'only text');
});

test('single project plan: short output is not folded, Atlantis layout', () => {
  const s = renderResults({
    command: 'plan',
    results: [
      {
        dir: 'envs/prod',
        workspace: 'default',
        outcome: {
          type: 'success',
          output: PLAN_OUT,
          applyCmd: 'atlantis apply -d envs/prod',
          replanCmd: 'atlantis plan -d envs/prod',
          lockUrl: 'http://atlantis/lock?id=1',
        },
      },
    ],
  });
  assert.equal(
    s,
    'Ran Plan for dir: `envs/prod` workspace: `default`\n\n' +
      '```diff\n' +
      PLAN_OUT +
      '\n```\n\n' +
      '* :arrow_forward: To **apply** this plan, comment:\n  ```shell\n  atlantis apply -d envs/prod\n  ```\n' +
      '* :put_litter_in_its_place: To **delete** this plan and lock, click [here](http://atlantis/lock?id=1)\n' +
      '* :repeat: To **plan** this project again, comment:\n  ```shell\n  atlantis plan -d envs/prod\n  ```\n' +
      '\n\n---\n* :fast_forward: To **apply** all unapplied plans from this pull request, comment:\n    * `atlantis apply`\n' +
      '* :put_litter_in_its_place: To delete all plans and locks for the PR, comment:\n    * `atlantis unlock`\n',
  );
});

test('long plan output is folded with the summary line after it', () => {
  const long = Array.from({ length: 20 }, (_, i) => `line ${i}`).join('\n') + '\nPlan: 3 to add, 0 to change, 0 to destroy.';
  const s = renderResults({
    command: 'plan',
    executableName: 'infra',
    results: [
      { dir: '.', workspace: 'default', projectName: 'root', outcome: { type: 'success', output: long, applyCmd: 'infra apply -p root' } },
    ],
  });
  assert.ok(
    s.startsWith(
      'Ran Plan for project: `root` dir: `.` workspace: `default`\n\n<details><summary>Show Output</summary>\n\n```diff\nline 0\n',
    ),
  );
  assert.match(
    s,
    /\n```\n<\/details>\n\n\* :arrow_forward: To \*\*apply\*\* this plan, comment:\n {2}```shell\n {2}infra apply -p root\n {2}```\nPlan: 3 to add, 0 to change, 0 to destroy\.\n/,
  );
  assert.match(s, /\* `infra apply`/);
  assert.doesNotMatch(s, /delete\*\* this plan/);
});

test('plan failure (lock held) and error', () => {
  const f = renderResults({
    command: 'plan',
    results: [{ dir: 'a', workspace: 'default', outcome: { type: 'failure', reason: lockedByMessage(1) } }],
  });
  assert.equal(f, 'Ran Plan for dir: `a` workspace: `default`\n\n**Plan Failed**: ' + lockedByMessage(1) + '\n');
  const e = renderResults({
    command: 'plan',
    results: [{ dir: 'a', workspace: 'default', outcome: { type: 'error', error: 'exit status 1: Error: bad' } }],
  });
  assert.equal(e, 'Ran Plan for dir: `a` workspace: `default`\n\n**Plan Error**\n```\nexit status 1: Error: bad\n```\n');
  const longErr = renderResults({
    command: 'apply',
    results: [{ dir: 'a', workspace: 'default', outcome: { type: 'error', error: 'e\n'.repeat(20) } }],
  });
  assert.match(longErr, /\*\*Apply Error\*\*\n<details><summary>Show Output<\/summary>/);
});

test('multi-project plan with header, numbered sections and summary', () => {
  const s = renderResults({
    command: 'plan',
    results: [
      { dir: 'a', workspace: 'default', outcome: { type: 'success', output: PLAN_OUT, applyCmd: 'atlantis apply -d a' } },
      {
        dir: 'b',
        workspace: 'default',
        outcome: { type: 'success', output: 'No changes. Your infrastructure matches the configuration.' },
      },
      { dir: 'c', workspace: 'staging', outcome: { type: 'failure', reason: lockedByMessage(9) } },
    ],
  });
  assert.ok(
    s.startsWith(
      'Ran Plan for 3 projects:\n\n1. dir: `a` workspace: `default`\n1. dir: `b` workspace: `default`\n1. dir: `c` workspace: `staging`\n### 1. dir: `a` workspace: `default`\n```diff\n',
    ),
  );
  assert.match(s, /### 2\. dir: `b` workspace: `default`\n/);
  assert.match(
    s,
    /### 3\. dir: `c` workspace: `staging`\n\*\*Plan Failed\*\*: This project is currently locked by an unapplied plan from pull #9\./,
  );
  assert.match(s, /---\n### Plan Summary\n\n3 projects, 1 with changes, 1 with no changes, 1 failed\n/);
  assert.ok(
    s.endsWith(
      '* :put_litter_in_its_place: To **delete** all plans and locks from this pull request, comment:\n  ```shell\n  atlantis unlock\n  ```\n',
    ),
  );
  const noAll = renderResults({
    command: 'plan',
    disableApplyAll: true,
    results: [
      { dir: 'a', workspace: 'default', outcome: { type: 'success', output: 'x' } },
      { dir: 'b', workspace: 'default', outcome: { type: 'success', output: 'y' } },
    ],
  });
  assert.doesNotMatch(noAll, /apply\*\* all/);
});

test('apply results', () => {
  const one = renderResults({
    command: 'apply',
    results: [
      {
        dir: 'a',
        workspace: 'default',
        outcome: { type: 'success', output: 'Apply complete! Resources: 1 added, 0 changed, 0 destroyed.' },
      },
    ],
  });
  assert.equal(
    one,
    'Ran Apply for dir: `a` workspace: `default`\n\n```diff\nApply complete! Resources: 1 added, 0 changed, 0 destroyed.\n```\n',
  );
  const two = renderResults({
    command: 'apply',
    results: [
      { dir: 'a', workspace: 'default', outcome: { type: 'success', output: 'ok' } },
      { dir: 'b', workspace: 'default', outcome: { type: 'error', error: 'boom' } },
    ],
  });
  assert.ok(
    two.startsWith(
      'Ran Apply for 2 projects:\n\n1. dir: `a` workspace: `default`\n1. dir: `b` workspace: `default`\n\n### 1. dir: `a` workspace: `default`\n```diff\nok\n```\n\n---\n### 2.',
    ),
  );
  assert.doesNotMatch(two, /Plan Summary/);
});

test('version, verbose log, zero projects, titles', () => {
  const v = renderResults({
    command: 'version',
    verbose: true,
    log: 'log line\n',
    results: [{ dir: '.', workspace: 'default', outcome: { type: 'success', output: 'Terraform v1.11.0' } }],
  });
  assert.equal(
    v,
    'Ran Version for dir: `.` workspace: `default`\n\n```\nTerraform v1.11.0\n```\n\n<details><summary>Log</summary>\n  <p>\n\n```\nlog line\n```\n</p></details>\n',
  );
  assert.equal(renderResults({ command: 'plan', results: [] }), 'Ran Plan for 0 projects:\n\n');
  assert.equal(commandTitle('state', 'rm'), 'State rm');
});

test('command errors and drain texts', () => {
  // Atlantis's unwrappedErr template, trimmed: a command that failed before running its projects.
  assert.equal(
    commandErrorComment('plan', "no project with name 'nope' is defined in 'atlantis.yaml'"),
    "**Plan Error**\n```\nno project with name 'nope' is defined in 'atlantis.yaml'\n```",
  );
  assert.equal(commandErrorComment('apply', 'x'), '**Apply Error**\n```\nx\n```');
  assert.match(queuedDuringDrainComment('atlantis plan -d a'), /`atlantis plan -d a` has been queued/);
  assert.match(queuedCommandStartingComment('atlantis plan'), /running the queued command `atlantis plan`/);
  const i = interruptedByShutdownComment('apply', 'a', 'default');
  assert.match(i, /^\*\*Apply Interrupted\*\* for dir: `a` workspace: `default`/);
  assert.match(i, /SIGINT/);
  assert.match(i, /comment `atlantis plan` to run it again/);
});

test("the closed-PR comment groups a dir's workspaces, sorted, as Atlantis", () => {
  assert.equal(
    pullClosedComment([
      { dir: 'b', workspace: 'staging' },
      { dir: 'a', workspace: 'default' },
      { dir: 'b', workspace: 'default' },
    ]),
    'Locks and plans deleted for the projects and workspaces modified in this pull request:\n\n' +
      '- dir: `a` workspace: `default`\n- dir: `b` workspaces: `default`, `staging`',
  );
});
