// The behaviour every StateStore must have, whatever keeps the state (SQLite, Redis). A test
// file calls stateStoreContract with a way to open a fresh, empty store; only the interface
// of state-store.ts is used here, so the same table runs against every implementation.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import type { ProjectOutcome } from '../../src/server/locks/pull-status.js';
import { JOB_OUTPUT_MAX, type LockKey, type LockRecord, type StateStore } from '../../src/server/locks/state-store.js';
import { deliveryContract } from './state-store-contract-deliveries.js';

export type WithStore = (title: string, fn: (o: OpenedStore) => Promise<void>) => void;

export interface OpenedStore {
  /** A fresh store with no state. */
  store: StateStore;
  /** The data dir the store's plan paths are under. */
  dataDir: string;
  /** Opens the same state again (the test closes the previous store first). */
  reopen(): Promise<StateStore>;
  /**
   * The store of another server: on Redis another replica id on the same keys, for SQLite
   * another data dir. What is only this server's (the command journal) it must not see.
   */
  otherServer(): Promise<StateStore>;
  /** Closes every store it opened and removes what it made. */
  cleanup(): Promise<void>;
}

const K: LockKey = { repo: 'acme/infra', dir: 'envs/prod', workspace: 'default' };
const R = 'acme/infra';
const d = (dir: string, workspace = 'default') => ({ dir, workspace, project: '' });
const plan = (dir: string, ok = true, noChanges = false): ProjectOutcome => ({ ...d(dir), command: 'plan', ok, noChanges });
const isTime = (s: string) => assert.ok(!Number.isNaN(Date.parse(s)) && s.includes('T'), `an RFC 3339 time: ${s}`);
/** A lock without its time, to compare with deepEqual. */
const untimed = ({ time, ...rest }: LockRecord) => {
  isTime(time);
  return rest;
};

export function stateStoreContract(name: string, open: () => Promise<OpenedStore>): void {
  const withStore: WithStore = (title, fn) =>
    test(`${name}: ${title}`, async () => {
      const o = await open();
      try {
        await fn(o);
      } finally {
        await o.cleanup();
      }
    });

  withStore('tryLock: acquire, re-entrant for the same pull, refused with the holder for another', async ({ store: s }) => {
    const a = await s.tryLock(K, { pull: 1, user: 'alice', project: 'prod' });
    assert.equal(a.acquired, true);
    assert.ok(a.acquired);
    assert.deepEqual(untimed(a.lock), { ...K, pull: 1, user: 'alice', project: 'prod' });
    // Re-entrant: the same pull keeps the lock as it was taken (user, project, time).
    const again = await s.tryLock(K, { pull: 1, user: 'someone-else' });
    assert.ok(again.acquired);
    assert.deepEqual(again.lock, a.lock);
    const b = await s.tryLock(K, { pull: 2, user: 'bob' });
    assert.equal(b.acquired, false);
    if (!b.acquired) assert.deepEqual(b.holder, a.lock);
    assert.deepEqual(await s.getLock(K), a.lock);
    // Other workspace, dir, repo: separate locks.
    assert.equal((await s.tryLock({ ...K, workspace: 'staging' }, { pull: 2, user: 'bob' })).acquired, true);
    assert.equal((await s.tryLock({ ...K, dir: '.' }, { pull: 2, user: 'bob' })).acquired, true);
    assert.equal((await s.tryLock({ ...K, repo: 'acme/other' }, { pull: 2, user: 'bob' })).acquired, true);
    assert.equal((await s.list()).length, 4);
    assert.equal((await s.list(R)).length, 3);
    assert.equal((await s.list('nobody/none')).length, 0);
  });

  withStore('a lock record has a project only when one was given', async ({ store: s }) => {
    const r = await s.tryLock(K, { pull: 1, user: 'u' });
    assert.ok(r.acquired);
    assert.equal('project' in r.lock, false);
    const got = await s.getLock(K);
    assert.ok(got);
    assert.deepEqual(Object.keys(got).sort(), ['dir', 'pull', 'repo', 'time', 'user', 'workspace']);
    assert.equal(await s.getLock({ ...K, dir: 'elsewhere' }), undefined);
  });

  withStore('unlock returns the released lock, then nothing', async ({ store: s }) => {
    await s.tryLock(K, { pull: 1, user: 'a', project: 'p' });
    const released = await s.unlock(K);
    assert.equal(released?.pull, 1);
    assert.equal(released?.project, 'p');
    assert.equal(await s.unlock(K), undefined);
    assert.equal(await s.getLock(K), undefined);
    // Free again, for anyone.
    assert.equal((await s.tryLock(K, { pull: 2, user: 'b' })).acquired, true);
  });

  withStore("unlockIfOwnedBy releases the pull's own lock only", async ({ store: s }) => {
    await s.tryLock(K, { pull: 3, user: 'u' });
    assert.equal(await s.unlockIfOwnedBy(K, 4), undefined);
    assert.equal((await s.getLock(K))?.pull, 3);
    assert.equal((await s.unlockIfOwnedBy(K, 3))?.pull, 3);
    assert.equal(await s.getLock(K), undefined);
    assert.equal(await s.unlockIfOwnedBy(K, 3), undefined);
  });

  withStore('unlockAllForPull with discardPlans: the locks and plans of that pull only', async ({ store: s }) => {
    await s.tryLock({ ...K, dir: 'z' }, { pull: 1, user: 'a' });
    await s.tryLock(K, { pull: 1, user: 'a' });
    await s.tryLock({ ...K, dir: 'x' }, { pull: 1, user: 'a' });
    await s.tryLock({ ...K, dir: 'y' }, { pull: 2, user: 'b' });
    await s.tryLock({ ...K, repo: 'acme/other', dir: 'x' }, { pull: 1, user: 'a' });
    await s.savePlan({ ...K, pull: 1, planPath: s.planPath(K, 1), headSha: 'abc' });
    await s.savePlan({ ...K, dir: 'a', pull: 1, planPath: s.planPath({ ...K, dir: 'a' }, 1), headSha: 'abc' });
    await s.savePlan({ ...K, dir: 'y', pull: 2, planPath: s.planPath({ ...K, dir: 'y' }, 2), headSha: 'def' });
    assert.equal((await s.unlock(K))?.pull, 1);
    const r = await s.unlockAllForPull(R, 1, { discardPlans: true });
    assert.deepEqual(
      r.locks.map((l) => l.dir),
      ['x', 'z'],
    );
    assert.deepEqual(
      r.plans.map((p) => [p.dir, p.planPath]),
      [
        ['a', s.planPath({ ...K, dir: 'a' }, 1)],
        [K.dir, s.planPath(K, 1)],
      ],
    );
    assert.deepEqual(
      (await s.list()).map((l) => `${l.repo} ${l.dir}`),
      ['acme/infra y', 'acme/other x'],
    );
    assert.deepEqual(await s.listPlans(R, 1), []);
    assert.equal((await s.listPlans(R, 2)).length, 1);
    // Nothing left: empty answers, no error.
    assert.deepEqual(await s.unlockAllForPull(R, 1, { discardPlans: true }), { locks: [], plans: [] });
  });

  withStore('unlockAllForPull without discardPlans keeps the plans', async ({ store: s }) => {
    await s.tryLock({ ...K, dir: 'y' }, { pull: 2, user: 'b' });
    await s.savePlan({ ...K, dir: 'y', pull: 2, planPath: s.planPath({ ...K, dir: 'y' }, 2), headSha: 'def' });
    const r = await s.unlockAllForPull(R, 2);
    assert.equal(r.locks.length, 1);
    assert.deepEqual(r.plans, []);
    assert.equal((await s.listPlans(R, 2)).length, 1);
    assert.deepEqual(await s.list(), []);
  });

  withStore('list is ordered by repo, dir, workspace', async ({ store: s }) => {
    const keys: LockKey[] = [
      { repo: 'b/b', dir: '.', workspace: 'default' },
      { repo: 'a/a', dir: 'x', workspace: 'default' },
      { repo: 'a/a', dir: '.', workspace: 'staging' },
      { repo: 'a/a', dir: 'x', workspace: 'a' },
      { repo: 'a/a', dir: '.', workspace: 'default' },
      { repo: 'a/a', dir: 'X', workspace: 'default' },
    ];
    for (const [i, k] of keys.entries()) await s.tryLock(k, { pull: i, user: 'u' });
    const line = (l: LockKey) => `${l.repo} ${l.dir} ${l.workspace}`;
    assert.deepEqual((await s.list()).map(line), [
      'a/a . default',
      'a/a . staging',
      'a/a X default',
      'a/a x a',
      'a/a x default',
      'b/b . default',
    ]);
    assert.deepEqual(
      (await s.list('a/a')).map((l) => `${l.dir} ${l.workspace}`),
      ['. default', '. staging', 'X default', 'x a', 'x default'],
    );
  });

  withStore('plans: paths under the data dir, save, replace, get, list, delete', async ({ store: s, dataDir }) => {
    const p = s.planPath(K, 7);
    assert.ok(p.startsWith(path.join(dataDir, 'plans', 'acme', 'infra', '7')), p);
    assert.ok(p.endsWith(`${path.sep}envs%2Fprod.default.tfplan`), p);
    assert.ok(s.planPath({ ...K, dir: '.' }, 7).endsWith(`${path.sep}%2E.default.tfplan`));
    assert.ok(s.planPath(K, 7, 'prod').endsWith(`${path.sep}envs%2Fprod.default.prod.tfplan`));
    assert.equal(await s.getPlan(R, 7, K.dir, K.workspace), undefined);
    const pp = s.planPath(K, 7, 'prod');
    const saved = await s.savePlan({ ...K, pull: 7, planPath: pp, headSha: 'a1', project: 'prod', planSha256: 'f'.repeat(64) });
    isTime(saved.createdAt);
    await s.savePlan({ ...K, pull: 7, planPath: pp, headSha: 'b2', project: 'prod', createdAt: '2026-01-02T03:04:05.000Z' });
    assert.deepEqual(await s.getPlan(R, 7, K.dir, K.workspace), {
      ...K,
      pull: 7,
      project: 'prod',
      planPath: pp,
      headSha: 'b2',
      createdAt: '2026-01-02T03:04:05.000Z',
    });
    assert.equal((await s.listPlans(R, 7)).length, 1);
    await s.savePlan({ ...K, dir: '.', pull: 7, planPath: s.planPath({ ...K, dir: '.' }, 7), headSha: 'c3', planSha256: 'a'.repeat(64) });
    const listed = await s.listPlans(R, 7);
    assert.deepEqual(
      listed.map((x) => [x.dir, x.planSha256, x.planPath]),
      [
        ['.', 'a'.repeat(64), s.planPath({ ...K, dir: '.' }, 7)],
        [K.dir, undefined, pp],
      ],
    );
    assert.equal('project' in (listed[0] ?? {}), false, 'no project key for a plan without one');
    assert.deepEqual(await s.listPlans(R, 8), [], 'per pull');
    assert.equal((await s.deletePlan(R, 7, K.dir, K.workspace))?.headSha, 'b2');
    assert.equal(await s.deletePlan(R, 7, K.dir, K.workspace), undefined);
    assert.equal(await s.getPlan(R, 7, K.dir, K.workspace), undefined);
    assert.equal((await s.listPlans(R, 7)).length, 1);
  });

  withStore('restorePlanFile leaves a plan file that is there and matches as it is', async ({ store: s }) => {
    const p = s.planPath(K, 5);
    fs.mkdirSync(path.dirname(p), { recursive: true });
    const bytes = Buffer.from('terraform plan bytes \u0000\u00ff');
    fs.writeFileSync(p, bytes, { mode: 0o600 });
    const sha = createHash('sha256').update(bytes).digest('hex');
    const rec = await s.savePlan({ ...K, pull: 5, planPath: p, headSha: 'h', planSha256: sha });
    assert.equal(rec.planSha256, sha);
    const got = await s.getPlan(R, 5, K.dir, K.workspace);
    assert.ok(got);
    assert.equal(got.planPath, p);
    await s.restorePlanFile(got);
    assert.deepEqual(fs.readFileSync(p), bytes);
    // A plan with no file at all (a workflow that writes none): nothing to restore, no error.
    const none = await s.savePlan({ ...K, dir: 'nofile', pull: 5, planPath: s.planPath({ ...K, dir: 'nofile' }, 5), headSha: 'h' });
    await s.restorePlanFile(none);
    assert.equal(fs.existsSync(none.planPath), false);
  });

  withStore('pull status: merged for one head, fresh for a new head, replaced, per pull, deleted', async ({ store: s }) => {
    assert.equal(await s.getPullStatus(R, 1), undefined);
    await s.updatePullStatus(R, 1, 'h1', [plan('dir1'), plan('dir2', true, true)]);
    const merged = await s.updatePullStatus(R, 1, 'h1', [{ ...d('dir1'), command: 'apply', ok: true }]);
    const want = {
      headSha: 'h1',
      projects: [
        { ...d('dir1'), status: 'applied' },
        { ...d('dir2'), status: 'planned_no_changes' },
      ],
    };
    assert.deepEqual(merged, want);
    assert.deepEqual(await s.getPullStatus(R, 1), want);
    assert.deepEqual((await s.updatePullStatus(R, 1, 'h2', [plan('dir3', false)])).projects, [{ ...d('dir3'), status: 'plan_errored' }]);
    assert.deepEqual(await s.updatePullStatus(R, 1, 'h2', [], { replace: true }), { headSha: 'h2', projects: [] });
    assert.deepEqual(await s.getPullStatus(R, 1), { headSha: 'h2', projects: [] });
    assert.deepEqual(await s.updatePullStatus(R, 1, 'h2', [plan('dir4')], { replace: true }), {
      headSha: 'h2',
      projects: [{ ...d('dir4'), status: 'planned' }],
    });
    assert.equal(await s.getPullStatus(R, 2), undefined, 'per pull');
    assert.equal(await s.getPullStatus('acme/other', 1), undefined, 'per repo');
    await s.deletePullStatus(R, 1);
    assert.equal(await s.getPullStatus(R, 1), undefined);
    await s.deletePullStatus(R, 1);
    // After a delete, the next update starts fresh even for the same head.
    assert.deepEqual((await s.updatePullStatus(R, 1, 'h2', [plan('dir5')])).projects, [{ ...d('dir5'), status: 'planned' }]);
  });

  withStore(
    'pull status: policy statuses kept, replaced per set on one head, carried to a new head until checked again',
    async ({ store: s }) => {
      const set = (name: string, passed: boolean, approver?: string) => ({
        policySetName: name,
        passed,
        approvals: approver ? [{ approver, hashes: ['h'] }] : [],
        hashes: ['h'],
        policyItemRegex: '(?s).+',
      });
      await s.updatePullStatus(R, 3, 'h1', [plan('dir1')]);
      const checked = await s.updatePullStatus(R, 3, 'h1', [
        { ...d('dir1'), command: 'policy_check', ok: false, policyStatus: [set('a', false), set('b', true)] },
      ]);
      assert.deepEqual(checked.projects, [
        { ...d('dir1'), status: 'policy_check_errored', policyStatus: [set('a', false), set('b', true)] },
      ]);
      const approved = await s.updatePullStatus(R, 3, 'h1', [
        { ...d('dir1'), command: 'approve_policies', ok: true, policyStatus: [set('a', false, 'owner')] },
      ]);
      assert.deepEqual(approved.projects[0]?.policyStatus, [set('a', false, 'owner'), set('b', true)]);
      assert.equal(approved.projects[0]?.status, 'policy_check_passed');
      assert.deepEqual(await s.getPullStatus(R, 3), approved);
      const replanned = await s.updatePullStatus(R, 3, 'h2', [plan('dir1'), plan('dir2')]);
      assert.deepEqual(replanned.projects, [
        { ...d('dir1'), status: 'planned', policyStatus: [set('a', false, 'owner'), set('b', true)] },
        { ...d('dir2'), status: 'planned' },
      ]);
      assert.deepEqual(await s.getPullStatus(R, 3), replanned);
    },
  );

  withStore('markDiscarded: the first record of that dir and workspace; nothing without one', async ({ store: s }) => {
    await s.markDiscarded(R, 1, 'dir1', 'default');
    assert.equal(await s.getPullStatus(R, 1), undefined, 'no status is not created');
    await s.updatePullStatus(R, 1, 'h1', [plan('dir1'), { ...plan('dir1'), project: 'named' }, plan('dir2')]);
    await s.markDiscarded(R, 1, 'dir1', 'default');
    await s.markDiscarded(R, 1, 'dir9', 'default');
    assert.deepEqual((await s.getPullStatus(R, 1))?.projects, [
      { ...d('dir1'), status: 'plan_discarded' },
      { ...d('dir1'), project: 'named', status: 'planned' },
      { ...d('dir2'), status: 'planned' },
    ]);
  });

  withStore('pull status: concurrent updates of one head are all merged', async ({ store: s }) => {
    const dirs = Array.from({ length: 25 }, (_, i) => `dir${String(i).padStart(2, '0')}`);
    await Promise.all(dirs.map((x) => s.updatePullStatus(R, 9, 'h', [plan(x)])));
    const got = await s.getPullStatus(R, 9);
    assert.deepEqual(got?.projects.map((p) => p.dir).sort(), dirs);
  });

  withStore('queue: enqueue, takeAll oldest first, which empties the queue', async ({ store: s }) => {
    assert.equal(await s.queueLength(), 0);
    assert.deepEqual(await s.takeAll(), []);
    const ids: number[] = [];
    for (let i = 0; i < 5; i++) ids.push((await s.enqueue(R, i, { comment: `atlantis plan ${i}`, n: i })) as number);
    assert.deepEqual(
      [...ids].sort((a, b) => a - b),
      ids,
      'ids grow',
    );
    assert.equal(new Set(ids).size, 5);
    assert.equal(await s.queueLength(), 5);
    const all = await s.takeAll();
    assert.deepEqual(
      all.map((q) => q.id),
      ids,
    );
    assert.deepEqual(
      all.map((q) => (q.payload as { n: number }).n),
      [0, 1, 2, 3, 4],
    );
    assert.deepEqual(
      all.map((q) => [q.repo, q.pull]),
      [0, 1, 2, 3, 4].map((i) => [R, i]),
    );
    for (const q of all) isTime(q.enqueuedAt);
    assert.equal(await s.queueLength(), 0);
    assert.deepEqual(await s.takeAll(), []);
    await s.enqueue(R, 1, undefined);
    const [only] = await s.takeAll();
    assert.equal(only?.payload, null);
    assert.ok((only?.id ?? 0) > (ids.at(-1) ?? 0), 'ids are not reused after takeAll');
  });

  withStore('job journal: started, finished, unfinished, recent newest first, prune', async ({ store: s }) => {
    const j1 = await s.jobStarted({ id: 'j1', command: 'plan', repo: R, pull: 1, dir: '.', workspace: 'default' });
    assert.equal(j1.id, 'j1');
    isTime(j1.startedAt);
    await s.jobStarted({ id: 'j2', command: 'apply', repo: R, pull: 1, project: 'p' });
    await s.jobFinished('j1', 'success', 'Plan: 1 to add');
    await s.jobFinished('nope', 'success');
    assert.deepEqual(
      (await s.unfinishedJobs()).map((j) => j.id),
      ['j2'],
    );
    const recent = await s.recentJobs();
    assert.deepEqual(
      recent.map((j) => j.id),
      ['j2', 'j1'],
    );
    const [r2, r1] = recent;
    assert.deepEqual(
      { ...r1, startedAt: '', finishedAt: '' },
      {
        id: 'j1',
        command: 'plan',
        repo: R,
        pull: 1,
        dir: '.',
        workspace: 'default',
        startedAt: '',
        finishedAt: '',
        result: 'success',
        summary: 'Plan: 1 to add',
      },
    );
    isTime(r1?.finishedAt ?? '');
    assert.deepEqual({ ...r2, startedAt: '' }, { id: 'j2', command: 'apply', repo: R, pull: 1, project: 'p', startedAt: '' });
    assert.deepEqual(
      (await s.recentJobs(1)).map((j) => j.id),
      ['j2'],
    );
    await s.jobFinished('j2', 'interrupted');
    assert.deepEqual(await s.unfinishedJobs(), []);
    assert.equal((await s.recentJobs())[0]?.result, 'interrupted');
    assert.equal((await s.recentJobs())[0]?.summary, undefined);
    await s.jobStarted({ id: 'j3', command: 'plan', repo: R, pull: 2 });
    // Only finished jobs beyond the newest `keep` go: j3 (newest, unfinished) stays, j2 kept, j1 goes.
    assert.equal(await s.pruneJobs(2), 1);
    assert.deepEqual(
      (await s.recentJobs()).map((j) => j.id),
      ['j3', 'j2'],
    );
    assert.equal(await s.pruneJobs(0), 1, 'an unfinished job is never pruned');
    assert.deepEqual(
      (await s.recentJobs()).map((j) => j.id),
      ['j3'],
    );
  });

  withStore('job journal: a job started again under the same id is unfinished again', async ({ store: s }) => {
    await s.jobStarted({ id: 'j', command: 'plan', repo: R, pull: 1 });
    await s.jobFinished('j', 'failure');
    await s.jobStarted({ id: 'j', command: 'plan', repo: R, pull: 1 });
    assert.deepEqual(
      (await s.unfinishedJobs()).map((j) => [j.id, j.result]),
      [['j', undefined]],
    );
    assert.equal((await s.recentJobs()).length, 1);
  });

  withStore('job output: appended in order, read from a cursor, any text; getJob; pruned with its job', async ({ store: s }) => {
    assert.deepEqual(await s.readJobOutput('none'), { text: '', cursor: 0 }, 'no output yet: empty, cursor at the start');
    const j = await s.jobStarted({ id: 'jo', command: 'plan', repo: R, pull: 1, dir: '.', workspace: 'default' });
    assert.deepEqual(await s.getJob('jo'), j);
    assert.equal(await s.getJob('nope'), undefined);
    // Multibyte and astral characters and ANSI colours: a cursor never splits one.
    const chunks = ['Initializing...\n', '\u001b[32mPlan:\u001b[0m 1 to add ✓\n', '🚀 done\n'];
    await s.appendJobOutput('jo', chunks[0] as string);
    const first = await s.readJobOutput('jo');
    assert.equal(first.text, chunks[0]);
    for (const c of chunks.slice(1)) await s.appendJobOutput('jo', c);
    const rest = await s.readJobOutput('jo', first.cursor);
    assert.equal(rest.text, chunks.slice(1).join(''));
    assert.deepEqual(await s.readJobOutput('jo', rest.cursor), { text: '', cursor: rest.cursor }, 'nothing new: the same cursor');
    assert.equal((await s.readJobOutput('jo')).text, chunks.join(''));
    await s.jobFinished('jo', 'success');
    assert.equal((await s.getJob('jo'))?.result, 'success');
    await s.jobStarted({ id: 'newer', command: 'plan', repo: R, pull: 2 });
    assert.equal(await s.pruneJobs(1), 1);
    assert.equal(await s.getJob('jo'), undefined);
    assert.deepEqual(await s.readJobOutput('jo'), { text: '', cursor: 0 }, 'its output went with it');
  });

  withStore('job output: past JOB_OUTPUT_MAX the rest is dropped, what was kept stays', async ({ store: s }) => {
    const big = 'x'.repeat(1024 * 1024);
    for (let i = 0; i < 3; i++) await s.appendJobOutput('big', big);
    await s.appendJobOutput('big', 'the end');
    const all = await s.readJobOutput('big');
    assert.equal(all.text.length, 2 * 1024 * 1024, 'appends stop once JOB_OUTPUT_MAX is reached');
    assert.equal(all.text.length, JOB_OUTPUT_MAX);
    assert.ok(!all.text.includes('the end'));
  });

  withStore('command journal: accepted, started, finished; oldest first; payload as given', async ({ store: s }) => {
    assert.deepEqual(await s.acceptedCommands(), []);
    const payload = { kind: 'comment', command: { name: 'plan', flags: [] }, n: 1.5, empty: {}, list: [] };
    const a = await s.acceptCommand({ id: 'c-b', repo: R, pull: 1, payload });
    isTime(a.acceptedAt);
    assert.equal(a.startedAt, undefined);
    // Ids in no order: the journal keeps the order of acceptance, not of ids.
    await s.acceptCommand({ id: 'c-a', repo: R, pull: 2, payload: { p: 2 } });
    await s.acceptCommand({ id: 'c-c', repo: 'acme/other', pull: 1, payload: undefined });
    const all = await s.acceptedCommands();
    assert.deepEqual(
      all.map((c) => [c.id, c.repo, c.pull, c.startedAt]),
      [
        ['c-b', R, 1, undefined],
        ['c-a', R, 2, undefined],
        ['c-c', 'acme/other', 1, undefined],
      ],
    );
    assert.deepEqual(all[0], { id: 'c-b', repo: R, pull: 1, payload, acceptedAt: a.acceptedAt });
    assert.equal(all[2]?.payload, null);
    await s.commandStarted('c-a');
    await s.commandStarted('nope');
    const started = (await s.acceptedCommands()).find((c) => c.id === 'c-a');
    isTime(started?.startedAt ?? '');
    assert.equal(
      (await s.acceptedCommands()).filter((c) => c.startedAt !== undefined).length,
      1,
      'only the started one is marked, an unknown id adds nothing',
    );
    await s.commandFinished('c-a');
    await s.commandFinished('c-b');
    await s.commandFinished('c-b');
    assert.deepEqual(
      (await s.acceptedCommands()).map((c) => c.id),
      ['c-c'],
    );
    // Finished, then marked started (a late call): it does not come back.
    await s.commandStarted('c-a');
    assert.deepEqual(
      (await s.acceptedCommands()).map((c) => c.id),
      ['c-c'],
    );
  });

  deliveryContract(withStore);

  withStore("command journal: only this server's commands", async (o) => {
    const s = o.store;
    const other = await o.otherServer();
    await s.acceptCommand({ id: 'mine', repo: R, pull: 1, payload: 1 });
    await other.acceptCommand({ id: 'theirs', repo: R, pull: 1, payload: 2 });
    assert.deepEqual(
      (await s.acceptedCommands()).map((c) => c.id),
      ['mine'],
    );
    assert.deepEqual(
      (await other.acceptedCommands()).map((c) => c.id),
      ['theirs'],
    );
    // Neither marks nor removes the other's entries.
    await other.commandStarted('mine');
    await other.commandFinished('mine');
    assert.deepEqual(
      (await s.acceptedCommands()).map((c) => [c.id, c.startedAt]),
      [['mine', undefined]],
    );
  });

  withStore('tryLock: concurrent calls for one key from different pulls, exactly one wins', async ({ store: s }) => {
    for (let round = 0; round < 20; round++) {
      const key = { ...K, dir: `r${round}` };
      const rs = await Promise.all([1, 2, 3, 4].map((pull) => s.tryLock(key, { pull, user: `u${pull}` })));
      const winners = rs.filter((r) => r.acquired);
      assert.equal(winners.length, 1, `round ${round}`);
      const held = await s.getLock(key);
      for (const r of rs) assert.deepEqual(r.acquired ? r.lock : r.holder, held);
    }
  });

  withStore('everything survives a close and a reopen; isHealthy until closed', async (o) => {
    const s = o.store;
    assert.equal(s.kind === 'boltdb' || s.kind === 'redis', true);
    assert.equal(await s.isHealthy(), true);
    await s.tryLock(K, { pull: 9, user: 'u', project: 'prod' });
    await s.savePlan({ ...K, pull: 9, planPath: s.planPath(K, 9, 'prod'), project: 'prod', headSha: 'sha', planSha256: 'b'.repeat(64) });
    await s.updatePullStatus(R, 9, 'sha', [plan(K.dir)]);
    await s.enqueue(R, 9, { a: 1 });
    await s.jobStarted({ id: 'j', command: 'apply', repo: R, pull: 9 });
    await s.acceptCommand({ id: 'c1', repo: R, pull: 9, payload: { line: 'atlantis plan' } });
    await s.acceptCommand({ id: 'c2', repo: R, pull: 9, payload: { line: 'atlantis apply' } });
    await s.commandStarted('c2');
    const lock = await s.getLock(K);
    await s.close();
    assert.equal(await s.isHealthy(), false);
    await s.close();
    const s2 = await o.reopen();
    assert.equal(await s2.isHealthy(), true);
    assert.deepEqual(await s2.getLock(K), lock);
    const p = await s2.getPlan(R, 9, K.dir, K.workspace);
    assert.equal(p?.planPath, s2.planPath(K, 9, 'prod'));
    assert.equal(p?.planSha256, 'b'.repeat(64));
    assert.deepEqual((await s2.getPullStatus(R, 9))?.projects, [{ ...d(K.dir), status: 'planned' }]);
    assert.deepEqual(
      (await s2.takeAll()).map((q) => q.payload),
      [{ a: 1 }],
    );
    assert.deepEqual(
      (await s2.unfinishedJobs()).map((j) => j.id),
      ['j'],
    );
    assert.deepEqual(
      (await s2.acceptedCommands()).map((c) => [c.id, c.payload, c.startedAt !== undefined]),
      [
        ['c1', { line: 'atlantis plan' }, false],
        ['c2', { line: 'atlantis apply' }, true],
      ],
    );
  });

  withStore(
    'apply lock: off at first; on keeps the first one; off; kept over a reopen; seen by every replica of a shared store',
    async (o) => {
      const s = o.store;
      assert.equal(await s.getApplyLock(), undefined);
      assert.equal(await s.setApplyLock(false, 'ops'), undefined, 'off while off: nothing');
      const on = await s.setApplyLock(true, 'ops');
      assert.equal(on?.by, 'ops');
      isTime(on?.time ?? '');
      assert.deepEqual(await s.getApplyLock(), on);
      assert.deepEqual(await s.setApplyLock(true, 'someone-else'), on, 'on while on: the first stays, time and who');
      const other = await o.otherServer();
      assert.deepEqual(await other.getApplyLock(), s.shared ? on : undefined, 'one lock for every replica, one per data dir');
      await s.close();
      const s2 = await o.reopen();
      assert.deepEqual(await s2.getApplyLock(), on, 'kept over a restart');
      assert.equal(await s2.setApplyLock(false, 'ops'), undefined);
      assert.equal(await s2.getApplyLock(), undefined);
      if (s2.shared) assert.equal(await other.getApplyLock(), undefined, 'off for every replica');
      const again = await s2.setApplyLock(true, 'dev');
      assert.equal(again?.by, 'dev', 'on again: a new lock');
    },
  );
}
