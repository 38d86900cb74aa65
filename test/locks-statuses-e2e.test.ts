// Locks and commit statuses as Atlantis v0.47 keeps them, through the real server process,
// the GitHub stand-in, real git and real terraform: a lock held from plan until the PR
// closes (not released by apply), repo_locks modes and --disable-repo-locking, PR-wide
// `atlantis/plan` / `atlantis/apply` derived from all the PR's projects, per-project
// statuses linking to the job page, Atlantis's "**Plan Error**"/"**Apply Error**" answers,
// `version` with no plans posting nothing, and reactions only with --emoji-reaction.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { CliProcess } from './support/cli.js';
import { childList } from './support/children.js';
import { terraformConfig } from './support/git-repos.js';
import { issueCommentPayload, sendWebhook } from './support/github-standin.js';
import { waitFor } from './support/server.js';
import { WEBHOOK_SECRET, type WorkflowEnv, createWorkflowEnv, startWorkflowServer, tempDataDir } from './support/workflow-env.js';

let env: WorkflowEnv;
const procs = childList();

before(async () => {
  env = await createWorkflowEnv();
});
after(async () => {
  procs.killAll();
  await env.close();
});

async function startServer(host: string, extra: string[] = []): Promise<{ p: CliProcess; url: string }> {
  const started = await startWorkflowServer(env, tempDataDir(), host, extra);
  procs.push(started.p);
  return started;
}

const statuses = (sha: string, context: string) => env.gh.statusesFor(env.repo.fullName, sha).filter((s) => s.context === context);
const described = (sha: string, context: string) => statuses(sha, context).map((s) => `${s.state}: ${s.description}`);
const page = async (url: string) => (await fetch(`${url}/`)).text();

/** Waits for the server's own log line that the command on `pull` ended (finished, or failed before running). */
async function commandFinished(p: CliProcess, pull: number, command: string, count = 1): Promise<void> {
  const re = /"msg":"Command (finished|failed)"/;
  await waitFor(`${command} on #${pull} to finish (server log)`, () => {
    const lines = p
      .output()
      .split('\n')
      .filter((l) => re.test(l) && l.includes(`"pull":${pull}`) && l.includes(`"command":"${command}"`));
    return lines.length >= count;
  });
}

const BROKEN_TF = 'resource "terraform_data" "bad" {\n  input = var.missing\n}\n';

describe('locks and statuses, default settings (repo_locks on_plan)', () => {
  let url: string;
  let server: CliProcess;
  let head21 = '';

  it('autoplan: PR-wide plan status, per-project statuses linking to the job page, no apply status yet', async () => {
    ({ p: server, url } = await startServer('127.18.45.1'));
    const opened = await env.openPull(url, 21, 'ls-21', {
      's1/main.tf': terraformConfig({ marker: 's1' }),
      's2/main.tf': terraformConfig({ marker: 's2' }),
    });
    head21 = opened.headSha;
    await env.waitForComment(21, /^Ran Plan for 2 projects/);
    await waitFor('the final atlantis/plan status', () => statuses(head21, 'atlantis/plan').some((s) => s.state !== 'pending'));
    assert.deepEqual(described(head21, 'atlantis/plan'), ['pending: Plan in progress...', 'success: 2/2 projects planned successfully.']);
    assert.deepEqual(
      statuses(head21, 'atlantis/plan').map((s) => s.target_url),
      ['', ''],
      'PR-wide statuses carry an empty link, as Atlantis sends them',
    );
    assert.deepEqual(statuses(head21, 'atlantis/policy_check'), [], 'an autoplan sets no policy_check status');
    for (const dir of ['s1', 's2']) {
      const st = statuses(head21, `atlantis/plan: ${dir}/default`);
      assert.deepEqual(
        st.map((s) => `${s.state}: ${s.description}`),
        ['pending: Plan in progress...', 'success: Plan: 1 to add, 0 to change, 0 to destroy.'],
      );
      const link = st[1]?.target_url ?? '';
      assert.match(link, new RegExp(`^${url}/jobs/[0-9a-f-]{36}$`));
      assert.equal(st[0]?.target_url, link, 'pending and final link to the same job');
      const job = await fetch(link);
      assert.equal(job.status, 200, 'the link opens the job page');
      assert.match(await job.text(), new RegExp(`plan acme/infra#21 ${dir} default`));
    }
    // As Atlantis on GitHub: atlantis/apply is left alone while plans wait to be applied.
    assert.deepEqual(statuses(head21, 'atlantis/apply'), []);
  });

  it('apply -d s1 with s2 still planned: atlantis/apply is pending "1/2 projects applied.", and the lock stays', async () => {
    const before = env.commentsOn(21).length;
    await env.comment(url, 21, 'atlantis apply -d s1');
    await env.waitForComment(21, /^Ran Apply for dir: `s1` workspace: `default`/, { after: before });
    await commandFinished(server, 21, 'apply');
    assert.deepEqual(described(head21, 'atlantis/apply'), ['pending: Apply in progress...', 'pending: 1/2 projects applied.']);
    assert.deepEqual(described(head21, 'atlantis/apply: s1/default'), ['pending: Apply in progress...', 'success: Apply succeeded.']);
    assert.match(await page(url), /<td>s1<\/td><td>default<\/td><td>#21 by dev/, 'the applied project stays locked');
    assert.deepEqual(env.gh.reactions, [], 'no reaction without --emoji-reaction (Atlantis default)');
  });

  it('another PR cannot plan on top of the applied, unmerged s1', async () => {
    const { headSha } = await env.openPull(url, 22, 'ls-22', { 's1/main.tf': terraformConfig({ marker: 's1-other' }) });
    const c = await env.waitForComment(22, /^Ran Plan for dir: `s1`/);
    assert.match(c.body, /\*\*Plan Failed\*\*: This project is currently locked by an unapplied plan from pull #21/);
    await waitFor('PR 22 plan status', () => statuses(headSha, 'atlantis/plan').some((s) => s.state !== 'pending'));
    assert.deepEqual(described(headSha, 'atlantis/plan'), ['pending: Plan in progress...', 'failure: 1/1 projects failed to plan.']);
    assert.deepEqual(described(headSha, 'atlantis/plan: s1/default'), ['pending: Plan in progress...', 'failure: Plan failed.']);
  });

  it('apply of the rest: atlantis/apply success for the whole PR', async () => {
    const before = env.commentsOn(21).length;
    await env.comment(url, 21, 'atlantis apply');
    await env.waitForComment(21, /^Ran Apply for dir: `s2` workspace: `default`/, { after: before });
    await commandFinished(server, 21, 'apply', 2);
    assert.equal(described(head21, 'atlantis/apply').at(-1), 'success: 2/2 projects applied successfully.');
  });

  it('`plan -d nope`: the missing dir fails as a project, and the PR-wide statuses still count the whole PR', async () => {
    const before = env.commentsOn(21).length;
    await env.comment(url, 21, 'atlantis plan -d nope');
    const c = await env.waitForComment(21, /^Ran Plan for dir: `nope` workspace: `default`/, { after: before });
    assert.match(c.body, /\*\*Plan Error\*\*\n```\ndir "nope" does not exist\n```/);
    await commandFinished(server, 21, 'plan', 2);
    assert.deepEqual(described(head21, 'atlantis/plan: nope/default'), ['pending: Plan in progress...', 'failure: Plan failed.']);
    assert.equal(described(head21, 'atlantis/plan').at(-1), 'success: 2/2 projects planned successfully.');
    assert.equal(described(head21, 'atlantis/apply').at(-1), 'success: 2/2 projects applied successfully.');
    assert.deepEqual(statuses(head21, 'atlantis/policy_check'), [], 'a plan with an error runs no policy checks');
  });

  it('`atlantis version` on a PR with no plans left posts nothing', async () => {
    const before = env.commentsOn(21).length;
    await env.comment(url, 21, 'atlantis version');
    await commandFinished(server, 21, 'version');
    assert.equal(env.commentsOn(21).length, before, 'no comment');
  });

  it('closing the PR releases its locks, with Atlantis comment', async () => {
    assert.equal((await env.closePull(url, 21)).status, 200);
    const c = await env.waitForComment(21, /^Locks and plans deleted/);
    assert.equal(
      c.body,
      'Locks and plans deleted for the projects and workspaces modified in this pull request:\n\n' +
        '- dir: `s1` workspace: `default`\n- dir: `s2` workspace: `default`',
    );
    assert.doesNotMatch(await page(url), /#21 by/);
  });

  it('an errored plan: atlantis/plan fails, its lock is given back, and apply answers with Atlantis "**Apply Error**"', async () => {
    const { headSha } = await env.openPull(url, 23, 'ls-23', {
      's3/main.tf': BROKEN_TF,
      's4/main.tf': terraformConfig({ marker: 's4' }),
    });
    await env.waitForComment(23, /^Ran Plan for 2 projects/);
    await waitFor('PR 23 plan status', () => statuses(headSha, 'atlantis/plan').some((s) => s.state !== 'pending'));
    assert.equal(described(headSha, 'atlantis/plan').at(-1), 'failure: 1/2 projects failed to plan.');
    const locks = await page(url);
    assert.doesNotMatch(locks, /<td>s3<\/td><td>default<\/td><td>#23/, 'the failed plan keeps no lock');
    assert.match(locks, /<td>s4<\/td><td>default<\/td><td>#23 by dev/);

    const before = env.commentsOn(23).length;
    await env.comment(url, 23, 'atlantis apply');
    const c = await env.waitForComment(23, /Apply Error/, { after: before });
    assert.equal(
      c.body,
      '**Apply Error**\n```\nplan for dir "s3" workspace "default" project "" errored and cannot be applied without a plan file; run `atlantis plan`\n```',
    );
    await commandFinished(server, 23, 'apply');
    assert.deepEqual(described(headSha, 'atlantis/apply'), ['failure: Apply failed.']);
    assert.ok(!env.commentsOn(23).some((x) => /^Ran Apply/.test(x.body)), 'nothing was applied');
  });

  it('`plan -p nope` fails before running: "**Plan Error**" and atlantis/plan failed', async () => {
    const headSha = env.gh.getPull(env.repo.fullName, 23)?.headSha ?? '';
    const before = env.commentsOn(23).length;
    await env.comment(url, 23, 'atlantis plan -p nope');
    const c = await env.waitForComment(23, /Plan Error/, { after: before });
    assert.equal(
      c.body,
      '**Plan Error**\n```\ncannot specify a project name unless an atlantis.yaml file exists to configure projects\n```',
    );
    await commandFinished(server, 23, 'plan', 2); // the autoplan, then this one
    assert.equal(described(headSha, 'atlantis/plan').at(-1), 'failure: Plan failed.');
  });

  it("the web page deletes a lock as Atlantis's: the plan goes and the PR is told", async () => {
    // Atlantis's id (owner/repo/dir/workspace/project name), encoded twice in its links.
    const id = 'acme/infra/s4/default/';
    const param = encodeURIComponent(encodeURIComponent(id));
    const planComment = env.commentsOn(23).find((x) => /^Ran Plan for 2 projects/.test(x.body));
    assert.ok(planComment?.body.includes(`click [here](${url}/lock?id=${param})`), 'the plan links the lock page');
    const lockPage = await fetch(`${url}/lock?id=${param}`);
    assert.equal(lockPage.status, 200);
    assert.match(await lockPage.text(), /#23 by dev[\s\S]*Discard Plan &amp; Unlock/);
    const before = env.commentsOn(23).length;
    const del = await fetch(`${url}/locks?id=${param}`, { method: 'DELETE' });
    assert.equal(del.status, 200);
    assert.equal(await del.text(), `Deleted lock id '${encodeURIComponent(id)}'\n`);
    const c = await env.waitForComment(23, /^\*\*Warning\*\*/, { after: before });
    assert.equal(
      c.body,
      '**Warning**: The plan for dir: `s4` workspace: `default` was **discarded** via the Atlantis UI.\n\nTo `apply` this plan you must run `plan` again.',
    );
    assert.doesNotMatch(await page(url), /<td>s4<\/td><td>default<\/td><td>#23/);
    const again = await fetch(`${url}/locks?id=${param}`, { method: 'DELETE' });
    assert.equal(again.status, 404);
    assert.equal(await again.text(), `No lock found at id '${id}'\n`);
    assert.equal((await fetch(`${url}/locks`, { method: 'DELETE' })).status, 400);
  });

  it('a PR without projects gets the 0/0 successes and no comment; version posts nothing', async () => {
    const { headSha } = await env.openPull(url, 24, 'ls-24', { 'README.md': 'docs only\n' });
    await waitFor('the 0/0 statuses', () => statuses(headSha, 'atlantis/apply').length > 0);
    assert.deepEqual(described(headSha, 'atlantis/plan'), ['success: 0/0 projects planned successfully.']);
    assert.deepEqual(described(headSha, 'atlantis/policy_check'), ['success: 0/0 projects had policies checked successfully.']);
    assert.deepEqual(described(headSha, 'atlantis/apply'), ['success: 0/0 projects applied successfully.']);
    await env.comment(url, 24, 'atlantis version');
    await commandFinished(server, 24, 'version');
    assert.deepEqual(env.commentsOn(24), []);
  });

  it('apply on a PR never planned: "no current plan status found"', async () => {
    const headSha = await env.repo.createBranch('ls-25', { 's5/main.tf': terraformConfig({ marker: 's5' }) });
    await env.repo.publishPull(25, 'ls-25');
    env.gh.addPull(env.repo.fullName, {
      number: 25,
      headSha,
      headRef: 'ls-25',
      baseRef: env.repo.baseBranch,
      files: [{ filename: 's5/main.tf' }],
    });
    await env.comment(url, 25, 'atlantis apply');
    const c = await env.waitForComment(25, /Apply Error/);
    assert.equal(c.body, '**Apply Error**\n```\nno current plan status found; run `atlantis plan` before apply\n```');
  });
});

describe('--disable-repo-locking and --emoji-reaction', () => {
  it('plans take no lock and say nothing of deleting one; comments get the reaction', async () => {
    const { url } = await startServer('127.18.45.2', ['--disable-repo-locking', '--emoji-reaction', 'eyes']);
    await env.openPull(url, 31, 'ls-31', { 's6/main.tf': terraformConfig({ marker: 's6' }) });
    const c = await env.waitForComment(31, /^Ran Plan for dir: `s6`/);
    assert.doesNotMatch(c.body, /To \*\*delete\*\* this plan and lock/);
    assert.doesNotMatch(await page(url), /#31 by/);
    await env.openPull(url, 32, 'ls-32', { 's6/main.tf': terraformConfig({ marker: 's6-b' }) });
    const other = await env.waitForComment(32, /^Ran Plan for dir: `s6`/);
    assert.doesNotMatch(other.body, /currently locked/);
    const r = await sendWebhook(
      `${url}/events`,
      'issue_comment',
      issueCommentPayload({
        repo: env.repo.fullName,
        cloneUrl: env.repo.cloneUrl,
        number: 31,
        body: 'atlantis plan -d s6',
        commentId: 777031,
      }),
      { secret: WEBHOOK_SECRET },
    );
    assert.equal(r.status, 200);
    await waitFor('the reaction', () => env.gh.reactions.some((x) => x.commentId === 777031));
    // A comment's plan that went through sets Atlantis's (empty) policy_check success.
    const head31 = env.gh.getPull(env.repo.fullName, 31)?.headSha ?? '';
    await waitFor('the policy_check status', () => statuses(head31, 'atlantis/policy_check').length > 0);
    assert.deepEqual(described(head31, 'atlantis/policy_check'), ['success: 0/0 projects had policies checked successfully.']);
    assert.deepEqual(
      env.gh.reactions.filter((x) => x.commentId === 777031).map((x) => x.content),
      ['eyes'],
    );
    // A comment answered without running (here an unknown command) gets it too, as in Atlantis.
    await sendWebhook(
      `${url}/events`,
      'issue_comment',
      issueCommentPayload({ repo: env.repo.fullName, cloneUrl: env.repo.cloneUrl, number: 31, body: 'atlantis nope', commentId: 777032 }),
      { secret: WEBHOOK_SECRET },
    );
    await env.waitForComment(31, /unknown command "nope"/);
    await waitFor('the reaction to the unknown command', () =>
      env.gh.reactions.some((x) => x.commentId === 777032 && x.content === 'eyes'),
    );
  });
});

describe('repo_locks mode on_apply (server-side repo config)', () => {
  it('plan takes no lock; apply takes it and holds it; another PR then cannot apply', async () => {
    const cfg = JSON.stringify({ repos: [{ id: '/.*/', repo_locks: { mode: 'on_apply' } }] });
    const { url } = await startServer('127.18.45.3', ['--repo-config-json', cfg]);
    await env.openPull(url, 41, 'ls-41', { 's7/main.tf': terraformConfig({ marker: 's7' }) });
    await env.waitForComment(41, /^Ran Plan for dir: `s7`/);
    await env.openPull(url, 42, 'ls-42', { 's7/main.tf': terraformConfig({ marker: 's7-b' }) });
    const planned = await env.waitForComment(42, /^Ran Plan for dir: `s7`/);
    assert.doesNotMatch(planned.body, /currently locked/, 'plans do not lock in on_apply mode');
    assert.doesNotMatch(await page(url), /#4[12] by/);

    // `unlock` discards the plans of locked projects only: this plan has no lock, it stays.
    let before = env.commentsOn(41).length;
    await env.comment(url, 41, 'atlantis unlock');
    await env.waitForComment(41, /^All Atlantis locks for this PR have been unlocked and plans discarded$/, { after: before });
    before = env.commentsOn(41).length;
    await env.comment(url, 41, 'atlantis apply');
    await env.waitForComment(41, /^Ran Apply for dir: `s7`/, { after: before });
    assert.match(await page(url), /<td>s7<\/td><td>default<\/td><td>#41 by dev/, 'the apply took the lock');

    before = env.commentsOn(42).length;
    await env.comment(url, 42, 'atlantis apply');
    const refused = await env.waitForComment(42, /^Ran Apply for dir: `s7`/, { after: before });
    assert.match(refused.body, /\*\*Apply Failed\*\*: This project is currently locked by an unapplied plan from pull #41/);
  });
});
