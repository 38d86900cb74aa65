// GitHub App authentication (src/server/vcs/github/app.ts): the JWT (checked with the App's
// public key, as GitHub does), the refresh rule, the --gh-app-* flags with Atlantis's
// validation, the key kept out of every text, and installation tokens against the stand-in:
// fetched, shared, replaced before they expire, a refused token replaced once.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { parseFlags, UsageError } from '../src/config/flags.js';
import { SERVER_FLAGS, buildServerConfig } from '../src/server/config.js';
import { Redactor } from '../src/server/secrets/redact.js';
import { serverSecretValues } from '../src/server/secrets/server-secrets.js';
import {
  GitHubAppApi,
  GitHubAppTokens,
  type InstallationToken,
  appJwt,
  appKeySecretValues,
  parseAppPrivateKey,
  tokenNeedsRefresh,
} from '../src/server/vcs/github/app.js';
import { GitHubApiError, GitHubClient } from '../src/server/vcs/github/client.js';
import { parseRepoAllowlist } from '../src/server/vcs/repo-allowlist.js';
import { type DecisionOptions, decideWebhook } from '../src/server/workflow/intake/webhook-decision.js';
import { githubWebhooks } from '../src/server/vcs/github/webhooks.js';
import { GitHubStandin, githubDelivery, issueCommentPayload } from './support/github-standin.js';
import { JWT_EXPIRED, JWT_TOO_LONG, JWT_UNDECODABLE, StandinApp } from './support/github-standin-app.js';
import { githubOf } from './support/server-config.js';

const { privateKeyPem, publicKey } = StandinApp.keyPair();
const APP_ID = 4242;

function usageError(fn: () => unknown): string {
  try {
    fn();
  } catch (e) {
    assert.ok(e instanceof UsageError, `expected UsageError, got ${String(e)}`);
    assert.ok(!e.message.includes('\n'), 'one line');
    return e.message;
  }
  assert.fail('expected a UsageError');
}

describe('the App JWT', () => {
  const key = parseAppPrivateKey(privateKeyPem);
  const now = Date.parse('2026-06-01T12:00:00Z');
  const [h, p, sig] = appJwt(APP_ID, key, now).split('.') as [string, string, string];

  it('is RS256, signed by the App key, issued by the App id', () => {
    assert.deepEqual(JSON.parse(Buffer.from(h, 'base64url').toString()), { alg: 'RS256', typ: 'JWT' });
    assert.ok(crypto.verify('RSA-SHA256', Buffer.from(`${h}.${p}`), publicKey, Buffer.from(sig, 'base64url')));
    const other = crypto.generateKeyPairSync('rsa', { modulusLength: 2048 }).publicKey;
    assert.ok(!crypto.verify('RSA-SHA256', Buffer.from(`${h}.${p}`), other, Buffer.from(sig, 'base64url')));
  });

  it('is backdated a minute and valid for at most 10 minutes, as GitHub requires', () => {
    const claims = JSON.parse(Buffer.from(p, 'base64url').toString()) as { iat: number; exp: number; iss: string };
    assert.equal(claims.iss, String(APP_ID));
    assert.equal(claims.iat, now / 1000 - 60);
    assert.equal(claims.exp, now / 1000 + 540);
    assert.ok(claims.exp - claims.iat <= 600);
  });

  it("is accepted by the stand-in, which refuses forged, expired and too long ones with GitHub's messages", () => {
    const app = new StandinApp({ appId: APP_ID, slug: 'atl', publicKey, installations: [] });
    assert.equal(app.checkJwt(`Bearer ${appJwt(APP_ID, key, Date.now())}`), undefined);
    const otherKey = parseAppPrivateKey(StandinApp.keyPair().privateKeyPem);
    assert.equal(app.checkJwt(`Bearer ${appJwt(APP_ID, otherKey, Date.now())}`), JWT_UNDECODABLE);
    assert.equal(app.checkJwt(`Bearer ${appJwt(APP_ID + 1, key, Date.now())}`), JWT_UNDECODABLE);
    assert.equal(app.checkJwt(`Bearer ${appJwt(APP_ID, key, Date.now() - 600_000)}`), JWT_EXPIRED);
    assert.equal(app.checkJwt(`Bearer ${appJwt(APP_ID, key, Date.now() + 120_000)}`), JWT_TOO_LONG);
    assert.equal(app.checkJwt('Bearer not-a-jwt'), JWT_UNDECODABLE);
    assert.equal(app.checkJwt(undefined), JWT_UNDECODABLE);
  });
});

describe('the App key', () => {
  it('must be an RSA private key; the error never shows it', () => {
    assert.throws(() => parseAppPrivateKey('garbage'), /not a private key in PEM form/);
    const ec = crypto.generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
    assert.throws(() => parseAppPrivateKey(ec), /not an RSA key \(got ec\)/);
    const pkcs8 = crypto.createPrivateKey(privateKeyPem).export({ type: 'pkcs8', format: 'pem' }).toString();
    assert.equal(parseAppPrivateKey(pkcs8).asymmetricKeyType, 'rsa');
  });

  it('is scrubbed from every text the server writes, whole or unwrapped, cheaply', () => {
    const r = new Redactor([() => appKeySecretValues(privateKeyPem)]);
    const body = privateKeyPem
      .split('\n')
      .filter((l) => l !== '' && !l.startsWith('-----'))
      .join('');
    let t = performance.now();
    assert.equal(r.redact(`leak: ${privateKeyPem.trim()} end`), 'leak: [REDACTED] end');
    assert.ok(performance.now() - t < 500, 'building the scrubber for the key takes well under a second');
    assert.equal(r.redact(`x ${body} y`), 'x [REDACTED] y');
    assert.equal(r.redact(JSON.stringify({ k: privateKeyPem.trim() })), '{"k":"[REDACTED]"}');
    const line = 'an ordinary log line of a server '.repeat(120);
    t = performance.now();
    for (let i = 0; i < 20; i++) r.redact(line);
    assert.ok((performance.now() - t) / 20 < 5, 'a 4 kB text is scrubbed in well under 5 ms');
  });
});

describe('the redactor with many rotated tokens', () => {
  it('never lets remembered tokens push out what its sources give (the webhook secret)', () => {
    const r = new Redactor([() => ['webhook-secret-value']], 60_000);
    assert.equal(r.redact('x webhook-secret-value'), 'x [REDACTED]');
    // A GitHub App's tokens, one an hour: more than the redactor keeps.
    for (let i = 0; i < 100; i++) r.remember(`ghs_token${String(i).padStart(4, '0')}abcdefgh`);
    assert.equal(r.redact('x webhook-secret-value'), 'x [REDACTED]');
    assert.equal(r.redact('ghs_token0099abcdefgh'), '[REDACTED]');
    assert.equal(r.redact('ghs_token0000abcdefgh'), 'ghs_token0000abcdefgh', 'the oldest token went first');
  });
});

describe('refreshing installation tokens (pure)', () => {
  const t0 = 1_000_000;
  const hour: InstallationToken = { token: 't', fetchedAtMs: t0, expiresAtMs: t0 + 3600_000 };
  const short: InstallationToken = { token: 't', fetchedAtMs: t0, expiresAtMs: t0 + 4000 };
  const rows: Array<[string, InstallationToken | undefined, number, boolean]> = [
    ['no token yet', undefined, t0, true],
    ['an hour token, fresh', hour, t0, false],
    ['an hour token, 61 s left', hour, t0 + 3600_000 - 61_000, false],
    ['an hour token, 60 s left (Atlantis refreshes here)', hour, t0 + 3600_000 - 60_000, true],
    ['an hour token, expired', hour, t0 + 3600_000 + 1, true],
    ['a 4 s token, 1.1 s left', short, t0 + 2900, false],
    ['a 4 s token, 1 s left (a quarter of its life)', short, t0 + 3000, true],
    ['a token that came already expired', { token: 't', fetchedAtMs: t0, expiresAtMs: t0 - 5 }, t0, true],
  ];
  for (const [name, tok, now, want] of rows) it(name, () => assert.equal(tokenNeedsRefresh(tok, now), want));
});

describe("the App's own comments and its name in comments (decideWebhook)", () => {
  // As Atlantis with an App: its GitHub user is empty, so `@<name>` is no executable name;
  // the bot's comments (author `<slug>[bot]`) are the server's own.
  const options: DecisionOptions = {
    webhooks: githubWebhooks({ secret: undefined }),
    allowlist: parseRepoAllowlist('github.com/acme/*'),
    hostname: 'github.com',
    user: '',
    botLogin: 'atl-bot[bot]',
    executableName: 'atlantis',
    allowCommands: ['plan', 'apply', 'unlock', 'version'],
    blockedExtraArgs: [],
    disableAutoplan: false,
    allowForkPrs: false,
    silenceForkPrErrors: false,
  };
  const decide = (body: string, user: string, o: Partial<DecisionOptions> = {}) => {
    const d = decideWebhook(
      githubDelivery({
        event: 'issue_comment',
        signature: undefined,
        deliveryId: crypto.randomUUID(),
        rawBody: Buffer.from(JSON.stringify(issueCommentPayload({ repo: 'acme/infra', number: 3, body, user }))),
      }),
      { ...options, ...o },
    );
    return d.kind === 'respond' ? d.body : d.kind;
  };
  const rows: Array<[string, string, string, Partial<DecisionOptions>, string]> = [
    ["the bot's own comment", 'atlantis plan', 'atl-bot[bot]', {}, 'Ignoring comment from our own user'],
    ["the bot's own comment, login case differs", 'atlantis plan', 'ATL-bot[bot]', {}, 'Ignoring comment from our own user'],
    ['a user', 'atlantis plan', 'dev', {}, 'work'],
    ['a user addressing the App by slug (not an executable name in Atlantis)', '@atl-bot plan', 'dev', {}, 'Ignoring non-command comment'],
    ['a user addressing @<slug>[bot]', '@atl-bot[bot] plan', 'dev', {}, 'Ignoring non-command comment'],
    ['a user named like nobody, before the slug is known', 'atlantis plan', 'dev', { botLogin: undefined }, 'work'],
    [
      'with a token user, its comments are still ours',
      'atlantis plan',
      'atlantis-bot',
      { user: 'atlantis-bot', botLogin: undefined },
      'Ignoring comment from our own user',
    ],
  ];
  for (const [name, body, user, o, want] of rows) it(name, () => assert.equal(decide(body, user, o), want));
});

describe('--gh-app-* flags', () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'ato-ghapp-'));
  const keyFile = path.join(dir, 'app.pem');
  writeFileSync(keyFile, privateKeyPem);
  const base = ['--repo-allowlist', 'github.com/acme/*', '--gh-webhook-secret', 's3cret', '--data-dir', dir];
  const config = (argv: string[], env: NodeJS.ProcessEnv = {}) =>
    buildServerConfig(parseFlags([...base, ...argv], SERVER_FLAGS, env).values);

  it('--gh-app-id with --gh-app-key-file replaces --gh-user/--gh-token', () => {
    const c = config(['--gh-app-id', '4242', '--gh-app-key-file', keyFile, '--gh-app-slug', 'atl-bot']);
    assert.deepEqual(githubOf(c).app, { appId: 4242, privateKeyPem, slug: 'atl-bot' });
    assert.equal(githubOf(c).user, '', "Atlantis's GitHub user is empty with an App: `@user` is no executable name");
  });

  it('the same from ATLANTIS_* env, the key itself as ATLANTIS_GH_APP_KEY', () => {
    const c = config([], { ATLANTIS_GH_APP_ID: '7', ATLANTIS_GH_APP_KEY: privateKeyPem, ATLANTIS_GH_APP_INSTALLATION_ID: '99' });
    assert.deepEqual(githubOf(c).app, { appId: 7, privateKeyPem, installationId: 99 });
  });

  it('the key is one of the server secrets (scrubbed, kept from children)', () => {
    const c = config(['--gh-app-id', '1', '--gh-app-key', privateKeyPem]);
    assert.ok(serverSecretValues(c).includes(privateKeyPem.trim()));
  });

  it('with --gh-user and a token too, the token is used and a warning says so (Atlantis uses the user silently)', () => {
    const c = config(['--gh-user', 'bot', '--gh-token', 'tok', '--gh-app-id', '1', '--gh-app-key-file', keyFile]);
    assert.equal(githubOf(c).app, undefined);
    assert.equal(githubOf(c).token(), 'tok');
    assert.ok(c.flagWarnings.some((w) => /--gh-app-id .* the token is used/.test(w)));
  });

  const need =
    /^--gh-user\/--gh-token or --gh-user\/--gh-token-file or --gh-app-id\/--gh-app-key-file or --gh-app-id\/--gh-app-key must be set$/;
  const bad: Array<[string, string[], RegExp]> = [
    ['no credentials at all', [], need],
    ['an App id without a key', ['--gh-app-id', '1'], need],
    ['an App id with both key and key file', ['--gh-app-id', '1', '--gh-app-key', privateKeyPem, '--gh-app-key-file', keyFile], need],
    ['a key without an App id', ['--gh-app-key-file', keyFile], need],
    ['a user without a token', ['--gh-user', 'bot', '--gh-app-id', '1', '--gh-app-key-file', keyFile], need],
    [
      'an unreadable key file',
      ['--gh-app-id', '1', '--gh-app-key-file', path.join(dir, 'nope.pem')],
      /--gh-app-key-file .*nope\.pem cannot be read: ENOENT/,
    ],
    [
      'a key that is no key',
      ['--gh-app-id', '1', '--gh-app-key', 'hunter2-not-a-key'],
      /^invalid --gh-app-key: not a private key in PEM form$/,
    ],
    ['a non-integer App id', ['--gh-app-id', 'abc', '--gh-app-key-file', keyFile], /--gh-app-id/],
    [
      'a negative installation id',
      ['--gh-app-id', '1', '--gh-app-key-file', keyFile, '--gh-app-installation-id', '-3'],
      /--gh-app-installation-id/,
    ],
  ];
  for (const [name, argv, re] of bad) {
    it(`refuses ${name}`, () => {
      const msg = usageError(() => config(argv));
      assert.match(msg, re);
      assert.ok(!msg.includes('hunter2'), 'the key is never repeated');
    });
  }
});

describe('installation tokens against the stand-in', () => {
  let gh: GitHubStandin;
  let app: StandinApp;
  const tokens = (extra: Partial<ConstructorParameters<typeof GitHubAppTokens>[0]['settings']> = {}) =>
    new GitHubAppTokens({
      settings: { appId: APP_ID, privateKeyPem, ...extra },
      baseUrl: gh.url,
      redactor: new Redactor(),
      retry: { maxAttempts: 1 },
    });

  before(async () => {
    gh = await GitHubStandin.start({ botLogin: 'atl-bot[bot]' });
    gh.addRepo('acme/infra');
    gh.addPull('acme/infra', { number: 1 });
    app = new StandinApp({ appId: APP_ID, slug: 'atl-bot', publicKey, installations: [{ id: 77, account: 'acme' }] });
    gh.app = app;
  });
  after(() => gh.close());

  it("finds the App's only installation and gets a token for it", async () => {
    const t = await tokens().token();
    assert.match(t, /^ghs_/);
    assert.equal(app.issued.at(-1)?.installationId, 77);
    assert.equal(gh.callsTo('GET', /^\/app\/installations$/).length, 1);
    assert.match(String(gh.callsTo('POST', /^\/app\/installations\/77\/access_tokens$/)[0]?.headers.authorization), /^Bearer ey/);
  });

  it('concurrent callers share one token request, and the token is reused while valid', async () => {
    const src = tokens({ installationId: 77 });
    const before = app.issued.length;
    const all = await Promise.all(Array.from({ length: 5 }, () => src.token()));
    assert.equal(new Set(all).size, 1);
    assert.equal(await src.token(), all[0]);
    assert.equal(app.issued.length, before + 1);
  });

  it('a token about to expire is replaced before it is used again', async () => {
    // 3 to 4 s (GitHub's expiry has whole seconds): the refresh margin is then at least 750 ms.
    app.tokenTtlMs = 4000;
    try {
      const src = tokens({ installationId: 77 });
      const first = await src.token();
      const expiry = app.issued.at(-1)!.expiresAtMs;
      assert.equal(await src.token(), first, 'reused while far from expiry');
      // Bounded wait until 300 ms before the stand-in's own expiry time: inside the margin.
      while (Date.now() < expiry - 300) await new Promise((r) => setTimeout(r, 50));
      const second = await src.token();
      assert.notEqual(second, first);
      assert.equal(app.tokenState(`token ${second}`), 'valid');
    } finally {
      app.tokenTtlMs = 3600_000;
    }
  });

  it('a client with the App tokens gets a new one when GitHub refuses the token (401), once', async () => {
    const src = tokens({ installationId: 77 });
    const client = new GitHubClient({
      baseUrl: gh.url,
      token: () => src.token(),
      tokenRejected: (t) => src.invalidate(t),
      retry: { maxAttempts: 1 },
    });
    const stale = await src.token();
    // GitHub revokes it (the stand-in forgets it): the next call is refused, then retried with a new token.
    app.issued.splice(
      app.issued.findIndex((i) => i.token === stale),
      1,
    );
    const pull = await client.getPull('acme/infra', 1);
    assert.equal(pull.number, 1);
    assert.notEqual(await src.token(), stale);
    const getPulls = gh.callsTo('GET', /^\/repos\/acme\/infra\/pulls\/1$/).slice(-2);
    assert.deepEqual(
      getPulls.map((c) => c.status),
      [401, 200],
    );
  });

  it("with two installations and no --gh-app-installation-id, fails with Atlantis's words", async () => {
    const two = new StandinApp({
      appId: APP_ID,
      slug: 'atl-bot',
      publicKey,
      installations: [
        { id: 1, account: 'a' },
        { id: 2, account: 'b' },
      ],
    });
    gh.app = two;
    try {
      await assert.rejects(tokens().token(), /^Error: wrong number of installations, expected 1, found 2$/);
    } finally {
      gh.app = app;
    }
  });

  it('a key GitHub does not know gets its 401, and no token', async () => {
    const other = StandinApp.keyPair().privateKeyPem;
    const src = new GitHubAppTokens({
      settings: { appId: APP_ID, privateKeyPem: other, installationId: 77 },
      baseUrl: gh.url,
      retry: { maxAttempts: 1 },
    });
    await assert.rejects(
      src.token(),
      (e: unknown) => e instanceof GitHubApiError && e.status === 401 && e.githubMessage === JWT_UNDECODABLE,
    );
  });

  it('the bot login is <slug>[bot], as GitHub spells the slug; an unknown slug fails', async () => {
    const src = tokens({ installationId: 77, slug: 'ATL-BOT' });
    const client = new GitHubAppApi({ baseUrl: gh.url, token: () => src.token(), retry: { maxAttempts: 1 } });
    assert.equal(await src.botLogin(client), 'atl-bot[bot]');
    const wrong = tokens({ installationId: 77, slug: 'nope' });
    await assert.rejects(wrong.botLogin(client), (e: unknown) => e instanceof GitHubApiError && e.status === 404);
  });

  it('an expired installation token gets 401 Bad credentials on the repo routes', async () => {
    app.tokenTtlMs = 1000;
    try {
      const t = await tokens({ installationId: 77 }).token();
      const expiry = app.issued.at(-1)!.expiresAtMs;
      while (Date.now() < expiry + 10) await new Promise((r) => setTimeout(r, 50));
      const client = new GitHubClient({ baseUrl: gh.url, token: t, retry: { maxAttempts: 1 } });
      await assert.rejects(
        client.getPull('acme/infra', 1),
        (e: unknown) => e instanceof GitHubApiError && e.status === 401 && e.githubMessage === 'Bad credentials',
      );
    } finally {
      app.tokenTtlMs = 3600_000;
    }
  });
});
