// --repo-allowlist semantics.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseRepoAllowlist, AllowlistError } from '../src/server/vcs/repo-allowlist.js';

const cases: [string, string, string, boolean][] = [
  // [allowlist, repo, host, expected]
  ['github.com/acme/infra', 'acme/infra', 'github.com', true],
  ['github.com/acme/infra', 'acme/infra2', 'github.com', false],
  ['github.com/acme/infra', 'ACME/Infra', 'github.com', true],
  ['GitHub.com/Acme/*', 'acme/anything', 'github.com', true],
  ['github.com/acme/*', 'acme/x', 'ghe.example.com', false],
  ['github.com/acme/*', 'other/x', 'github.com', false],
  ['github.com/acme/*', 'acmex/x', 'github.com', false],
  ['*', 'anyone/anything', 'ghe.example.com', true],
  ['github.com/*', 'a/b', 'github.com', true],
  ['github.com/acme/*-infra', 'acme/team-infra', 'github.com', true],
  ['github.com/acme/*-infra', 'evil/team-infra', 'github.com', false],
  ['github.com/acme/*-infra', 'acme/team-infra-old', 'github.com', false],
  ['github.com/acme/*,!github.com/acme/secret', 'acme/secret', 'github.com', false],
  ['github.com/acme/*,!github.com/acme/secret', 'acme/public', 'github.com', true],
  ['github.com/acme/*,!github.com/acme/legacy-*', 'acme/legacy-vpc', 'github.com', false],
  ['github.com/acme/*,!github.com/acme/legacy-*', 'acme/vpc', 'github.com', true],
  ['!github.com/acme/secret', 'acme/other', 'github.com', false],
  ['github.com/acme/a, github.com/acme/b', 'acme/b', 'github.com', true],
  ['', 'acme/b', 'github.com', false],
  ['github.com/acme/a.b', 'acme/aXb', 'github.com', false],
  ['ghe.example.com/acme/*', 'acme/x', 'ghe.example.com', true],
];

for (const [list, repo, host, want] of cases) {
  test(`${JSON.stringify(list)} ${host}/${repo} → ${want}`, () => {
    assert.equal(parseRepoAllowlist(list).isAllowed(repo, host), want);
  });
}

test('default host is github.com', () => {
  assert.equal(parseRepoAllowlist('github.com/acme/*').isAllowed('acme/x'), true);
});

test('a rule with :// is refused, as Atlantis does', () => {
  assert.throws(() => parseRepoAllowlist('https://github.com/acme/*'), AllowlistError);
});

test('exposes parsed rules', () => {
  const a = parseRepoAllowlist('github.com/a/*,!github.com/a/b,!');
  assert.deepEqual(a.include, ['github.com/a/*', '!']);
  assert.deepEqual(a.exclude, ['github.com/a/b']);
});
