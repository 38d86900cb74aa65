// When project locks are taken: repo_locks / repo_locking from repos.yaml and atlantis.yaml
// and --disable-repo-locking, merged as Atlantis v0.47's global config merges them (cases
// after its MergeProjectCfg and raw repo_locks tests, as a table).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { type RepoLocksMode, commandLocks, projectLockMode, repoLocksModeFor } from '../src/server/workflow/repo-config/lock-policy.js';
import { repoConfigViolation } from '../src/server/workflow/checkout/projects.js';
import { parseRepoConfig } from '../src/server/workflow/repo-config/atlantis-yaml.js';
import { parseServerSideRepoConfig, serverLockSettingsFor } from '../src/server/workflow/repo-config/server-side.js';
import { RepoConfigError } from '../src/server/workflow/repo-config/types.js';

describe('repo locks mode', () => {
  const rows: [string, Parameters<typeof repoLocksModeFor>[0], RepoLocksMode][] = [
    ['default', { disableRepoLocking: false, server: { allowedOverrides: [] } }, 'on_plan'],
    ['server on_apply', { disableRepoLocking: false, server: { repoLocks: 'on_apply', allowedOverrides: [] } }, 'on_apply'],
    ['server repo_locking: false', { disableRepoLocking: false, server: { repoLocking: false, allowedOverrides: [] } }, 'disabled'],
    [
      'repo_locking: false wins over server repo_locks',
      { disableRepoLocking: false, server: { repoLocks: 'on_apply', repoLocking: false, allowedOverrides: [] } },
      'disabled',
    ],
    [
      'repo and project settings ignored without the override',
      { disableRepoLocking: false, server: { allowedOverrides: [] }, repo: { repoLocks: 'disabled' }, project: { repoLocks: 'on_apply' } },
      'on_plan',
    ],
    [
      'repo top level with the override',
      { disableRepoLocking: false, server: { allowedOverrides: ['repo_locks'] }, repo: { repoLocks: 'on_apply' } },
      'on_apply',
    ],
    [
      'project beats repo top level',
      {
        disableRepoLocking: false,
        server: { allowedOverrides: ['repo_locks'] },
        repo: { repoLocks: 'on_apply' },
        project: { repoLocks: 'disabled' },
      },
      'disabled',
    ],
    [
      'project repo_locking: false',
      { disableRepoLocking: false, server: { allowedOverrides: ['repo_locking'] }, project: { repoLocking: false } },
      'disabled',
    ],
    [
      'project repo_locking: true re-enables a disabled server',
      { disableRepoLocking: false, server: { repoLocks: 'disabled', allowedOverrides: ['repo_locking'] }, project: { repoLocking: true } },
      'on_plan',
    ],
    [
      'project repo_locking: true keeps on_apply',
      { disableRepoLocking: false, server: { repoLocks: 'on_apply', allowedOverrides: ['repo_locking'] }, project: { repoLocking: true } },
      'on_apply',
    ],
    [
      'overrides apply in the listed order',
      {
        disableRepoLocking: false,
        server: { allowedOverrides: ['repo_locks', 'repo_locking'] },
        project: { repoLocks: 'on_apply', repoLocking: false },
      },
      'disabled',
    ],
    [
      '--disable-repo-locking beats everything',
      { disableRepoLocking: true, server: { repoLocks: 'on_apply', allowedOverrides: ['repo_locks'] }, project: { repoLocks: 'on_plan' } },
      'disabled',
    ],
  ];
  for (const [name, opts, want] of rows) it(name, () => assert.equal(repoLocksModeFor(opts), want));

  it('which command takes the lock (an apply under on_plan takes it again: the PR must still hold it)', () => {
    assert.deepEqual(
      (['on_plan', 'on_apply', 'disabled'] as const).map((m) => [commandLocks(m, 'plan'), commandLocks(m, 'apply')]),
      [
        [true, true],
        [false, true],
        [false, false],
      ],
    );
  });
});

describe('repo_locks in the config files', () => {
  it("a selected project takes its own entry's setting (named, or unnamed at its dir and workspace)", () => {
    const c = parseRepoConfig(
      'version: 3\nprojects:\n- dir: a\n  repo_locks: {mode: on_apply}\n- name: n\n  dir: b\n  repo_locks: {mode: disabled}\n- name: m\n  dir: b\n',
    );
    const server = { allowedOverrides: ['repo_locks'] };
    assert.equal(projectLockMode(false, server, c, { dir: 'a', workspace: 'default' }), 'on_apply');
    assert.equal(projectLockMode(false, server, c, { name: 'n', dir: 'b', workspace: 'default' }), 'disabled');
    assert.equal(projectLockMode(false, server, c, { name: 'm', dir: 'b', workspace: 'default' }), 'on_plan');
    assert.equal(projectLockMode(false, server, c, { dir: 'z', workspace: 'default' }), 'on_plan', 'a default project');
    assert.equal(projectLockMode(false, server, undefined, { dir: 'a', workspace: 'default' }), 'on_plan', 'no atlantis.yaml');
  });

  it('atlantis.yaml: top level and per project', () => {
    const c = parseRepoConfig(
      'version: 3\nrepo_locks:\n  mode: on_apply\nprojects:\n- dir: a\n  repo_locks:\n    mode: disabled\n- dir: b\n  repo_locking: false\n- dir: c\n  repo_locks: {}\n',
    );
    assert.equal(c.repoLocks, 'on_apply');
    assert.deepEqual(
      c.projects.map((p) => [p.repoLocks, p.repoLocking]),
      [
        ['disabled', undefined],
        [undefined, false],
        ['on_plan', undefined],
      ],
    );
    assert.deepEqual(c.unsupported, [], 'nothing unsupported');
  });

  it('atlantis.yaml: a bad mode is an error naming its place', () => {
    assert.throws(
      () => parseRepoConfig('version: 3\nprojects:\n- dir: a\n  repo_locks:\n    mode: always\n'),
      (e: unknown) => e instanceof RepoConfigError && /projects\[0\]\.repo_locks\.mode: must be a valid value/.test(e.message),
    );
  });

  it('a project may set them only where the server allows it (Atlantis text)', () => {
    const c = parseRepoConfig('version: 3\nprojects:\n- dir: a\n  repo_locks:\n    mode: disabled\n');
    assert.equal(
      repoConfigViolation(c, { allowedOverrides: [], allowCustomWorkflows: false }),
      "repo config not allowed to set 'repo_locks' key: server-side config needs 'allowed_overrides: [repo_locks]'",
    );
    assert.equal(repoConfigViolation(c, { allowedOverrides: ['repo_locks'], allowCustomWorkflows: false }), undefined);
    const d = parseRepoConfig('version: 3\nprojects:\n- dir: a\n  repo_locking: false\n');
    assert.match(repoConfigViolation(d, { allowedOverrides: [], allowCustomWorkflows: false }) ?? '', /'repo_locking' key/);
  });

  it('repos.yaml: per repo rule, later rules win', () => {
    const s = parseServerSideRepoConfig(
      'repos:\n- id: /.*/\n  repo_locks:\n    mode: on_apply\n  allowed_overrides: [repo_locks]\n- id: github.com/acme/infra\n  repo_locking: false\n',
    );
    assert.deepEqual(serverLockSettingsFor(s, 'github.com/acme/other'), { allowedOverrides: ['repo_locks'], repoLocks: 'on_apply' });
    const infra = serverLockSettingsFor(s, 'github.com/acme/infra');
    assert.deepEqual([infra.repoLocks, infra.repoLocking], ['on_apply', false]);
  });
});
