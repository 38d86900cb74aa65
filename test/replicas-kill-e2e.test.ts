// A replica dies mid-plan (every process of it SIGKILLed at once, as a pod's death), with a
// second command of the same PR accepted (journalled, answered 200) and not yet begun: it is
// held in its read of the PR by the GitHub stand-in. Three replicas on one real Redis, the
// stamped workflow of many-prs.ts (each terraform run records its start and end), real git and
// terraform. Then:
//   - one survivor sees the dead replica's heartbeat expire, takes its journal over, and posts
//     the interrupted plan's comment once;
//   - the lock stays with the PR, as Atlantis v0.47 leaves it (docs/shared-state.md): another
//     PR's plan of the project is refused by it;
//   - the accepted, never-begun command runs once, on the survivor that took over;
//   - the PR's next `atlantis plan`, sent through a replica that does not own it, is run by the
//     PR's new owner and succeeds;
//   - no two runs of the project overlap; once the PR closes, nothing is left in Redis.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { RedisStore } from '../src/server/locks/redis-store.js';
import { terraformConfig } from './support/git-repos.js';
import { classify, describeAnswer, overlaps, readRuns, stampedReposYaml } from './support/many-prs.js';
import { killTree } from './support/process-tree.js';
import { type RedisServer, startRedisServer, testSharedStateKey } from './support/redis-server.js';
import {
  NO_LOCK_ROW,
  type Replica,
  isAlive,
  keepLogs,
  leftInRedis,
  lockRows,
  logLines,
  ownerAmong,
  startReplica,
} from './support/replica-faults.js';
import { waitFor } from './support/server.js';
import { type WorkflowEnv, createWorkflowEnv, tempDataDir } from './support/workflow-env.js';

const TAKEOVER = 'A replica stopped heartbeating: taking over its interrupted jobs and accepted commands';
const ADOPTED = 'Running a command a dead replica had accepted';

let env: WorkflowEnv;
let redis: RedisServer;
const replicas: Replica[] = [];
const dirs: string[] = [];
const eventsDir = mkdtempSync(path.join(tmpdir(), 'ato-kill-'));
const events = path.join(eventsDir, 'events');
dirs.push(eventsDir);

before(async () => {
  env = await createWorkflowEnv();
  redis = await startRedisServer();
  // Each run sleeps 3 s after its plan: the kill lands well inside the victim's run.
  writeFileSync(path.join(eventsDir, 'repos.yaml'), stampedReposYaml(events, 3));
  const extra = ['--disable-autoplan', '--repo-config', path.join(eventsDir, 'repos.yaml')];
  // 127.18.92.x: this file's own loopback addresses.
  for (const i of [1, 2, 3]) replicas.push(await startReplica(env, redis, `127.18.92.${i}`, `r${i}`, extra, dirs));
});
after(async () => {
  keepLogs(replicas, 'kill-');
  for (const r of replicas) if (isAlive(r)) r.p.child.kill('SIGKILL');
  await Promise.all(replicas.map((r) => r.p.exited));
  await env?.close();
  await redis?.cleanup();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

async function addPull(n: number, dir: string): Promise<void> {
  const ref = `kill-${n}`;
  const sha = await env.repo.createBranch(ref, { [`${dir}/main.tf`]: terraformConfig({ marker: `${dir}-pr${n}` }) });
  await env.repo.publishPull(n, ref);
  const files = (await env.repo.changedFiles(ref)).map((filename) => ({ filename }));
  env.gh.addPull(env.repo.fullName, { number: n, headSha: sha, headRef: ref, files });
}

/** The victim's command journal, read from Redis as a store of that replica would. */
async function journalOf(replicaId: string) {
  const s = await RedisStore.connect({
    host: redis.host,
    port: redis.port,
    dataDir: tempDataDir(),
    replicaId,
    sharedStateKey: testSharedStateKey(),
  });
  try {
    return await s.acceptedCommands();
  } finally {
    await s.close();
  }
}

describe('a replica SIGKILLed mid-plan, with a command of the PR accepted and not begun', { timeout: 300_000 }, () => {
  it('is taken over once: the plan answered interrupted, the lock kept, the waiting command run once, the next plan run by the new owner', async () => {
    const n = 1;
    const pullKey = `${env.repo.fullName}#${n}`;
    await addPull(n, 'k1');
    await addPull(2, 'k1');
    const victim = ownerAmong(pullKey, replicas);
    const others = replicas.filter((r) => r !== victim);
    const via = others[0] as Replica;

    // The plan, sent through another replica, runs on the owner; the kill waits for its stamp.
    assert.deepEqual(await env.comment(via.url, n, 'atlantis plan'), { status: 200, body: 'Processing...\n' });
    await waitFor(
      "the victim's terraform run to start",
      () => readRuns(events).some((r) => r.pull === n && r.dir.startsWith(victim.dataDir)),
      120_000,
    );
    // A second command, accepted by the owner, held before it begins (in its read of the PR).
    const hold = env.gh.holdNext({ method: 'GET', path: new RegExp(`/pulls/${n}$`) });
    assert.deepEqual(await env.comment(others[1]?.url as string, n, 'atlantis plan -d k1'), { status: 200, body: 'Processing...\n' });
    await hold.reached;
    const commentsBefore = env.commentsOn(n).length;

    const killedAt = Date.now();
    const killed = killTree(victim.p.child.pid as number);
    assert.equal((await victim.p.exited).signal, 'SIGKILL');
    hold.release();
    assert.ok(killed.length >= 3, `the server and its processes (terraform among them) were killed: ${killed.length}`);
    assert.deepEqual(
      (await journalOf(victim.id)).map((c) => [c.pull, c.startedAt !== undefined]),
      [
        [n, true],
        [n, false],
      ],
      "the victim's journal: the running plan (begun) and the held one (not begun)",
    );

    // One survivor takes over: the interrupted comment once; the lock stays with the PR.
    const interrupted = await env.waitForComment(n, /\*\*Plan Interrupted\*\*/, { after: commentsBefore, timeoutMs: 60_000 });
    assert.match(interrupted.body, /^Ran Plan for dir: `k1` workspace: `default`/);
    const takers = others.filter((r) => logLines(r, TAKEOVER).length > 0);
    assert.deepEqual(
      takers.map((r) => logLines(r, TAKEOVER).map((l) => l.replica)),
      [[victim.id]],
      'exactly one survivor took over, once',
    );
    const taker = takers[0] as Replica;
    for (const r of others) assert.match(await lockRows(r.url), /<td>k1<\/td><td>default<\/td><td>#1 by /, `${r.id}: the lock stays`);
    const refused = env.commentsOn(2).length;
    assert.equal((await env.comment(via.url, 2, 'atlantis plan')).status, 200);
    const locked = await env.waitForComment(2, /^Ran Plan for dir: `k1`/, { after: refused });
    assert.equal(describeAnswer(classify(locked.body)), 'plan k1:locked-by-#1', "another PR's plan is refused by the kept lock");

    // The never-begun command runs once, on the taker.
    await waitFor('the adopted command to finish', () => logLines(taker, 'Command finished').some((l) => l.pull === n), 120_000);
    assert.deepEqual(
      logLines(taker, ADOPTED).map((l) => [l.pull, l.command, l.replica]),
      [[n, 'atlantis plan -d k1', victim.id]],
    );
    for (const r of others.filter((x) => x !== taker)) assert.deepEqual(logLines(r, ADOPTED), [], `${r.id} adopted nothing`);

    // The next plan, through a replica that does not own the PR now, runs on its new owner.
    const owner = ownerAmong(pullKey, others);
    const notOwner = others.find((r) => r !== owner) as Replica;
    const beforeNext = env.commentsOn(n).length;
    assert.equal((await env.comment(notOwner.url, n, 'atlantis plan')).status, 200);
    const next = await env.waitForComment(n, /^Ran Plan for dir: `k1`/, { after: beforeNext, timeoutMs: 120_000 });
    assert.equal(describeAnswer(classify(next.body)), 'plan k1:ok');
    const onOwner = owner === taker ? 2 : 1;
    await waitFor(
      "the new owner's plan to be logged finished",
      () => logLines(owner, 'Command finished').filter((l) => l.pull === n).length >= onOwner,
    );

    // Every command of PR 1 answered once: the interrupted plan, the adopted one, the next one.
    assert.deepEqual(
      env
        .commentsOn(n)
        .slice(commentsBefore)
        .map((c) => (/\*\*Plan Interrupted\*\*/.test(c.body) ? 'interrupted' : describeAnswer(classify(c.body))))
        .sort(),
      ['interrupted', 'plan k1:ok', 'plan k1:ok'],
    );
    // Runs of PR 1: the victim's never ended (killed), the taker's and the new owner's did, none overlapping.
    const runs = readRuns(events).filter((r) => r.pull === n);
    const where = (dir: string) => replicas.find((r) => dir.startsWith(r.dataDir))?.id;
    assert.deepEqual(
      runs.map((r) => [where(r.dir), r.end !== undefined]),
      [
        [victim.id, false],
        [taker.id, true],
        [owner.id, true],
      ],
    );
    assert.deepEqual(overlaps(runs), []);
    const at = (l: Record<string, unknown> | undefined) => (l ? Date.parse(l.time as string) - killedAt : Number.NaN);
    const adoptedRun = runs[1];
    console.log(
      `killed ${victim.id}; ${taker.id} took over ${at(logLines(taker, TAKEOVER)[0])} ms after the kill, posted the interrupted comment ` +
        `${Date.parse(interrupted.createdAt) - killedAt} ms after it; the adopted plan's run began ` +
        `${adoptedRun ? Number(adoptedRun.start / 1_000_000n) - killedAt : '-'} ms after it ` +
        `(${logLines(taker, 'Waiting for the project lease').length} lease waits logged); new owner ${owner.id}`,
    );

    // Closed: nothing left anywhere, the victim's journal included.
    assert.equal((await env.closePull(notOwner.url, n)).status, 200);
    await env.waitForComment(n, /^Locks and plans deleted for the projects and workspaces modified in this pull request:/);
    for (const r of others) assert.match(await lockRows(r.url), new RegExp(NO_LOCK_ROW), `${r.id} lists no lock`);
    assert.deepEqual(await leftInRedis(redis), []);
    for (const r of others)
      for (const msg of ['Command crashed', 'Command failed', 'Handling a gone replica failed'])
        assert.deepEqual(logLines(r, msg), [], `${r.id}: ${msg}`);
  });
});
