// The server's GitLab settings from its flags and ATLANTIS_* env (vcs/gitlab/settings.ts,
// vcs/host-config.ts): GitLab chosen by its user or token, both needed, the webhook secret
// required, --gitlab-hostname as Atlantis reads it (https assumed, a port and a path kept),
// the groups of --gitlab-group-allowlist asked in Atlantis's order, one code host per server.
import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, it } from 'node:test';
import { UsageError, parseFlags } from '../src/config/flags.js';
import { SERVER_FLAGS, type ServerConfig, buildServerConfig } from '../src/server/config.js';
import { allowlistGroups, parseGitlabHostname } from '../src/server/vcs/gitlab/settings.js';

const dataDir = mkdtempSync(path.join(tmpdir(), 'ato-glconfig-'));
const GITLAB_ENV = {
  ATLANTIS_GITLAB_USER: 'atlantis-bot',
  ATLANTIS_GITLAB_TOKEN: 'glpat-abc',
  ATLANTIS_GITLAB_WEBHOOK_SECRET: 'gl-secret-1',
};

const config = (argv: string[], env: NodeJS.ProcessEnv = GITLAB_ENV): ServerConfig =>
  buildServerConfig(parseFlags(['--repo-allowlist', '*', '--data-dir', dataDir, ...argv], SERVER_FLAGS, env).values);

function refusal(argv: string[], env: NodeJS.ProcessEnv = GITLAB_ENV): string {
  try {
    config(argv, env);
  } catch (e) {
    assert.ok(e instanceof UsageError, String(e));
    return e.message;
  }
  return assert.fail('expected a refusal');
}

describe('GitLab settings from the flags', () => {
  it('ATLANTIS_GITLAB_* choose GitLab at gitlab.com, with the group allowlist as the team rules', () => {
    const c = config(['--gitlab-group-allowlist', 'acme/ops:apply,acme/dev:plan,*:unlock']);
    assert.equal(c.vcs.kind, 'gitlab');
    if (c.vcs.kind !== 'gitlab') return;
    const g = c.vcs.gitlab;
    assert.deepEqual(
      { user: g.user, token: g.token(), secret: g.webhookSecret, api: g.apiUrl, host: g.hostname, retry: g.statusRetryEnabled },
      {
        user: 'atlantis-bot',
        token: 'glpat-abc',
        secret: 'gl-secret-1',
        api: 'https://gitlab.com/api/v4',
        host: 'gitlab.com',
        retry: false,
      },
    );
    assert.deepEqual(g.groups, ['acme/dev', 'acme/ops']);
    assert.deepEqual(
      c.teamAllowlist.map((r) => [r.team, r.command]),
      [
        ['acme/ops', 'apply'],
        ['acme/dev', 'plan'],
        ['*', 'unlock'],
      ],
    );
  });

  it('--gitlab-hostname: https assumed, a port and a relative URL root kept; the allowlist names the host alone', () => {
    const rows: Array<[string, { webUrl: string; host: string; basePath: string; hostname: string }]> = [
      ['gitlab.acme.com', { webUrl: 'https://gitlab.acme.com', host: 'gitlab.acme.com', basePath: '', hostname: 'gitlab.acme.com' }],
      [
        'gitlab.acme.com:8443/gitlab',
        { webUrl: 'https://gitlab.acme.com:8443/gitlab', host: 'gitlab.acme.com:8443', basePath: '/gitlab', hostname: 'gitlab.acme.com' },
      ],
      ['http://10.0.0.5:8080/', { webUrl: 'http://10.0.0.5:8080', host: '10.0.0.5:8080', basePath: '', hostname: '10.0.0.5' }],
    ];
    for (const [raw, want] of rows) assert.deepEqual(parseGitlabHostname(raw), want, raw);
    const c = config(['--gitlab-hostname', 'gitlab.acme.com:8443/gitlab', '--gitlab-status-retry-enabled']);
    assert.ok(c.vcs.kind === 'gitlab');
    assert.equal(c.vcs.gitlab.apiUrl, 'https://gitlab.acme.com:8443/gitlab/api/v4');
    assert.equal(c.vcs.gitlab.statusRetryEnabled, true);
    assert.match(refusal(['--gitlab-hostname', 'https://u:p@gitlab.acme.com']), /--gitlab-hostname: a host and a path only/);
  });

  it("the groups GitLab is asked about: each once, sorted as Atlantis sorts them, never '*'", () => {
    assert.deepEqual(allowlistGroups('acme/platform:plan,acme/platform:apply,acme/ghost:plan,*:unlock'), ['acme/ghost', 'acme/platform']);
    assert.deepEqual(allowlistGroups(''), []);
  });

  it('refused: a user without a token, no webhook secret, GitHub beside GitLab, a group allowlist without GitLab', () => {
    assert.equal(refusal([], { ATLANTIS_GITLAB_USER: 'bot' }), '--gitlab-user and --gitlab-token must both be set');
    assert.match(
      refusal([], { ATLANTIS_GITLAB_USER: 'bot', ATLANTIS_GITLAB_TOKEN: 't' }),
      /^--gitlab-webhook-secret is required \(or pass --insecure-no-webhook-secret/,
    );
    assert.equal(config(['--insecure-no-webhook-secret'], { ATLANTIS_GITLAB_USER: 'bot', ATLANTIS_GITLAB_TOKEN: 't' }).vcs.kind, 'gitlab');
    assert.match(refusal(['--gh-user', 'bot']), /and --gh-user are both set: this server talks to one code host/);
    assert.match(refusal(['--gh-team-allowlist', 'ops:plan']), /--gitlab-group-allowlist/);
    assert.match(
      refusal(['--gitlab-group-allowlist', 'ops:plan', '--gh-user', 'b', '--gh-token', 't', '--gh-webhook-secret', 's'], {}),
      /^--gitlab-group-allowlist is set, but the code host is not GitLab/,
    );
    assert.match(refusal(['--gitlab-group-allowlist', 'ops']), /--gitlab-group-allowlist/);
  });

  it('--discard-approval-on-plan is honoured with GitLab', () => {
    assert.equal(config(['--discard-approval-on-plan']).discardApprovalOnPlan, true);
  });
});
