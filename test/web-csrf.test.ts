// The cross-site decision of the web UI's actions (src/server/web/csrf.ts), every
// case, and how an action tells a page's form from a script (prefersHtml).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { type RequestFacts, decideCrossSite, originOf, prefersHtml } from '../src/server/web/csrf.js';

const HOST = 'atlantis.internal:4141';
const facts = (f: Partial<RequestFacts>): RequestFacts => ({
  method: 'POST',
  fetchSite: undefined,
  origin: undefined,
  host: HOST,
  ownOrigins: ['https://atlantis.example.com'],
  ...f,
});

describe('cross-site requests', () => {
  const rows: Array<[string, Partial<RequestFacts>, 'allowed' | 'refused']> = [
    ['a GET is never checked', { method: 'GET', fetchSite: 'cross-site', origin: 'https://evil.example' }, 'allowed'],
    ['a HEAD is never checked', { method: 'HEAD', fetchSite: 'cross-site' }, 'allowed'],
    ['the form of a page of this server', { fetchSite: 'same-origin', origin: `http://${HOST}` }, 'allowed'],
    ['a request the user made (typed, bookmarked)', { fetchSite: 'none' }, 'allowed'],
    ['a form on another site', { fetchSite: 'cross-site', origin: 'https://evil.example' }, 'refused'],
    ['another port or a sibling host of the same site', { fetchSite: 'same-site', origin: 'http://atlantis.internal:8080' }, 'refused'],
    ['Sec-Fetch-Site decides over a matching Origin', { fetchSite: 'cross-site', origin: `http://${HOST}` }, 'refused'],
    ['an unknown Sec-Fetch-Site value', { fetchSite: 'weird' }, 'refused'],
    ['no browser at all (curl, a script)', {}, 'allowed'],
    ['a DELETE from a script', { method: 'DELETE' }, 'allowed'],
    ['without Sec-Fetch-Site (plain HTTP): Origin is the Host', { origin: `http://${HOST}` }, 'allowed'],
    ['Origin and Host differ only in case', { origin: 'http://Atlantis.Internal:4141', host: 'ATLANTIS.internal:4141' }, 'allowed'],
    ['a default port in Host', { origin: 'http://atlantis.internal', host: 'atlantis.internal:80' }, 'allowed'],
    ['the other default port is another origin', { origin: 'https://atlantis.internal', host: 'atlantis.internal:80' }, 'refused'],
    ['Origin of another site', { origin: 'https://evil.example' }, 'refused'],
    ['Origin of another port', { origin: 'http://atlantis.internal:8080' }, 'refused'],
    ['Origin null (a sandboxed frame, a data: page)', { origin: 'null' }, 'refused'],
    ['Origin junk', { origin: 'not a url' }, 'refused'],
    ['Origin of another scheme', { origin: 'file://x' }, 'refused'],
    ['--atlantis-url behind a proxy that rewrites Host', { origin: 'https://atlantis.example.com', host: '10.0.0.7:4141' }, 'allowed'],
    [
      '--atlantis-url with a path and trailing slash',
      { origin: 'https://atlantis.example.com', ownOrigins: ['https://atlantis.example.com/base/'] },
      'allowed',
    ],
    ['Origin but no Host header', { origin: 'https://evil.example', host: undefined }, 'refused'],
    ['an IPv6 host', { origin: 'http://[::1]:4141', host: '[::1]:4141' }, 'allowed'],
  ];
  for (const [what, f, expected] of rows) {
    it(`${what}: ${expected}`, () => {
      const d = decideCrossSite(facts(f));
      assert.equal(d.kind, expected);
      if (d.kind === 'refused') assert.ok(d.reason.length > 0);
    });
  }

  it('originOf: scheme, host and port, lower case, no default port; nothing for null or other schemes', () => {
    assert.equal(originOf('HTTP://Example.COM:80/a?b'), 'http://example.com');
    assert.equal(originOf('https://example.com:8443/'), 'https://example.com:8443');
    assert.equal(originOf('null'), undefined);
    assert.equal(originOf('ftp://example.com'), undefined);
  });
});

describe('a page or a script', () => {
  const rows: Array<[string | undefined, boolean]> = [
    ['text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,*/*;q=0.8', true],
    ['TEXT/HTML', true],
    ['text/html;q=0', false],
    ['*/*', false],
    ['text/plain', false],
    ['application/json, text/*', false],
    [undefined, false],
    ['', false],
  ];
  for (const [accept, html] of rows)
    it(`Accept ${JSON.stringify(accept)}: ${html ? 'a page' : 'a script'}`, () => assert.equal(prefersHtml(accept), html));
});
