// The comment grammar through the real server process (GitHub stand-in, real git, real
// terraform): what Atlantis v0.47.1 answers, the server answers, and a workspace that is not a
// safe name never touches a working copy (`-w .` used to resolve to the pull's own directory
// and wipe every checkout of the PR).
import assert from 'node:assert/strict';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { nullLogger } from '../src/log.js';
import { ProcessHost } from '../src/server/terraform/process-host.js';
import { WorkingCopies } from '../src/server/workflow/checkout/working-copy.js';
import type { CliProcess } from './support/cli.js';
import { terraformConfig } from './support/git-repos.js';
import { type WorkflowEnv, createWorkflowEnv, startWorkflowServer, tempDataDir } from './support/workflow-env.js';

const PLAN_USAGE = `  -d, --dir string         Which directory to run plan in relative to root of repo,
                           ex. 'child/dir'.
  -p, --project string     Which project to run plan for. Refers to the name of the
                           project configured in a repo config file. Cannot be used
                           at same time as workspace or dir flags.
      --verbose            Append Atlantis log to comment.
  -w, --workspace string   Switch to this Terraform workspace before planning.
`;

let env: WorkflowEnv;
let server: CliProcess | undefined;

before(async () => {
  env = await createWorkflowEnv();
});
after(async () => {
  server?.child.kill('SIGKILL');
  await env.close();
});

describe('comments through the real server', () => {
  const dataDir = tempDataDir();
  let url: string;
  const checkout = path.join(dataDir, 'repos', 'acme', 'infra', '1', 'default');
  const sentinel = path.join(checkout, 'sentinel.txt');

  /** Posts `body` on PR 1 and returns the first comment after it matching `re`. */
  async function ask(body: string, re: RegExp): Promise<string> {
    const before = env.commentsOn(1).length;
    const r = await env.comment(url, 1, body);
    assert.equal(r.status, 200, r.body);
    return (await env.waitForComment(1, re, { after: before })).body;
  }

  it('autoplans the PR (its default checkout is what the next steps must keep)', { timeout: 120_000 }, async () => {
    ({ p: server, url } = await startWorkflowServer(env, dataDir, '127.0.71.1'));
    await env.openPull(url, 1, 'change-app1', { 'app1/main.tf': terraformConfig({ marker: 'app1-v2' }) });
    await env.waitForComment(1, /^Ran Plan for dir: `app1` workspace: `default`/);
    assert.ok(existsSync(path.join(checkout, '.git')));
    writeFileSync(sentinel, 'kept\n');
  });

  it("`plan -w .` gets Atlantis's refusal and leaves the PR's checkout alone", { timeout: 60_000 }, async () => {
    const body = await ask('atlantis plan -w .', /invalid workspace/);
    assert.equal(body, '```\nError: invalid workspace ".": cannot be \'.\'.\nUsage of plan:\n' + PLAN_USAGE + '```');
    for (const ws of ['./', '..', '-chdir', '~root']) await ask(`atlantis plan -w ${ws}`, /invalid workspace/);
    assert.equal(readFileSync(sentinel, 'utf8'), 'kept\n', 'the checkout was not touched');
    assert.ok(existsSync(path.join(checkout, '.git')));
    assert.ok(existsSync(path.join(checkout, 'app1', 'main.tf')));
  });

  it('matches executable and command in any case, and inside backticks', { timeout: 120_000 }, async () => {
    const body = await ask('ATLANTIS PLAN -d app1', /^Ran Plan|Plan Error|Plan Failed/);
    assert.match(body, /^Ran Plan for dir: `app1` workspace: `default`/);
    const help = await ask('`Atlantis help`', /Terraform Pull Request Automation/);
    assert.match(help, /\n {2}cancel {3}Cancels all queued commands for this pull request\.\n/);
  });

  it("answers approve_policies (policy checks off) and cancel with Atlantis's texts", { timeout: 60_000 }, async () => {
    assert.equal(
      await ask('atlantis approve_policies', /^Approved Policies/),
      'Approved Policies for 1 projects:\n\n1. dir: `app1` workspace: `default`',
    );
    assert.equal(
      await ask('atlantis cancel', /^Cancelled/),
      'Cancelled all queued operations and released working directory locks for this pull request.\n' +
        'New operations can now be started. Currently running operations will continue to completion.',
    );
    assert.equal(await ask('atlantis unlock now', /unknown argument/), '```\nError: unknown argument(s) – now.\nUsage of unlock:\n```');
  });

  it('a glob -d runs the matching projects of atlantis.yaml, for plan and apply', { timeout: 180_000 }, async () => {
    const project = (dir: string) => `- dir: ${dir}\n  autoplan: {enabled: false}\n`;
    await env.openPull(url, 2, 'stacks', {
      'atlantis.yaml': `version: 3\nprojects:\n${project('stacks/a')}${project('stacks/b')}${project('other/c')}`,
      'stacks/a/main.tf': terraformConfig({ marker: 'a' }),
      'stacks/b/main.tf': terraformConfig({ marker: 'b' }),
      'other/c/main.tf': terraformConfig({ marker: 'c' }),
    });
    const on2 = async (body: string, re: RegExp) => {
      const before = env.commentsOn(2).length;
      assert.equal((await env.comment(url, 2, body)).status, 200);
      return (await env.waitForComment(2, re, { after: before, timeoutMs: 120_000 })).body;
    };
    const plan = await on2('atlantis plan -d stacks/*', /^Ran Plan|Error/);
    assert.match(plan, /^Ran Plan for 2 projects:/);
    assert.match(plan, /dir: `stacks\/a` workspace: `default`/);
    assert.match(plan, /dir: `stacks\/b` workspace: `default`/);
    assert.doesNotMatch(plan, /other\/c/);
    const apply = await on2("atlantis apply -d 'stacks/[b]'", /^Ran Apply|Error/);
    assert.match(apply, /^Ran Apply for dir: `stacks\/b` workspace: `default`/);
    const bad = await on2("atlantis plan -d '../*'", /glob pattern/);
    assert.match(bad, /^```\nError: using '\.\.' in glob pattern "\.\.\/\*" with -d\/--dir is not allowed\.\nUsage of plan:\n/);
  });

  it('the checkout path rule refuses an unsafe workspace itself (second line of defence)', () => {
    const copies = new WorkingCopies(dataDir, () => '', nullLogger(), new ProcessHost({ logger: nullLogger() }));
    for (const ws of ['.', '..', '', 'a/b', '-x', 'a b']) {
      assert.throws(() => copies.dirFor('acme/infra', 1, ws), /invalid workspace/, JSON.stringify(ws));
    }
    assert.equal(copies.dirFor('acme/infra', 1, 'default'), checkout);
    assert.equal(readFileSync(sentinel, 'utf8'), 'kept\n');
  });
});
