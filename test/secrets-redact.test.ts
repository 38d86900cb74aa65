// The redactor (every form of a secret in any text, and across the chunks of a stream), the
// children's environment decision, and how git is given the token: pure functions, tables.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { GITHUB_TOKEN_VARS, childEnv } from '../src/server/secrets/child-env.js';
import { MIN_ENCODED_LENGTH, REDACTED, Redactor, base64Fragments } from '../src/server/secrets/redact.js';
import { gitAuth, withoutCredentials } from '../src/server/workflow/working-copy.js';

const TOKEN = 'ghp_Sx9/Token+Value=0123456789abcdef';
const HOOK = 'hook secret/with "quotes" & spaces';
const SHORT = 'pw7';
const b64 = (s: string) => Buffer.from(s).toString('base64');
const b64url = (s: string) => Buffer.from(s).toString('base64url');

describe('redactor', () => {
  const r = new Redactor([() => [TOKEN, HOOK, SHORT, undefined, '']]);
  const cases: Array<[string, string]> = [
    ['verbatim', `token=${TOKEN} end`],
    ['encodeURIComponent', `https://x/?t=${encodeURIComponent(TOKEN)}`],
    [
      'encodeURIComponent, lower-case hex',
      `t=${encodeURIComponent(TOKEN)
        .toLowerCase()
        .replace(/ghp_sx9/, 'ghp_Sx9')
        .replace(/token/, 'Token')
        .replace(/value/, 'Value')}`,
    ],
    ['JSON-escaped', JSON.stringify({ s: HOOK })],
    ['base64 alone', b64(TOKEN)],
    ['base64 URL-safe alone', b64url(TOKEN)],
    ['base64 of env, offset 0', b64(`${TOKEN}\nHOME=/root\n`)],
    ['base64 of env, offset 1', b64(`A${TOKEN}\nHOME=/root\n`)],
    ['base64 of env, offset 2', b64(`AB=${TOKEN}\n`)],
    ['base64 URL-safe, offset 1', b64url(`X${HOOK}?`)],
    ['base64 URL-safe, offset 2', b64url(`XY${HOOK}?`)],
    ['base64 wrapped at 76 columns', (b64(`PATH=/usr/bin\nATLANTIS_GH_TOKEN=${TOKEN}\nX=1\n`).match(/.{1,76}/g) ?? []).join('\n')],
    ['base64 wrapped with CRLF', (b64(`ATLANTIS_GH_TOKEN=${TOKEN}`).match(/.{1,20}/g) ?? []).join('\r\n')],
    ['short secret verbatim', `password is ${SHORT}.`],
  ];
  for (const [name, text] of cases) {
    it(`scrubs ${name}`, () => {
      const out = r.redact(text);
      assert.ok(out.includes(REDACTED), `${name}: ${out}`);
      for (const s of [TOKEN, HOOK]) {
        for (const form of [s, encodeURIComponent(s), ...base64Fragments(Buffer.from(s))])
          assert.ok(!out.replace(/\r?\n/g, '').includes(form), `${name}: ${out}`);
      }
      assert.ok(!out.includes(SHORT), `${name}: ${out}`);
    });
  }

  it('leaves other text alone, and a short secret only verbatim (its base64 is too short to tell from text)', () => {
    assert.equal(SHORT.length < MIN_ENCODED_LENGTH, true);
    const text = `Plan: 1 to add.\n${b64('xx' + SHORT + 'yy')}\n${b64(TOKEN.slice(0, 10))}`;
    assert.equal(r.redact(text), text);
    assert.equal(new Redactor().redact(TOKEN), TOKEN, 'no secrets, nothing to scrub');
  });

  it('reads its sources again after the refresh interval and keeps old values (a rotated token)', async () => {
    let current = 'first-token-value-1234';
    const rot = new Redactor([() => [current]], 20);
    assert.equal(rot.redact(current), REDACTED);
    current = 'second-token-value-5678';
    await new Promise((res) => setTimeout(res, 30));
    assert.equal(rot.redact('first-token-value-1234 second-token-value-5678'), `${REDACTED} ${REDACTED}`);
    const failing = new Redactor([
      () => {
        throw new Error('file gone');
      },
      () => ['still-here-secret'],
    ]);
    assert.equal(failing.redact('still-here-secret'), REDACTED);
  });

  it('scrubs a secret split across the chunks of a stream, in any cut, and delays only what looks like its start', () => {
    const text = `line one\nexport T=${TOKEN}\n${b64(`A=${TOKEN}\n`)}\nlast line\n`;
    for (let cut1 = 0; cut1 < text.length; cut1 += 3) {
      const cut2 = Math.min(text.length, cut1 + 7);
      const s = r.stream();
      const out = s.push(text.slice(0, cut1)) + s.push(text.slice(cut1, cut2)) + s.push(text.slice(cut2)) + s.flush();
      assert.equal(out, r.redact(text), `cuts at ${cut1}, ${cut2}`);
    }
    const s = r.stream();
    assert.equal(s.push('Plan: 1 to add\n'), 'Plan: 1 to add\n', 'a line that cannot start a secret is passed on at once');
    assert.equal(s.push('value: ghp_Sx'), 'value: ', 'the start of the token is held');
    assert.equal(s.push('X more\n'), 'ghp_SxX more\n', 'and let go once it is not the token');
    assert.equal(s.flush(), '');
  });
});

describe('children environment', () => {
  const secrets = [TOKEN, HOOK];
  const rows: Array<[string, string, boolean]> = [
    ['ATLANTIS_GH_TOKEN', TOKEN, false],
    ['ATLANTIS_GH_WEBHOOK_SECRET', HOOK, false],
    ['ATLANTIS_GH_TOKEN_FILE', '/var/run/secrets/token', false],
    ['ATLANTIS_REPO_ALLOWLIST', 'github.com/acme/*', false],
    ['atlantis_lower_case', 'x', false],
    ...GITHUB_TOKEN_VARS.map((n): [string, string, boolean] => [n, TOKEN, false]),
    ['GITHUB_TOKEN', 'another-token-for-terraform', true],
    ['GIT_URL', `https://x-access-token:${TOKEN}@github.com/acme/x`, false],
    ['SOME_VAR', `prefix ${HOOK}`, false],
    ['AWS_REGION', 'eu-west-1', true],
    ['AWS_SECRET_ACCESS_KEY', 'aws-secret', true],
    ['GOOGLE_APPLICATION_CREDENTIALS', '/creds.json', true],
    ['ARM_CLIENT_SECRET', 'arm', true],
    ['TF_VAR_region', 'eu', true],
    ['PATH', '/usr/bin:/bin', true],
    ['HOME', '/home/atlantis', true],
    ['HTTPS_PROXY', 'http://proxy:3128', true],
    ['MY_ATLANTIS_THING', 'kept: the prefix is ATLANTIS_ only', true],
  ];
  for (const [name, value, kept] of rows) {
    it(`${name}=${value.slice(0, 20)}… is ${kept ? 'passed on' : 'withheld'}`, () => {
      const { env, withheld } = childEnv({ [name]: value, UNSET: undefined }, secrets);
      assert.equal(env[name], kept ? value : undefined);
      assert.equal(
        withheld.some((w) => w.name === name),
        !kept,
      );
      assert.equal('UNSET' in env, false);
    });
  }
  it('gives the reason, never the value', () => {
    assert.deepEqual(childEnv({ ATLANTIS_PORT: '1', GH_TOKEN: TOKEN }, secrets).withheld, [
      { name: 'ATLANTIS_PORT', reason: 'server-setting' },
      { name: 'GH_TOKEN', reason: 'holds-secret' },
    ]);
  });
});

describe('git authentication', () => {
  const rows: Array<[string, string, boolean]> = [
    ['https://github.com/acme/infra.git', 'ghs_gittoken42', true],
    ['https://ghe.example.com:8443/acme/infra.git', 'ghs_gittoken42', true],
    ['https://github.com/acme/infra.git', '', false],
    ['http://github.com/acme/infra.git', 'ghs_gittoken42', false],
    ['file:///srv/git/infra.git', 'ghs_gittoken42', false],
    ['/srv/git/infra.git', 'ghs_gittoken42', false],
  ];
  for (const [url, token, helper] of rows) {
    it(`${url} with ${token ? 'a' : 'no'} token: ${helper ? 'helper' : 'no credentials'}`, () => {
      const a = gitAuth(url, token);
      assert.deepEqual(a.args.slice(0, 2), ['-c', 'credential.helper='], 'configured helpers are cleared');
      assert.equal(a.args.length, helper ? 4 : 2);
      assert.ok(
        a.args.every((x) => !token || !x.includes(token)),
        'never the token in argv',
      );
      assert.equal(a.env.ATO_GIT_TOKEN, helper ? token : undefined);
      if (helper) assert.equal(a.env.ATO_GIT_HOST, new URL(url).host);
    });
  }
  it('drops credentials from clone URLs', () => {
    assert.equal(withoutCredentials('https://u:p@github.com/a/b.git'), 'https://github.com/a/b.git');
    assert.equal(withoutCredentials('/srv/x'), '/srv/x');
  });
});
