// The pure parts of the Atlantis differential test, table-tested: the one normaliser both
// sides go through (it must replace only what varies between runs), the events read from the
// stand-in's calls, and the line diff a failing step shows.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { type NormaliseContext, STEPS, eventsOf, lineDiff, normalise } from './support/atlantis-scenario.js';
import type { RecordedCall } from './support/github-standin.js';

const ctx: NormaliseContext = {
  serverUrl: 'http://127.0.18.2:4141',
  githubUrl: 'https://127.0.18.1:40123',
  dataDirs: ['/tmp/ato-diff-data-AbC123', '/tmp/ato-diff-data-XyZ789'],
};

describe('normalise', () => {
  const cases: Array<[string, string, string]> = [
    [
      'the server URL',
      'click [here](http://127.0.18.2:4141/lock?id=acme%252Finfra)',
      'click [here](<atlantis-url>/lock?id=acme%252Finfra)',
    ],
    ['a job URL with a UUID', 'http://127.0.18.2:4141/jobs/0f8fad5b-d9cb-469f-a165-70867728950e', '<atlantis-url>/jobs/<uuid>'],
    ['GitHub URL and host', 'https://127.0.18.1:40123/acme/infra.git 127.0.18.1:40123', '<github-url>/acme/infra.git <github-host>'],
    ['the data dir', "in '/tmp/ato-diff-data-AbC123/repos/acme/infra/3/default/dir3'", "in '<data-dir>/repos/acme/infra/3/default/dir3'"],
    [
      "another replica's data dir",
      "in '/tmp/ato-diff-data-XyZ789/repos/acme/infra/3/default/dir3'",
      "in '<data-dir>/repos/acme/infra/3/default/dir3'",
    ],
    ['a SHA', 'head 4f3c2a1b0e9d8c7b6a5f4e3d2c1b0a9f8e7d6c5b', 'head <sha>'],
    ['timestamps', 'at 2026-12-01T07:12:56.567Z and 2026-12-01 07:12:56 UTC', 'at <time> and <time>'],
    ['a duration', 'Creation complete after 0s [id=x]; done in 1.5s', 'Creation complete after <duration> [id=x]; done in <duration>'],
    ['a comment anchor', 'pull/1#issuecomment-500123', 'pull/1#issuecomment-<id>'],
    // What users read stays as it is: counts, dirs, short hex words, the terraform version.
    [
      'texts users read',
      'Plan: 1 to add, 0 to change, 0 to destroy. dir1 cafe Terraform v1.11.4',
      'Plan: 1 to add, 0 to change, 0 to destroy. dir1 cafe Terraform v1.11.4',
    ],
    ['a 39-digit hex word is no SHA', 'x 4f3c2a1b0e9d8c7b6a5f4e3d2c1b0a9f8e7d6c5', 'x 4f3c2a1b0e9d8c7b6a5f4e3d2c1b0a9f8e7d6c5'],
    [
      "terraform's slow-lock notes (timing, not behaviour)",
      '```\nAcquiring state lock. This may take a few moments...\n\nError: x\nReleasing state lock. This may take a few moments...\n```',
      '```\nError: x\n```',
    ],
    ['other lines about the state lock stay', 'Error acquiring the state lock\n', 'Error acquiring the state lock\n'],
  ];
  for (const [what, input, want] of cases) it(what, () => assert.equal(normalise(input, ctx), want));
});

describe('eventsOf', () => {
  const call = (method: string, path: string, body: unknown, status = 201): RecordedCall => ({
    method,
    path,
    query: {},
    headers: {},
    body,
    status,
  });
  it('keeps GitHub writes in order, normalised, and drops reads, clones, failures and GraphQL queries', () => {
    const sha = 'a'.repeat(40);
    const calls = [
      call('GET', '/repos/acme/infra/pulls/1', undefined, 200),
      call('POST', `/repos/acme/infra/statuses/${sha}`, {
        state: 'pending',
        context: 'atlantis/plan',
        description: 'Plan in progress...',
        target_url: '',
      }),
      call('GET', '/acme/infra.git/info/refs', undefined, 200),
      call('POST', '/acme/infra.git/git-upload-pack', undefined, 200),
      call('POST', '/repos/acme/infra/issues/comments/77/reactions', { content: 'eyes' }),
      call('POST', '/repos/acme/infra/issues/1/comments', { body: 'see http://127.0.18.2:4141/jobs/1' }),
      call('POST', '/repos/acme/infra/issues/1/comments', { body: 'refused' }, 422),
      call('PATCH', '/repos/acme/infra/issues/comments/1234', { body: 'edited' }, 200),
      call('POST', '/api/graphql', { query: 'query { organization(login: "acme") { id } }' }, 200),
      call('POST', '/api/graphql', { query: 'mutation { minimizeComment(input: {}) { clientMutationId } }' }, 200),
      call('PUT', '/repos/acme/infra/pulls/1/merge', { merge_method: 'merge' }, 200),
    ];
    assert.deepEqual(eventsOf(calls, ctx), [
      { kind: 'status', context: 'atlantis/plan', state: 'pending', description: 'Plan in progress...', target_url: '' },
      { kind: 'reaction', content: 'eyes' },
      { kind: 'comment', pull: 1, body: 'see <atlantis-url>/jobs/1' },
      { kind: 'comment-edit', body: 'edited' },
      { kind: 'call', method: 'POST', path: '/api/graphql' },
      { kind: 'call', method: 'PUT', path: '/repos/acme/infra/pulls/<n>/merge' },
    ]);
  });
  it('a status without description or target URL keeps them null (GitHub shows none)', () => {
    assert.deepEqual(eventsOf([call('POST', `/repos/acme/infra/statuses/${'b'.repeat(40)}`, { state: 'success', context: 'c' })], ctx), [
      { kind: 'status', context: 'c', state: 'success', description: null, target_url: null },
    ]);
  });
});

describe('lineDiff', () => {
  const cases: Array<[string, string[], string[], string[]]> = [
    ['same', ['a', 'b'], ['a', 'b'], ['  a', '  b']],
    ['both empty', [], [], []],
    ['a line only Atlantis posted', ['a', 'b', 'c'], ['a', 'c'], ['  a', '- b', '  c']],
    ['a line only we posted', ['a'], ['x', 'a'], ['+ x', '  a']],
    ['a changed line', ['a', 'b', 'c'], ['a', 'B', 'c'], ['  a', '- b', '+ B', '  c']],
    ['nothing in common', ['a'], ['b'], ['- a', '+ b']],
  ];
  for (const [what, expected, actual, want] of cases) it(what, () => assert.deepEqual(lineDiff(expected, actual), want));
});

describe('the scenario', () => {
  it('names each step once (the fixture is keyed by name)', () => {
    assert.equal(new Set(STEPS.map((s) => s.name)).size, STEPS.length);
  });
});
