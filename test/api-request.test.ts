// The API's request body (src/server/http/api-request.ts): read as Go's encoding/json reads
// Atlantis's APIRequest (any case of a key, nulls and unknown keys ignored), then checked field
// by field; every refusal names the field. Pure, so a table. And the --api-secret flag.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { type ApiRequest, parseApiRequest, targetLabel } from '../src/server/http/api-request.js';
import { serverSecretValues } from '../src/server/secrets/server-secrets.js';
import { configWithRequiredFlags } from './support/server-config.js';

const base = { Repository: 'acme/infra', Ref: 'feature', Type: 'Github' };
const body = (extra: Record<string, unknown> = {}): string => JSON.stringify({ ...base, ...extra });

describe('parseApiRequest: accepted bodies', () => {
  const table: Array<[string, string, ApiRequest]> = [
    ['the three required fields: no PR, no target', body(), { repository: 'acme/infra', ref: 'feature', pull: 0, targets: [] }],
    [
      'a PR, projects first then paths, in order',
      body({ PR: 7, Projects: ['net', 'db'], Paths: [{ Directory: 'a/b/', Workspace: 'staging' }, { Directory: '.' }] }),
      {
        repository: 'acme/infra',
        ref: 'feature',
        pull: 7,
        targets: [{ project: 'net' }, { project: 'db' }, { dir: 'a/b', workspace: 'staging' }, { dir: '.' }],
      },
    ],
    [
      "keys in any case, as Go matches them (the path's json tags too)",
      JSON.stringify({ repository: 'acme/infra', REF: 'feature', type: 'Github', pr: 3, paths: [{ directory: 'x', WORKSPACE: 'w' }] }),
      { repository: 'acme/infra', ref: 'feature', pull: 3, targets: [{ dir: 'x', workspace: 'w' }] },
    ],
    [
      'the Kelvin sign and the long s fold as Go folds them',
      JSON.stringify({ Repoſitory: 'acme/infra', Ref: 'main', Type: 'Github', Paths: [{ \u212Aey: 1, directory: 'x' }] }),
      { repository: 'acme/infra', ref: 'main', pull: 0, targets: [{ dir: 'x' }] },
    ],
    [
      'the last of two keys that fold alike wins',
      '{"Repository":"acme/infra","ref":"first","Type":"Github","REF":"second"}',
      { repository: 'acme/infra', ref: 'second', pull: 0, targets: [] },
    ],
    [
      'nulls and unknown keys are ignored; PR 0 is no pull request',
      body({ PR: null, Projects: null, Paths: null, Extra: { x: 1 }, DiscoverProjects: true, base_branch: null }),
      { repository: 'acme/infra', ref: 'feature', pull: 0, targets: [] },
    ],
    [
      'refs/heads/ is dropped from the ref',
      body({ Ref: 'refs/heads/team/feature-1' }),
      { repository: 'acme/infra', ref: 'team/feature-1', pull: 0, targets: [] },
    ],
    [
      'a dir as a comment takes it: cleaned, from the root, a glob kept',
      body({ Paths: [{ Directory: '/envs/../prod//' }, { Directory: './mods/*' }, { Directory: '/' }] }),
      { repository: 'acme/infra', ref: 'feature', pull: 0, targets: [{ dir: 'prod' }, { dir: 'mods/*' }, { dir: '.' }] },
    ],
    [
      'a path with only project_name names a project',
      body({ Paths: [{ project_name: 'net' }] }),
      { repository: 'acme/infra', ref: 'feature', pull: 0, targets: [{ project: 'net' }] },
    ],
    [
      'a commit SHA as the ref (a PR head)',
      body({ PR: 2, Ref: 'a'.repeat(40) }),
      { repository: 'acme/infra', ref: 'a'.repeat(40), pull: 2, targets: [] },
    ],
  ];
  for (const [name, text, want] of table) {
    it(name, () => {
      assert.deepEqual(parseApiRequest(text, 'Github'), { ok: true, request: want });
    });
  }
});

describe('parseApiRequest: refused bodies name the field', () => {
  const table: Array<[string, string, string | RegExp]> = [
    ['not JSON', 'not json', /^failed to parse request: Unexpected token/],
    ['an empty body', '', /^failed to parse request: Unexpected end of JSON input/],
    ['not an object', '[1]', 'failed to parse request: the body must be a JSON object'],
    ['every required field missing', '{}', 'request is missing fields: Repository, Ref, Type'],
    ['an empty string is missing too', body({ Ref: '' }), 'request is missing fields: Ref'],
    ['a missing Type', JSON.stringify({ Repository: 'acme/infra', Ref: 'x' }), 'request is missing fields: Type'],
    ['Repository not a string', body({ Repository: 1 }), 'failed to parse request: Repository: must be a string'],
    ['PR a string', body({ PR: '7' }), 'failed to parse request: PR: must be an integer'],
    ['PR a fraction', body({ PR: 1.5 }), 'failed to parse request: PR: must be an integer'],
    ['PR negative', body({ PR: -1 }), 'PR: must be 0 (no pull request) or a pull request number'],
    ['Projects not an array', body({ Projects: 'net' }), 'failed to parse request: Projects: must be an array of strings'],
    ['a project not a string', body({ Projects: ['a', 2] }), 'failed to parse request: Projects[1]: must be a string'],
    ['an empty project name', body({ Projects: ['a', ''] }), 'Projects[1]: must be a project name'],
    ['a project name with a control character', body({ Projects: ['a\u0000'] }), 'Projects[0]: control characters are not allowed'],
    ['Paths not an array', body({ Paths: {} }), 'failed to parse request: Paths: must be an array of objects'],
    ['a path not an object', body({ Paths: ['a'] }), 'failed to parse request: Paths[0]: must be an object'],
    [
      'a path without its directory',
      body({ Paths: [{ Directory: 'a' }, { Workspace: 'w' }] }),
      'Paths[1].Directory: is required (or project_name)',
    ],
    ['a null path', body({ Paths: [null] }), 'Paths[0].Directory: is required (or project_name)'],
    ['a directory not a string', body({ Paths: [{ Directory: 1 }] }), 'failed to parse request: Paths[0].Directory: must be a string'],
    [
      'a directory climbing out',
      body({ Paths: [{ Directory: '../x' }] }),
      'Paths[0].Directory: using a relative path "../x" is not allowed',
    ],
    [
      'a directory climbing out after cleaning',
      body({ Paths: [{ Directory: 'a/../../x' }] }),
      'Paths[0].Directory: using a relative path "a/../../x" is not allowed',
    ],
    ['a directory named ..x', body({ Paths: [{ Directory: '..x' }] }), 'Paths[0].Directory: using a relative path "..x" is not allowed'],
    [
      'a directory with NUL',
      body({ Paths: [{ Directory: 'a\u0000b' }] }),
      'Paths[0].Directory: invalid dir "a\\x00b": control characters are not allowed',
    ],
    [
      'a glob climbing out',
      body({ Paths: [{ Directory: '../*' }] }),
      `Paths[0].Directory: using '..' in glob pattern "../*" is not allowed`,
    ],
    ['a bad glob', body({ Paths: [{ Directory: 'a[' }] }), 'Paths[0].Directory: invalid glob pattern "a["'],
    [
      'a workspace with a slash',
      body({ Paths: [{ Directory: 'a', Workspace: 'a/b' }] }),
      `Paths[0].Workspace: invalid workspace "a/b": cannot contain '/' or '\\'`,
    ],
    [
      'a workspace that is a flag',
      body({ Paths: [{ Directory: 'a', Workspace: '-x' }] }),
      `Paths[0].Workspace: invalid workspace "-x": cannot start with '-'`,
    ],
    [
      'a workspace with $',
      body({ Paths: [{ Directory: 'a', Workspace: '$(id)' }] }),
      `Paths[0].Workspace: invalid workspace "$(id)": cannot contain '$'`,
    ],
    [
      'a workspace with a space',
      body({ Paths: [{ Directory: 'a', Workspace: 'a b' }] }),
      'Paths[0].Workspace: invalid workspace "a b": cannot contain whitespace or control characters',
    ],
    [
      'project_name with a directory',
      body({ Paths: [{ project_name: 'net', Directory: 'a' }] }),
      'Paths[0]: project_name cannot be used with Directory or Workspace',
    ],
    [
      'project_name with a workspace',
      body({ Paths: [{ project_name: 'net', Workspace: 'w' }] }),
      'Paths[0]: project_name cannot be used with Directory or Workspace',
    ],
    ['another VCS type', body({ Type: 'Gitlab' }), 'Type: "Gitlab" is not a valid type'],
    ['an unknown type', body({ Type: 'github' }), 'Type: "github" is not a valid type'],
    ['a repository without owner', body({ Repository: 'infra' }), 'Repository: "infra" must be owner/name'],
    ['a repository with a path', body({ Repository: 'acme/infra/x' }), 'Repository: "acme/infra/x" must be owner/name'],
    ['a repository named ..', body({ Repository: 'acme/..' }), 'Repository: "acme/.." must be owner/name'],
    [
      'a repository URL',
      body({ Repository: 'https://github.com/acme/infra' }),
      'Repository: "https://github.com/acme/infra" must be owner/name',
    ],
    ['a ref that is a flag', body({ Ref: '--upload-pack=x' }), 'Ref: "--upload-pack=x" is not a valid branch name'],
    ['a ref with ..', body({ Ref: 'a..b' }), 'Ref: "a..b" is not a valid branch name'],
    ['a ref with a space', body({ Ref: 'a b' }), 'Ref: "a b" is not a valid branch name'],
    ['a ref ending .lock', body({ Ref: 'x.lock' }), 'Ref: "x.lock" is not a valid branch name'],
    ['a ref with a hidden part', body({ Ref: 'a/.b' }), 'Ref: "a/.b" is not a valid branch name'],
    ['a ref that is only refs/heads/', body({ Ref: 'refs/heads/' }), 'Ref: "" is not a valid branch name'],
    ['base_branch, which this server does not take', body({ base_branch: 'main' }), /^base_branch: is not supported by this server/],
  ];
  for (const [name, text, want] of table) {
    it(name, () => {
      const r = parseApiRequest(text, 'Github');
      assert.equal(r.ok, false);
      if (r.ok) return;
      if (typeof want === 'string') assert.equal(r.error, want);
      else assert.match(r.error, want);
    });
  }
});

describe('targetLabel', () => {
  it('names the project, or the dir and the workspace when one was given', () => {
    assert.deepEqual([{ project: 'net' }, { dir: 'a' }, { dir: 'a', workspace: 'w' }].map(targetLabel), ['net', 'a', 'a/w']);
  });
});

describe('--api-secret', () => {
  const config = configWithRequiredFlags('ato-api-flags-');

  it('is unset by default: the API is disabled', () => {
    assert.equal(config([]).apiSecret, undefined);
    assert.equal(config(['--api-secret', '']).apiSecret, undefined, 'empty counts as unset');
  });
  it('reads the flag and ATLANTIS_API_SECRET (the flag wins), and is one of the secrets the server scrubs', () => {
    assert.equal(config([], { ATLANTIS_API_SECRET: 'from-env-secret' }).apiSecret, 'from-env-secret');
    const c = config(['--api-secret=from-flag-secret'], { ATLANTIS_API_SECRET: 'from-env-secret' });
    assert.equal(c.apiSecret, 'from-flag-secret');
    assert.ok(serverSecretValues(c).includes('from-flag-secret'), 'the API secret is a secret value');
  });
});
