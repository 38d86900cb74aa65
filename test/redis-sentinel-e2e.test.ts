// Two server replicas on Redis through Redis Sentinel (`--redis-sentinel-*`) survive a
// failover: the master is SIGKILLed once PR 1's plan and lock are on its replica (judged from
// the replica's own replication offset), the sentinels promote the replica (judged from their
// own answer), and a PR opened during the failover window is answered 503 until a
// redelivery is accepted, then planned once. After it: PR 1's lock is still listed on every
// replica, its apply is answered 200 and applied once, a new PR plans, /readyz is 200 again,
// every command got its answer and ran once (the replicas' own "Command finished" lines), no
// replica was declared gone, once the PRs are closed no lock or lease is left in Redis, and
// SIGTERM stops both replicas cleanly.
// Real redis-servers and sentinels, real git and terraform, the GitHub stand-in.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { CliProcess } from './support/cli.js';
import { pullRequestPayload, sendWebhook } from './support/github-standin.js';
import { type SentinelSetup, sentinelReplicaArgs, startSentinelSetup } from './support/redis-sentinel.js';
import { waitFor } from './support/server.js';
import { WEBHOOK_SECRET, type WorkflowEnv, createWorkflowEnv, startWorkflowServer, tempDataDir } from './support/workflow-env.js';

interface Replica {
  id: string;
  p: CliProcess;
  url: string;
}

const PW = 'sentinel-e2e-data-pw';
const SPW = 'sentinel-e2e-sentinel-pw';
let env: WorkflowEnv;
let s: SentinelSetup;
const replicas: Replica[] = [];
const dirs: string[] = [];
const markers = fs.mkdtempSync(path.join(os.tmpdir(), 'ato-sentinel-e2e-'));

before(async () => {
  env = await createWorkflowEnv();
  s = await startSentinelSetup({ password: PW, sentinelPassword: SPW });
  for (const [i, id] of ['r1', 'r2'].entries()) {
    const dataDir = tempDataDir();
    dirs.push(dataDir);
    // 127.18.84.x: this file's own loopback addresses.
    const started = await startWorkflowServer(env, dataDir, `127.18.84.${i + 1}`, [
      ...sentinelReplicaArgs(s, id),
      '--redis-password',
      PW,
      '--redis-sentinel-password',
      SPW,
    ]);
    replicas.push({ id, ...started });
  }
});
after(async () => {
  for (const r of replicas) r.p.child.kill('SIGKILL');
  await env?.close();
  await s?.cleanup();
  for (const d of [...dirs, markers]) fs.rmSync(d, { recursive: true, force: true });
});

/** A server's own log lines with message `msg`, parsed. */
const logged = (r: Replica, msg: string): Array<Record<string, unknown>> =>
  r.p
    .output()
    .split('\n')
    .filter((l) => l.includes(`"msg":"${msg}"`))
    .map((l) => JSON.parse(l) as Record<string, unknown>);
/** Every command the replicas finished (or failed), as `<command> #<pull>`, one entry per run. */
const runs = (): string[] =>
  replicas.flatMap((r) =>
    [...logged(r, 'Command finished'), ...logged(r, 'Command failed')].map((j) => `${String(j.command)} #${String(j.pull)}`),
  );
const lockRows = async (url: string): Promise<string> => {
  const page = await (await fetch(`${url}/`, { signal: AbortSignal.timeout(5000) })).text();
  return page.slice(page.indexOf('<h2>Locks</h2>'), page.indexOf('<h2>Running jobs</h2>'));
};
const readyz = async (url: string): Promise<number> =>
  (await fetch(`${url}/readyz`, { signal: AbortSignal.timeout(5000) }).catch(() => ({ status: 0 }))).status;

/** A project whose apply appends its name to a marker file: one line per apply that ran. */
const project = (name: string): string => `resource "terraform_data" "m" {
  input = "${name}"
  provisioner "local-exec" {
    command = "echo ${name} >> '${markers}/applies'"
  }
}
`;
const applies = (): string[] =>
  fs.existsSync(path.join(markers, 'applies')) ? fs.readFileSync(path.join(markers, 'applies'), 'utf8').trim().split('\n') : [];

describe('two replicas through Redis Sentinel, across a failover', { timeout: 300_000 }, () => {
  const r1 = () => replicas[0]!;
  const failover = { killedAt: 0, promotedAt: 0, acceptedAt: 0, refused: 0 };

  it('before: PR 1 planned, its lock listed everywhere and on the replica of Redis', async () => {
    assert.equal((await env.openPull(r1().url, 1, 'sen-1', { 'net/main.tf': project('net') })).status, 200);
    await env.waitForComment(1, /^Ran Plan for dir: `net` workspace: `default`/, { timeoutMs: 90_000 });
    await waitFor('the plan of PR 1 to finish', () => runs().includes('plan #1'), 60_000);
    for (const r of replicas) assert.match(await lockRows(r.url), /<td>net<\/td><td>default<\/td><td>#1 by /, `${r.id} lists the lock`);
    const [master, replica] = s.nodes;
    await s.waitReplicated(master, replica);
    const c = s.client(replica);
    assert.equal(await c.hexists('atlantis:locks', JSON.stringify(['acme/infra', 'net', 'default'])), 1, 'the lock is on the replica');
    c.disconnect();
    for (const r of replicas) assert.equal(logged(r, 'Utilizing Redis DB in sentinel mode').length, 1);
  });

  it('during: the master SIGKILLed, a PR opened meanwhile is answered 503 until a redelivery is accepted', async () => {
    const [master, replica] = s.nodes;
    const headSha = await env.repo.createBranch('sen-2', { 'dns/main.tf': project('dns') });
    await env.repo.publishPull(2, 'sen-2');
    env.gh.addPull(env.repo.fullName, {
      number: 2,
      headSha,
      headRef: 'sen-2',
      baseRef: env.repo.baseBranch,
      files: [{ filename: 'dns/main.tf' }],
    });
    const payload = pullRequestPayload({
      repo: env.repo.fullName,
      cloneUrl: env.repo.cloneUrl,
      action: 'opened',
      number: 2,
      headSha,
      headRef: 'sen-2',
    });
    const deliveryId = randomUUID();

    failover.killedAt = Date.now();
    await master.kill();
    // The sentinels' own answer, watched while the redeliveries go on.
    const promoted = s.waitForMaster(replica, 60_000);
    // GitHub's redeliveries: the same delivery again, until it is accepted (bounded in count and time).
    const answers: Array<{ status: number; body: string }> = [];
    for (let i = 0; i < 120 && Date.now() - failover.killedAt < 60_000; i++) {
      const a = await sendWebhook(`${r1().url}/events`, 'pull_request', payload, { secret: WEBHOOK_SECRET, deliveryId });
      answers.push({ status: a.status, body: a.body });
      if (a.status === 200) break;
      await new Promise((r) => setTimeout(r, 250));
    }
    failover.acceptedAt = Date.now();
    failover.refused = answers.length - 1;
    failover.promotedAt = await promoted;
    assert.equal(answers.at(-1)?.status, 200, `accepted at last: ${JSON.stringify(answers.slice(-3))}`);
    for (const a of answers.slice(0, -1))
      assert.deepEqual(a, { status: 503, body: 'The state store cannot be reached: the command was not accepted, try again later\n' });
    assert.ok(answers.length > 1, 'the first delivery came while there was no master');
    assert.equal((await s.masterNode()).port, replica.port, 'the sentinels promoted the replica');

    const plan = await env.waitForComment(2, /^Ran Plan for dir: `dns` workspace: `default`/, { timeoutMs: 90_000 });
    assert.match(plan.body, /Plan: 1 to add, 0 to change, 0 to destroy\./);
    await waitFor('the plan of PR 2 to finish', () => runs().includes('plan #2'), 60_000);
  });

  it('after: the lock is still listed, the apply is answered and applied once, a new PR plans, /readyz is 200', async () => {
    for (const r of replicas) await waitFor(`${r.id} /readyz 200`, async () => (await readyz(r.url)) === 200, 30_000);
    for (const r of replicas)
      assert.match(await lockRows(r.url), /<td>net<\/td><td>default<\/td><td>#1 by /, `${r.id} still lists the lock`);

    const before = env.commentsOn(1).length;
    assert.deepEqual(await env.comment(replicas[1]!.url, 1, 'atlantis apply'), { status: 200, body: 'Processing...\n' });
    const applied = await env.waitForComment(1, /^Ran Apply for dir: `net` workspace: `default`/, { after: before, timeoutMs: 90_000 });
    assert.match(applied.body, /Apply complete! Resources: 1 added, 0 changed, 0 destroyed\./);
    await waitFor('the apply of PR 1 to finish', () => runs().includes('apply #1'), 60_000);
    assert.deepEqual(applies(), ['net'], 'terraform applied once');

    assert.equal((await env.openPull(r1().url, 3, 'sen-3', { 'app/main.tf': project('app') })).status, 200);
    await env.waitForComment(3, /^Ran Plan for dir: `app` workspace: `default`/, { timeoutMs: 90_000 });
    await waitFor('the plan of PR 3 to finish', () => runs().includes('plan #3'), 60_000);
  });

  it('throughout: one answer and one run per command, no replica declared gone, no lock or lease left, no secret written', async () => {
    // The closes release what the PRs hold; wait for their comments, then count.
    for (const n of [1, 2, 3]) {
      assert.equal((await env.closePull(r1().url, n)).status, 200);
      await env.waitForComment(n, /^Locks and plans deleted for the projects and workspaces modified in this pull request:/);
    }
    const counts: Record<string, number> = {};
    for (const r of runs()) counts[r] = (counts[r] ?? 0) + 1;
    assert.deepEqual(counts, { 'plan #1': 1, 'plan #2': 1, 'apply #1': 1, 'plan #3': 1 }, 'each command ran once');
    const answers = (n: number, re: RegExp) => env.commentsOn(n).filter((c) => re.test(c.body)).length;
    assert.equal(answers(1, /^Ran Plan for dir: `net`/), 1);
    assert.equal(answers(1, /^Ran Apply for dir: `net`/), 1);
    assert.equal(answers(2, /^Ran Plan for dir: `dns`/), 1, 'the accepted redelivery answered once');
    assert.equal(answers(3, /^Ran Plan for dir: `app`/), 1);
    for (const r of replicas) {
      assert.deepEqual(logged(r, 'A replica stopped heartbeating: taking over its interrupted jobs and accepted commands'), [], r.id);
      assert.deepEqual(logged(r, 'Command not run: the state store cannot be reached'), [], r.id);
      assert.deepEqual(logged(r, 'Lost the project lease: it expired, another replica may have run terraform in the project'), [], r.id);
      assert.match(await lockRows(r.url), /<td colspan="6">none<\/td>/, `${r.id} lists no lock`);
      assert.ok(!r.p.output().includes(PW) && !r.p.output().includes(SPW), `${r.id} never wrote a password`);
      assert.equal(r.p.child.exitCode, null, `${r.id} never exited by itself`);
    }
    const c = s.client(s.nodes[1]);
    assert.equal(await c.hlen('atlantis:locks'), 0, 'no lock in Redis');
    assert.deepEqual(await c.keys('atlantis:lease:*'), [], 'no project lease in Redis');
    for (const r of replicas) assert.equal(await c.hlen(`atlantis:commands:${r.id}`), 0, `nothing left in ${r.id}'s journal`);
    c.disconnect();
    // A clean stop ends every connection, the sentinels' subscriptions of the failover detector included.
    for (const r of replicas) r.p.child.kill('SIGTERM');
    for (const r of replicas) assert.deepEqual(await r.p.exited, { code: 0, signal: null }, `${r.id} stopped cleanly`);
    // The figures of this run, for docs/reliability.md.
    const ms = (t: number) => `${t - failover.killedAt} ms`;
    console.log(
      `# failover: sentinels named the new master ${ms(failover.promotedAt)} after the SIGKILL (bounded above by the polling); ${failover.refused} deliveries answered 503, the next accepted ${ms(failover.acceptedAt)} after it`,
    );
  });
});
