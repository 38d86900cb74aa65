// PR comment texts: exact Atlantis wording and layout.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  SHUTTING_DOWN_COMMENT,
  UNLOCKED_COMMENT,
  lockedByMessage,
  planSummary,
  planHasChanges,
  cleanPlanOutput,
  renderResults,
  statusDescription,
  statusContext,
  queuedDuringDrainComment,
  queuedCommandStartingComment,
  interruptedReason,
  crashedJobComment,
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

test('statuses and drain texts', () => {
  assert.equal(statusDescription('plan', 'pending'), 'Plan in progress...');
  assert.equal(statusDescription('apply', 'success'), 'Apply succeeded.');
  assert.equal(statusDescription('plan', 'failure'), 'Plan failed.');
  assert.equal(statusDescription('plan', 'success', { succeeded: 2, total: 2 }), '2/2 projects planned successfully.');
  assert.equal(statusDescription('apply', 'failure', { succeeded: 1, total: 3 }), '1/3 projects applied successfully.');
  assert.equal(statusContext('plan'), 'atlantis/plan');
  assert.equal(statusContext('apply', { dir: 'a', workspace: 'default' }), 'atlantis/apply: a/default');
  assert.equal(statusContext('plan', { dir: 'a', workspace: 'default', name: 'proj' }), 'atlantis/plan: proj');
  assert.match(queuedDuringDrainComment('atlantis plan -d a'), /`atlantis plan -d a` has been queued/);
  assert.match(queuedCommandStartingComment('atlantis plan'), /running the queued command `atlantis plan`/);
});

test('an interrupted run is worded one way, whether the drain deadline passed or the server crashed', () => {
  const drained = renderResults({
    command: 'apply',
    results: [{ dir: 'a', workspace: 'default', outcome: { type: 'interrupted', cause: 'drain-deadline' } }],
  });
  const crashed = crashedJobComment({ command: 'apply', dir: 'a', workspace: 'default' });
  // Same layout and headline on both paths; only the cause sentence differs.
  for (const body of [drained, crashed]) {
    assert.ok(body.startsWith('Ran Apply for dir: `a` workspace: `default`\n\n**Apply Interrupted**: the Atlantis server '), body);
    assert.match(
      body,
      / The project stays locked by this pull request\. Check the state \(and `terraform force-unlock` if needed\), then comment `atlantis plan` to plan again\.\n$/,
    );
  }
  assert.match(drained, /its drain deadline passed, so terraform was interrupted \(SIGINT/);
  assert.match(crashed, /stopped unexpectedly while this ran \(it was not drained\)/);
  assert.equal(
    crashedJobComment({ command: 'plan', dir: 'b', workspace: 'w', project: 'p' }, 'infra'),
    'Ran Plan for project: `p` dir: `b` workspace: `w`\n\n**Plan Interrupted**: ' +
      interruptedReason('plan', 'server-crash', 'infra') +
      '\n',
  );
  assert.doesNotMatch(interruptedReason('plan', 'drain-deadline'), /stays locked/);
  assert.match(interruptedReason('version', 'server-crash', 'x'), /comment `x version` to run it again\.$/);
});
