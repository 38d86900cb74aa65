// Two server processes sharing one real redis-server (`--locking-db-type redis`) behave as
// one Atlantis for a PR whose webhooks land on either: a plan made on replica A is applied
// by replica B (which clones the PR, restores the plan file from Redis and checks its hash),
// a lock taken on A holds back another PR's plan on B, both replicas show the same locks,
// and a close on A releases them for B. Real git, real terraform, the GitHub stand-in.
import assert from 'node:assert/strict';
import { readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { CliProcess } from './support/cli.js';
import { terraformConfig } from './support/git-repos.js';
import { type RedisServer, startRedisServer } from './support/redis-server.js';
import { waitFor } from './support/server.js';
import { type WorkflowEnv, createWorkflowEnv, startWorkflowServer, tempDataDir } from './support/workflow-env.js';

let env: WorkflowEnv;
let redis: RedisServer;
const procs: CliProcess[] = [];
const dirs: string[] = [];

before(async () => {
  env = await createWorkflowEnv();
  redis = await startRedisServer();
});
after(async () => {
  for (const p of procs) p.child.kill('SIGKILL');
  await env.close();
  await redis.cleanup();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

async function startReplica(host: string, id: string): Promise<{ p: CliProcess; url: string }> {
  const dataDir = tempDataDir();
  dirs.push(dataDir);
  const started = await startWorkflowServer(env, dataDir, host, [
    '--locking-db-type',
    'redis',
    '--redis-host',
    redis.host,
    '--redis-port',
    String(redis.port),
    '--replica-id',
    id,
  ]);
  procs.push(started.p);
  return started;
}

/** The server's own log lines of finished commands, as `<command> #<pull>`. */
const finished = (p: CliProcess): string[] =>
  p
    .output()
    .split('\n')
    .filter((l) => /"msg":"Command (finished|failed)"/.test(l))
    .map((l) => {
      const j = JSON.parse(l) as { command: string; pull: number };
      return `${j.command} #${j.pull}`;
    });

/** The rows of the index page's Locks table. */
const lockRows = async (url: string): Promise<string> => {
  const page = await (await fetch(`${url}/`)).text();
  return page.slice(page.indexOf('<h2>Locks</h2>'), page.indexOf('<h2>Running jobs</h2>'));
};

const statuses = (sha: string, context: string) =>
  env.gh
    .statusesFor(env.repo.fullName, sha)
    .filter((s) => s.context === context)
    .map((s) => `${s.state}: ${s.description}`);

describe('two replicas sharing one Redis', () => {
  let a: { p: CliProcess; url: string };
  let b: { p: CliProcess; url: string };
  let head1 = '';
  const marker = path.join(tmpdir(), `ato-replicas-applied-${process.pid}`);
  after(() => rmSync(marker, { force: true }));

  it('a plan made on replica A is locked for both: B shows the lock, and another PR on B is refused by it', async () => {
    a = await startReplica('127.18.60.1', 'replica-a');
    b = await startReplica('127.18.60.2', 'replica-b');
    const opened = await env.openPull(a.url, 1, 'rep-1', { 'net/main.tf': terraformConfig({ marker: 'net-v2', touchFile: marker }) });
    head1 = opened.headSha;
    assert.equal(opened.status, 200);
    const plan = await env.waitForComment(1, /^Ran Plan for dir: `net` workspace: `default`/);
    assert.match(plan.body, /Plan: 1 to add, 0 to change, 0 to destroy\./);
    await waitFor('autoplan to finish on A', () => finished(a.p).includes('plan #1'));
    for (const r of [a, b]) assert.match(await lockRows(r.url), /<td>net<\/td><td>default<\/td><td>#1 by /, `${r.url} lists A's lock`);
    const other = await env.openPull(b.url, 2, 'rep-2', { 'net/main.tf': terraformConfig({ marker: 'net-other' }) });
    const refused = await env.waitForComment(2, /^Ran Plan for dir: `net`/);
    assert.match(refused.body, /\*\*Plan Failed\*\*: This project is currently locked by an unapplied plan from pull #1/);
    await waitFor('PR 2 plan status', () => statuses(other.headSha, 'atlantis/plan').length === 2);
    assert.deepEqual(statuses(other.headSha, 'atlantis/plan'), ['pending: Plan in progress...', 'failure: 1/1 projects failed to plan.']);
    assert.deepEqual(finished(a.p), ['plan #1'], 'PR 2 ran on B only');
  });

  it('`atlantis apply` sent to B applies the plan A made: the same comment and statuses as one server', async () => {
    const before = env.commentsOn(1).length;
    const r = await env.comment(b.url, 1, 'atlantis apply');
    assert.equal(r.status, 200);
    const applied = await env.waitForComment(1, /^Ran Apply for dir: `net` workspace: `default`/, { after: before });
    assert.match(applied.body, /Apply complete! Resources: 1 added, 0 changed, 0 destroyed\./);
    await waitFor('apply to finish on B', () => finished(b.p).includes('apply #1'));
    assert.ok(!finished(a.p).includes('apply #1'), 'A ran no apply');
    assert.equal(readFileSync(marker, 'utf8'), 'net-v2', "terraform's local-exec ran the plan's marker");
    assert.equal(statuses(head1, 'atlantis/apply').at(-1), 'success: 1/1 projects applied successfully.');
    assert.deepEqual(statuses(head1, 'atlantis/apply: net/default'), ['pending: Apply in progress...', 'success: Apply succeeded.']);
    // As Atlantis: the lock outlives the apply, on every replica.
    for (const r of [a, b]) assert.match(await lockRows(r.url), /<td>net<\/td><td>default<\/td><td>#1 by /);
  });

  it('closing the PR on A releases its lock for B: PR 2 then plans on B', async () => {
    assert.equal((await env.closePull(a.url, 1)).status, 200);
    const c = await env.waitForComment(1, /^Locks and plans deleted for the projects and workspaces modified in this pull request:/);
    assert.match(c.body, /- dir: `net` workspace: `default`/);
    for (const r of [a, b]) assert.match(await lockRows(r.url), /<td colspan="6">none<\/td>/, `${r.url} lists no lock`);
    const before = env.commentsOn(2).length;
    await env.comment(b.url, 2, 'atlantis plan');
    const plan = await env.waitForComment(2, /^Ran Plan for dir: `net` workspace: `default`/, { after: before });
    assert.match(plan.body, /Plan: 1 to add, 0 to change, 0 to destroy\./);
  });
});
