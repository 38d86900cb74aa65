// Server-side workflow hooks against the real server process, the GitHub stand-in, real git
// and real terraform: a pre hook that writes atlantis.yaml (the command reads the config after
// the hooks), the hook env (Atlantis's variables, no server secret), the hook statuses and job
// pages, a failing hook with and without --fail-on-pre-workflow-hook-error, and post hooks
// after the command (judged from the server's own log timestamps).
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { type CliProcess, startCli, waitForHttp } from './support/cli.js';
import { childList } from './support/children.js';
import { terraformConfig } from './support/git-repos.js';
import { waitFor } from './support/server.js';
import { type WorkflowEnv, createWorkflowEnv, tempDataDir } from './support/workflow-env.js';

const REPOS_YAML = `workflows:
  importer:
    import:
      steps:
        - init
        - import:
            extra_args: ["-var=marker=from-stage"]
repos:
  - id: /.*/
    workflow: importer
    pre_workflow_hooks:
      - run: |
          case "$HEAD_BRANCH_NAME" in *fail*) echo "nope from $HEAD_BRANCH_NAME"; exit 3;; esac
          [ -f atlantis.yaml ] || cat > atlantis.yaml <<EOF
          version: 3
          projects:
          - name: generated-$PULL_NUM
            dir: app
          EOF
        description: Generating atlantis.yaml
      - run: |
          echo "hook-env PULL_NUM=$PULL_NUM COMMAND_NAME=$COMMAND_NAME BASE=$BASE_REPO_OWNER/$BASE_REPO_NAME HEAD=$HEAD_REPO_OWNER/$HEAD_REPO_NAME BRANCH=$HEAD_BRANCH_NAME BASE_BRANCH=$BASE_BRANCH_NAME AUTHOR=$PULL_AUTHOR USER=$USER_NAME URL=$PULL_URL DIR_OK=$([ "$DIR" = "$(pwd)" ] && echo yes)"
          echo "secrets token=[\${GITHUB_TOKEN:-none}] atlantis_vars=$(env | grep -c '^ATLANTIS_')"
          echo "custom words for $COMMAND_NAME" > "$OUTPUT_STATUS_FILE"
        shell: bash
        shellArgs: -eu -c
        commands: plan
    post_workflow_hooks:
      - run: echo "post $COMMAND_NAME errors=$COMMAND_HAS_ERRORS"
`;

let env: WorkflowEnv;
const servers = childList();
let repoConfig: string;

async function start(host: string, extra: string[] = []): Promise<{ p: CliProcess; url: string }> {
  // GITHUB_TOKEN holds the token and ATLANTIS_* is the server's: neither may reach a hook.
  const p = startCli(env.serverArgs(tempDataDir(), host, ['--repo-config', repoConfig, '--log-level', 'debug', ...extra]), {
    GITHUB_TOKEN: env.gh.token,
    ATLANTIS_TEST_MARKER: 'server-only',
  });
  servers.push(p);
  const url = `http://${host}:4141`;
  await waitForHttp(`${url}/healthz`).catch((e: Error) => {
    throw new Error(`${e.message}\n${p.output()}`);
  });
  return { p, url };
}

interface LogLine {
  time: string;
  msg: string;
  pull?: number;
  hooks?: string;
  [k: string]: unknown;
}
function logLines(p: CliProcess): LogLine[] {
  return p
    .output()
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as LogLine);
}

before(async () => {
  env = await createWorkflowEnv({ ghHost: '127.0.186.40' });
  const dir = mkdtempSync(path.join(tmpdir(), 'ato-hooks-'));
  repoConfig = path.join(dir, 'repos.yaml');
  writeFileSync(repoConfig, REPOS_YAML);
});
after(async () => {
  servers.killAll();
  await env.close();
});

describe('workflow hooks (real server process)', { timeout: 240_000 }, () => {
  let a: { p: CliProcess; url: string };
  before(async () => {
    a = await start('127.0.186.41', ['--allow-commands', 'all']);
  });

  it('a pre hook writes atlantis.yaml: autoplan plans its project; statuses, job pages and env as Atlantis', async () => {
    const { status, headSha } = await env.openPull(a.url, 1, 'gen-1', { 'app/main.tf': terraformConfig({ marker: 'hooked' }) });
    assert.equal(status, 200);
    const c = await env.waitForComment(1, /^Ran Plan for project: `generated-1` dir: `app` workspace: `default`/);
    assert.match(c.body, /hooked/);
    await waitFor('the post hook status', () =>
      env.gh
        .statusesFor(env.repo.fullName, headSha)
        .some((s) => s.context.startsWith('atlantis/post_workflow_hook') && s.state !== 'pending'),
    );
    const hookStatuses = env.gh
      .statusesFor(env.repo.fullName, headSha)
      .filter((s) => s.context.includes('workflow_hook'))
      .map((s) => [s.context, s.state, s.description]);
    assert.deepEqual(hookStatuses, [
      ['atlantis/pre_workflow_hook: Generating atlantis.yaml', 'pending', 'in progress...'],
      ['atlantis/pre_workflow_hook: Generating atlantis.yaml', 'success', 'succeeded.'],
      ['atlantis/pre_workflow_hook: Pre workflow hook #1', 'pending', 'in progress...'],
      ['atlantis/pre_workflow_hook: Pre workflow hook #1', 'success', 'custom words for plan'],
      ['atlantis/post_workflow_hook: Post workflow hook #0', 'pending', 'in progress...'],
      // The file the pre hook wrote is still in the checkout: Atlantis reads it for every hook.
      ['atlantis/post_workflow_hook: Post workflow hook #0', 'success', 'custom words for plan'],
    ]);
    const envStatus = env.gh
      .statusesFor(env.repo.fullName, headSha)
      .find((s) => s.context === 'atlantis/pre_workflow_hook: Pre workflow hook #1' && s.state === 'success');
    assert.match(envStatus?.target_url ?? '', /^http:\/\/127\.0\.186\.41:4141\/jobs\/[0-9a-f-]{36}$/);
    const page = await (await fetch(envStatus!.target_url!, { signal: AbortSignal.timeout(5000) })).text();
    assert.match(
      page,
      /hook-env PULL_NUM=1 COMMAND_NAME=plan BASE=acme\/infra HEAD=acme\/infra BRANCH=gen-1 BASE_BRANCH=main AUTHOR=\S+ USER=\S+ URL=https:\/\/github\.com\/acme\/infra\/pull\/1 DIR_OK=yes/,
    );
    assert.match(page, /secrets token=\[none\] atlantis_vars=0/);
    const postStatus = env.gh.statusesFor(env.repo.fullName, headSha).find((s) => s.context.startsWith('atlantis/post_workflow_hook'));
    const postPage = await (await fetch(postStatus!.target_url!, { signal: AbortSignal.timeout(5000) })).text();
    assert.match(postPage, /post plan errors=false/);

    // Order from the server's own log: pre hooks done, then the command, then the post hook.
    const lines = logLines(a.p).filter((l) => l.pull === 1);
    const t = (pred: (l: LogLine) => boolean, what: string): number => {
      const l = lines.find(pred);
      assert.ok(l, `log line: ${what}\n${a.p.output().slice(-3000)}`);
      return Date.parse(l.time);
    };
    const preDone = t((l) => l.msg === 'Workflow hook succeeded' && l.hooks === 'pre' && l.description === 'Pre workflow hook #1', 'pre');
    const finished = t((l) => l.msg === 'Command finished', 'command');
    const postStart = t((l) => l.msg === 'Running workflow hook' && l.hooks === 'post', 'post');
    assert.ok(preDone <= finished && finished <= postStart, `${preDone} <= ${finished} <= ${postStart}`);
  });

  it('a failing pre hook without --fail-on-pre-workflow-hook-error: its status fails, the command still runs', async () => {
    const { headSha } = await env.openPull(a.url, 2, 'hook-fail-2', {
      'app2/main.tf': terraformConfig({ marker: 'still-runs' }),
      'atlantis.yaml': 'version: 3\nprojects:\n- name: committed\n  dir: app2\n',
    });
    const c = await env.waitForComment(2, /^Ran Plan for project: `committed`/);
    assert.match(c.body, /still-runs/);
    const failed = env.gh
      .statusesFor(env.repo.fullName, headSha)
      .find((s) => s.context === 'atlantis/pre_workflow_hook: Generating atlantis.yaml' && s.state === 'failure');
    assert.equal(failed?.description, 'failed.');
    // The first failure stops the hooks: the second never ran.
    assert.ok(
      !env.gh.statusesFor(env.repo.fullName, headSha).some((s) => s.context === 'atlantis/pre_workflow_hook: Pre workflow hook #1'),
    );
  });

  it('atlantis.yaml keys not implemented here: one notice comment and the plan runs; a refused key fails the command naming it', async () => {
    await env.openPull(a.url, 5, 'keys-5', {
      'app5/main.tf': terraformConfig({ marker: 'noticed' }),
      'atlantis.yaml': 'version: 3\nsilence_pr_comments: [apply]\nemoji_reaction: eyes\nprojects:\n- name: app5\n  dir: app5\n',
    });
    const plan = await env.waitForComment(5, /^Ran Plan for project: `app5`/);
    assert.match(plan.body, /noticed/);
    await env.waitForComment(5, /^\*\*Warning\*\*/);
    const notices = env.commentsOn(5).filter((c) => c.body.startsWith('**Warning**'));
    assert.deepEqual(
      notices.map((c) => c.body),
      [
        '**Warning**: `atlantis.yaml` sets keys this server does not implement; the command ran without them:\n\n' +
          '- `silence_pr_comments`: silencing plan/apply comments is not implemented; they are posted',
      ],
    );
    // A second command on the same commit: no second notice.
    const before = env.commentsOn(5).length;
    await env.comment(a.url, 5, 'atlantis plan -p app5');
    await env.waitForComment(5, /^Ran Plan for project: `app5`/, { after: before });
    assert.equal(env.commentsOn(5).filter((c) => c.body.startsWith('**Warning**')).length, 1);

    await env.openPull(a.url, 6, 'keys-6', {
      'app6/main.tf': terraformConfig({ marker: 'refused' }),
      'atlantis.yaml': 'version: 3\nautodiscover: {mode: disabled}\nprojects:\n- dir: app6\n',
    });
    // A command that fails before running its projects answers as Atlantis: **Plan Error** and a code block.
    const err = await env.waitForComment(6, /^\*\*Plan Error\*\*/);
    assert.equal(
      err.body,
      '**Plan Error**\n```\natlantis.yaml: autodiscover: not supported by this server: autodiscover modes other than auto (and ignore_paths) are not implemented\n```',
    );
  });

  it("a server-side workflow's custom import stage runs with its extra_args (the default import would lack the variable)", async () => {
    const tf = 'variable "marker" {}\n\nresource "terraform_data" "marker" {\n  input = var.marker\n}\n';
    await env.openPull(a.url, 8, 'import-8', { 'app8/main.tf': tf, 'atlantis.yaml': 'version: 3\nprojects:\n- dir: app8\n' });
    // Autoplan fails: the variable has no value (only the import stage gives one).
    await env.waitForComment(8, /^Ran Plan for dir: `app8`/);
    const before = env.commentsOn(8).length;
    await env.comment(a.url, 8, 'atlantis import -d app8 terraform_data.marker some-id');
    const c = await env.waitForComment(8, /^Ran Import for dir: `app8` workspace: `default`/, { after: before });
    assert.match(c.body, /Import successful!/);
  });

  it('with --fail-on-pre-workflow-hook-error: Atlantis comment, failed plan status, nothing planned', async () => {
    const b = await start('127.0.186.42', ['--fail-on-pre-workflow-hook-error']);
    const { headSha } = await env.openPull(b.url, 3, 'hook-fail-3', { 'app/main.tf': terraformConfig({ marker: 'never' }) });
    const c = await env.waitForComment(3, /^```\nError: Pre-workflow hook failed: /);
    const cmd = REPOS_YAML.split('- run: |\n')[1]!
      .split('        description:')[0]!
      .replace(/^ {10}/gm, '');
    const quoted = JSON.stringify(`sh -c ${cmd}`).replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
    assert.match(
      c.body,
      new RegExp(
        `^\`\`\`\\nError: Pre-workflow hook failed: exit status 3: running ${quoted} in "/[^"]+/3/default": \\nnope from hook-fail-3\\n\\n\`\`\`$`,
      ),
    );
    await waitFor('the failed plan status', () =>
      env.gh.statusesFor(env.repo.fullName, headSha).some((s) => s.context === 'atlantis/plan' && s.state === 'failure'),
    );
    const plan = env.gh.statusesFor(env.repo.fullName, headSha).filter((s) => s.context === 'atlantis/plan');
    assert.deepEqual(
      plan.map((s) => [s.state, s.description]),
      [['failure', 'Plan failed.']],
    );
    assert.equal(env.commentsOn(3).length, 1);
    // No post hooks after a command the pre hooks stopped (Atlantis returns before them).
    assert.ok(!env.gh.statusesFor(env.repo.fullName, headSha).some((s) => s.context.startsWith('atlantis/post_workflow_hook')));
  });
});

describe('server-side branch (real server process)', { timeout: 120_000 }, () => {
  it('a PR into a base branch the last matching rule does not match: ignored, with a log line only', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'ato-branch-'));
    const file = path.join(dir, 'repos.yaml');
    writeFileSync(file, 'repos:\n  - id: /.*/\n    branch: /^release$/\n');
    const p = startCli(env.serverArgs(tempDataDir(), '127.0.186.43', ['--repo-config', file]));
    servers.push(p);
    const url = 'http://127.0.186.43:4141';
    await waitForHttp(`${url}/healthz`);
    const { status, headSha } = await env.openPull(url, 7, 'other-base-7', { 'app/main.tf': terraformConfig({ marker: 'ignored' }) });
    assert.equal(status, 200);
    await waitFor('the log line', () =>
      logLines(p).some((l) => l.pull === 7 && l.msg === "command was run on a pull request which doesn't match base branches"),
    );
    await env.comment(url, 7, 'atlantis plan');
    await waitFor(
      'the second log line',
      () =>
        logLines(p).filter((l) => l.pull === 7 && l.msg === "command was run on a pull request which doesn't match base branches")
          .length === 2,
    );
    assert.deepEqual(env.commentsOn(7), []);
    assert.deepEqual(env.gh.statusesFor(env.repo.fullName, headSha), []);
  });
});
