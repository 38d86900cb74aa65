// --web-basic-auth: the pure decision (which paths are open, how the header is read) as a
// table, and the flags in their command-line and env forms.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { decideWebAuth, parseBasicAuth } from '../src/server/http/web-auth.js';
import { configWithRequiredFlags } from './support/server-config.js';

const basic = (user: string, pass: string) => `Basic ${Buffer.from(`${user}:${pass}`).toString('base64')}`;
const AUTH = { username: 'ops', password: 'p4ss:w0rd' };

describe('decideWebAuth', () => {
  const table: Array<[string, string | undefined, typeof AUTH | undefined, string]> = [
    // basic auth off: everything open
    ['/', undefined, undefined, 'open'],
    ['/jobs/x', undefined, undefined, 'open'],
    // Atlantis's open paths, exact
    ['/events', undefined, AUTH, 'open'],
    ['/healthz', undefined, AUTH, 'open'],
    ['/readyz', undefined, AUTH, 'open'],
    ['/status', undefined, AUTH, 'open'],
    ['/status', basic('x', 'y'), AUTH, 'open'],
    // variants of open paths are not open
    ['/status/', undefined, AUTH, 'missing'],
    ['/STATUS', undefined, AUTH, 'missing'],
    ['/%73tatus', undefined, AUTH, 'missing'],
    ['/events/x', undefined, AUTH, 'missing'],
    // the API has its own secret (as Atlantis: any path under /api/)
    ['/api/locks', undefined, AUTH, 'open'],
    ['/api/plan', basic('x', 'y'), AUTH, 'open'],
    ['/api', undefined, AUTH, 'missing'],
    ['/API/locks', undefined, AUTH, 'missing'],
    // protected paths
    ['/', undefined, AUTH, 'missing'],
    ['/metrics', undefined, AUTH, 'missing'],
    ['/jobs/0b5e', undefined, AUTH, 'missing'],
    ['/jobs/0b5e/stream', undefined, AUTH, 'missing'],
    ['/no-such-page', undefined, AUTH, 'missing'],
    ['/', basic('ops', 'p4ss:w0rd'), AUTH, 'allowed'],
    ['/jobs/0b5e/stream', basic('ops', 'p4ss:w0rd'), AUTH, 'allowed'],
    ['/', `basic ${Buffer.from('ops:p4ss:w0rd').toString('base64')}`, AUTH, 'allowed'],
    ['/', basic('ops', 'p4ss:w0rd!'), AUTH, 'wrong'],
    ['/', basic('ops', 'p4ss'), AUTH, 'wrong'],
    ['/', basic('Ops', 'p4ss:w0rd'), AUTH, 'wrong'],
    ['/', basic('', ''), AUTH, 'wrong'],
    ['/', 'Bearer p4ss:w0rd', AUTH, 'missing'],
    ['/', 'Basic', AUTH, 'missing'],
    ['/', 'Basic !!!!', AUTH, 'missing'],
    ['/', `Basic ${Buffer.from('no-colon').toString('base64')}`, AUTH, 'missing'],
  ];
  for (const [p, header, auth, want] of table) {
    it(`${p} ${header ?? '(no header)'} ${auth ? 'auth on' : 'auth off'} -> ${want}`, () => {
      assert.equal(decideWebAuth(p, header, auth).kind, want);
    });
  }
});

describe('parseBasicAuth', () => {
  it('splits at the first colon, as Go does: the password may contain colons, the username not', () => {
    assert.deepEqual(parseBasicAuth(basic('a', 'b:c:d')), { username: 'a', password: 'b:c:d' });
    assert.deepEqual(parseBasicAuth(basic('', 'x')), { username: '', password: 'x' });
    assert.deepEqual(parseBasicAuth(basic('ünï', 'cödé')), { username: 'ünï', password: 'cödé' });
  });
  it("refuses base64 that Go's strict decoder refuses (no padding, junk)", () => {
    assert.deepEqual(parseBasicAuth('Basic YTpiYw=='), { username: 'a', password: 'bc' });
    assert.equal(parseBasicAuth('Basic YTpiYw'), undefined, 'padding missing');
    assert.equal(parseBasicAuth('Basic YTpi*Yw=='), undefined, 'a character outside the alphabet');
    assert.equal(parseBasicAuth('Basic YTpi_w=='), undefined, 'URL-safe alphabet');
  });
});

describe('web basic auth flags', () => {
  const config = configWithRequiredFlags('ato-webauth-flags-');

  it("is off by default, with Atlantis's default username and password", () => {
    const c = config([]);
    assert.equal(c.webBasicAuth, false);
    assert.equal(c.webUsername, 'atlantis');
    assert.equal(c.webPassword, 'atlantis');
  });
  it('reads the command line', () => {
    const c = config(['--web-basic-auth', '--web-username', 'ops', '--web-password=s3cr3t']);
    assert.deepEqual([c.webBasicAuth, c.webUsername, c.webPassword], [true, 'ops', 's3cr3t']);
  });
  it('reads ATLANTIS_WEB_BASIC_AUTH, ATLANTIS_WEB_USERNAME and ATLANTIS_WEB_PASSWORD', () => {
    const c = config([], { ATLANTIS_WEB_BASIC_AUTH: 'true', ATLANTIS_WEB_USERNAME: 'ops', ATLANTIS_WEB_PASSWORD: 'from-env' });
    assert.deepEqual([c.webBasicAuth, c.webUsername, c.webPassword], [true, 'ops', 'from-env']);
  });
  it('an empty username or password falls back to the default, as in Atlantis', () => {
    const c = config(['--web-username='], { ATLANTIS_WEB_BASIC_AUTH: '1', ATLANTIS_WEB_PASSWORD: '' });
    assert.deepEqual([c.webBasicAuth, c.webUsername, c.webPassword], [true, 'atlantis', 'atlantis']);
  });
});
