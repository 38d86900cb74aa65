// Automerge, hidden comments and reactions on a real Gitea v1.27.3, as Atlantis v0.47's Gitea
// client does them: with --automerge --hide-prev-plan-comments --emoji-reaction eyes, each
// command comment gets the reaction, a second plan folds the first plan comment into
// Atlantis's superseded <details>, and the apply of every project merges the pull request
// (style merge, Atlantis's title and message) after Atlantis's comment. Then a pull request
// Gitea cannot merge (a conflict with its base) gets Atlantis's automerge-failed comment with
// Gitea's answer, and stays open.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { sleep } from '../src/async.js';
import { AUTOMERGE_COMMENT } from '../src/server/workflow/automerge/automerge.js';
import { type GiteaWorld, giteaFlags, giteaServerEnv, hookServer, startGiteaWorld } from './support/atlantis-gitea-scenario.js';
import { type CliProcess, startCli, waitForHttp } from './support/cli.js';
import { terraformConfig } from './support/git-repos.js';
import { waitMergeable } from './support/gitea-site.js';

const NET = '127.0.246';
const serverUrl = `http://${NET}.3:4141`;
const dirs = [mkdtempSync(path.join(tmpdir(), 'ato-gitea-merge-data-')), mkdtempSync(path.join(tmpdir(), 'ato-gitea-merge-home-'))];
const [dataDir, home] = dirs as [string, string];
let w: GiteaWorld;
let server: CliProcess;

interface Comment {
  id: number;
  user: string;
  body: string;
}

async function comments(number: number): Promise<Comment[]> {
  const r = await w.gitea.api<Array<{ id: number; user: { login: string }; body: string }>>(
    'GET',
    `/repos/acme/infra/issues/${number}/comments`,
  );
  return r.body.map((c) => ({ id: c.id, user: c.user.login, body: c.body }));
}

async function botComments(number: number, n: number): Promise<Comment[]> {
  const end = Date.now() + 150_000;
  for (;;) {
    const got = (await comments(number)).filter((c) => c.user === w.bot.name);
    if (got.length >= n) return got;
    if (Date.now() > end) throw new Error(`${n} comments on #${number} not within 150 s (${got.length})\n${server.output().slice(-3000)}`);
    await sleep(200);
  }
}

async function reactions(commentId: number): Promise<string[]> {
  const r = await w.gitea.api<Array<{ content: string }> | null>('GET', `/repos/acme/infra/issues/comments/${commentId}/reactions`);
  return (r.body ?? []).map((x) => x.content);
}

before(async () => {
  w = await startGiteaWorld(`${NET}.1`, `${NET}.2`);
  server = startCli(
    [
      ...giteaFlags(w, dataDir, serverUrl, 4141),
      '--bind-address',
      `${NET}.3`,
      '--automerge',
      '--hide-prev-plan-comments',
      '--emoji-reaction',
      'eyes',
    ],
    giteaServerEnv(home),
  );
  await waitForHttp(`${serverUrl}/healthz`).catch((e: Error) => {
    throw new Error(`${e.message}\n${server.output()}`);
  });
  await hookServer(w, `${serverUrl}/events`);
});
after(async () => {
  server?.child.kill('SIGTERM');
  await server?.exited;
  await w?.close();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

describe('automerge, hidden plan comments and reactions on a real Gitea', () => {
  it('a second plan folds the first; the apply merges the pull request', { timeout: 300_000 }, async () => {
    const repo = w.repos.get('acme/infra')!;
    await w.gitea.push(repo, w.dev, { branch: 'merge-me', base: 'main', files: { 'dir1/main.tf': terraformConfig({ marker: 'merged' }) } });
    const pr = await w.gitea.openPullRequest(repo, w.dev, { head: 'merge-me' });
    const [autoplan] = await botComments(pr.number, 1);
    assert.match(autoplan!.body, /^Ran Plan for dir: `dir1` workspace: `default`/);

    const planCmd = await w.gitea.comment(repo, w.dev, pr.number, 'atlantis plan');
    const afterPlan = await botComments(pr.number, 2);
    assert.deepEqual(await reactions(planCmd), ['eyes']);
    // The autoplan's comment, folded as Atlantis folds it; the new plan comment as it was posted.
    assert.equal(
      afterPlan[0]!.body,
      `<!--- +-Superseded Command-+ ---><details><summary>Superseded Atlantis Plan</summary>\n${autoplan!.body}\n</details>\n`,
    );
    assert.match(afterPlan[1]!.body, /^Ran Plan for dir: `dir1` workspace: `default`/);

    await waitMergeable(w.gitea, repo.fullName, pr.number, true);
    const applyCmd = await w.gitea.comment(repo, w.dev, pr.number, 'atlantis apply');
    const afterApply = await botComments(pr.number, 4);
    assert.deepEqual(await reactions(applyCmd), ['eyes']);
    assert.match(afterApply[2]!.body, /^Ran Apply for dir: `dir1` workspace: `default`/);
    assert.equal(afterApply[3]!.body, AUTOMERGE_COMMENT);
    const end = Date.now() + 60_000;
    let state = await w.gitea.api<{ merged: boolean; state: string; merge_commit_sha: string }>(
      'GET',
      `/repos/acme/infra/pulls/${pr.number}`,
    );
    while (!state.body.merged && Date.now() < end) {
      await sleep(200);
      state = await w.gitea.api('GET', `/repos/acme/infra/pulls/${pr.number}`);
    }
    assert.equal(state.body.merged, true, 'Gitea merged the pull request');
    assert.equal(state.body.state, 'closed');
    const merge = w.recorder.calls.find((c) => c.method === 'POST' && c.path.endsWith(`/pulls/${pr.number}/merge`));
    assert.deepEqual(merge?.body, {
      Do: 'merge',
      MergeTitleField: 'Atlantis merge',
      MergeMessageField: 'Automatic merge by Atlantis',
      delete_branch_after_merge: false,
      force_merge: false,
      head_commit_id: pr.headSha,
      merge_when_checks_succeed: false,
    });
    const commit = await w.gitea.api<{ commit: { message: string } }>(
      'GET',
      `/repos/acme/infra/git/commits/${state.body.merge_commit_sha}`,
    );
    assert.match(commit.body.commit.message, /^Atlantis merge\n\nAutomatic merge by Atlantis/);
  });

  it("a pull request Gitea cannot merge gets Atlantis's automerge-failed comment and stays open", { timeout: 300_000 }, async () => {
    const repo = w.repos.get('acme/infra')!;
    await w.gitea.push(repo, w.dev, { branch: 'conflicts', base: 'main', files: { 'dir2/main.tf': terraformConfig({ marker: 'mine' }) } });
    const pr = await w.gitea.openPullRequest(repo, w.dev, { head: 'conflicts' });
    await botComments(pr.number, 1);
    // The base changes the same file meanwhile: a conflict.
    await w.gitea.push(repo, w.owner, { branch: 'main', files: { 'dir2/main.tf': '# changed on main meanwhile\n' }, message: 'conflict' });
    await waitMergeable(w.gitea, repo.fullName, pr.number, false);
    await w.gitea.comment(repo, w.dev, pr.number, 'atlantis apply');
    const got = await botComments(pr.number, 3);
    assert.match(got[1]!.body, /^Ran Apply for dir: `dir2` workspace: `default`/);
    assert.equal(got[2]!.body, AUTOMERGE_COMMENT);
    const failed = await botComments(pr.number, 4);
    assert.match(failed[3]!.body, /^Automerging failed:\n```\nmerge failed: \d{3} [A-Za-z ]+\n```$/);
    const state = await w.gitea.api<{ merged: boolean; state: string }>('GET', `/repos/acme/infra/pulls/${pr.number}`);
    assert.deepEqual([state.body.merged, state.body.state], [false, 'open']);
  });
});
