// A merge request from a fork on GitLab, through the project's server and the GitLab
// stand-in: the fork session of the GitLab differential (test/fixtures/atlantis-v0.47-gitlab/
// fork.json, --allow-fork-prs), step for step as a real Atlantis v0.47 did it, and beyond the
// recording: the plan and apply ran on the fork's code, cloned from the fork's project (whose
// host must be --gitlab-hostname's), while notes and statuses went to the target project.
// Without --allow-fork-prs the refusal is in gitlab-webhook-auth.test.ts. Loopback: 127.0.113.
import assert from 'node:assert/strict';
import { compareGitlabWithAtlantis } from './support/atlantis-gitlab-differential.js';
import { SESSIONS } from './support/atlantis-gitlab-sessions-more.js';
import { ourGitlabServer } from './support/gitlab-our-server.js';

compareGitlabWithAtlantis({
  title: 'a fork merge request on GitLab',
  sessions: SESSIONS.filter((s) => s.name === 'fork'),
  start: ourGitlabServer('127.0.113'),
  net: '127.0.113',
  quietMs: 1500,
  checks: {
    "the fork's code was cloned from the fork, and every note and status went to the target project": (run) => {
      const git = run.steps.flatMap((s) => s.git);
      const fetched = git.filter((g) => g.includes('git-upload-pack'));
      assert.ok(fetched.length > 0, `a clone or fetch: ${git.join('; ')}`);
      const forks = fetched.filter((g) => !g.includes('/acme/infra.git/'));
      assert.ok(forks.length > 0, `the fork's repository was fetched: ${fetched.join('; ')}`);
      const writes = run.steps.flatMap((s) => s.requests).filter((r) => r.method !== 'GET');
      assert.ok(writes.length > 0);
      for (const w of writes) assert.match(w.path, /\/projects\/acme%2Finfra\//, `${w.method} ${w.path}`);
      const applied = run.steps.find((s) => s.name === 'fork apply');
      assert.ok(applied?.events.some((e) => e.kind === 'status' && e.context === 'atlantis/apply' && e.state === 'success'));
    },
  },
});
