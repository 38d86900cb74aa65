// The Atlantis workflow end to end against the real server process: GitHub stand-in,
// real git repositories, real terraform.
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { CliProcess } from './support/cli.js';
import { childList } from './support/children.js';
import { terraformConfig } from './support/git-repos.js';
import { type WorkflowEnv, createWorkflowEnv, startWorkflowServer, tempDataDir } from './support/workflow-env.js';
import { waitFor } from './support/server.js';

let env: WorkflowEnv;
const procs = childList();
let hostSeq = 1;

async function startServer(dataDir: string, extra: string[] = []): Promise<{ p: CliProcess; url: string }> {
  const started = await startWorkflowServer(env, dataDir, `127.0.44.${hostSeq++}`, extra);
  procs.push(started.p);
  return started;
}

before(async () => {
  env = await createWorkflowEnv();
});
after(async () => {
  procs.killAll();
  await env.close();
});

describe('PR workflow end to end (real server process)', () => {
  const dataDir = tempDataDir();
  let url: string;
  let server: CliProcess;

  it('autoplans both changed projects of an opened PR, with comment and status', async () => {
    ({ p: server, url } = await startServer(dataDir));
    const { status, headSha } = await env.openPull(url, 1, 'change-both', {
      'app1/main.tf': terraformConfig({ marker: 'app1-v2' }),
      'app2/main.tf': terraformConfig({ marker: 'app2-v2' }),
    });
    assert.equal(status, 200);
    const c = await env.waitForComment(1, /^Ran Plan for 2 projects/);
    assert.match(c.body, /dir: `app1` workspace: `default`/);
    assert.match(c.body, /dir: `app2` workspace: `default`/);
    assert.match(c.body, /2 projects, 2 with changes/);
    // The final status follows the result comment: wait for it rather than race it.
    await waitFor('the final atlantis/plan status', () =>
      env.gh.statusesFor(env.repo.fullName, headSha).some((s) => s.context === 'atlantis/plan' && s.state !== 'pending'),
    );
    const statuses = env.gh.statusesFor(env.repo.fullName, headSha).filter((s) => s.context === 'atlantis/plan');
    assert.deepEqual(
      statuses.map((s) => s.state),
      ['pending', 'success'],
    );
  });

  it('a second PR planning a locked dir gets the lock message', async () => {
    await env.openPull(url, 2, 'change-app1', { 'app1/main.tf': terraformConfig({ marker: 'app1-v3' }) });
    const c = await env.waitForComment(2, /Plan Failed/);
    assert.match(c.body, /This project is currently locked by an unapplied plan from pull #1/);
  });

  it("`atlantis apply` applies the PR's plans and writes state; the locks stay until the PR closes", async () => {
    let before = env.commentsOn(1).length;
    const r = await env.comment(url, 1, 'atlantis apply');
    assert.equal(r.status, 200);
    const c = await env.waitForComment(1, /^Ran Apply for 2 projects/, { after: before });
    assert.match(c.body, /applied app1-v2/);
    for (const app of ['app1', 'app2']) {
      const state = JSON.parse(
        readFileSync(path.join(dataDir, 'repos', 'acme/infra', '1', 'default', app, 'terraform.tfstate'), 'utf8'),
      ) as { resources: unknown[] };
      assert.equal(state.resources.length, 1);
    }
    // As Atlantis: an apply does not release the lock (nobody plans on top of unmerged changes).
    assert.match(await (await fetch(`${url}/`)).text(), /#1 by dev/, 'PR 1 still holds its locks');
    assert.deepEqual(env.gh.reactions, [], 'no reaction: --emoji-reaction is not set (Atlantis default)');
    before = env.commentsOn(2).length;
    await env.comment(url, 2, 'atlantis plan -d app1');
    const locked = await env.waitForComment(2, /Plan Failed/, { after: before });
    assert.match(locked.body, /currently locked by an unapplied plan from pull #1/);
    // Merged and closed: the locks go.
    assert.equal((await env.closePull(url, 1)).status, 200);
    const closed = await env.waitForComment(1, /^Locks and plans deleted/);
    assert.equal(
      closed.body,
      'Locks and plans deleted for the projects and workspaces modified in this pull request:\n\n' +
        '- dir: `app1` workspace: `default`\n- dir: `app2` workspace: `default`',
    );
    assert.doesNotMatch(await (await fetch(`${url}/`)).text(), /#1 by/, 'no lock of PR 1 remains');
  });

  it('the second PR can plan once the lock is gone; unlock and close release its lock', async () => {
    let before = env.commentsOn(2).length;
    await env.comment(url, 2, 'atlantis plan -d app1');
    await env.waitForComment(2, /^Ran Plan for dir: `app1` workspace: `default`/, { after: before });
    assert.match(await (await fetch(`${url}/`)).text(), /#2 by dev/);
    before = env.commentsOn(2).length;
    await env.comment(url, 2, 'atlantis unlock');
    await env.waitForComment(2, /All Atlantis locks for this PR have been unlocked and plans discarded/, { after: before });
    assert.doesNotMatch(await (await fetch(`${url}/`)).text(), /#2 by dev/);
    before = env.commentsOn(2).length;
    await env.comment(url, 2, 'atlantis plan -d app1');
    await env.waitForComment(2, /^Ran Plan for dir: `app1`/, { after: before });
    assert.equal((await env.closePull(url, 2)).status, 200);
    await env.waitForComment(2, /Locks and plans deleted for the projects and workspaces modified in this pull request/);
    assert.doesNotMatch(await (await fetch(`${url}/`)).text(), /#2 by dev/);
  });

  it('a plan survives a restart of the server on the same data dir, and the apply works', async () => {
    await env.openPull(url, 3, 'change-app2', { 'app2/main.tf': terraformConfig({ marker: 'app2-v9' }) });
    await env.waitForComment(3, /^Ran Plan for dir: `app2`/);
    server.child.kill('SIGTERM');
    assert.equal((await server.exited).code, 0, server.output());
    ({ p: server, url } = await startServer(dataDir));
    const before = env.commentsOn(3).length;
    await env.comment(url, 3, 'atlantis apply -d app2');
    const c = await env.waitForComment(3, /^Ran Apply for dir: `app2`/, { after: before });
    assert.match(c.body, /applied app2-v9/);
    assert.ok(existsSync(path.join(dataDir, 'repos', 'acme/infra', '3', 'default', 'app2', 'terraform.tfstate')));
  });
});
