// Several replicas, one Atlantis, under load: one real redis-server, three server processes
// (`--replica-id r1..r3`, each its own data dir), one GitHub stand-in, 50 PRs over 5 projects
// (p0..p4, each PR touching one or two, so PRs share projects and locks matter). Webhooks go
// round-robin to the replicas, concurrently, at most 12 at a time. The server-side workflow
// records every terraform run's start and end (date +%s%N) with the working copy's dir (which
// names the replica) and sleeps, so an overlap would be wide. Phases:
//   A. PRs 1..5 open (PR n touches p<n-1> only): each autoplan plans and locks its project.
//   B. PRs 6..50 open: every autoplan is refused by the locks of PRs 1..5 ("locked by ... #N").
//   C. PRs 1..5 and some others comment `atlantis unlock`: no lock is left.
//   D. Many PRs plan at once (`plan -d pX`, or `plan` over two projects): per project exactly
//      one PR wins and every other attempt names that winner.
//   E. Each winner plans its project again on two replicas at once (the lease keeps the two
//      terraform runs apart), and a loser tries again (still refused by the winner).
//   F. All 50 PRs close: the winners get Atlantis's "Locks and plans deleted" comment; no lock
//      is left on any replica.
//   G. (After the checks below.) PR 51 opens through r1; its autoplan, on the PR's owner, is held
//      (the stand-in holds its GET of the PR's files, before it takes the lock) while the PR
//      closes through r2: once the autoplan ends, no lock may be left, as on one server.
// Checked: every webhook answered 200; every command answered by exactly one comment, as the
// model says; no two recorded runs of one project overlap; one run per successful project
// plan, each run ended; every command logged finished once; no "Command crashed".
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { ownerOf as replicaOwning } from '../src/server/replicas/affinity.js';
import type { CliProcess } from './support/cli.js';
import { childList } from './support/children.js';
import { terraformConfig } from './support/git-repos.js';
import { pullRequestPayload, sendWebhook } from './support/github-standin.js';
import { type Answer, type Run, classify, describeAnswer, overlaps, pooled, readRuns, stampedReposYaml } from './support/many-prs.js';
import { type RedisServer, startRedisServer, replicaArgs } from './support/redis-server.js';
import { waitFor } from './support/server.js';
import { WEBHOOK_SECRET, type WorkflowEnv, createWorkflowEnv, startWorkflowServer, tempDataDir } from './support/workflow-env.js';

const PULLS = 50;
const PROJECTS = ['p0', 'p1', 'p2', 'p3', 'p4'];
const CONCURRENCY = 12;
const PHASE_MS = 120_000;

let env: WorkflowEnv;
let redis: RedisServer;
const procs = childList();
const dirs: string[] = [];
const eventsDir = mkdtempSync(path.join(tmpdir(), 'ato-many-'));
const events = path.join(eventsDir, 'events');
dirs.push(eventsDir);

interface Replica {
  id: string;
  p: CliProcess;
  url: string;
  dataDir: string;
}
const replicas: Replica[] = [];

before(async () => {
  env = await createWorkflowEnv();
  redis = await startRedisServer();
  writeFileSync(path.join(eventsDir, 'repos.yaml'), stampedReposYaml(events, 0.4));
});
after(async () => {
  procs.killAll();
  await Promise.all(procs.map((p) => p.exited));
  await env?.close();
  await redis?.cleanup();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

async function startReplica(host: string, id: string): Promise<Replica> {
  const dataDir = tempDataDir();
  dirs.push(dataDir);
  const started = await startWorkflowServer(env, dataDir, host, [
    ...replicaArgs(redis, id),
    '--repo-config',
    path.join(eventsDir, 'repos.yaml'),
  ]);
  procs.push(started.p);
  return { id, ...started, dataDir };
}

/** The projects PR `n` changes: PRs 1..5 one each; the others one, every third a second. */
function projectsOf(n: number): string[] {
  if (n > PULLS) return ['p0'];
  if (n <= PROJECTS.length) return [PROJECTS[n - 1] as string];
  const first = PROJECTS[n % 5] as string;
  return n % 3 === 0 ? [first, PROJECTS[(n + 2) % 5] as string] : [first];
}
/** The PR of phase A that locks project `p`. */
const ownerOf = (p: string): number => PROJECTS.indexOf(p) + 1;

// --- What was sent, and the answers expected -------------------------------------------------

type Kind = 'autoplan' | 'plan' | 'unlock' | 'close';
interface Sent {
  pull: number;
  kind: Kind;
  text: string;
  replica: string;
  status: number;
  body: string;
}
const sent: Sent[] = [];
let roundRobin = 0;
const heads = new Map<number, { sha: string; ref: string }>();

/** One webhook, to replica `to` (default: the next one round-robin); recorded with its answer. */
async function send(pull: number, kind: Kind, text: string, to?: number): Promise<Sent> {
  const r = replicas[to ?? roundRobin++ % replicas.length] as Replica;
  const head = heads.get(pull) as { sha: string; ref: string };
  let res: { status: number; body: string };
  if (kind === 'plan' || kind === 'unlock') res = await env.comment(r.url, pull, text);
  else {
    if (kind === 'close') env.gh.updatePull(env.repo.fullName, pull, { state: 'closed' });
    const action = kind === 'close' ? 'closed' : 'opened';
    const payload = pullRequestPayload({
      repo: env.repo.fullName,
      cloneUrl: env.repo.cloneUrl,
      action,
      number: pull,
      headSha: head.sha,
      headRef: head.ref,
    });
    res = await sendWebhook(`${r.url}/events`, 'pull_request', payload, { secret: WEBHOOK_SECRET });
  }
  const s: Sent = { pull, kind, text, replica: r.id, status: res.status, body: res.body };
  sent.push(s);
  return s;
}

type Cmd = { pull: number; kind: Kind; text: string; to?: number };
const sendAll = (cmds: readonly Cmd[]): Promise<Sent[]> => pooled(cmds, CONCURRENCY, (c) => send(c.pull, c.kind, c.text, c.to));

/** Answers (comments) seen per PR so far: each phase takes the new ones. */
const seen = new Map<number, number>();

/**
 * Waits (bounded) until every PR in `counts` has that many new comments since the last phase,
 * then returns them, classified. Comments persist in the stand-in, so polling misses none.
 */
async function newAnswers(what: string, counts: Map<number, number>): Promise<Map<number, Answer[]>> {
  const fresh = (n: number) => env.commentsOn(n).slice(seen.get(n) ?? 0);
  await waitFor(what, () => [...counts].every(([n, c]) => fresh(n).length >= c), PHASE_MS).catch((e: Error) => {
    const missing = [...counts].filter(([n, c]) => fresh(n).length < c).map(([n, c]) => `#${n}: ${fresh(n).length}/${c}`);
    throw new Error(`${e.message}; short of answers: ${missing.join(', ')}\n${logTails()}`);
  });
  const out = new Map<number, Answer[]>();
  for (const [n] of counts) {
    const got = fresh(n);
    seen.set(n, (seen.get(n) ?? 0) + got.length);
    out.set(
      n,
      got.map((c) => classify(c.body)),
    );
  }
  return out;
}

/** How many commands of `cmds` each PR got: the answers a phase waits for. */
const perPull = (cmds: readonly { pull: number }[]): Map<number, number> => {
  const m = new Map<number, number>();
  for (const c of cmds) m.set(c.pull, (m.get(c.pull) ?? 0) + 1);
  return m;
};

const planOf = (results: Record<string, 'ok' | number>): string =>
  describeAnswer({
    kind: 'plan',
    results: new Map(Object.entries(results).map(([d, r]) => [d, r === 'ok' ? { ok: true } : { lockedBy: r }])),
  });

/** Every PR's answers of a phase equal the expected ones (as a multiset: concurrent commands of one PR answer in any order). */
function assertAnswers(phase: string, got: Map<number, Answer[]>, expected: Map<number, string[]>): void {
  const sorted = (xs: string[]) => [...xs].sort();
  const actual = new Map([...got].map(([n, as]) => [n, sorted(as.map(describeAnswer))]));
  const want = new Map([...expected].map(([n, xs]) => [n, sorted(xs)]));
  assert.deepEqual(actual, want, `${phase}: the answers per PR`);
}

// --- Observations of the servers --------------------------------------------------------------

/** The JSON log lines of a replica with message `msg`. */
const logLines = (p: CliProcess, msg: string): Array<Record<string, unknown>> =>
  p
    .output()
    .split('\n')
    .filter((l) => l.includes(`"msg":"${msg}"`))
    .map((l) => JSON.parse(l) as Record<string, unknown>);

const logTails = (): string =>
  replicas.map((r) => `--- ${r.id} (last lines)\n${r.p.output().split('\n').slice(-25).join('\n')}`).join('\n');

/** The rows of the index page's Locks table. */
const lockRows = async (url: string): Promise<string> => {
  const page = await (await fetch(`${url}/`, { signal: AbortSignal.timeout(10_000) })).text();
  return page.slice(page.indexOf('<h2>Locks</h2>'), page.indexOf('<h2>Running jobs</h2>'));
};

/** Successful project plans per `pull dir`, over every answer of the test. */
const okPlans = new Map<string, number>();
function countOk(answers: Map<number, Answer[]>): void {
  for (const [n, as] of answers)
    for (const a of as)
      if (a.kind === 'plan')
        for (const [dir, r] of a.results) if ('ok' in r) okPlans.set(`#${n} ${dir}`, (okPlans.get(`#${n} ${dir}`) ?? 0) + 1);
}

describe('three replicas sharing one Redis, 50 PRs over 5 shared projects', { timeout: 240_000 }, () => {
  const winners = new Map<string, number>();
  const t0 = Date.now();
  const took = (what: string) => console.log(`${what}: ${((Date.now() - t0) / 1000).toFixed(1)} s`);

  it('starts three replicas and prepares 50 PR branches', async () => {
    for (let n = 1; n <= PULLS + 1; n++) {
      const ref = `many-${n}`;
      const files = Object.fromEntries(projectsOf(n).map((p) => [`${p}/main.tf`, terraformConfig({ marker: `${p}-pr${n}` })]));
      const sha = await env.repo.createBranch(ref, files);
      await env.repo.publishPull(n, ref);
      const changed = await env.repo.changedFiles(ref);
      env.gh.addPull(env.repo.fullName, { number: n, headSha: sha, headRef: ref, files: changed.map((filename) => ({ filename })) });
      heads.set(n, { sha, ref });
    }
    replicas.push(...(await Promise.all([1, 2, 3].map((i) => startReplica(`127.18.90.${i}`, `r${i}`)))));
    took('prepared');
  });

  it('A: PRs 1..5 open; each autoplan plans and locks its own project', async () => {
    const cmds: Cmd[] = PROJECTS.map((_, i) => ({ pull: i + 1, kind: 'autoplan', text: 'opened' }));
    await sendAll(cmds);
    const got = await newAnswers('the autoplans of PRs 1..5', perPull(cmds));
    assertAnswers('A', got, new Map(cmds.map((c) => [c.pull, [planOf({ [projectsOf(c.pull)[0] as string]: 'ok' })]])));
    countOk(got);
    for (const r of replicas) {
      const rows = await lockRows(r.url);
      for (const p of PROJECTS) assert.match(rows, new RegExp(`<td>${p}</td><td>default</td><td>#${ownerOf(p)} by `), `${r.id} lists ${p}`);
    }
    took('A');
  });

  it('B: PRs 6..50 open at once; every autoplan is refused by the locks of PRs 1..5', async () => {
    const cmds: Cmd[] = [];
    for (let n = PROJECTS.length + 1; n <= PULLS; n++) cmds.push({ pull: n, kind: 'autoplan', text: 'opened' });
    await sendAll(cmds);
    const got = await newAnswers('the autoplans of PRs 6..50', perPull(cmds));
    const expected = new Map(cmds.map((c) => [c.pull, [planOf(Object.fromEntries(projectsOf(c.pull).map((p) => [p, ownerOf(p)])))]]));
    assertAnswers('B', got, expected);
    took('B');
  });

  it('C: PRs 1..5 and every seventh PR unlock; no lock is left', async () => {
    const cmds: Cmd[] = [];
    for (let n = 1; n <= PULLS; n++)
      if (n <= PROJECTS.length || n % 7 === 0) cmds.push({ pull: n, kind: 'unlock', text: 'atlantis unlock' });
    await sendAll(cmds);
    const got = await newAnswers('the unlocks', perPull(cmds));
    assertAnswers('C', got, new Map(cmds.map((c) => [c.pull, ['unlock']])));
    for (const r of replicas) assert.match(await lockRows(r.url), /<td colspan="6">none<\/td>/, `${r.id} lists no lock`);
    took('C');
  });

  it('D: many PRs plan at once: per project exactly one wins, every other attempt names the winner', async () => {
    // Even PRs: `plan -d <first project>`; odd PRs with two projects: `plan` (both).
    const cmds: Cmd[] = [];
    const targets = new Map<number, string[]>();
    for (let n = PROJECTS.length + 1; n <= PULLS; n++) {
      const ps = projectsOf(n);
      if (n % 2 === 0) {
        cmds.push({ pull: n, kind: 'plan', text: `atlantis plan -d ${ps[0]}` });
        targets.set(n, [ps[0] as string]);
      } else if (ps.length === 2) {
        cmds.push({ pull: n, kind: 'plan', text: 'atlantis plan' });
        targets.set(n, ps);
      }
    }
    await sendAll(cmds);
    const got = await newAnswers('the contended plans', perPull(cmds));
    for (const [n, as] of got)
      for (const a of as)
        if (a.kind === 'plan')
          for (const [dir, r] of a.results)
            if ('ok' in r) {
              assert.equal(winners.get(dir), undefined, `${dir} planned by both #${winners.get(dir)} and #${n}`);
              winners.set(dir, n);
            }
    assert.deepEqual([...winners.keys()].sort(), PROJECTS, `one winner per project: ${JSON.stringify([...winners])}`);
    const expected = new Map(
      [...targets].map(([n, ps]) => [
        n,
        [planOf(Object.fromEntries(ps.map((p) => [p, winners.get(p) === n ? 'ok' : (winners.get(p) as number)])))],
      ]),
    );
    assertAnswers('D', got, expected);
    countOk(got);
    for (const r of replicas) {
      const rows = await lockRows(r.url);
      for (const [p, w] of winners) assert.match(rows, new RegExp(`<td>${p}</td><td>default</td><td>#${w} by `), `${r.id} lists ${p}`);
    }
    took(`D (winners ${[...winners].map(([p, w]) => `${p}:#${w}`).join(' ')})`);
  });

  it('E: each winner plans again on two replicas at once, and a loser tries again', async () => {
    const cmds: Cmd[] = [];
    const expected = new Map<number, string[]>();
    const expect = (n: number, a: string) => expected.set(n, [...(expected.get(n) ?? []), a]);
    PROJECTS.forEach((p, i) => {
      const w = winners.get(p) as number;
      cmds.push({ pull: w, kind: 'plan', text: `atlantis plan -d ${p}`, to: i % 3 });
      cmds.push({ pull: w, kind: 'plan', text: `atlantis plan -d ${p}`, to: (i + 1) % 3 });
      expect(w, planOf({ [p]: 'ok' }));
      expect(w, planOf({ [p]: 'ok' }));
      let loser = PROJECTS.length + 1;
      while (loser === w || !projectsOf(loser).includes(p)) loser++;
      cmds.push({ pull: loser, kind: 'plan', text: `atlantis plan -d ${p}`, to: (i + 2) % 3 });
      expect(loser, planOf({ [p]: w }));
    });
    await sendAll(cmds);
    const got = await newAnswers('the repeated plans', perPull(cmds));
    assertAnswers('E', got, expected);
    countOk(got);
    const waits = replicas.flatMap((r) => logLines(r.p, 'Waiting for the project lease'));
    took(`E (${waits.length} lease waits logged)`);
  });

  it('F: all 50 PRs close at once; the winners are told their locks went, and no lock is left', async () => {
    const cmds: Cmd[] = [];
    for (let n = 1; n <= PULLS; n++) cmds.push({ pull: n, kind: 'close', text: 'closed' });
    await sendAll(cmds);
    const held = new Map<number, string[]>();
    for (const [p, w] of winners) held.set(w, [...(held.get(w) ?? []), p].sort());
    const got = await newAnswers('the close comments of the lock holders', new Map([...held.keys()].map((n) => [n, 1])));
    assertAnswers('F', got, new Map([...held].map(([n, ps]) => [n, [`closed ${ps.join(',')}`]])));
    for (const r of replicas) assert.match(await lockRows(r.url), /<td colspan="6">none<\/td>/, `${r.id} lists no lock`);
    took('F');
  });

  it('every webhook was answered 200, every command finished once, and nothing crashed', async () => {
    const bad = sent.filter((s) => s.status !== 200).map((s) => `#${s.pull} ${s.text} on ${s.replica}: ${s.status} ${s.body}`);
    assert.deepEqual(bad, []);
    const commands = sent.filter((s) => s.kind !== 'close');
    const key = (command: string, pull: number) => `${command === 'autoplan' ? 'plan' : command} #${pull}`;
    const want = commands.map((s) => key(s.kind, s.pull)).sort();
    const finished = () =>
      replicas
        .flatMap((r) => logLines(r.p, 'Command finished'))
        .map((j) => key(j.command as string, j.pull as number))
        .sort();
    await waitFor('every command to be logged finished', () => finished().length >= want.length, PHASE_MS);
    assert.deepEqual(finished(), want, 'each command finished exactly once, on one replica');
    for (const r of replicas) {
      for (const msg of ['Command crashed', 'Command failed', 'Plan not saved: the project lease was lost while terraform ran'])
        assert.deepEqual(logLines(r.p, msg), [], `${r.id}: ${msg}`);
    }
    // Nothing came after the answers the phases counted: one comment per command (and per close with locks).
    for (let n = 1; n <= PULLS; n++) assert.equal(env.commentsOn(n).length, seen.get(n), `#${n}: no comment beyond its answers`);
    const perReplica = replicas.map((r) => `${r.id}: ${sent.filter((s) => s.replica === r.id).length}`).join(', ');
    took(`${sent.length} webhooks (${perReplica}), ${commands.length} commands`);
  });

  it('no two terraform runs of one project overlapped; one ended run per successful project plan', () => {
    const runs: Run[] = readRuns(events);
    assert.deepEqual(
      runs.filter((r) => r.end === undefined).map((r) => `#${r.pull} ${r.project} ${r.dir}`),
      [],
      'every run ended',
    );
    assert.deepEqual(overlaps(runs), [], 'no overlap within a project');
    const perPlan = new Map<string, number>();
    for (const r of runs) perPlan.set(`#${r.pull} ${r.project}`, (perPlan.get(`#${r.pull} ${r.project}`) ?? 0) + 1);
    const sortedEntries = (m: Map<string, number>) => [...m].sort(([a], [b]) => a.localeCompare(b));
    assert.deepEqual(sortedEntries(perPlan), sortedEntries(okPlans), 'runs per PR and project = its successful plans');
    const byReplica = replicas.map((r) => `${r.id}: ${runs.filter((x) => x.dir.startsWith(r.dataDir)).length}`).join(', ');
    assert.equal(
      runs.filter((x) => replicas.some((r) => x.dir.startsWith(r.dataDir))).length,
      runs.length,
      'every run in a replica data dir',
    );
    took(`${runs.length} terraform runs (${byReplica})`);
  });

  it('G: a PR closed through one replica while its autoplan runs on another leaves no lock once that autoplan ends', async () => {
    // PR 51 (p0) opens through r1 and its autoplan runs on the PR's owner, held at its list of
    // the PR's files (before it takes the lock) while the close goes through r2 (routed to the
    // owner too, so the running command sees it), then goes on.
    const n = PULLS + 1;
    const ownerId = replicaOwning(
      `${env.repo.fullName}#${n}`,
      replicas.map((r) => ({ id: r.id, url: r.url, draining: false, heartbeatAt: 0 })),
    )?.id;
    const owner = replicas.find((r) => r.id === ownerId) as Replica;
    const hold = env.gh.holdNext({ method: 'GET', path: new RegExp(`/pulls/${n}/files$`) });
    const opened = send(n, 'autoplan', 'opened', 0);
    await hold.reached;
    const closed = await send(n, 'close', 'closed', 1);
    assert.equal(closed.status, 200);
    hold.release();
    assert.equal((await opened).status, 200);
    const finished = () => logLines(owner.p, 'Command finished').filter((j) => j.pull === n).length;
    await waitFor("the owner's autoplan of PR 51 to finish", () => finished() === 1, PHASE_MS);
    // As on one server (where the close marks the running command, which releases at its end):
    // no lock is left, and the release is told after the autoplan's answer.
    const noLock = async () =>
      (await Promise.all(replicas.map((r) => lockRows(r.url)))).every((t) => t.includes('<td colspan="6">none</td>'));
    await waitFor('no lock of the closed PR 51 on any replica', noLock, 15_000).catch(async (e: Error) => {
      const logs = replicas.map(
        (r) =>
          `--- ${r.id}\n${r.p
            .output()
            .split('\n')
            .filter((l) => l.includes(`"pull":${n}`))
            .join('\n')}`,
      );
      throw new Error(`${e.message}: the owner lists ${await lockRows(owner.url)}\n${logs.join('\n')}`);
    });
    const got = await newAnswers('the autoplan of PR 51 and the release of its lock', new Map([[n, 2]]));
    assertAnswers('G', got, new Map([[n, [planOf({ p0: 'ok' }), 'closed p0']]]));
    const runs = readRuns(events).filter((r) => r.pull === n);
    assert.deepEqual(
      runs.map((r) => [r.project, r.end !== undefined, r.dir.startsWith(owner.dataDir)]),
      [['p0', true, true]],
    );
    assert.equal(env.commentsOn(n).length, seen.get(n), 'no comment beyond those two');
    for (const r of replicas) assert.deepEqual(logLines(r.p, 'Command crashed'), [], `${r.id}: no crash`);
    took('G');
  });
});
