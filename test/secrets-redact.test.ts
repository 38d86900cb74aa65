// The redactor (every form of a secret in any text, and across the chunks of a stream; weak
// secrets only as whole values; multi-line secrets line by line; JSON inside its strings), the
// children's environment decision, and how git is given the token: pure functions, tables.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { GITHUB_TOKEN_VARS, childEnv } from '../src/server/secrets/child-env.js';
import { generateKeyPairSync } from 'node:crypto';
import { MIN_ENCODED_LENGTH, REDACTED, Redactor, base64Fragments, secretForms, secretWeakness } from '../src/server/secrets/redact.js';
import { gitAuth, withoutCredentials } from '../src/server/workflow/checkout/working-copy.js';

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
    ['short secret as a whole value', `password=${SHORT}\n`],
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

  it('leaves other text alone, and a short secret only as a whole value (its base64 is too short to tell from text)', () => {
    assert.equal(SHORT.length < MIN_ENCODED_LENGTH, true);
    const text = `Plan: 1 to add.\n${b64('xx' + SHORT + 'yy')}\n${b64(TOKEN.slice(0, 10))}\npassword is ${SHORT}.`;
    assert.equal(r.redact(text), text);
    assert.equal(new Redactor().redact(TOKEN), TOKEN, 'no secrets, nothing to scrub');
  });

  it('a text without line breaks is matched by the forms as literals, just where the line-breakable forms match', () => {
    const oneLine = [
      ...cases.map(([, text]) => text.replace(/\r?\n/g, '')),
      `prefix ${b64(`A${TOKEN}`)} and ${b64url(`XY${HOOK}`)} twice ${b64(TOKEN)}${b64(TOKEN)}`,
      `${b64(TOKEN).slice(0, 20)} ${b64(TOKEN).slice(20)}`,
    ];
    let matched = 0;
    for (const secret of [TOKEN, HOOK]) {
      const forms = secretForms(secret);
      assert.ok(forms.some((f) => f.wrapped && f.lineSource !== f.source));
      for (const f of forms) {
        for (const text of oneLine) {
          const at = (source: string) => [...text.matchAll(new RegExp(source, 'g'))].map((m) => `${m.index}:${m[0]}`);
          assert.deepEqual(at(f.lineSource), at(f.source), `${f.plain} in ${text}`);
          if (f.wrapped) matched += at(f.source).length;
        }
      }
    }
    assert.ok(matched >= 10, `wrapped forms matched ${matched} times`);
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

describe('weak secrets: scrubbed only where they stand as a whole value', () => {
  it('which secrets are weak: short, or one word or number', () => {
    const rows: Array<[string, ReturnType<typeof secretWeakness>]> = [
      ['0', 'short'],
      ['false', 'short'],
      ['pw7', 'short'],
      ['atlantis', 'word'],
      ['Atlantis', 'word'],
      ['terraform', 'word'],
      ['atlantis-bot', 'word'],
      ['12345678', 'word'],
      ['correcthorsebatt', undefined],
      ['atlantis1', undefined],
      ['webhook-secret-for-tests', undefined],
      ['ghp_0123456789abcdef0123456789abcdef0123', undefined],
      ['4f9c2a7e1b', undefined],
    ];
    for (const [secret, want] of rows) assert.equal(secretWeakness(secret), want, secret);
  });

  const r = new Redactor([() => ['atlantis', 'false', '0', 'hunter2']]);
  const rows: Array<[string, string, string]> = [
    ['a comment command', 'comment `atlantis apply -d app1` to apply', 'comment `atlantis apply -d app1` to apply'],
    ['its usage line', 'atlantis plan [options] -- [terraform plan flags]', 'atlantis plan [options] -- [terraform plan flags]'],
    ['a status context and a file', 'atlantis/plan atlantis.yaml atlantis-bot', 'atlantis/plan atlantis.yaml atlantis-bot'],
    ['a plan summary', 'Plan: 0 to add, 0 to change, 0 to destroy.', 'Plan: 0 to add, 0 to change, 0 to destroy.'],
    ['a word in a sentence', 'the value is false here', 'the value is false here'],
    ['an env line', 'ATLANTIS_GH_WEBHOOK_SECRET=atlantis\nHOME=/x', 'ATLANTIS_GH_WEBHOOK_SECRET=[REDACTED]\nHOME=/x'],
    ['a NUL-separated environ', 'A=1\0S=hunter2\0B=2', 'A=1\0S=[REDACTED]\0B=2'],
    ['a quoted value', 'secret = "atlantis"', 'secret = "[REDACTED]"'],
    ['a YAML value', 'password: hunter2', 'password: [REDACTED]'],
    ['alone on an indented line', '      atlantis   \n', '      [REDACTED]   \n'],
    ['a printed string with escaped breaks', '"A=1\\nS=atlantis\\nB=2"', '"A=1\\nS=[REDACTED]\\nB=2"'],
    ['a URL password', 'redis://:hunter2@redis:6379', 'redis://:[REDACTED]@redis:6379'],
    ['a number after =', 'x=0\n', 'x=[REDACTED]\n'],
  ];
  for (const [name, text, want] of rows) it(name, () => assert.equal(r.redact(text), want));

  it('in a stream, cut anywhere, as in one text', () => {
    const text = 'atlantis apply\nS=atlantis\n    atlantis  \nxatlantis\n"false" false\nS=hunter2\n';
    for (let cut = 0; cut <= text.length; cut++) {
      const s = r.stream();
      assert.equal(s.push(text.slice(0, cut)) + s.push(text.slice(cut)) + s.flush(), r.redact(text), `cut at ${cut}`);
    }
    assert.equal(r.redact(text), 'atlantis apply\nS=[REDACTED]\n    [REDACTED]  \nxatlantis\n"[REDACTED]" false\nS=[REDACTED]\n');
  });

  it('JSON is scrubbed inside its strings: it stays valid, numbers and booleans are left alone', () => {
    const status = { shutting_down: false, in_progress_operations: 0, drain_reason: null, operations: [{ project: 'atlantis' }] };
    const out = JSON.stringify(r.redactValue(status));
    assert.deepEqual(JSON.parse(out), { ...status, operations: [{ project: REDACTED }] });
    const strong = new Redactor([() => [TOKEN]]);
    const e = new Error(`bad ${TOKEN}`);
    assert.deepEqual(strong.redactValue({ error: e, list: [`t=${TOKEN}`, 1, true], when: new Date(0) }), {
      error: { message: `bad ${REDACTED}`, name: 'Error' },
      list: [`t=${REDACTED}`, 1, true],
      when: '1970-01-01T00:00:00.000Z',
    });
  });
});

describe('multi-line secrets: scrubbed line by line, in any indentation', () => {
  const pem = generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({ type: 'pkcs1', format: 'pem' }).toString();
  const r = new Redactor([() => [pem]]);
  const keyLines = pem.split('\n').filter((l) => l.length >= 16);
  const shown: Array<[string, string]> = [
    ['as it is', pem],
    [
      'as an indented heredoc',
      `  + environ = <<-EOT\n${pem
        .split('\n')
        .map((l) => `        X=${l}`)
        .join('\n')}\n    EOT\n`,
    ],
    ['with CRLF', pem.replace(/\n/g, '\r\n')],
    [
      'with a prefix per line',
      pem
        .split('\n')
        .map((l) => `│ ${l}`)
        .join('\n'),
    ],
    ['JSON-escaped', JSON.stringify({ key: pem })],
    ['URL-encoded', encodeURIComponent(pem)],
    ['in an env dump', `A=1\nATLANTIS_GH_APP_KEY=${pem}B=2\n`],
  ];
  for (const [name, text] of shown) {
    it(name, () => {
      const out = r.redact(text);
      for (const l of keyLines) {
        assert.ok(!out.includes(l) && !out.includes(encodeURIComponent(l)), `${name}: ${l} left in\n${out}`);
      }
    });
  }
  it('in a stream cut every 7 characters', () => {
    const text = shown[1]![1];
    const s = r.stream();
    let out = '';
    for (let i = 0; i < text.length; i += 7) out += s.push(text.slice(i, i + 7));
    out += s.flush();
    assert.equal(out, r.redact(text));
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
