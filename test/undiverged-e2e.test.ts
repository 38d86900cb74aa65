// The `undiverged` requirement on the real server process with --checkout-strategy merge
// (repos.yaml plan_requirements and apply_requirements: [undiverged]), real git and real
// terraform: once the base branch gets a commit touching a project the PR changes, apply
// (from the merged checkout) and plan (from the PR's own head) of that project are refused
// with Atlantis's text, while a project the base change does not touch goes on. A second
// server with the branch strategy never refuses (Atlantis checks undiverged only when merging).
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { CliProcess } from './support/cli.js';
import { terraformConfig } from './support/git-repos.js';
import { type WorkflowEnv, createWorkflowEnv, startWorkflowServer, tempDataDir } from './support/workflow-env.js';

const MERGE_HOST = '127.0.171.21';
const BRANCH_HOST = '127.0.171.22';
let env: WorkflowEnv;
let branchEnv: WorkflowEnv;
let merge: { p: CliProcess; url: string };
let branch: { p: CliProcess; url: string };

const REFUSED = (cmd: 'plan' | 'apply') =>
  `**${cmd === 'plan' ? 'Plan' : 'Apply'} Failed**: Default branch must be rebased onto pull request before running ${cmd}.`;

function reposYaml(dataDir: string): string {
  const file = path.join(dataDir, '..', `undiverged-repos-${process.pid}-${path.basename(dataDir)}.yaml`);
  writeFileSync(file, 'repos:\n- id: /.*/\n  plan_requirements: [undiverged]\n  apply_requirements: [undiverged]\n');
  return file;
}

before(async () => {
  [env, branchEnv] = await Promise.all([createWorkflowEnv(), createWorkflowEnv()]);
  const mergeData = tempDataDir();
  const branchData = tempDataDir();
  [merge, branch] = await Promise.all([
    startWorkflowServer(env, mergeData, MERGE_HOST, ['--checkout-strategy', 'merge', '--repo-config', reposYaml(mergeData)]),
    startWorkflowServer(branchEnv, branchData, BRANCH_HOST, ['--repo-config', reposYaml(branchData)]),
  ]);
});
after(async () => {
  merge?.p.child.kill('SIGKILL');
  branch?.p.child.kill('SIGKILL');
  await Promise.all([env?.close(), branchEnv?.close()]);
});

/** Comments and waits for the server's answer about `dir`. */
async function ask(e: WorkflowEnv, url: string, body: string, re: RegExp) {
  const seen = e.commentsOn(1).length;
  await e.comment(url, 1, body);
  return (await e.waitForComment(1, re, { after: seen })).body;
}

describe('undiverged (real server process)', { timeout: 240_000 }, () => {
  it('--checkout-strategy merge: a base change in a project refuses its apply and plan; another project goes on', async () => {
    await env.openPull(merge.url, 1, 'undiverged-pr', {
      'app1/main.tf': terraformConfig({ marker: 'app1' }),
      'app2/main.tf': terraformConfig({ marker: 'app2' }),
    });
    // Nothing new on the base yet: the autoplan passes its requirement.
    const plan = await env.waitForComment(1, /^Ran Plan for 2 projects/);
    assert.match(plan.body, /2 projects, 2 with changes, 0 with no changes, 0 failed/);

    // The base branch moves on in app1 only, after the PR was planned.
    await env.repo.commit(env.repo.baseBranch, { 'app1/base.tf': 'output "from_base" {\n  value = "b"\n}\n' }, 'base change in app1');

    const apply1 = await ask(env, merge.url, 'atlantis apply -d app1', /^Ran Apply for dir: `app1`/);
    assert.equal(apply1, `Ran Apply for dir: \`app1\` workspace: \`default\`\n\n${REFUSED('apply')}`);
    const plan1 = await ask(env, merge.url, 'atlantis plan -d app1', /^Ran Plan for dir: `app1`/);
    assert.equal(plan1, `Ran Plan for dir: \`app1\` workspace: \`default\`\n\n${REFUSED('plan')}`);

    // app2 is untouched by the base change: its plan (still from the first merge) applies.
    const apply2 = await ask(env, merge.url, 'atlantis apply -d app2', /^Ran Apply for dir: `app2`/);
    assert.doesNotMatch(apply2, /Failed\*\*/);
    assert.match(apply2, /Apply complete!/);
  });

  it('--checkout-strategy branch: the same base change never refuses (Atlantis checks it only when merging)', async () => {
    await branchEnv.openPull(branch.url, 1, 'undiverged-pr', { 'app1/main.tf': terraformConfig({ marker: 'app1' }) });
    await branchEnv.waitForComment(1, /^Ran Plan for dir: `app1`/);
    await branchEnv.repo.commit(branchEnv.repo.baseBranch, { 'app1/base.tf': 'output "from_base" {\n  value = "b"\n}\n' }, 'base change');
    const apply1 = await ask(branchEnv, branch.url, 'atlantis apply -d app1', /^Ran Apply for dir: `app1`/);
    assert.doesNotMatch(apply1, /Failed\*\*/);
    assert.match(apply1, /Apply complete!/);
  });
});
