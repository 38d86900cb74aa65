// Automerge through the real server process, the stand-in and real terraform: `automerge: true`
// in atlantis.yaml merges once every planned project is applied (not before), with Atlantis's
// comment, the repository's allowed method and the branch deleted (repos.yaml
// delete_source_branch_on_merge); GitHub's 405 is commented as Atlantis does;
// `--auto-merge-disabled` and the --disable-automerge-label stop it; a plan with errors leaves
// nothing to apply; a project whose last plan failed (no plan file, status plan_errored)
// blocks the merge after the others are applied.
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { CliProcess } from './support/cli.js';
import { terraformConfig } from './support/git-repos.js';
import { type WorkflowEnv, createWorkflowEnv, startWorkflowServer, tempDataDir } from './support/workflow-env.js';

const HOST = '127.0.94.1';
let env: WorkflowEnv;
let server: CliProcess;
const url = `http://${HOST}:4141`;

/** Waits (bounded) for a line of the server's own log matching `re`; returns it. */
async function serverLogLine(re: RegExp, timeoutMs = 30_000): Promise<string> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const line = server
      .output()
      .split('\n')
      .find((l) => re.test(l));
    if (line) return line;
    if (Date.now() > end) throw new Error(`no server log line matching ${re}:\n${server.output().slice(-3000)}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

const atlantisYaml = (dirs: string[]) =>
  `version: 3\nautomerge: true\nprojects:\n${dirs.map((d) => `- dir: ${d}\n  autoplan: {when_modified: ["*.tf"]}\n`).join('')}`;

before(async () => {
  env = await createWorkflowEnv();
  // The stand-in answers GET /repos/acme/infra: merge commits off, so the method is rebase.
  const repo = env.gh.mergeState(env.repo.fullName)!;
  repo.allowMergeCommit = false;
  const dataDir = tempDataDir();
  const repoConfig = path.join(dataDir, '..', `repos-${process.pid}.yaml`);
  writeFileSync(repoConfig, 'repos:\n- id: /.*/\n  delete_source_branch_on_merge: true\n');
  ({ p: server } = await startWorkflowServer(env, dataDir, HOST, ['--repo-config', repoConfig, '--disable-automerge-label', 'hold']));
});
after(async () => {
  server?.child.kill('SIGKILL');
  await env.close();
});

describe('automerge (real server process)', () => {
  it('does not merge while a planned project is not applied', async () => {
    await env.openPull(url, 1, 'am-both', {
      'atlantis.yaml': atlantisYaml(['am1', 'am2']),
      'am1/main.tf': terraformConfig({ marker: 'am1' }),
      'am2/main.tf': terraformConfig({ marker: 'am2' }),
    });
    await env.waitForComment(1, /^Ran Plan for 2 projects/);
    const before = env.commentsOn(1).length;
    await env.comment(url, 1, 'atlantis apply -d am1');
    await env.waitForComment(1, /^Ran Apply for dir: `am1`/, { after: before });
    // The server's own word that it decided not to merge, and why.
    await serverLogLine(/"msg":"Not automerging".*"reason":"project at dir \\"am2\\", workspace \\"default\\" has status \\"planned\\""/);
    assert.equal(env.gh.getPull(env.repo.fullName, 1)?.merged, false);
    assert.ok(!env.commentsOn(1).some((c) => c.body.startsWith('Automatically merging')));
  });

  it('merges once the last plan is applied: the comment, the allowed method, the branch deleted', async () => {
    const before = env.commentsOn(1).length;
    await env.comment(url, 1, 'atlantis apply');
    const merging = await env.waitForComment(1, /^Automatically merging/, { after: before });
    assert.equal(merging.body, 'Automatically merging because all plans have been successfully applied.');
    const applied = env.commentsOn(1).findIndex((c) => c.body.startsWith('Ran Apply for dir: `am2`'));
    assert.ok(applied >= before && applied < env.commentsOn(1).indexOf(merging), 'the apply result comes first');
    const state = env.gh.mergeState(env.repo.fullName)!;
    // The merge happens after the comment; the branch deletion after the merge.
    const deadline = Date.now() + 30_000;
    while (state.deletedBranches.length === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
    assert.deepEqual(
      state.merges.map((m) => [m.pull, m.method]),
      [[1, 'rebase']],
    );
    assert.equal(env.gh.getPull(env.repo.fullName, 1)?.merged, true);
    assert.deepEqual(state.deletedBranches, ['am-both']);
  });

  it("comments GitHub's refusal as Atlantis does when the PR is not mergeable", async () => {
    await env.openPull(url, 2, 'am-blocked', { 'atlantis.yaml': atlantisYaml(['am3']), 'am3/main.tf': terraformConfig({ marker: 'am3' }) });
    env.gh.updatePull(env.repo.fullName, 2, { mergeable: false, mergeableState: 'blocked' });
    await env.waitForComment(2, /^Ran Plan for dir: `am3`/);
    const before = env.commentsOn(2).length;
    await env.comment(url, 2, 'atlantis apply');
    const failed = await env.waitForComment(2, /^Automerging failed:/, { after: before });
    assert.equal(
      failed.body,
      `Automerging failed:\n\`\`\`\nmerging pull request: PUT ${env.gh.url}/repos/acme/infra/pulls/2/merge: 405 Pull Request is not mergeable []\n\`\`\``,
    );
    assert.equal(env.gh.mergeState(env.repo.fullName)?.deletedBranches.includes('am-blocked'), false);
  });

  it('`apply --auto-merge-disabled` applies without merging', async () => {
    await env.openPull(url, 3, 'am-off', { 'atlantis.yaml': atlantisYaml(['am4']), 'am4/main.tf': terraformConfig({ marker: 'am4' }) });
    await env.waitForComment(3, /^Ran Plan for dir: `am4`/);
    const before = env.commentsOn(3).length;
    await env.comment(url, 3, 'atlantis apply --auto-merge-disabled');
    await env.waitForComment(3, /^Ran Apply for dir: `am4`/, { after: before });
    await serverLogLine(
      /"msg":"Not automerging".*"pull":3.*"reason":"the comment has --auto-merge-disabled"|"msg":"Not automerging".*"reason":"the comment has --auto-merge-disabled".*"pull":3/,
    );
    assert.ok(!env.commentsOn(3).some((c) => /^Automatically merging|^Automerging failed/.test(c.body)));
    assert.equal(env.gh.getPull(env.repo.fullName, 3)?.merged, false);
  });

  it('a PR with the --disable-automerge-label is applied, not merged', async () => {
    await env.openPull(url, 5, 'am-hold', { 'atlantis.yaml': atlantisYaml(['am7']), 'am7/main.tf': terraformConfig({ marker: 'am7' }) });
    env.gh.updatePull(env.repo.fullName, 5, { labels: ['infra', 'hold'] });
    await env.waitForComment(5, /^Ran Plan for dir: `am7`/);
    const before = env.commentsOn(5).length;
    await env.comment(url, 5, 'atlantis apply');
    await env.waitForComment(5, /^Ran Apply for dir: `am7`/, { after: before });
    await serverLogLine(/"msg":"Not automerging".*"reason":"the pull request has the label \\"hold\\""/);
    assert.equal(env.gh.getPull(env.repo.fullName, 5)?.merged, false);
    assert.equal(env.gh.callsTo('GET', /^\/repos\/acme\/infra\/issues\/5\/labels$/).length, 1);
  });

  it('a plan with errors discards its plans, so nothing is applied or merged', async () => {
    await env.openPull(url, 4, 'am-broken', {
      'atlantis.yaml': atlantisYaml(['am5', 'am6']),
      'am5/main.tf': terraformConfig({ marker: 'am5' }),
      'am6/main.tf': 'resource "terraform_data" "x" {\n  input = \n}\n',
    });
    const plan = await env.waitForComment(4, /^Ran Plan for 2 projects/);
    assert.match(plan.body, /2 projects, 1 with changes, 0 with no changes, 1 failed/);
    await serverLogLine(/"msg":"Deleted plans because there were errors and automerge requires all plans succeed".*"pull":4/);
    const before = env.commentsOn(4).length;
    await env.comment(url, 4, 'atlantis apply');
    // As Atlantis (its generic apply checks the PR-wide status): the discarded plan of am5 is
    // still "planned" there, so the apply is refused before anything runs.
    const c = await env.waitForComment(4, /^\*\*Apply Error\*\*/, { after: before });
    assert.match(c.body, /plan file is missing for dir "am5" workspace "default" project "" with status "planned"; run `atlantis plan`/);
    assert.ok(!env.commentsOn(4).some((x) => /^Ran Apply/.test(x.body)));
    assert.equal(env.gh.getPull(env.repo.fullName, 4)?.merged, false);
  });

  it('a project whose plan failed blocks the merge after the other is applied (its PR-wide status)', async () => {
    // No autoplan: the projects are planned one by one, so the failed plan discards only its own.
    const manual = (d: string) => `- dir: ${d}\n  autoplan: {enabled: false}\n`;
    await env.openPull(url, 6, 'am-partial', {
      'atlantis.yaml': `version: 3\nautomerge: true\nprojects:\n${manual('am8')}${manual('am9')}`,
      'am8/main.tf': terraformConfig({ marker: 'am8' }),
      'am9/main.tf': 'resource "terraform_data" "x" {\n  input = \n}\n',
    });
    let before = env.commentsOn(6).length;
    await env.comment(url, 6, 'atlantis plan -d am8');
    await env.waitForComment(6, /^Ran Plan for dir: `am8`/, { after: before });
    before = env.commentsOn(6).length;
    await env.comment(url, 6, 'atlantis plan -d am9');
    const failed = await env.waitForComment(6, /^Ran Plan for dir: `am9`/, { after: before });
    assert.match(failed.body, /\*\*Plan Error\*\*/);
    before = env.commentsOn(6).length;
    await env.comment(url, 6, 'atlantis apply -d am8');
    await env.waitForComment(6, /^Ran Apply for dir: `am8`/, { after: before });
    await serverLogLine(
      /"msg":"Not automerging".*"reason":"project at dir \\"am9\\", workspace \\"default\\" has status \\"plan_errored\\""/,
    );
    assert.equal(env.gh.getPull(env.repo.fullName, 6)?.merged, false);
    assert.ok(!env.commentsOn(6).some((c) => /^Automatically merging/.test(c.body)));
  });
});
