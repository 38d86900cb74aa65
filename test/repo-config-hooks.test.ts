// Server-side pre_workflow_hooks / post_workflow_hooks (repos.yaml): parsing, and the pure
// decisions and texts of src/server/workflow/commands/hooks.ts, table-tested against what Atlantis
// v0.47 does (server/events/pre_workflow_hooks_command_runner.go, post_..., the hook runners
// in server/core/runtime and commit_status_updater.go).
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { test } from 'node:test';
import {
  escapedCommentArgs,
  goQuote,
  hookDescription,
  hookEnv,
  hookErrorText,
  hookRunsFor,
  hookStatusContext,
  hookStatusDescription,
  hooksFor,
  preHookFailedComment,
} from '../src/server/workflow/commands/hooks.js';
import { baseBranchAllowed, parseServerSideRepoConfig } from '../src/server/workflow/repo-config/server-side.js';
import { RepoConfigError } from '../src/server/workflow/repo-config/types.js';

const REPOS_YAML = `
repos:
  - id: /.*/
    pre_workflow_hooks:
      - run: ./gen.sh
        description: Generating configs
      - run: echo second
        commands: plan, apply
    post_workflow_hooks:
      - run: echo post-all
  - id: github.com/acme/infra
    branch: /^main$/
    pre_workflow_hooks:
      - run: echo infra-only
        shell: bash
        shellArgs: -euc
    post_workflow_hooks:
      - run: echo infra-main-post
`;

test('hooks parse from repos.yaml with every key Atlantis reads', () => {
  const s = parseServerSideRepoConfig(REPOS_YAML);
  assert.deepEqual(s.repos[0]?.preWorkflowHooks, [
    { run: './gen.sh', description: 'Generating configs' },
    { run: 'echo second', commands: 'plan, apply' },
  ]);
  assert.deepEqual(s.repos[1]?.preWorkflowHooks, [{ run: 'echo infra-only', shell: 'bash', shellArgs: '-euc' }]);
  assert.equal(s.repos[1]?.branch, '/^main$/');
  // --repo-config-json is read by the same parser.
  const j = parseServerSideRepoConfig(
    JSON.stringify({ repos: [{ id: '/.*/', post_workflow_hooks: [{ run: 'echo j', commands: 'apply' }] }] }),
    '--repo-config-json',
  );
  assert.deepEqual(j.repos[0]?.postWorkflowHooks, [{ run: 'echo j', commands: 'apply' }]);
});

test('bad hooks and branches are refused at start, each named by its place', () => {
  const cases: Array<[string, RegExp]> = [
    ['repos:\n- id: /.*/\n  pre_workflow_hooks: {run: x}', /repos\[0\]\.pre_workflow_hooks: must be a list of hooks/],
    ['repos:\n- id: /.*/\n  pre_workflow_hooks: [{description: d}]', /repos\[0\]\.pre_workflow_hooks\[0\]\.run: is required/],
    ['repos:\n- id: /.*/\n  post_workflow_hooks: [{run: x, shellArgs: [-c]}]', /post_workflow_hooks\[0\]\.shellArgs: must be a string/],
    ['repos:\n- id: /.*/\n  pre_workflow_hooks: [{run: x, when: plan}]', /pre_workflow_hooks\[0\]: unknown key "when"/],
    ['repos:\n- id: /.*/\n  branch: main', /repos\[0\]\.branch: regex must begin and end with a slash '\/'/],
    ['repos:\n- id: /.*/\n  branch: /(/', /repos\[0\]\.branch: parsing: \/\(\/: /],
  ];
  for (const [text, re] of cases) {
    assert.throws(
      () => parseServerSideRepoConfig(text),
      (e: unknown) => e instanceof RepoConfigError && re.test(e.message),
      text,
    );
  }
});

test('hooksFor: every matching rule adds its hooks in order; post hooks also need the branch', () => {
  const s = parseServerSideRepoConfig(REPOS_YAML);
  const runs = (kind: 'pre' | 'post', repo: string, branch: string) => hooksFor(s, kind, repo, branch).map((h) => h.run);
  const rows: Array<[kind: 'pre' | 'post', repo: string, branch: string, want: string[]]> = [
    ['pre', 'github.com/acme/infra', 'main', ['./gen.sh', 'echo second', 'echo infra-only']],
    // Atlantis checks only the id for pre hooks.
    ['pre', 'github.com/acme/infra', 'dev', ['./gen.sh', 'echo second', 'echo infra-only']],
    ['pre', 'github.com/acme/other', 'main', ['./gen.sh', 'echo second']],
    ['post', 'github.com/acme/infra', 'main', ['echo post-all', 'echo infra-main-post']],
    ['post', 'github.com/acme/infra', 'dev', ['echo post-all']],
  ];
  for (const [kind, repo, branch, want] of rows) assert.deepEqual(runs(kind, repo, branch), want, `${kind} ${repo} ${branch}`);
  assert.deepEqual(hooksFor(undefined, 'pre', 'github.com/acme/infra', 'main'), []);
});

test('baseBranchAllowed: the last matching rule with a branch decides, as Atlantis MatchingRepo', () => {
  const s = parseServerSideRepoConfig(REPOS_YAML);
  assert.equal(baseBranchAllowed(s, 'github.com/acme/infra', 'main'), true);
  assert.equal(baseBranchAllowed(s, 'github.com/acme/infra', 'dev'), false);
  assert.equal(baseBranchAllowed(s, 'github.com/acme/other', 'dev'), true);
  assert.equal(baseBranchAllowed(undefined, 'github.com/acme/infra', 'dev'), true);
});

test('hookRunsFor: commands is a substring test of the comma list, as in Atlantis', () => {
  const rows: Array<[commands: string | undefined, name: string, want: boolean]> = [
    [undefined, 'plan', true],
    ['', 'unlock', true],
    ['plan', 'plan', true],
    ['plan', 'apply', false],
    ['plan, apply', 'apply', true],
    ['plan,apply', 'version', false],
    // Atlantis's strings.Contains: `state` is inside `state_rm` too.
    ['state_rm', 'state', true],
  ];
  for (const [commands, name, want] of rows) {
    const hook = commands === undefined ? { run: 'x' } : { run: 'x', commands };
    assert.equal(hookRunsFor(hook, name), want, `${commands} ${name}`);
  }
});

test('descriptions, status contexts and status descriptions as Atlantis sets them', () => {
  assert.equal(hookDescription({ run: 'x' }, 'pre', 0), 'Pre workflow hook #0');
  assert.equal(hookDescription({ run: 'x' }, 'post', 2), 'Post workflow hook #2');
  assert.equal(hookDescription({ run: 'x', description: 'Gen' }, 'pre', 1), 'Gen');
  assert.equal(hookStatusContext('pre', 'Gen'), 'atlantis/pre_workflow_hook: Gen');
  assert.equal(hookStatusContext('post', 'Post workflow hook #0'), 'atlantis/post_workflow_hook: Post workflow hook #0');
  const long = 'd'.repeat(300);
  const full = `atlantis/pre_workflow_hook: ${long}`;
  const ctx = hookStatusContext('pre', long);
  assert.equal(ctx.length, 255);
  assert.equal(ctx, `${full.slice(0, 255 - 13)}-${createHash('sha256').update(full).digest('hex').slice(0, 12)}`);
  assert.equal(hookStatusDescription('pending'), 'in progress...');
  assert.equal(hookStatusDescription('success'), 'succeeded.');
  assert.equal(hookStatusDescription('failure'), 'failed.');
  assert.equal(hookStatusDescription('success', 'custom words'), 'custom words');
});

test('env: the variables Atlantis documents, COMMENT_ARGS escaped, COMMAND_HAS_ERRORS for post hooks only', () => {
  const pull = {
    repo: 'acme/infra',
    pull: 7,
    user: 'dev',
    author: 'alice',
    headRepo: 'alice/infra',
    headSha: 'abc',
    headRef: 'feat',
    baseRef: 'main',
    url: 'https://github.com/acme/infra/pull/7',
  };
  const cmd = { name: 'plan', extraArgs: ['-var', 'a=b'], project: 'prod' };
  assert.deepEqual(hookEnv('pre', pull, cmd, '/w/repo', false), {
    BASE_BRANCH_NAME: 'main',
    BASE_REPO_NAME: 'infra',
    BASE_REPO_OWNER: 'acme',
    COMMENT_ARGS: '\\-\\v\\a\\r,\\a\\=\\b',
    DIR: '/w/repo',
    HEAD_BRANCH_NAME: 'feat',
    HEAD_COMMIT: 'abc',
    HEAD_REPO_NAME: 'infra',
    HEAD_REPO_OWNER: 'alice',
    PULL_AUTHOR: 'alice',
    PULL_NUM: '7',
    PULL_URL: 'https://github.com/acme/infra/pull/7',
    USER_NAME: 'dev',
    OUTPUT_STATUS_FILE: '/w/repo/OUTPUT_STATUS_FILE',
    COMMAND_NAME: 'plan',
    PROJECT_NAME: 'prod',
  });
  assert.equal(hookEnv('pre', pull, cmd, '/w', true).COMMAND_HAS_ERRORS, undefined);
  assert.equal(hookEnv('post', pull, cmd, '/w', true).COMMAND_HAS_ERRORS, 'true');
  assert.equal(hookEnv('post', pull, cmd, '/w', false).COMMAND_HAS_ERRORS, 'false');
  assert.equal(escapedCommentArgs([]), '');
  assert.equal(escapedCommentArgs(['arg1', 'arg2']), '\\a\\r\\g\\1,\\a\\r\\g\\2');
});

test("error and comment texts worded as Atlantis's (Go's %q quoting included)", () => {
  const rows: Array<[string, string]> = [
    ['sh -c exit 1', '"sh -c exit 1"'],
    ['echo "hi"\nexit 3', '"echo \\"hi\\"\\nexit 3"'],
    ['tab\there\\', '"tab\\there\\\\"'],
    ['\x01\x7f', '"\\x01\\x7f"'],
    ['é ✓', '"é ✓"'],
  ];
  for (const [s, want] of rows) assert.equal(goQuote(s), want, s);
  assert.equal(
    hookErrorText({ exitCode: 1, signal: null }, { run: 'exit 1' }, '/data/repos/acme/infra/7/default', 'boom\n'),
    'exit status 1: running "sh -c exit 1" in "/data/repos/acme/infra/7/default": \nboom\n',
  );
  assert.equal(
    hookErrorText({ exitCode: null, signal: 'SIGKILL' }, { run: 'x', shell: 'bash', shellArgs: '-eu -c' }, '/r', ''),
    'signal: killed: running "bash -eu -c x" in "/r": \n',
  );
  assert.equal(preHookFailedComment('exit status 1: x'), '```\nError: Pre-workflow hook failed: exit status 1: x\n```');
  assert.ok(preHookFailedComment('y'.repeat(100_000)).length < 65_536);
});
