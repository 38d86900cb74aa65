// GitLab webhook authentication (X-Gitlab-Token against --gitlab-webhook-secret), through the
// project's server and the GitLab stand-in: the webhook-auth session of the GitLab
// differential (test/fixtures/atlantis-v0.47-gitlab/webhook-auth.json), step for step as a
// real Atlantis v0.47 answered it, and beyond the recording: a wrong or a missing token is
// refused and nothing runs (no API request, no clone, no command), while the right one runs.
// Loopback: 127.0.112.
import assert from 'node:assert/strict';
import { compareGitlabWithAtlantis } from './support/atlantis-gitlab-differential.js';
import { SESSIONS } from './support/atlantis-gitlab-sessions-more.js';
import type { CliProcess } from './support/cli.js';
import { ourGitlabServer } from './support/gitlab-our-server.js';

let servers: CliProcess[] = [];

compareGitlabWithAtlantis({
  title: 'GitLab webhook authentication',
  sessions: SESSIONS.filter((s) => s.name === 'webhook-auth'),
  start: ourGitlabServer('127.0.112', { seen: (s) => (servers = s.servers) }),
  net: '127.0.112',
  quietMs: 1500,
  checks: {
    'a wrong or missing X-Gitlab-Token: 400, and GitLab sees nothing (no API request, no clone, no note, no status)': (run) => {
      for (const name of ['wrong token', 'missing token']) {
        const step = run.steps.find((s) => s.name === name);
        assert.ok(step, name);
        assert.deepEqual(
          step.webhooks.map((w) => w.status),
          [400],
          name,
        );
        assert.deepEqual([step.requests, step.git, step.events], [[], [], []], name);
      }
      const right = run.steps.find((s) => s.name === 'right token');
      assert.ok(
        right?.events.some((e) => e.kind === 'comment'),
        'the right token runs the command',
      );
    },
    'the server logged no command for the refused deliveries, and never echoed the secret': () => {
      const log = servers.map((s) => s.output()).join('\n');
      assert.doesNotMatch(log, /gitlab-differential-secret/);
      // The only command run is the right token's `help` (the fork's plan is refused before it runs).
      assert.equal(log.match(/"msg":"Command (finished|failed)"/g)?.length ?? 0, 0, 'no command ran to its end');
    },
  },
});
