// Two replicas of the project's server sharing one real redis-server, GitLab's webhooks spread
// round-robin over them: the scenario session of the GitLab differential
// (test/fixtures/atlantis-v0.47-gitlab/scenario.json) must give GitLab, step for step, what one
// real Atlantis v0.47 gave it (the same deliberate differences as
// atlantis-gitlab-differential.test.ts), each merge request's commands running on its owner
// wherever the webhook landed (the X-Gitlab-Token is checked again by the owner: the forward
// carries GitLab's headers under the shared key's proof). Loopback: 127.0.42.
import assert from 'node:assert/strict';
import { compareGitlabWithAtlantis } from './support/atlantis-gitlab-differential.js';
import { SESSIONS } from './support/atlantis-gitlab-sessions-more.js';
import type { CliProcess } from './support/cli.js';
import { ourGitlabServer } from './support/gitlab-our-server.js';

let servers: CliProcess[] = [];

compareGitlabWithAtlantis({
  title: 'two replicas on one Redis, GitLab webhooks round-robin',
  sessions: SESSIONS.filter((s) => s.name === 'scenario'),
  start: ourGitlabServer('127.0.42', { replicas: 2, seen: (s) => (servers = s.servers) }),
  net: '127.0.42',
  quietMs: 1500,
  checks: {
    'the webhooks were spread: both replicas ran commands, and webhooks reached merge requests owners through the other': () => {
      const ran = servers.filter((s) => /"msg":"Command (finished|failed)"/.test(s.output())).length;
      const handed = servers.reduce(
        (n, s) => n + (s.output().match(/"msg":"Webhook handed to the replica that owns the pull request"/g)?.length ?? 0),
        0,
      );
      assert.equal(ran, 2, `commands ran on ${ran} replica(s)`);
      assert.ok(handed > 0, 'no webhook was handed to its owner');
    },
  },
});
