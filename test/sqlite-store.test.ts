// The SQLite StateStore: locks, plans, drain queue, job journal, crash safety.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import { STORE_FILENAME, SqliteStore } from '../src/server/locks/sqlite-store.js';
import { DELIVERY_TTL_MS, type StateStore } from '../src/server/locks/state-store.js';
import { fileSha256 } from '../src/server/locks/plan-file.js';
import { lockId, parseLockId } from '../src/server/locks/lock-id.js';
import { createHash } from 'node:crypto';

const here = path.dirname(fileURLToPath(import.meta.url));
const storeModule = path.resolve(here, '../src/server/locks/sqlite-store.ts');

function tmpDir(): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), 'lockstore-'));
}

const K = { repo: 'acme/infra', dir: 'envs/prod', workspace: 'default' };

test('tryLock: acquire, re-entrant for the same pull, refused with holder for another', async () => {
  const s = SqliteStore.open(tmpDir(), { now: () => new Date('2026-01-02T03:04:05Z') });
  const a = await s.tryLock(K, { pull: 1, user: 'alice', project: 'prod' });
  assert.equal(a.acquired, true);
  assert.deepEqual((await s.tryLock(K, { pull: 1, user: 'alice' })).acquired, true);
  const b = await s.tryLock(K, { pull: 2, user: 'bob' });
  assert.equal(b.acquired, false);
  if (!b.acquired) assert.deepEqual(b.holder, { ...K, pull: 1, user: 'alice', project: 'prod', time: '2026-01-02T03:04:05.000Z' });
  // other workspace / dir / repo are separate locks
  assert.equal((await s.tryLock({ ...K, workspace: 'staging' }, { pull: 2, user: 'bob' })).acquired, true);
  assert.equal((await s.tryLock({ ...K, dir: '.' }, { pull: 2, user: 'bob' })).acquired, true);
  assert.equal((await s.tryLock({ ...K, repo: 'acme/other' }, { pull: 2, user: 'bob' })).acquired, true);
  assert.equal((await s.list()).length, 4);
  assert.equal((await s.list('acme/infra')).length, 3);
  await s.close();
});

test('unlock and unlockAllForPull', async () => {
  const s = SqliteStore.open(tmpDir());
  await s.tryLock(K, { pull: 1, user: 'a' });
  await s.tryLock({ ...K, dir: 'x' }, { pull: 1, user: 'a' });
  await s.tryLock({ ...K, dir: 'y' }, { pull: 2, user: 'b' });
  await s.savePlan({ ...K, pull: 1, planPath: '/p/1', headSha: 'abc' });
  await s.savePlan({ ...K, dir: 'y', pull: 2, planPath: '/p/2', headSha: 'def' });
  assert.equal((await s.unlock(K))?.pull, 1);
  assert.equal(await s.unlock(K), undefined);
  const r = await s.unlockAllForPull('acme/infra', 1, { discardPlans: true });
  assert.deepEqual(
    r.locks.map((l) => l.dir),
    ['x'],
  );
  assert.deepEqual(
    r.plans.map((p) => p.planPath),
    ['/p/1'],
  );
  assert.deepEqual(
    (await s.list()).map((l) => l.dir),
    ['y'],
  );
  assert.equal((await s.listPlans('acme/infra', 2)).length, 1);
  // without discardPlans, plans stay
  const r2 = await s.unlockAllForPull('acme/infra', 2);
  assert.equal(r2.plans.length, 0);
  assert.equal((await s.listPlans('acme/infra', 2)).length, 1);
  assert.equal((await s.list()).length, 0);
  await s.close();
});

test('plans: save, replace, get, delete, paths under the data dir', async () => {
  const dir = tmpDir();
  const s = SqliteStore.open(dir);
  const p = s.planPath(K, 7);
  assert.ok(p.startsWith(path.join(dir, 'plans', 'acme', 'infra', '7')), p);
  assert.ok(p.endsWith(`${path.sep}envs%2Fprod.default.tfplan`), p);
  assert.ok(s.planPath({ ...K, dir: '.' }, 7).endsWith(`${path.sep}%2E.default.tfplan`));
  assert.ok(s.planPath(K, 7, 'prod').endsWith(`${path.sep}envs%2Fprod.default.prod.tfplan`));
  await s.savePlan({ ...K, pull: 7, planPath: p, headSha: 'a1', project: 'prod' });
  await s.savePlan({ ...K, pull: 7, planPath: p, headSha: 'b2', project: 'prod' });
  assert.equal((await s.getPlan('acme/infra', 7, K.dir, K.workspace))?.headSha, 'b2');
  assert.equal((await s.listPlans('acme/infra', 7)).length, 1);
  await s.savePlan({ ...K, pull: 7, planPath: p, headSha: 'c3' });
  assert.equal((await s.deletePlan('acme/infra', 7, K.dir, K.workspace))?.headSha, 'c3');
  await s.close();
});

test("unlockIfOwnedBy releases the pull's own lock only", async () => {
  const s = SqliteStore.open(tmpDir());
  await s.tryLock(K, { pull: 3, user: 'u' });
  assert.equal(await s.unlockIfOwnedBy(K, 4), undefined);
  assert.equal((await s.getLock(K))?.pull, 3);
  assert.equal((await s.unlockIfOwnedBy(K, 3))?.pull, 3);
  assert.equal(await s.getLock(K), undefined);
  await s.close();
});

test('pull status: merged for one head, fresh for a new head, replaced, deleted, durable across reopen', async () => {
  const dir = tmpDir();
  let s = SqliteStore.open(dir);
  const R = 'acme/infra';
  const d = (x: string) => ({ dir: x, workspace: 'default', project: '' });
  assert.equal(await s.getPullStatus(R, 1), undefined);
  await s.updatePullStatus(R, 1, 'h1', [
    { ...d('dir1'), command: 'plan', ok: true },
    { ...d('dir2'), command: 'plan', ok: true, noChanges: true },
  ]);
  await s.updatePullStatus(R, 1, 'h1', [{ ...d('dir1'), command: 'apply', ok: true }]);
  await s.close();
  s = SqliteStore.open(dir);
  assert.deepEqual(await s.getPullStatus(R, 1), {
    headSha: 'h1',
    projects: [
      { ...d('dir1'), status: 'applied' },
      { ...d('dir2'), status: 'planned_no_changes' },
    ],
  });
  assert.deepEqual((await s.updatePullStatus(R, 1, 'h2', [{ ...d('dir3'), command: 'plan', ok: false }])).projects, [
    { ...d('dir3'), status: 'plan_errored' },
  ]);
  assert.deepEqual(await s.updatePullStatus(R, 1, 'h2', [], { replace: true }), { headSha: 'h2', projects: [] });
  assert.equal(await s.getPullStatus(R, 2), undefined, 'per pull');
  await s.deletePullStatus(R, 1);
  assert.equal(await s.getPullStatus(R, 1), undefined);
  await s.close();
});

test('queue: enqueue, takeAll in order, empties the queue', async () => {
  const s = SqliteStore.open(tmpDir());
  for (let i = 0; i < 5; i++) await s.enqueue('acme/infra', i, { comment: `atlantis plan ${i}`, n: i });
  assert.equal(await s.queueLength(), 5);
  const all = await s.takeAll();
  assert.deepEqual(
    all.map((q) => (q.payload as { n: number }).n),
    [0, 1, 2, 3, 4],
  );
  assert.deepEqual(
    all.map((q) => q.pull),
    [0, 1, 2, 3, 4],
  );
  assert.equal(await s.queueLength(), 0);
  assert.deepEqual(await s.takeAll(), []);
  await s.close();
});

test('job journal: unfinished jobs and recent jobs', async () => {
  let t = 0;
  const s = SqliteStore.open(tmpDir(), { now: () => new Date(1_700_000_000_000 + 1000 * t++) });
  await s.jobStarted({ id: 'j1', command: 'plan', repo: 'acme/infra', pull: 1, dir: '.', workspace: 'default' });
  await s.jobStarted({ id: 'j2', command: 'apply', repo: 'acme/infra', pull: 1, project: 'p' });
  await s.jobFinished('j1', 'success', 'Plan: 1 to add');
  assert.deepEqual(
    (await s.unfinishedJobs()).map((j) => j.id),
    ['j2'],
  );
  const recent = await s.recentJobs();
  assert.deepEqual(
    recent.map((j) => j.id),
    ['j2', 'j1'],
  );
  assert.equal(recent[1]?.result, 'success');
  assert.equal(recent[1]?.summary, 'Plan: 1 to add');
  assert.equal(recent[0]?.project, 'p');
  await s.jobFinished('j2', 'interrupted');
  assert.equal((await s.unfinishedJobs()).length, 0);
  assert.equal(await s.pruneJobs(1), 1);
  assert.equal((await s.recentJobs()).length, 1);
  await s.close();
});

test('reopen after close keeps everything; WAL and synchronous settings', async () => {
  const dir = tmpDir();
  const s = SqliteStore.open(dir);
  await s.tryLock(K, { pull: 9, user: 'u', project: 'prod' });
  await s.savePlan({ ...K, pull: 9, planPath: '/x.tfplan', headSha: 'sha' });
  await s.enqueue('acme/infra', 9, { a: 1 });
  await s.jobStarted({ id: 'j', command: 'apply', repo: 'acme/infra', pull: 9 });
  assert.ok(await s.isHealthy());
  await s.close();
  assert.equal(await s.isHealthy(), false);
  const s2 = SqliteStore.open(dir);
  assert.equal((await s2.getLock(K))?.project, 'prod');
  assert.equal((await s2.getPlan('acme/infra', 9, K.dir, K.workspace))?.planPath, '/x.tfplan');
  assert.deepEqual(
    (await s2.takeAll()).map((q) => q.payload),
    [{ a: 1 }],
  );
  assert.deepEqual(
    (await s2.unfinishedJobs()).map((j) => j.id),
    ['j'],
  );
  assert.equal(s2.integrityCheck(), 'ok');
  await s2.close();
  const raw = new Database(path.join(dir, STORE_FILENAME));
  assert.equal(raw.pragma('journal_mode', { simple: true }), 'wal');
  raw.close();
});

test('isHealthy is false when the database file is removed', async () => {
  const dir = tmpDir();
  const s = SqliteStore.open(dir);
  assert.ok(await s.isHealthy());
  fs.rmSync(path.join(dir, STORE_FILENAME));
  assert.equal(await s.isHealthy(), false);
  await s.close();
});

test('two stores on one file: only one pull gets the lock', async () => {
  const dir = tmpDir();
  const a = SqliteStore.open(dir);
  const b = SqliteStore.open(dir);
  assert.equal((await a.tryLock(K, { pull: 1, user: 'a' })).acquired, true);
  const r = await b.tryLock(K, { pull: 2, user: 'b' });
  assert.equal(r.acquired, false);
  await a.close();
  await b.close();
});

test('SIGKILL in the middle of a write loop leaves a store that opens and passes integrity_check', async () => {
  const dir = tmpDir();
  const child = path.join(dir, 'writer.ts');
  fs.writeFileSync(
    child,
    `import { SqliteStore } from ${JSON.stringify(storeModule)};
const s = SqliteStore.open(process.argv[2]);
let i = 0;
const big = 'x'.repeat(20000);
async function loop() {
  for (let k = 0; k < 50; k++, i++) {
    await s.tryLock({ repo: 'r/r', dir: 'd' + (i % 200), workspace: 'default' }, { pull: i, user: 'u' });
    await s.savePlan({ repo: 'r/r', pull: i % 7, dir: 'd' + (i % 50), workspace: 'w', planPath: big, headSha: String(i) });
    await s.enqueue('r/r', i, { big, i });
    await s.unlockAllForPull('r/r', i - 100, { discardPlans: true });
    if (i % 3 === 0) await s.takeAll();
    await s.jobStarted({ id: 'j' + i, command: 'plan', repo: 'r/r', pull: i });
    await s.jobFinished('j' + (i - 1), 'success');
  }
  if (i === 50) process.stdout.write('ready\\n');
  setImmediate(() => void loop());
}
void loop();
`,
  );
  for (let round = 0; round < 3; round++) {
    const p = spawn(process.execPath, ['--import', 'tsx', child, dir], { stdio: ['ignore', 'pipe', 'inherit'] });
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('writer never became ready')), 30_000);
      p.stdout.on('data', (d: Buffer) => {
        if (d.toString().includes('ready')) {
          clearTimeout(timer);
          resolve();
        }
      });
      p.on('exit', (code) => reject(new Error(`writer exited early: ${code}`)));
    });
    // Let it write for a while, then kill it without warning.
    await new Promise((r) => setTimeout(r, 150 + round * 100));
    const exited = new Promise((r) => p.once('exit', r));
    p.kill('SIGKILL');
    await exited;
    const s = SqliteStore.open(dir);
    assert.equal(s.integrityCheck(), 'ok');
    assert.ok(await s.isHealthy());
    // Readable and internally consistent: at most one lock per key by construction.
    const locks = await s.list();
    assert.equal(new Set(locks.map((l) => `${l.repo}|${l.dir}|${l.workspace}`)).size, locks.length);
    assert.ok((await s.recentJobs(5)).length > 0);
    await s.close();
  }
});

test('lockId round-trips, including the root dir and nested dirs', () => {
  for (const k of [K, { ...K, dir: '.' }, { repo: 'a/b', dir: 'x/y/z', workspace: 'staging' }]) {
    assert.deepEqual(parseLockId(lockId(k.repo, k.dir, k.workspace)), k);
    assert.deepEqual(parseLockId(lockId(k.repo, k.dir, k.workspace, 'alpha')), { ...k, projectName: 'alpha' });
  }
  // Atlantis's form: the project name last, empty for an unnamed project.
  assert.equal(lockId(K.repo, K.dir, K.workspace), 'acme/infra/envs/prod/default/');
  assert.equal(lockId(K.repo, K.dir, K.workspace, 'alpha'), 'acme/infra/envs/prod/default/alpha');
  assert.equal(parseLockId('a/b/c/d'), undefined);
  assert.equal(parseLockId('a//c/d/'), undefined);
  assert.equal(parseLockId('a/b/c//'), undefined);
});

test('plan hashes: recorded with the plan; a data dir from before hashes gains the column, its plans have none', async () => {
  const dir = tmpDir();
  // The plans table as it was before hashes were kept, with one saved plan.
  const old = new Database(path.join(dir, STORE_FILENAME));
  old.exec(`CREATE TABLE plans (repo TEXT NOT NULL, pull INTEGER NOT NULL, dir TEXT NOT NULL, workspace TEXT NOT NULL,
    project TEXT, plan_path TEXT NOT NULL, head_sha TEXT NOT NULL, created_at TEXT NOT NULL, PRIMARY KEY (repo, pull, dir, workspace))`);
  old
    .prepare('INSERT INTO plans VALUES (?, ?, ?, ?, ?, ?, ?, ?)')
    .run('acme/infra', 1, 'app1', 'default', null, '/old.tfplan', 'sha', '2026-01-01T00:00:00Z');
  old.close();
  const s = SqliteStore.open(dir);
  const before = await s.getPlan('acme/infra', 1, 'app1', 'default');
  assert.equal(before?.planPath, '/old.tfplan');
  assert.equal(before?.planSha256, undefined);
  const file = path.join(dir, 'p.tfplan');
  fs.writeFileSync(file, 'plan bytes');
  const sha = await fileSha256(file);
  assert.equal(sha, createHash('sha256').update('plan bytes').digest('hex'));
  await s.savePlan({ ...K, pull: 2, planPath: file, headSha: 'h', planSha256: sha });
  await s.close();
  const again = SqliteStore.open(dir);
  assert.equal((await again.getPlan('acme/infra', 2, K.dir, K.workspace))?.planSha256, sha);
  await again.close();
});

test('the StateStore of the embedded kind: every call answers a promise; restorePlanFile leaves the local file alone', async () => {
  const dir = tmpDir();
  const s: StateStore = SqliteStore.open(dir);
  assert.equal(s.kind, 'boltdb');
  const pending = s.tryLock(K, { pull: 1, user: 'u' });
  assert.ok(pending instanceof Promise);
  assert.equal((await pending).acquired, true);
  const file = s.planPath(K, 1);
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, 'plan bytes');
  const plan = await s.savePlan({ ...K, pull: 1, planPath: file, headSha: 'h', planSha256: await fileSha256(file) });
  await s.restorePlanFile(plan);
  assert.equal(fs.readFileSync(file, 'utf8'), 'plan bytes');
  fs.rmSync(file);
  await s.restorePlanFile(plan);
  assert.equal(fs.existsSync(file), false, 'nothing to bring back from an embedded store');
  await s.updatePullStatus(K.repo, 1, 'h', [{ dir: K.dir, workspace: K.workspace, project: '', command: 'plan', ok: true }]);
  await s.markDiscarded(K.repo, 1, K.dir, K.workspace);
  assert.deepEqual((await s.getPullStatus(K.repo, 1))?.projects, [
    { dir: K.dir, workspace: K.workspace, project: '', status: 'plan_discarded' },
  ]);
  await s.close();
  assert.equal(await s.isHealthy(), false);
  await s.close();
});

test('deliveries are remembered for DELIVERY_TTL_MS, then forgotten (the table stays bounded in time)', async () => {
  let now = 1_700_000_000_000;
  const dir = tmpDir();
  const s = SqliteStore.open(dir, { now: () => new Date(now) });
  const cmd = (id: string) => ({ id, repo: 'acme/infra', pull: 1, payload: null });
  assert.ok('accepted' in (await s.acceptDelivery('old', cmd('c1'))));
  await s.commandFinished('c1');
  now += DELIVERY_TTL_MS - 1;
  assert.deepEqual(await s.acceptDelivery('old', cmd('c2')), { replay: 'handled' });
  now += 1;
  // Past the TTL: a new delivery, and the old row is gone with the next record.
  assert.ok('accepted' in (await s.acceptDelivery('old', cmd('c3'))));
  now += DELIVERY_TTL_MS;
  assert.ok('accepted' in (await s.acceptDelivery('new', cmd('c4'))));
  await s.close();
  const db = new Database(path.join(dir, STORE_FILENAME), { readonly: true });
  assert.deepEqual(db.prepare('SELECT id FROM deliveries ORDER BY id').all(), [{ id: 'new' }]);
  db.close();
});
