// --gitlab-group-allowlist through the project's server and the GitLab stand-in: the
// group-allowlist session of the GitLab differential (test/fixtures/atlantis-v0.47-gitlab/
// group-allowlist.json: acme/platform may plan and apply, acme/ghost, a group GitLab lacks, may
// plan), step for step as a real Atlantis v0.47 did it, and beyond the recording: a user in no
// listed group, or in the parent group only, is refused with Atlantis's note and nothing runs
// (no status, no clone); GitLab is asked about direct membership of each listed group, sorted.
// Loopback: 127.0.40.
import assert from 'node:assert/strict';
import { compareGitlabWithAtlantis } from './support/atlantis-gitlab-differential.js';
import { SESSIONS } from './support/atlantis-gitlab-sessions-more.js';
import { ourGitlabServer } from './support/gitlab-our-server.js';

compareGitlabWithAtlantis({
  title: 'the GitLab group allowlist',
  sessions: SESSIONS.filter((s) => s.name === 'group-allowlist'),
  start: ourGitlabServer('127.0.40'),
  net: '127.0.40',
  quietMs: 1500,
  checks: {
    'refused users get the note and nothing runs; members run': (run) => {
      for (const name of ['non-member plans', 'parent-group member plans', 'non-member unlocks']) {
        const step = run.steps.find((s) => s.name === name);
        assert.ok(step, name);
        const notes = step.events.filter((e) => e.kind === 'comment');
        assert.equal(notes.length, 1, name);
        assert.match(notes[0]?.kind === 'comment' ? notes[0].body : '', /does not have permissions to execute/, name);
        assert.deepEqual(
          step.events.filter((e) => e.kind === 'status'),
          [],
          `${name}: no status`,
        );
        assert.deepEqual(step.git, [], `${name}: no clone`);
        const groups = step.requests.filter((r) => r.path.includes('/groups/')).map((r) => r.path.replace(/^.*\/groups\//, ''));
        assert.deepEqual(
          groups.map((g) => g.split('/members/')[0]),
          ['acme%2Fghost', 'acme%2Fplatform'],
          `${name}: each listed group asked, sorted`,
        );
      }
      const member = run.steps.find((s) => s.name === 'member plans');
      assert.ok(member?.events.some((e) => e.kind === 'status' && e.context === 'atlantis/plan' && e.state === 'success'));
    },
  },
});
