// GitHubClient.listUserTeams (for --gh-team-allowlist) against the stand-in's GraphQL:
// filtering by member, pagination past 100 teams, GitHub Enterprise's /api/graphql, and
// errors (unknown organisation, bad token, retries on 5xx) that must never read as "no teams".
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { GitHubApiError, GitHubClient } from '../src/server/vcs/github/client.js';
import { GitHubStandin } from './support/github-standin.js';

let gh: GitHubStandin;
const client = (opts: { baseUrl?: string; token?: string } = {}) =>
  new GitHubClient({
    baseUrl: opts.baseUrl ?? gh.url,
    token: opts.token ?? gh.token,
    retry: { maxAttempts: 3, baseDelayMs: 1 },
    sleep: async () => undefined,
  });

before(async () => {
  gh = await GitHubStandin.start({ host: '127.0.163.150' });
  gh.addTeam('acme', 'dev', ['bob', 'alice']);
  gh.addTeam('acme', 'ops', ['alice']);
  for (let i = 0; i < 130; i++) gh.addTeam('bigorg', `team-${i}`, i % 2 === 0 ? ['eve'] : ['mallory']);
});
after(async () => {
  await gh.close();
});

describe('listUserTeams', () => {
  it("returns the slugs of the user's teams in the organisation", async () => {
    assert.deepEqual(await client().listUserTeams('acme', 'alice'), ['dev', 'ops']);
    assert.deepEqual(await client().listUserTeams('ACME', 'Bob'), ['dev']);
    assert.deepEqual(await client().listUserTeams('acme', 'carol'), []);
  });

  it('follows cursors past the 100-team page', async () => {
    const teams = await client().listUserTeams('bigorg', 'eve');
    assert.equal(teams.length, 65);
    assert.equal(new Set(teams).size, 65);
    assert.equal(
      teams.every((t) => Number(t.split('-')[1]) % 2 === 0),
      true,
    );
    const calls = gh.callsTo('POST', /^\/graphql$/).filter((c) => (c.body as { variables: { org: string } }).variables.org === 'bigorg');
    assert.equal(calls.length, 1, 'eve has 65 teams: one page');
    const all = await client().listUserTeams('bigorg', 'mallory');
    assert.equal(all.length, 65);
    gh.addTeam('bigorg', 'extra', ['eve']);
    for (let i = 0; i < 40; i++) gh.addTeam('bigorg', `more-${i}`, ['eve']);
    assert.equal((await client().listUserTeams('bigorg', 'eve')).length, 106);
  });

  it('uses /api/graphql for a GitHub Enterprise base URL', async () => {
    const before = gh.calls.length;
    assert.deepEqual(await client({ baseUrl: `${gh.url}/api/v3` }).listUserTeams('acme', 'bob'), ['dev']);
    assert.equal(gh.calls.slice(before)[0]?.path, '/api/graphql');
  });

  it('throws, never answers "no teams", for an unknown organisation, a bad token, or a failing GitHub', async () => {
    await assert.rejects(
      client().listUserTeams('no-such-org', 'bob'),
      (e: unknown) => e instanceof GitHubApiError && /Could not resolve to an Organization/.test(e.message),
    );
    await assert.rejects(
      client({ token: 'wrong' }).listUserTeams('acme', 'bob'),
      (e: unknown) => e instanceof GitHubApiError && e.status === 401,
    );
    gh.failNext(5, { kind: 'status', status: 502 }, { path: /graphql/ });
    await assert.rejects(client().listUserTeams('acme', 'bob'), (e: unknown) => e instanceof GitHubApiError && e.status === 502);
    gh.clearFaults();
    gh.failNext(1, { kind: 'status', status: 502 }, { path: /graphql/ });
    assert.deepEqual(await client().listUserTeams('acme', 'bob'), ['dev'], 'retried after one 5xx');
  });
});
