// Automerge (src/server/workflow/automerge/automerge.ts), as Atlantis v0.47 does it on GitHub: the pure
// decisions (settings from --automerge and the repo configs, when to merge, which method,
// Atlantis's texts), the flags, the config keys, and the merge calls against the stand-in
// (GitHub's 405 when a PR is not mergeable, branch deletion).
import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { parseFlags, UsageError } from '../src/config/flags.js';
import { buildServerConfig, SERVER_FLAGS } from '../src/server/config.js';
import type { ProjectPlanStatus, PullStatus } from '../src/server/locks/pull-status.js';
import { GitHubApiError, GitHubClient } from '../src/server/vcs/github/client.js';
import {
  AUTOMERGE_COMMENT,
  type AutomergeSettings,
  automergeFailedComment,
  automergeSettings,
  automergeSettingsFor,
  commentMergeMethod,
  decideAutomerge,
  notApplied,
} from '../src/server/workflow/automerge/automerge.js';
import { githubErrorText } from '../src/server/vcs/github/error-text.js';
import { chooseMergeMethod } from '../src/server/vcs/github/merge.js';
import { repoConfigViolation } from '../src/server/workflow/checkout/projects.js';
import { parseRepoConfig } from '../src/server/workflow/repo-config/atlantis-yaml.js';
import { parseServerSideRepoConfig, serverSettingsFor } from '../src/server/workflow/repo-config/server-side.js';
import { GitHubStandin } from './support/github-standin.js';

describe("Atlantis's automerge texts", () => {
  it('are word for word', () => {
    assert.equal(AUTOMERGE_COMMENT, 'Automatically merging because all plans have been successfully applied.');
    assert.equal(automergeFailedComment('boom'), 'Automerging failed:\n```\nboom\n```');
  });
});

describe('automerge settings (pure)', () => {
  const server = (dsb?: boolean, allowed: string[] = []) => ({
    allowedOverrides: allowed,
    ...(dsb === undefined ? {} : { deleteSourceBranchOnMerge: dsb }),
  });
  const rows: Array<
    [
      string,
      boolean,
      ReturnType<typeof server>,
      { automerge?: boolean; deleteSourceBranchOnMerge?: boolean } | undefined,
      { deleteSourceBranchOnMerge?: boolean } | undefined,
      AutomergeSettings,
    ]
  > = [
    ['off everywhere', false, server(), undefined, undefined, { enabled: false, deleteSourceBranch: false }],
    ['--automerge, no atlantis.yaml', true, server(), undefined, undefined, { enabled: true, deleteSourceBranch: false }],
    ['--automerge, atlantis.yaml without the key', true, server(), {}, undefined, { enabled: true, deleteSourceBranch: false }],
    [
      'atlantis.yaml automerge: false wins over --automerge',
      true,
      server(),
      { automerge: false },
      undefined,
      { enabled: false, deleteSourceBranch: false },
    ],
    [
      'atlantis.yaml automerge: true without --automerge',
      false,
      server(),
      { automerge: true },
      undefined,
      { enabled: true, deleteSourceBranch: false },
    ],
    ['server side deletes', false, server(true), undefined, undefined, { enabled: false, deleteSourceBranch: true }],
    [
      'repo top level ignored without the override',
      false,
      server(false),
      { deleteSourceBranchOnMerge: true },
      undefined,
      { enabled: false, deleteSourceBranch: false },
    ],
    [
      'repo top level with the override',
      false,
      server(false, ['delete_source_branch_on_merge']),
      { deleteSourceBranchOnMerge: true },
      undefined,
      { enabled: false, deleteSourceBranch: true },
    ],
    [
      'project level wins over the top level',
      true,
      server(false, ['delete_source_branch_on_merge']),
      { deleteSourceBranchOnMerge: true },
      { deleteSourceBranchOnMerge: false },
      { enabled: true, deleteSourceBranch: false },
    ],
  ];
  for (const [name, flag, s, repo, project, want] of rows)
    it(name, () => assert.deepEqual(automergeSettings(flag, s, repo, project), want));

  it('takes the first project of the command from atlantis.yaml, by name or by dir and workspace', () => {
    const repo = parseRepoConfig(
      'version: 3\nautomerge: true\nprojects:\n- name: a\n  dir: x\n  delete_source_branch_on_merge: true\n- dir: y\n',
    );
    const sc = parseServerSideRepoConfig('repos:\n- id: /.*/\n  allowed_overrides: [delete_source_branch_on_merge]\n');
    const id = 'github.com/acme/infra';
    assert.deepEqual(automergeSettingsFor(false, sc, id, repo, { dir: 'x', workspace: 'default', project: 'a' }), {
      enabled: true,
      deleteSourceBranch: true,
    });
    assert.deepEqual(automergeSettingsFor(false, sc, id, repo, { dir: 'x', workspace: 'default' }), {
      enabled: true,
      deleteSourceBranch: true,
    });
    assert.deepEqual(automergeSettingsFor(false, sc, id, repo, { dir: 'y', workspace: 'default' }), {
      enabled: true,
      deleteSourceBranch: false,
    });
    assert.deepEqual(automergeSettingsFor(false, undefined, id, undefined, undefined), { enabled: false, deleteSourceBranch: false });
  });
});

describe('when to merge (pure)', () => {
  const on: AutomergeSettings = { enabled: true, deleteSourceBranch: false };
  const base = {
    settings: on,
    applySucceeded: true,
    unapplied: [] as Array<{ dir: string; workspace: string; status: string }>,
    autoMergeDisabled: false,
    commentMethod: undefined as string | undefined,
    serverMethod: '',
    disableLabel: '',
  };
  const rows: Array<[string, Partial<typeof base> & { labels?: string[] }, string]> = [
    ['every plan applied', {}, 'merge:'],
    ['automerge off', { settings: { ...on, enabled: false } }, 'skip: automerge is not enabled'],
    ['--auto-merge-disabled on the comment', { autoMergeDisabled: true }, 'skip: the comment has --auto-merge-disabled'],
    ['the apply had errors', { applySucceeded: false }, 'skip: the apply had errors'],
    [
      'a project still planned',
      { unapplied: [{ dir: 'b', workspace: 'default', status: 'planned' }] },
      'skip: project at dir "b", workspace "default" has status "planned"',
    ],
    [
      'a project whose plan failed (no plan file, only its status)',
      { unapplied: [{ dir: 'c', workspace: 'default', status: 'plan_errored' }] },
      'skip: project at dir "c", workspace "default" has status "plan_errored"',
    ],
    ['the comment method wins', { commentMethod: 'squash', serverMethod: 'rebase' }, 'merge:squash'],
    ['else the server method', { serverMethod: 'rebase' }, 'merge:rebase'],
    [
      'the disable label is on the PR',
      { disableLabel: 'no-merge', labels: ['x', 'no-merge'] },
      'skip: the pull request has the label "no-merge"',
    ],
    ['the disable label is not on the PR', { disableLabel: 'no-merge', labels: ['x'] }, 'merge:'],
  ];
  for (const [name, o, want] of rows) {
    it(name, () => {
      const d = decideAutomerge({ ...base, ...o });
      assert.equal(d.kind === 'merge' ? `merge:${d.method}` : `skip: ${d.reason}`, want);
    });
  }
});

describe('projects that block the merge, from the PR-wide status (pure)', () => {
  const rec = (dir: string, status: ProjectPlanStatus) => ({ dir, workspace: 'default', project: '', status });
  const rows: Array<[string, PullStatus | undefined, string[]]> = [
    ['no status recorded', undefined, []],
    ['all applied', { headSha: 'h', projects: [rec('a', 'applied'), rec('b', 'applied')] }, []],
    [
      'every other status blocks, as Atlantis (only "applied" passes)',
      {
        headSha: 'h',
        projects: [
          rec('a', 'applied'),
          rec('b', 'plan_errored'),
          rec('c', 'planned'),
          rec('d', 'planned_no_changes'),
          rec('e', 'apply_errored'),
          rec('f', 'plan_discarded'),
        ],
      },
      ['b:plan_errored', 'c:planned', 'd:planned_no_changes', 'e:apply_errored', 'f:plan_discarded'],
    ],
  ];
  for (const [name, ps, want] of rows) {
    it(name, () => {
      assert.deepEqual(
        notApplied(ps).map((p) => `${p.dir}:${p.status}`),
        want,
      );
    });
  }
});

describe("the apply comment's --auto-merge-method", () => {
  // Parsed by the comment parser into `autoMergeMethod` on the command (Atlantis: empty = none).
  const apply = { name: 'apply' as const, verbose: false, autoMergeDisabled: false, extraArgs: [], args: [] };
  it('is read from autoMergeMethod; empty or absent means none', () => {
    assert.equal(commentMergeMethod({ ...apply, autoMergeMethod: 'squash' } as typeof apply), 'squash');
    assert.equal(commentMergeMethod({ ...apply, autoMergeMethod: '' } as typeof apply), undefined);
    assert.equal(commentMergeMethod(apply), undefined);
  });
});

describe('which merge method (pure, Atlantis rules)', () => {
  const all = { allowMergeCommit: true, allowRebaseMerge: true, allowSquashMerge: true };
  const rows: Array<[string, string, typeof all, string]> = [
    ['default: merge', '', all, 'merge'],
    ['default without merge commits: rebase', '', { ...all, allowMergeCommit: false }, 'rebase'],
    ['default with only squash', '', { allowMergeCommit: false, allowRebaseMerge: false, allowSquashMerge: true }, 'squash'],
    ['default when the repo says nothing', '', { allowMergeCommit: false, allowRebaseMerge: false, allowSquashMerge: false }, 'merge'],
    ['asked and allowed', 'squash', all, 'squash'],
    [
      'asked and not allowed',
      'rebase',
      { ...all, allowRebaseMerge: false },
      "merge method 'rebase' is not allowed by the repository Pull Request settings",
    ],
    ['unknown', 'fast-forward', all, "merge method 'fast-forward' is unknown. Specify one of the valid values: 'merge, rebase, squash'"],
  ];
  for (const [name, asked, repo, want] of rows) {
    it(name, () => {
      const r = chooseMergeMethod(asked, repo);
      assert.equal('error' in r ? r.error : r.method, want);
    });
  }

  it("words API errors as Atlantis's GitHub library does", () => {
    const e = new GitHubApiError('PUT', '/repos/acme/infra/pulls/3/merge', 405, 'Pull Request is not mergeable');
    assert.equal(
      githubErrorText(e, 'https://api.github.com'),
      'PUT https://api.github.com/repos/acme/infra/pulls/3/merge: 405 Pull Request is not mergeable []',
    );
    const v = new GitHubApiError('PUT', '/x', 422, 'Validation Failed', undefined, [
      { resource: 'PullRequest', field: 'merge_method', code: 'invalid' },
    ]);
    assert.equal(
      githubErrorText(v, 'https://h/api/v3'),
      'PUT https://h/api/v3/x: 422 Validation Failed [{Resource:PullRequest Field:merge_method Code:invalid Message:}]',
    );
  });
});

describe('automerge flags and config keys', () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'ato-automerge-'));
  const base = [
    '--repo-allowlist',
    'github.com/acme/*',
    '--gh-user',
    'bot',
    '--gh-token',
    't',
    '--gh-webhook-secret',
    's',
    '--data-dir',
    dir,
  ];
  const config = (argv: string[], env: NodeJS.ProcessEnv = {}) =>
    buildServerConfig(parseFlags([...base, ...argv], SERVER_FLAGS, env).values);

  it('defaults as Atlantis: off, method from the repository, no label', () => {
    const c = config([]);
    assert.deepEqual([c.automerge, c.automergeMethod, c.disableAutomergeLabel], [false, '', '']);
  });

  it('--automerge, --automerge-method, --disable-automerge-label and their env', () => {
    const c = config(['--automerge', '--automerge-method', 'squash', '--disable-automerge-label', 'hold']);
    assert.deepEqual([c.automerge, c.automergeMethod, c.disableAutomergeLabel], [true, 'squash', 'hold']);
    const e = config([], { ATLANTIS_AUTOMERGE: 'true', ATLANTIS_AUTOMERGE_METHOD: 'rebase' });
    assert.deepEqual([e.automerge, e.automergeMethod], [true, 'rebase']);
    assert.deepEqual(e.flagWarnings, []);
  });

  it("refuses an unknown --automerge-method with Atlantis's words", () => {
    assert.throws(
      () => config(['--automerge-method', 'fast-forward']),
      (e: unknown) => e instanceof UsageError && e.message === 'invalid --automerge-method: must be one of [merge rebase squash]',
    );
  });

  it('atlantis.yaml: automerge unset is not false; delete_source_branch_on_merge at both levels', () => {
    assert.equal(parseRepoConfig('version: 3\n').automerge, undefined);
    assert.equal(parseRepoConfig('version: 3\nautomerge: false\n').automerge, false);
    const c = parseRepoConfig(
      'version: 3\ndelete_source_branch_on_merge: true\nprojects:\n- dir: a\n  delete_source_branch_on_merge: false\n',
    );
    assert.equal(c.deleteSourceBranchOnMerge, true);
    assert.equal(c.projects[0]?.deleteSourceBranchOnMerge, false);
    assert.deepEqual(c.unsupported, []);
    assert.throws(
      () => parseRepoConfig('version: 3\ndelete_source_branch_on_merge: yes please\n'),
      /delete_source_branch_on_merge: must be true or false/,
    );
  });

  it("a project's delete_source_branch_on_merge needs the server's allowed_overrides (Atlantis's text)", () => {
    const c = parseRepoConfig('version: 3\nprojects:\n- dir: a\n  delete_source_branch_on_merge: true\n');
    assert.equal(
      repoConfigViolation(c, { allowedOverrides: [], allowCustomWorkflows: false }),
      "repo config not allowed to set 'delete_source_branch_on_merge' key: server-side config needs 'allowed_overrides: [delete_source_branch_on_merge]'",
    );
    assert.equal(repoConfigViolation(c, { allowedOverrides: ['delete_source_branch_on_merge'], allowCustomWorkflows: false }), undefined);
  });

  it('repos.yaml: delete_source_branch_on_merge per repo, later rules win', () => {
    const sc = parseServerSideRepoConfig(
      'repos:\n- id: /.*/\n  delete_source_branch_on_merge: true\n- id: github.com/acme/keep\n  delete_source_branch_on_merge: false\n',
    );
    assert.equal(serverSettingsFor(sc, 'github.com/acme/infra').deleteSourceBranchOnMerge, true);
    assert.equal(serverSettingsFor(sc, 'github.com/acme/keep').deleteSourceBranchOnMerge, false);
  });
});

describe('merging through the API (stand-in)', () => {
  let gh: GitHubStandin;
  let client: GitHubClient;
  before(async () => {
    gh = await GitHubStandin.start();
    gh.addRepo('acme/infra', { allowRebaseMerge: false });
    gh.addPull('acme/infra', { number: 1, headRef: 'feat-1', labels: ['infra', 'hold'] });
    gh.addPull('acme/infra', { number: 2, headRef: 'feat-2', mergeable: false, mergeableState: 'blocked' });
    client = new GitHubClient({ baseUrl: gh.url, token: gh.token, retry: { maxAttempts: 1 } });
  });
  after(() => gh.close());

  it("reads the repository's merge settings", async () => {
    assert.deepEqual(await client.getRepoMergeSettings('acme/infra'), {
      allowMergeCommit: true,
      allowRebaseMerge: false,
      allowSquashMerge: true,
    });
  });

  it("reads the PR's labels", async () => assert.deepEqual(await client.listPullLabels('acme/infra', 1), ['infra', 'hold']));

  it('a PR that is not mergeable gets 405, worded as Atlantis words it', async () => {
    const e = await client.mergePull('acme/infra', 2, 'merge').then(
      () => assert.fail('merged'),
      (x: unknown) => x,
    );
    assert.equal(
      `merging pull request: ${githubErrorText(e, gh.url)}`,
      `merging pull request: PUT ${gh.url}/repos/acme/infra/pulls/2/merge: 405 Pull Request is not mergeable []`,
    );
  });

  it('a method the repository does not allow gets 405 from GitHub', async () => {
    await assert.rejects(client.mergePull('acme/infra', 1, 'rebase'), (e: unknown) => e instanceof GitHubApiError && e.status === 405);
  });

  it('merges with the method, then deletes the branch (once)', async () => {
    assert.deepEqual(await client.mergePull('acme/infra', 1, 'squash'), {
      merged: true,
      message: 'Pull Request successfully merged',
      sha: gh.mergeState('acme/infra')?.merges[0]?.sha,
    });
    assert.equal(gh.getPull('acme/infra', 1)?.merged, true);
    assert.equal(gh.mergeState('acme/infra')?.merges[0]?.method, 'squash');
    await client.deleteBranch('acme/infra', 'feat-1');
    assert.deepEqual(gh.mergeState('acme/infra')?.deletedBranches, ['feat-1']);
    await assert.rejects(client.deleteBranch('acme/infra', 'feat-1'), (e: unknown) => e instanceof GitHubApiError && e.status === 422);
    await assert.rejects(client.mergePull('acme/infra', 1, 'merge'), (e: unknown) => e instanceof GitHubApiError && e.status === 405);
  });
});
