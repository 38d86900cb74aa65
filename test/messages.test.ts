// PR comment texts: exact Atlantis wording and layout.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  commandErrorComment,
  pullClosedComment,
  SHUTTING_DOWN_COMMENT,
  UNLOCKED_COMMENT,
  lockedByMessage,
  renderResults,
  queuedDuringDrainComment,
  queuedCommandStartingComment,
  interruptedReason,
  crashedJobComment,
} from '../src/server/workflow/pr/messages.js';

test('exact fixed texts', () => {
  assert.equal(SHUTTING_DOWN_COMMENT, 'Atlantis server is shutting down, please try again later.');
  assert.equal(UNLOCKED_COMMENT, 'All Atlantis locks for this PR have been unlocked and plans discarded');
  assert.equal(
    lockedByMessage(12),
    'This project is currently locked by an unapplied plan from pull #12. To continue, delete the lock from #12 or apply that plan and merge the pull request.\n\nOnce the lock is released, comment `atlantis plan` here to re-plan.',
  );
  assert.match(lockedByMessage(3, 'infra'), /comment `infra plan` here to re-plan\.$/);
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
      / The project stays locked by this pull request\. Check the state \(and `terraform force-unlock` if needed\), then comment `atlantis plan` to plan again\.$/,
    );
  }
  assert.match(drained, /its drain deadline passed, so terraform was interrupted \(SIGINT/);
  assert.match(crashed, /stopped unexpectedly while this ran \(it was not drained\)/);
  assert.equal(
    crashedJobComment({ command: 'plan', dir: 'b', workspace: 'w', project: 'p' }, 'infra'),
    // As Atlantis, an unsuccessful single plan's header leaves out the project name.
    'Ran Plan for dir: `b` workspace: `w`\n\n**Plan Interrupted**: ' + interruptedReason('plan', 'server-crash', 'infra'),
  );
  assert.doesNotMatch(interruptedReason('plan', 'drain-deadline'), /stays locked/);
  assert.match(interruptedReason('version', 'server-crash', 'x'), /comment `x version` to run it again\.$/);
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
