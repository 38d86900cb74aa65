// --checkout-strategy=merge on the real server process: the plan of a PR is made on the base
// branch with the PR merged in (a change the base got after the PR branched shows in the
// plan), and when the base moves on before the next plan, the server merges again and says
// so with Atlantis's line under the plan.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { CliProcess } from './support/cli.js';
import { terraformConfig } from './support/git-repos.js';
import { pullRequestPayload, sendWebhook } from './support/github-standin.js';
import { WEBHOOK_SECRET, type WorkflowEnv, createWorkflowEnv, startWorkflowServer, tempDataDir } from './support/workflow-env.js';

const HOST = '127.0.162.15';
let env: WorkflowEnv;
let server: { p: CliProcess; url: string };

const baseOutput = (marker: string) => `output "base_marker" {\n  value = "${marker}"\n}\n`;
const UPSTREAM_LINE = ':twisted_rightwards_arrows: Upstream was modified, a new merge was performed.';

before(async () => {
  env = await createWorkflowEnv();
  server = await startWorkflowServer(env, tempDataDir(), HOST, ['--checkout-strategy', 'merge', '--checkout-depth', '1']);
});
after(async () => {
  server?.p.child.kill('SIGKILL');
  await env?.close();
});

describe('--checkout-strategy=merge (real server process)', { timeout: 180_000 }, () => {
  it('plans the PR merged into its base, and merges again when the base moved on', async () => {
    const { repo, gh } = env;
    const headSha = await repo.createBranch('merge-pr', { 'app1/main.tf': terraformConfig({ marker: 'pr-side' }) });
    // The base gets a change after the PR branched: only a merge checkout has it.
    await repo.commit(repo.baseBranch, { 'app1/base.tf': baseOutput('from-base-1') }, 'base change 1');
    await repo.publishPull(1, 'merge-pr');
    gh.addPull(repo.fullName, {
      number: 1,
      headSha,
      headRef: 'merge-pr',
      baseRef: repo.baseBranch,
      files: (await repo.changedFiles('merge-pr')).map((filename) => ({ filename })),
    });
    const r = await sendWebhook(
      `${server.url}/events`,
      'pull_request',
      pullRequestPayload({ repo: repo.fullName, cloneUrl: repo.cloneUrl, action: 'opened', number: 1, headSha, headRef: 'merge-pr' }),
      { secret: WEBHOOK_SECRET },
    );
    assert.equal(r.status, 200);
    const first = await env.waitForComment(1, /^Ran Plan for dir: `app1` workspace: `default`/);
    assert.match(first.body, /pr-side/, 'the PR change');
    assert.match(first.body, /from-base-1/, "the base's later change, merged in");
    assert.ok(!first.body.includes(UPSTREAM_LINE));

    await repo.commit(repo.baseBranch, { 'app1/base.tf': baseOutput('from-base-2') }, 'base change 2');
    const seen = env.commentsOn(1).length;
    await env.comment(server.url, 1, 'atlantis plan -d app1');
    const second = await env.waitForComment(1, /^Ran Plan for dir: `app1` workspace: `default`/, { after: seen });
    assert.match(second.body, /from-base-2/, 'merged again with the new base');
    assert.match(second.body, /pr-side/);
    // Atlantis's place for it: the project's last line, after the plan's actions (and summary).
    assert.match(second.body, /```\n(Plan: [^\n]*\n)?:twisted_rightwards_arrows: Upstream was modified, a new merge was performed\.\n/);
  });
});
