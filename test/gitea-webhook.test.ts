// The Gitea host's pure parts: the signature (X-Gitea-Signature), what each delivery means
// (src/server/vcs/gitea/webhook.ts, webhooks.ts), Atlantis's texts of a hidden comment and a
// failed merge, and the --gitea-* flags (settings.ts, host-config.ts). What a real Gitea sends
// is tested against a real Gitea (test/vcs-host-gitea.test.ts, the Gitea differential).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { UsageError } from '../src/config/flags.js';
import { approvedByGiteaReviews, giteaMergeStyle, supersededBody } from '../src/server/vcs/gitea/host.js';
import { parseGiteaWebhook, signGitea, verifyGiteaSignature } from '../src/server/vcs/gitea/webhook.js';
import { GITEA_BAD_SIGNATURE_TEXT, giteaEventLabel, giteaWebhooks } from '../src/server/vcs/gitea/webhooks.js';
import type { WebhookDelivery } from '../src/server/vcs/host.js';
import { configWithRequiredFlags } from './support/server-config.js';

const SECRET = 'gitea-hook-secret';

const repo = (fullName: string) => ({ full_name: fullName, clone_url: `http://gitea.test/${fullName}.git`, name: fullName.split('/')[1] });
const pullPayload = (o: { action: string; state?: string; merged?: boolean; draft?: boolean; head?: string | null }) => ({
  action: o.action,
  number: 7,
  pull_request: {
    number: 7,
    state: o.state ?? 'open',
    merged: o.merged ?? false,
    draft: o.draft ?? false,
    user: { login: 'dev' },
    head: { sha: 'a'.repeat(40), ref: 'feature', repo: o.head === null ? null : repo(o.head ?? 'acme/infra') },
    base: { sha: 'b'.repeat(40), ref: 'main', repo: repo('acme/infra') },
  },
  repository: repo('acme/infra'),
  sender: { login: 'dev' },
});
const commentPayload = (action = 'created') => ({
  action,
  issue: { number: 7, pull_request: { merged: false } },
  comment: { id: 42, body: 'atlantis plan -d dir1', user: { login: 'dev' } },
  repository: repo('acme/infra'),
  sender: { login: 'dev' },
  is_pull: true,
});

function delivery(type: string, payload: unknown, o: { secret?: string | null; event?: string } = {}): WebhookDelivery {
  const rawBody = Buffer.from(JSON.stringify(payload));
  const headers: Record<string, string | undefined> = {
    'x-gitea-event': o.event ?? (type === 'pull_request_comment' ? 'issue_comment' : 'pull_request'),
    'x-gitea-event-type': type,
    'x-gitea-delivery': '1b0c8a39-5f7e-4b54-9e02-0a3c0f6f3f11',
  };
  if (o.secret !== null) headers['x-gitea-signature'] = signGitea(o.secret ?? SECRET, rawBody);
  return { headers, rawBody };
}

describe('X-Gitea-Signature', () => {
  const body = Buffer.from('{"action":"created"}');
  it('accepts the right signature only', () => {
    const sig = signGitea(SECRET, body);
    assert.match(sig, /^[0-9a-f]{64}$/);
    assert.equal(verifyGiteaSignature(SECRET, body, sig), true);
    assert.equal(verifyGiteaSignature(SECRET, body, sig.toUpperCase()), true);
    assert.equal(verifyGiteaSignature('other', body, sig), false);
    assert.equal(verifyGiteaSignature(SECRET, Buffer.from('{"action":"edited"}'), sig), false);
    for (const bad of [undefined, '', `sha256=${sig}`, sig.slice(0, -2), `${sig}00`, 'z'.repeat(64)])
      assert.equal(verifyGiteaSignature(SECRET, body, bad), false, String(bad));
    assert.equal(verifyGiteaSignature('', body, signGitea('', body)), false, 'an empty secret verifies nothing');
  });

  it('property: never throws, accepts only the real signature', () => {
    // biome-ignore lint/nursery/noFloatingPromises: fc.assert of a synchronous property returns void
    fc.assert(
      fc.property(
        fc.string({ maxLength: 60 }),
        fc.uint8Array({ maxLength: 200 }),
        fc.option(fc.string({ maxLength: 80 })),
        (s, bytes, h) => {
          const b = Buffer.from(bytes);
          if (verifyGiteaSignature(s, b, h ?? undefined)) assert.equal(h?.trim().toLowerCase(), signGitea(s, b));
        },
      ),
      { numRuns: 500 },
    );
  });
});

describe('the events of a Gitea delivery', () => {
  const w = giteaWebhooks({ secret: SECRET });

  it('a wrong or missing signature is refused, before the body is read when there is none', () => {
    const right = delivery('pull_request_comment', commentPayload());
    assert.equal(w.refuseBeforeBody?.(right.headers), undefined);
    assert.equal(w.authenticate(right), undefined);
    const wrong = delivery('pull_request_comment', commentPayload(), { secret: 'not-the-secret' });
    assert.equal(w.refuseBeforeBody?.(wrong.headers), undefined, 'well formed: the body decides');
    assert.deepEqual(w.authenticate(wrong), { status: 401, body: GITEA_BAD_SIGNATURE_TEXT });
    const none = delivery('pull_request_comment', commentPayload(), { secret: null });
    assert.deepEqual(w.refuseBeforeBody?.(none.headers), { status: 401, body: GITEA_BAD_SIGNATURE_TEXT });
    assert.deepEqual(w.authenticate(none), { status: 401, body: GITEA_BAD_SIGNATURE_TEXT });
    const insecure = giteaWebhooks({ secret: undefined });
    assert.equal(insecure.refuseBeforeBody, undefined);
    assert.equal(insecure.authenticate(none), undefined);
  });

  it('a new comment on a pull request is a command; an edited or deleted one is not run again', () => {
    assert.deepEqual(w.parse(delivery('pull_request_comment', commentPayload())), {
      kind: 'comment',
      repo: 'acme/infra',
      cloneUrl: 'http://gitea.test/acme/infra.git',
      pull: 7,
      commentId: 42,
      body: 'atlantis plan -d dir1',
      author: 'dev',
    });
    for (const action of ['edited', 'deleted'])
      assert.deepEqual(w.parse(delivery('pull_request_comment', commentPayload(action))), {
        kind: 'answer',
        status: 200,
        body: `Ignoring comment event since action was not created (${action})`,
      });
  });

  it('pull request events: opened and reopened, synchronized and edited autoplan; a draft does not; closed, merged or not, is closed', () => {
    const table: Array<[string, Parameters<typeof pullPayload>[0], { action: string; autoplan: boolean }]> = [
      ['pull_request', { action: 'opened' }, { action: 'opened', autoplan: true }],
      ['pull_request', { action: 'reopened' }, { action: 'opened', autoplan: true }],
      ['pull_request_sync', { action: 'synchronized' }, { action: 'updated', autoplan: true }],
      ['pull_request', { action: 'edited' }, { action: 'updated', autoplan: true }],
      ['pull_request', { action: 'opened', draft: true }, { action: 'opened', autoplan: false }],
      ['pull_request', { action: 'closed', state: 'closed', merged: true }, { action: 'closed', autoplan: false }],
      ['pull_request', { action: 'closed', state: 'closed' }, { action: 'closed', autoplan: false }],
    ];
    for (const [type, p, want] of table) {
      const ev = w.parse(delivery(type, pullPayload(p)));
      assert.ok(ev.kind === 'pull', JSON.stringify(ev));
      assert.deepEqual({ action: ev.action, autoplan: ev.autoplan }, want, `${type} ${JSON.stringify(p)}`);
    }
    const opened = w.parse(delivery('pull_request', pullPayload({ action: 'opened', head: 'forker/infra' })));
    assert.ok(opened.kind === 'pull');
    assert.deepEqual(opened.pull, {
      repo: 'acme/infra',
      number: 7,
      state: 'open',
      author: 'dev',
      headSha: 'a'.repeat(40),
      headRef: 'feature',
      baseRef: 'main',
      headRepo: 'forker/infra',
      baseRepo: 'acme/infra',
      headCloneUrl: 'http://gitea.test/forker/infra.git',
      baseCloneUrl: 'http://gitea.test/acme/infra.git',
    });
    const deletedFork = w.parse(delivery('pull_request', pullPayload({ action: 'closed', state: 'closed', head: null })));
    assert.ok(deletedFork.kind === 'pull');
    assert.equal(deletedFork.pull.headRepo, null);
    assert.equal(deletedFork.pull.headCloneUrl, 'http://gitea.test/acme/infra.git');
  });

  it("other events are answered 200 in Atlantis's words; a body that cannot be read 400", () => {
    assert.deepEqual(w.parse(delivery('pull_request_review_approved', { action: 'reviewed' }, { event: 'pull_request_approved' })), {
      kind: 'answer',
      status: 200,
      body: 'Ignoring unsupported Gitea event type: pull_request_review_approved X-Gitea-Delivery=1b0c8a39-5f7e-4b54-9e02-0a3c0f6f3f11',
    });
    assert.equal(parseGiteaWebhook('issue_comment', Buffer.from('{}'), undefined).kind, 'ignored');
    const notJson = { headers: delivery('pull_request', {}).headers, rawBody: Buffer.from('{') };
    assert.equal((w.parse(notJson) as { status: number }).status, 400);
    const noRepo = w.parse(delivery('pull_request_comment', { ...commentPayload(), repository: { full_name: 'a/b/c', clone_url: 'x' } }));
    assert.deepEqual(noRepo, {
      kind: 'answer',
      status: 400,
      body: 'Failed to parse request body: repository.full_name must look like owner/name',
    });
    const noType = { headers: { 'x-gitea-event': 'pull_request' }, rawBody: Buffer.from('{}') };
    assert.equal((w.parse(noType) as { status: number }).status, 400);
  });

  it('names the event for the metrics from a bounded list', () => {
    assert.equal(giteaEventLabel('pull_request_comment'), 'pull_request_comment');
    assert.equal(giteaEventLabel(undefined), 'unknown');
    assert.equal(giteaEventLabel('made-up'), 'other');
  });
});

describe("Atlantis's Gitea texts and rules", () => {
  it('a superseded comment, a merge style, approvals', () => {
    assert.equal(
      supersededBody('Plan', 'Ran Plan for dir: `.`'),
      '<!--- +-Superseded Command-+ ---><details><summary>Superseded Atlantis Plan</summary>\nRan Plan for dir: `.`\n</details>\n',
    );
    assert.deepEqual(['', 'merge', 'rebase', 'squash', 'fast-forward-only'].map(giteaMergeStyle), [
      'merge',
      'merge',
      'rebase',
      'squash',
      'merge',
    ]);
    assert.equal(approvedByGiteaReviews([{ state: 'COMMENT', dismissed: false }]), false);
    assert.equal(approvedByGiteaReviews([{ state: 'APPROVED', dismissed: true }]), false);
    assert.equal(
      approvedByGiteaReviews([
        { state: 'APPROVED', dismissed: false },
        { state: 'REQUEST_CHANGES', dismissed: false },
      ]),
      true,
    );
  });
});

describe('the --gitea-* flags', () => {
  const config = configWithRequiredFlags('ato-gitea-flags-');
  // The required flags name GitHub; a Gitea server is given instead of them.
  const gitea = ['--gh-user', '', '--gh-token', '', '--gh-webhook-secret', ''];
  const env = {
    ATLANTIS_GITEA_USER: 'atlantis-bot',
    ATLANTIS_GITEA_TOKEN: 'gitea-token-value',
    ATLANTIS_GITEA_WEBHOOK_SECRET: 'hook-s3cret',
  };
  const usage = (argv: string[], e: NodeJS.ProcessEnv): string => {
    try {
      config([...gitea, ...argv], e);
    } catch (err) {
      assert.ok(err instanceof UsageError, String(err));
      return err.message;
    }
    return assert.fail('expected a UsageError');
  };

  it('from env, with their defaults', () => {
    const c = config(gitea, env);
    assert.ok(c.vcs.kind === 'gitea');
    const g = c.vcs.gitea;
    assert.deepEqual(
      { user: g.user, token: g.token(), secret: g.webhookSecret, url: g.baseUrl, pageSize: g.pageSize },
      { user: 'atlantis-bot', token: 'gitea-token-value', secret: 'hook-s3cret', url: 'https://gitea.com', pageSize: 30 },
    );
    const custom = config([...gitea, '--gitea-base-url', 'http://10.0.0.5:3000/git/', '--gitea-page-size', '50'], env);
    assert.ok(custom.vcs.kind === 'gitea');
    assert.equal(custom.vcs.gitea.baseUrl, 'http://10.0.0.5:3000/git');
    assert.equal(custom.vcs.gitea.pageSize, 50);
  });

  it('refused: half a credential, a URL that is not http(s), a page size under 1, no secret, GitHub too, a team allowlist', () => {
    assert.equal(usage([], { ATLANTIS_GITEA_USER: 'bot' }), '--gitea-user/--gitea-token must be set together');
    assert.equal(usage([], { ATLANTIS_GITEA_TOKEN: 't' }), '--gitea-user/--gitea-token must be set together');
    assert.equal(usage(['--gitea-base-url', 'ftp://gitea'], env), '--gitea-base-url must have http:// or https://, got "ftp://gitea"');
    assert.match(usage(['--gitea-base-url', 'https://u:p@gitea'], env), /without credentials/);
    assert.equal(usage(['--gitea-page-size', '0'], env), 'invalid value 0 for --gitea-page-size: must be at least 1');
    assert.match(usage([], { ...env, ATLANTIS_GITEA_WEBHOOK_SECRET: '' }), /^--gitea-webhook-secret is required/);
    assert.equal(config([...gitea, '--insecure-no-webhook-secret'], { ...env, ATLANTIS_GITEA_WEBHOOK_SECRET: '' }).vcs.kind, 'gitea');
    assert.match(usage(['--gh-user', 'bot', '--gh-token', 't'], env), /a server talks to one code host/);
    assert.match(usage(['--gh-team-allowlist', 'ops:plan'], env), /^--gh-team-allowlist is set, but Gitea teams are not read/);
  });

  it('Bitbucket and Azure DevOps stay refused, by name', () => {
    assert.match(
      usage([], { ...env, ATLANTIS_BITBUCKET_USER: 'x' }),
      /^--bitbucket-user \(ATLANTIS_BITBUCKET_USER\) is set, but this server does not support it/,
    );
    assert.match(
      usage([], { ...env, ATLANTIS_AZUREDEVOPS_TOKEN: 'x' }),
      /--azuredevops-token.*only GitHub, GitLab and Gitea are supported/,
    );
  });
});
