// A plan is applied only while its PR holds the project's lock, on the real server process with
// the GitHub stand-in, real git and real terraform:
// - POST /api/plan with "PR": N keeps the lock it took, with its plan (a comment's plan does the
//   same), so another PR's plan of that project is refused with Atlantis's lock text and PR N's
//   `atlantis apply` runs. (It used to release the lock and keep the plan: another PR then took
//   the lock and PR N applied anyway.)
// - An apply checks the lock at the moment it runs, also under repo_locks on_plan: a plan made
//   while the PR held no lock (here: the server's repos.yaml said `repo_locks: {mode: disabled}`
//   then) is refused with Atlantis's lock text while another PR holds the lock, and applies,
//   taking the lock back, once that PR has closed.
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { lockedByMessage } from '../src/server/workflow/pr/messages.js';
import type { CliProcess } from './support/cli.js';
import { childList } from './support/children.js';
import { waitFor } from './support/server.js';
import { terraformConfig } from './support/git-repos.js';
import { type WorkflowEnv, createWorkflowEnv, startWorkflowServer, tempDataDir } from './support/workflow-env.js';

const SECRET = 'api-secret-lock-held-5d1e';
let env: WorkflowEnv;
const procs = childList();

before(async () => {
  env = await createWorkflowEnv();
});
after(async () => {
  procs.killAll();
  await env.close();
});

async function start(dataDir: string, host: string, extra: string[]): Promise<{ p: CliProcess; url: string }> {
  const s = await startWorkflowServer(env, dataDir, host, extra);
  procs.push(s.p);
  return s;
}

async function stop(p: CliProcess): Promise<void> {
  p.child.kill('SIGTERM');
  assert.equal((await p.exited).code, 0, p.output());
}

type Lock = { ProjectRepoPath: string; PullID: string };
async function locks(url: string): Promise<string[]> {
  const r = await fetch(`${url}/api/locks`, { headers: { 'X-Atlantis-Token': SECRET }, signal: AbortSignal.timeout(10_000) });
  const body = (await r.json()) as { Locks: Lock[] | null };
  return (body.Locks ?? []).map((l) => `${l.ProjectRepoPath}#${l.PullID}`);
}

describe('a plan is applied only while its PR holds the lock', () => {
  it('an API plan of a PR keeps its lock: another PR is refused, the PR applies', { timeout: 240_000 }, async () => {
    const { p, url } = await start(tempDataDir(), '127.24.63.1', ['--api-secret', SECRET]);
    const { headSha } = await env.openPull(url, 11, 'eleven', { 'README.md': '# eleven\n' });
    // The autoplan (no project) ends before the API plan: it would discard the PR's plans.
    await waitFor('the autoplan of #11 to end', () =>
      env.gh.statusesFor(env.repo.fullName, headSha).some((st) => st.context === 'atlantis/plan' && st.state === 'success'),
    );

    const r = await fetch(`${url}/api/plan`, {
      method: 'POST',
      headers: { 'X-Atlantis-Token': SECRET },
      body: JSON.stringify({ Repository: env.repo.fullName, Ref: 'eleven', Type: 'Github', PR: 11, Paths: [{ Directory: 'app1' }] }),
      signal: AbortSignal.timeout(120_000),
    });
    assert.equal(r.status, 200, await r.text());
    assert.deepEqual(await locks(url), ['app1#11'], "the API plan's lock stays with its plan");

    await env.openPull(url, 12, 'twelve', { 'app1/main.tf': terraformConfig({ marker: 'app1-twelve' }) });
    const refused = await env.waitForComment(12, /^Ran Plan for dir: `app1`/, { timeoutMs: 90_000 });
    assert.ok(refused.body.includes(lockedByMessage(11)), refused.body);
    assert.deepEqual(await locks(url), ['app1#11']);

    const before = env.commentsOn(11).length;
    await env.comment(url, 11, 'atlantis apply -d app1');
    const applied = await env.waitForComment(11, /^Ran Apply for dir: `app1`/, { after: before, timeoutMs: 90_000 });
    assert.match(applied.body, /applied app1-v1/);
    await stop(p);
  });

  it('an apply checks the lock when it runs (on_plan): refused while another PR holds it, applies once it is free', {
    timeout: 300_000,
  }, async () => {
    const dataDir = tempDataDir();
    const host = '127.24.63.2';
    const reposYaml = path.join(dataDir, '..', `repos-unlocked-${process.pid}.yaml`);
    writeFileSync(reposYaml, 'repos:\n  - id: /.*/\n    repo_locks:\n      mode: disabled\n');

    // PR #21's plan is made while the server's config takes no locks.
    let s = await start(dataDir, host, ['--api-secret', SECRET, '--repo-config', reposYaml]);
    await env.openPull(s.url, 21, 'twentyone', { 'app2/main.tf': terraformConfig({ marker: 'app2-21' }) });
    await env.waitForComment(21, /^Ran Plan for dir: `app2`/, { timeoutMs: 90_000 });
    assert.deepEqual(await locks(s.url), [], 'no lock under repo_locks: disabled');
    await stop(s.p);

    // Locks are on again (the default, on_plan); PR #22 plans the same project and locks it.
    s = await start(dataDir, host, ['--api-secret', SECRET]);
    await env.openPull(s.url, 22, 'twentytwo', { 'app2/main.tf': terraformConfig({ marker: 'app2-22' }) });
    await env.waitForComment(22, /^Ran Plan for dir: `app2`/, { timeoutMs: 90_000 });
    assert.deepEqual(await locks(s.url), ['app2#22']);

    let before = env.commentsOn(21).length;
    await env.comment(s.url, 21, 'atlantis apply -d app2');
    const refused = await env.waitForComment(21, /^Ran Apply for dir: `app2`/, { after: before, timeoutMs: 90_000 });
    assert.ok(refused.body.includes(lockedByMessage(22)), refused.body);
    assert.doesNotMatch(refused.body, /applied app2-21/);
    assert.deepEqual(await locks(s.url), ['app2#22']);

    // PR #22 closes: its lock goes, and PR #21's plan applies, taking the lock.
    await env.closePull(s.url, 22);
    const url = s.url;
    await waitFor("PR #22's lock to go", async () => (await locks(url)).length === 0);
    before = env.commentsOn(21).length;
    await env.comment(s.url, 21, 'atlantis apply -d app2');
    const applied = await env.waitForComment(21, /^Ran Apply for dir: `app2`/, { after: before, timeoutMs: 90_000 });
    assert.match(applied.body, /applied app2-21/);
    assert.deepEqual(await locks(s.url), ['app2#21'], 'the apply took the lock back; it stays until the PR closes');
    await stop(s.p);
  });
});
