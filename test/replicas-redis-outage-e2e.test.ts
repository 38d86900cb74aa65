// Redis goes away in the middle of a burst of commands on three replicas, and comes back:
//   a. stopped (SIGTERM: the AOF, fsynced at every write, keeps all it acknowledged) for 20 s,
//      then started again;
//   b. restarted at once (stop, then start).
// Each scenario: 15 PRs, each its own project (o<n>), three `atlantis plan` comments per PR
// paced over ~11 s, round-robin over the replicas; Redis goes away once a third of the comments
// were answered 200 and a terraform run is in flight. The senders behave like GitHub plus an
// operator clicking "Redeliver": a 503 or a failure to connect is sent again after a short
// backoff (test/support/redeliver.ts); a 200 never is. Then every PR closes, the same way.
// Checked after each, from the servers' logs, the stand-in's comments, the terraform runs'
// own stamps and Redis itself: every delivery ended 200; each one led to exactly one run and
// one answer comment (a plan); no two runs of a project overlapped; each close answered once;
// no lock, lease, journal entry or unfinished job is left; no replica was declared dead.
// While Redis was down (a), every replica's /readyz was 503 and the refusals said why.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { sleep } from '../src/async.js';
import { REPLAY_PENDING_BODY } from '../src/server/workflow/intake/delivery-replay.js';
import { STORE_UNAVAILABLE_BODY } from '../src/server/workflow/intake/command-intake.js';
import { terraformConfig } from './support/git-repos.js';
import { issueCommentPayload, pullRequestPayload } from './support/github-standin.js';
import { classify, describeAnswer, overlaps, readRuns, stampedReposYaml } from './support/many-prs.js';
import { type Delivery, deliver } from './support/redeliver.js';
import { type RedisServer, startRedisServer } from './support/redis-server.js';
import {
  NO_LOCK_ROW,
  type Replica,
  inProgress,
  keepLogs,
  leftInRedis,
  lockRows,
  logLines,
  logTails,
  metric,
  readyz,
  startReplica,
} from './support/replica-faults.js';
import { waitFor } from './support/server.js';
import { WEBHOOK_SECRET, type WorkflowEnv, createWorkflowEnv } from './support/workflow-env.js';

const PULLS = 15;
const pullsFrom = (first: number): number[] => Array.from({ length: PULLS }, (_, i) => first + i);
const COMMENTS_PER_PULL = 3;
/** One comment sent every PACE_MS, each on its own (so a slow or refused one holds back none). */
const PACE_MS = 250;
const OUTAGE_MS = 20_000;
const WAIT_MS = 180_000;

let env: WorkflowEnv;
let redis: RedisServer;
const replicas: Replica[] = [];
const dirs: string[] = [];
const eventsDir = mkdtempSync(path.join(tmpdir(), 'ato-outage-'));
const events = path.join(eventsDir, 'events');
dirs.push(eventsDir);

before(async () => {
  env = await createWorkflowEnv();
  redis = await startRedisServer();
  writeFileSync(path.join(eventsDir, 'repos.yaml'), stampedReposYaml(events, 1));
  const extra = ['--disable-autoplan', '--repo-config', path.join(eventsDir, 'repos.yaml')];
  // 127.18.91.x: this file's own loopback addresses.
  for (const i of [1, 2, 3]) replicas.push(await startReplica(env, redis, `127.18.91.${i}`, `r${i}`, extra, dirs));
});
after(async () => {
  keepLogs(replicas);
  for (const r of replicas) r.p.child.kill('SIGKILL');
  await Promise.all(replicas.map((r) => r.p.exited));
  await env?.close();
  await redis?.cleanup();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

const policy = { secret: WEBHOOK_SECRET };
const dirOf = (n: number): string => `o${n}`;

interface Sent extends Delivery {
  pull: number;
  replica: string;
}

async function preparePulls(pulls: number[]): Promise<void> {
  for (const n of pulls) {
    const ref = `outage-${n}`;
    const sha = await env.repo.createBranch(ref, { [`${dirOf(n)}/main.tf`]: terraformConfig({ marker: `o${n}` }) });
    await env.repo.publishPull(n, ref);
    const files = (await env.repo.changedFiles(ref)).map((filename) => ({ filename }));
    env.gh.addPull(env.repo.fullName, { number: n, headSha: sha, headRef: ref, files });
  }
}

const comment = (r: Replica, n: number, body: string): Promise<Delivery> =>
  deliver(
    `${r.url}/events`,
    'issue_comment',
    issueCommentPayload({ repo: env.repo.fullName, cloneUrl: env.repo.cloneUrl, number: n, body, user: 'dev' }),
    policy,
  );

function close(r: Replica, n: number): Promise<Delivery> {
  const pr = env.gh.getPull(env.repo.fullName, n);
  if (!pr) throw new Error(`no PR ${n}`);
  env.gh.updatePull(env.repo.fullName, n, { state: 'closed' });
  const payload = pullRequestPayload({
    repo: env.repo.fullName,
    cloneUrl: env.repo.cloneUrl,
    action: 'closed',
    number: n,
    headSha: pr.headSha,
    headRef: pr.headRef,
  });
  return deliver(`${r.url}/events`, 'pull_request', payload, policy);
}

/** A recorded terraform run of one of `pulls` has started and not ended. */
const runInFlight = (pulls: number[]): boolean => readRuns(events).some((r) => pulls.includes(r.pull) && r.end === undefined);

/** What the fault did, in the test's clock (ms). */
interface FaultTimes {
  downAt: number;
  upAt: number;
}

type Fault = () => Promise<FaultTimes>;

const attemptsOf = (ds: readonly Delivery[]) => ds.flatMap((d) => d.attempts);

/** Runs one scenario: the burst with `fault` injected mid-way, the closes, and every check. */
async function scenario(name: string, pulls: number[], fault: Fault): Promise<void> {
  const t0 = Date.now();
  const took = (what: string) => console.log(`${name}: ${what} at ${((Date.now() - t0) / 1000).toFixed(1)} s`);
  await preparePulls(pulls);
  const seen = new Map(pulls.map((n) => [n, env.commentsOn(n).length]));
  const runsBefore = new Set(readRuns(events).map((r) => r.id));

  // The burst, paced; the fault once a third of it is answered 200 and a run is in flight.
  const plan: Array<{ pull: number; to: Replica }> = [];
  for (let round = 0; round < COMMENTS_PER_PULL; round++)
    for (const [i, n] of pulls.entries()) plan.push({ pull: n, to: replicas[(round + i) % replicas.length] as Replica });
  let answered200 = 0;
  const burst = Promise.all(
    plan.map(async ({ pull, to }, i): Promise<Sent> => {
      await sleep(i * PACE_MS);
      const d = await comment(to, pull, 'atlantis plan');
      if (d.status === 200) answered200++;
      return { ...d, pull, replica: to.id };
    }),
  );
  const injected = (async () => {
    await waitFor('a third of the comments to be answered 200', () => answered200 >= plan.length / 3, WAIT_MS);
    await waitFor('a terraform run in flight', () => runInFlight(pulls), WAIT_MS);
    return fault();
  })();
  const [sent, times] = await Promise.all([burst, injected]);
  took(`burst answered, Redis down ${times.downAt - t0} ms .. up ${times.upAt - t0} ms`);

  const notOk = sent.filter((s) => s.status !== 200).map((s) => `#${s.pull} on ${s.replica}: ${s.status} ${s.body}`);
  assert.deepEqual(notOk, [], 'every comment delivery ended 200');
  for (const s of sent)
    for (const a of s.attempts.slice(0, -1)) {
      // Only a 503 (with the reason) or no answer at all was redelivered.
      // Or, after a write whose outcome was unknown, the answer to that delivery while its entry is removed.
      if (a.status !== undefined)
        assert.ok(
          [`503 ${STORE_UNAVAILABLE_BODY}\n`, `503 ${REPLAY_PENDING_BODY}\n`].includes(`${a.status} ${a.body}`),
          `#${s.pull}: a refused attempt: ${a.status} ${a.body}`,
        );
    }

  // Every comment answered exactly once, by a plan.
  const fresh = (n: number) => env.commentsOn(n).slice(seen.get(n) ?? 0);
  await waitFor('every comment to be answered', () => pulls.every((n) => fresh(n).length >= COMMENTS_PER_PULL), WAIT_MS).catch(
    (e: Error) => {
      const short = pulls.filter((n) => fresh(n).length < COMMENTS_PER_PULL).map((n) => `#${n}: ${fresh(n).length}`);
      throw new Error(`${e.message}: ${short.join(', ')}\n${logTails(replicas)}`);
    },
  );
  const ended = (msg: string) => replicas.flatMap((r) => logLines(r, msg)).filter((l) => pulls.includes(l.pull as number));
  const finished = () => ended('Command finished');
  await waitFor(
    'every command to be logged finished (or failed)',
    () => finished().length + ended('Command failed').length >= plan.length,
    WAIT_MS,
  );
  await waitFor('no operation left running', async () => (await Promise.all(replicas.map((r) => inProgress(r.url)))).every((n) => n === 0));
  took('every command answered');
  const answers = new Map(pulls.map((n) => [n, fresh(n).map((c) => describeAnswer(classify(c.body)))]));
  const want = new Map(pulls.map((n) => [n, Array.from({ length: COMMENTS_PER_PULL }, () => `plan ${dirOf(n)}:ok`)]));
  assert.deepEqual(answers, want, 'one successful plan answer per comment delivered');

  // One run per command, each ended, none overlapping another of its project.
  const runs = readRuns(events).filter((r) => !runsBefore.has(r.id) && pulls.includes(r.pull));
  assert.deepEqual(
    runs.filter((r) => r.end === undefined).map((r) => `#${r.pull} ${r.dir}`),
    [],
    'every run ended',
  );
  assert.deepEqual(overlaps(runs), [], 'no two runs of a project overlapped');
  const perPull = new Map(pulls.map((n) => [n, runs.filter((r) => r.pull === n).length]));
  assert.deepEqual(perPull, new Map(pulls.map((n) => [n, COMMENTS_PER_PULL])), 'one terraform run per accepted comment');
  assert.equal(finished().length, plan.length, 'each command logged finished once');
  const inFlight = runs.filter((r) => r.start < BigInt(times.downAt) * 1_000_000n && (r.end ?? 0n) > BigInt(times.downAt) * 1_000_000n);

  // Every PR closes (redelivered the same way); each, holding its project's lock, is told once.
  const seenBeforeClose = new Map(pulls.map((n) => [n, env.commentsOn(n).length]));
  const closes = await Promise.all(pulls.map((n, i) => close(replicas[i % replicas.length] as Replica, n)));
  assert.deepEqual(
    closes.filter((d) => d.status !== 200).map((d) => `${d.status} ${d.body}`),
    [],
    'every close delivery ended 200',
  );
  const afterClose = (n: number) => env.commentsOn(n).slice(seenBeforeClose.get(n));
  await waitFor('every close to be answered', () => pulls.every((n) => afterClose(n).length >= 1), WAIT_MS);
  assert.deepEqual(
    new Map(pulls.map((n) => [n, afterClose(n).map((c) => describeAnswer(classify(c.body)))])),
    new Map(pulls.map((n) => [n, [`closed ${dirOf(n)}`]])),
  );

  // Nothing left: no lock on any replica's page, nothing in Redis, nothing crashed or declared dead.
  for (const r of replicas) assert.match(await lockRows(r.url), new RegExp(NO_LOCK_ROW), `${r.id} lists no lock`);
  assert.deepEqual(await leftInRedis(redis), [], 'no lock, lease, journal entry or unfinished job left in Redis');
  for (const r of replicas)
    for (const msg of [
      'Command crashed',
      'Command failed',
      'Command not run: the state store cannot be reached',
      'Could not remove a finished command from the journal',
      'Replica gone without leaving',
    ])
      assert.deepEqual(logLines(r, msg), [], `${r.id}: ${msg}`);

  const all = attemptsOf(sent);
  const refused = all.filter((a) => a.status === 503);
  const unreachable = all.filter((a) => a.status === undefined);
  const firstOkAfter = all.filter((a) => a.status === 200 && a.at >= times.upAt).sort((x, y) => x.at - y.at)[0];
  const window = refused.length > 0 ? Math.max(...refused.map((a) => a.at)) - Math.min(...refused.map((a) => a.at)) : 0;
  console.log(
    `${name}: Redis away ${times.upAt - times.downAt} ms; 503 answers ${refused.length} over ${window} ms, ` +
      `${unreachable.length} attempts unanswered; deliveries redelivered ${sent.filter((s) => s.attempts.length > 1).length}/${sent.length} ` +
      `(${all.length - sent.length} redeliveries); first 200 ${firstOkAfter ? firstOkAfter.at - times.upAt : '-'} ms after Redis was up; ` +
      `${inFlight.length} terraform runs in flight when it went`,
  );
  took('done');
}

describe('three replicas, a burst of commands, and Redis going away', { timeout: 900_000 }, () => {
  it('a. Redis stopped for 20 s mid-burst: 503 and /readyz 503 meanwhile, then nothing lost, nothing twice, nothing left', async () => {
    let readyWhileDown: number[] = [];
    await scenario('stopped 20 s', pullsFrom(1), async () => {
      await redis.stop();
      const downAt = Date.now();
      // Redis is down until this function starts it again: one look at every replica.
      readyWhileDown = await Promise.all(replicas.map((r) => readyz(r.url)));
      await sleep(OUTAGE_MS);
      await redis.restart();
      return { downAt, upAt: Date.now() };
    });
    assert.deepEqual(readyWhileDown, [503, 503, 503], '/readyz of every replica while Redis was down');
    const refusals = replicas.flatMap((r) => logLines(r, 'Command refused: the state store cannot be reached'));
    assert.ok(refusals.length > 0, 'the refusals were logged');
    const counted = await Promise.all(replicas.map((r) => metric(r.url, 'atlantis_commands_refused_total{reason="store_unavailable"}')));
    assert.equal(
      counted.reduce((a: number, b) => a + (b ?? 0), 0),
      refusals.length,
      'and counted (atlantis_commands_refused_total{reason="store_unavailable"})',
    );
    for (const r of replicas) {
      assert.equal(await readyz(r.url), 200, `${r.id} ready again`);
      assert.equal(await metric(r.url, 'atlantis_store_up'), 1, `${r.id}: atlantis_store_up 1`);
    }
  });

  it('b. Redis restarted at once mid-burst (appendonly, appendfsync always): nothing lost, nothing twice, nothing left', async () => {
    await scenario('restarted', pullsFrom(21), async () => {
      const downAt = Date.now();
      await redis.restart();
      return { downAt, upAt: Date.now() };
    });
    for (const r of replicas) assert.equal(await readyz(r.url), 200, `${r.id} ready`);
  });
});
