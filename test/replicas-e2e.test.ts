// Three server processes sharing one real redis-server (`--locking-db-type redis`) behave as
// one Atlantis whatever replica a webhook lands on: each PR's commands run on the replica that
// owns it (rendezvous hashing over the live replicas, src/server/replicas/affinity.ts), the
// others hand its webhooks over; locks and statuses are the same as with one server. When the
// owner drains and leaves, another replica takes the PR and applies the plan the first one made
// (restored from Redis, hash checked). When the owner is SIGKILLed mid-apply, one survivor sees
// its heartbeat expire and posts the interrupted comment once; the lock stays.
// Real git, real terraform, the GitHub stand-in.
import assert from 'node:assert/strict';
import { existsSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { type ReplicaInfo, ownerOf } from '../src/server/replicas/affinity.js';
import type { CliProcess } from './support/cli.js';
import { terraformConfig } from './support/git-repos.js';
import { type RedisServer, replicaArgs, startRedisServer } from './support/redis-server.js';
import { waitFor } from './support/server.js';
import { type WorkflowEnv, createWorkflowEnv, startWorkflowServer, tempDataDir } from './support/workflow-env.js';

interface Replica {
  id: string;
  p: CliProcess;
  url: string;
}

let env: WorkflowEnv;
let redis: RedisServer;
const replicas: Replica[] = [];
const dirs: string[] = [];
const markers = path.join(tmpdir(), `ato-replicas-${process.pid}`);

before(async () => {
  env = await createWorkflowEnv();
  redis = await startRedisServer();
  for (const [i, id] of ['r1', 'r2', 'r3'].entries()) {
    const dataDir = tempDataDir();
    dirs.push(dataDir);
    const host = `127.18.60.${i + 1}`;
    const started = await startWorkflowServer(env, dataDir, host, [...replicaArgs(redis, id)]);
    replicas.push({ id, ...started });
  }
});
after(async () => {
  for (const r of replicas) r.p.child.kill('SIGKILL');
  await env.close();
  await redis.cleanup();
  for (const d of [...dirs, markers]) rmSync(d, { recursive: true, force: true });
});

const alive = (): Replica[] => replicas.filter((r) => r.p.child.exitCode === null && r.p.child.signalCode === null);
/** The replica that owns PR `n` among those alive, by the servers' own rule. */
function owner(n: number): Replica {
  const infos: ReplicaInfo[] = alive().map((r) => ({ id: r.id, url: r.url, draining: false, heartbeatAt: 0 }));
  const o = ownerOf(`${env.repo.fullName}#${n}`, infos);
  return replicas.find((r) => r.id === o?.id) as Replica;
}
const notOwner = (n: number): Replica => alive().find((r) => r.id !== owner(n).id) as Replica;

/** A server's own log lines with message `msg`, parsed. */
const logged = (r: Replica, msg: string): Array<Record<string, unknown>> =>
  r.p
    .output()
    .split('\n')
    .filter((l) => l.includes(`"msg":"${msg}"`))
    .map((l) => JSON.parse(l) as Record<string, unknown>);
/** Commands a server finished, as `<command> #<pull>`. */
const finished = (r: Replica): string[] =>
  [...logged(r, 'Command finished'), ...logged(r, 'Command failed')].map((j) => `${String(j.command)} #${String(j.pull)}`);

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

/** The rows of one of the index page's job tables. */
const jobRows = async (url: string, table: 'Running jobs' | 'Recent jobs'): Promise<string> => {
  const page = await (await fetch(`${url}/`)).text();
  const start = page.indexOf(`<h2>${table}</h2>`);
  const end = page.indexOf('</table>', start);
  return page.slice(start, end);
};

/** The server-sent events of `url` until the server ends the stream (bounded by `timeoutMs`). */
async function sseEvents(url: string, timeoutMs: number): Promise<Array<{ event: string; data: string }>> {
  const res = await fetch(url, { signal: AbortSignal.timeout(timeoutMs) });
  const text = await res.text();
  return text
    .split('\n\n')
    .filter((b) => b.trim() !== '')
    .map((b) => {
      const line = (k: string) =>
        b
          .split('\n')
          .find((l) => l.startsWith(`${k}: `))
          ?.slice(k.length + 2) ?? '';
      return { event: line('event'), data: line('data') };
    });
}

/** A project whose apply prints tick-1..tick-5, 2 s apart, after writing `started`. */
const tickingApply = (name: string): string => `resource "terraform_data" "t" {
  input = "${name}"
  provisioner "local-exec" {
    command = "mkdir -p '${markers}'; echo started > '${markers}/${name}.started'; for i in 1 2 3 4 5; do echo tick-$i; sleep 2; done"
  }
}
`;

/** A project whose apply writes `started` then, after `sleep` seconds, `done` to marker files. */
const slowApply = (name: string, sleep: number): string => `resource "terraform_data" "m" {
  input = "${name}"
  provisioner "local-exec" {
    command = "mkdir -p '${markers}'; echo started > '${markers}/${name}.started'; sleep ${sleep}; echo done > '${markers}/${name}.done'"
  }
}
`;

describe('three replicas sharing one Redis', () => {
  let head1 = '';

  it("a PR's autoplan runs on its owner whatever replica the webhook hit; every replica shows the lock", async () => {
    const o = owner(1);
    const via = notOwner(1);
    const opened = await env.openPull(via.url, 1, 'rep-1', { 'net/main.tf': terraformConfig({ marker: 'net-v2' }) });
    head1 = opened.headSha;
    assert.equal(opened.status, 200);
    const plan = await env.waitForComment(1, /^Ran Plan for dir: `net` workspace: `default`/);
    assert.match(plan.body, /Plan: 1 to add, 0 to change, 0 to destroy\./);
    await waitFor('the owner to finish the autoplan', () => finished(o).includes('plan #1'), 60_000);
    assert.deepEqual(
      logged(via, 'Webhook handed to the replica that owns the pull request').map((l) => [l.owner, l.status]),
      [[o.id, 200]],
    );
    for (const r of replicas) assert.deepEqual(finished(r).includes('plan #1'), r === o, `${r.id} ran the plan: ${r === o}`);
    for (const r of replicas) assert.match(await lockRows(r.url), /<td>net<\/td><td>default<\/td><td>#1 by /, `${r.id} lists the lock`);
  });

  it("another PR on the same dir, through any replica, is refused by the first PR's lock", async () => {
    const other = await env.openPull(notOwner(2).url, 2, 'rep-2', { 'net/main.tf': terraformConfig({ marker: 'net-other' }) });
    const refused = await env.waitForComment(2, /^Ran Plan for dir: `net`/);
    assert.match(refused.body, /\*\*Plan Failed\*\*: This project is currently locked by an unapplied plan from pull #1/);
    await waitFor('PR 2 plan status', () => statuses(other.headSha, 'atlantis/plan').length === 2);
    assert.deepEqual(statuses(other.headSha, 'atlantis/plan'), ['pending: Plan in progress...', 'failure: 1/1 projects failed to plan.']);
    await waitFor('the owner of PR 2 to finish', () => finished(owner(2)).includes('plan #2'));
  });

  it('`atlantis apply` sent to a replica that does not own the PR is applied by the owner: the same comment and statuses', async () => {
    const before = env.commentsOn(1).length;
    assert.equal((await env.comment(notOwner(1).url, 1, 'atlantis apply')).status, 200);
    const applied = await env.waitForComment(1, /^Ran Apply for dir: `net` workspace: `default`/, { after: before });
    assert.match(applied.body, /Apply complete! Resources: 1 added, 0 changed, 0 destroyed\./);
    await waitFor('the owner to finish the apply', () => finished(owner(1)).includes('apply #1'));
    assert.equal(statuses(head1, 'atlantis/apply').at(-1), 'success: 1/1 projects applied successfully.');
    assert.deepEqual(statuses(head1, 'atlantis/apply: net/default'), ['pending: Apply in progress...', 'success: Apply succeeded.']);
    for (const r of replicas)
      assert.match(await lockRows(r.url), /<td>net<\/td><td>default<\/td><td>#1 by /, 'the lock outlives the apply');
  });

  it('closing the PR releases its lock for every replica; PR 2 then plans', async () => {
    assert.equal((await env.closePull(notOwner(1).url, 1)).status, 200);
    const c = await env.waitForComment(1, /^Locks and plans deleted for the projects and workspaces modified in this pull request:/);
    assert.match(c.body, /- dir: `net` workspace: `default`/);
    for (const r of replicas) assert.match(await lockRows(r.url), /<td colspan="6">none<\/td>/, `${r.id} lists no lock`);
    const before = env.commentsOn(2).length;
    await env.comment(notOwner(2).url, 2, 'atlantis plan');
    const plan = await env.waitForComment(2, /^Ran Plan for dir: `net` workspace: `default`/, { after: before });
    assert.match(plan.body, /Plan: 1 to add, 0 to change, 0 to destroy\./);
  });

  it("every replica lists a job running on the owner, and another replica's page follows its output live to the end", async () => {
    const o = owner(5);
    const other = notOwner(5);
    await env.openPull(o.url, 5, 'rep-5', { 'ticks/main.tf': tickingApply('ticks') });
    await env.waitForComment(5, /^Ran Plan for dir: `ticks` workspace: `default`/);
    await waitFor('the plan to finish', () => finished(o).includes('plan #5'));
    assert.equal((await env.comment(other.url, 5, 'atlantis apply')).status, 200);
    await waitFor('terraform to start the apply', () => existsSync(path.join(markers, 'ticks.started')), 60_000);
    const rows = await jobRows(other.url, 'Running jobs');
    const id = /<a href="\/jobs\/([0-9a-f-]{36})">apply<\/a><\/td><td>acme\/infra#5<\/td>/.exec(rows)?.[1];
    assert.ok(id, `${other.id} lists the owner's running apply: ${rows}`);
    for (const r of replicas) assert.match(await jobRows(r.url, 'Running jobs'), new RegExp(id), `${r.id} lists it too`);
    const page = await (await fetch(`${other.url}/jobs/${id}`)).text();
    assert.match(page, /<p id="status">running<\/p>/);
    const from = /\/stream\?from=(\d+)/.exec(page)?.[1];
    assert.ok(from !== undefined, 'the page follows the job from the cursor it showed');
    const events = await sseEvents(`${other.url}/jobs/${id}/stream?from=${from}`, 120_000);
    const outputs = events.filter((e) => e.event === 'output').map((e) => JSON.parse(e.data) as string);
    assert.deepEqual(events.at(-1), { event: 'done', data: '"success"' }, 'the stream ends with the job');
    const shown = /<pre id="out">([\s\S]*?)<\/pre>/.exec(page)?.[1] ?? '';
    const all = shown + outputs.join('');
    for (let i = 1; i <= 5; i++) assert.match(all, new RegExp(`tick-${i}`), `tick-${i} shown`);
    // Live: the ticks come 2 s apart, the page reads the store every 500 ms, so the first tick and
    // the last never arrive in the same event.
    const withTick = (n: number) => outputs.findIndex((t) => t.includes(`tick-${n}`));
    assert.ok(withTick(5) > 0 && withTick(5) > Math.max(0, withTick(1)), `output came in pieces: ${JSON.stringify(outputs)}`);
    assert.equal(all.match(/tick-5/g)?.length, 1, 'nothing shown twice');
    const donePage = await (await fetch(`${other.url}/jobs/${id}`)).text();
    assert.match(donePage, /<p id="status">success<\/p>/);
    assert.match(await jobRows(other.url, 'Recent jobs'), new RegExp(id));
  });

  it('the owner drains and leaves: the PR moves, and its new owner applies the plan the old one made', async () => {
    await env.openPull(notOwner(3).url, 3, 'rep-3', { 'dns/main.tf': slowApply('dns', 0) });
    await env.waitForComment(3, /^Ran Plan for dir: `dns` workspace: `default`/);
    const old = owner(3);
    await waitFor('the owner to finish the plan', () => finished(old).includes('plan #3'));
    old.p.child.kill('SIGTERM');
    await old.p.exited;
    const next = owner(3);
    assert.notEqual(next.id, old.id);
    const before = env.commentsOn(3).length;
    assert.equal((await env.comment(next.url, 3, 'atlantis apply')).status, 200);
    const applied = await env.waitForComment(3, /^Ran Apply for dir: `dns` workspace: `default`/, { after: before });
    assert.match(applied.body, /Apply complete! Resources: 1 added, 0 changed, 0 destroyed\./);
    assert.ok(existsSync(path.join(markers, 'dns.done')), "the plan's local-exec ran");
    await waitFor('the new owner to finish the apply', () => finished(next).includes('apply #3'));
    assert.deepEqual(logged(next, 'Webhook handed to the replica that owns the pull request'), [], 'no hand-over: it owns the PR now');
  });

  it('the owner is SIGKILLed mid-apply: one survivor posts the interrupted comment once, and the lock stays', async () => {
    const o = owner(4);
    await env.openPull(o.url, 4, 'rep-4', { 'slow/main.tf': slowApply('slow', 60) });
    await env.waitForComment(4, /^Ran Plan for dir: `slow` workspace: `default`/);
    await waitFor('the plan to finish', () => finished(o).includes('plan #4'));
    const before = env.commentsOn(4).length;
    assert.equal((await env.comment(o.url, 4, 'atlantis apply')).status, 200);
    await waitFor('terraform to start the apply', () => existsSync(path.join(markers, 'slow.started')), 60_000);
    o.p.child.kill('SIGKILL');
    await o.p.exited;
    const c = await env.waitForComment(4, /\*\*Apply Interrupted\*\*/, { after: before, timeoutMs: 40_000 });
    assert.match(c.body, /^Ran Apply for dir: `slow` workspace: `default`/);
    const survivors = alive();
    await waitFor('the takeover to be logged', () =>
      survivors.some((r) => logged(r, 'A replica stopped heartbeating: taking over its interrupted jobs and accepted commands').length > 0),
    );
    const takers = survivors.filter(
      (r) => logged(r, 'A replica stopped heartbeating: taking over its interrupted jobs and accepted commands').length,
    );
    assert.deepEqual(
      takers.map((r) =>
        logged(r, 'A replica stopped heartbeating: taking over its interrupted jobs and accepted commands').map((l) => l.replica),
      ),
      [[o.id]],
      'exactly one survivor took over, once',
    );
    assert.equal(
      env
        .commentsOn(4)
        .slice(before)
        .filter((x) => /Interrupted\*\*/.test(x.body)).length,
      1,
      'one comment',
    );
    for (const r of survivors)
      assert.match(await lockRows(r.url), /<td>slow<\/td><td>default<\/td><td>#4 by /, `${r.id} still lists the lock`);
  });
});
