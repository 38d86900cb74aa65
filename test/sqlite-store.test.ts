// Durable store: locks, plans, drain queue, job journal, crash safety.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import { LockStore, STORE_FILENAME, fileSha256 } from '../src/server/locks/store.js';
import { lockId, parseLockId } from '../src/server/locks/lock-id.js';
import { createHash } from 'node:crypto';

const here = path.dirname(fileURLToPath(import.meta.url));
const storeModule = path.resolve(here, '../src/server/locks/store.ts');

function tmpDir(): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), 'lockstore-'));
}

const K = { repo: 'acme/infra', dir: 'envs/prod', workspace: 'default' };

test('tryLock: acquire, re-entrant for the same pull, refused with holder for another', () => {
  const s = LockStore.open(tmpDir(), { now: () => new Date('2026-01-02T03:04:05Z') });
  const a = s.tryLock(K, { pull: 1, user: 'alice', project: 'prod' });
  assert.equal(a.acquired, true);
  assert.deepEqual(s.tryLock(K, { pull: 1, user: 'alice' }).acquired, true);
  const b = s.tryLock(K, { pull: 2, user: 'bob' });
  assert.equal(b.acquired, false);
  if (!b.acquired) assert.deepEqual(b.holder, { ...K, pull: 1, user: 'alice', project: 'prod', time: '2026-01-02T03:04:05.000Z' });
  // other workspace / dir / repo are separate locks
  assert.equal(s.tryLock({ ...K, workspace: 'staging' }, { pull: 2, user: 'bob' }).acquired, true);
  assert.equal(s.tryLock({ ...K, dir: '.' }, { pull: 2, user: 'bob' }).acquired, true);
  assert.equal(s.tryLock({ ...K, repo: 'acme/other' }, { pull: 2, user: 'bob' }).acquired, true);
  assert.equal(s.list().length, 4);
  assert.equal(s.list('acme/infra').length, 3);
  s.close();
});

test('unlock and unlockAllForPull', () => {
  const s = LockStore.open(tmpDir());
  s.tryLock(K, { pull: 1, user: 'a' });
  s.tryLock({ ...K, dir: 'x' }, { pull: 1, user: 'a' });
  s.tryLock({ ...K, dir: 'y' }, { pull: 2, user: 'b' });
  s.savePlan({ ...K, pull: 1, planPath: '/p/1', headSha: 'abc' });
  s.savePlan({ ...K, dir: 'y', pull: 2, planPath: '/p/2', headSha: 'def' });
  assert.equal(s.unlock(K)?.pull, 1);
  assert.equal(s.unlock(K), undefined);
  const r = s.unlockAllForPull('acme/infra', 1, { discardPlans: true });
  assert.deepEqual(
    r.locks.map((l) => l.dir),
    ['x'],
  );
  assert.deepEqual(
    r.plans.map((p) => p.planPath),
    ['/p/1'],
  );
  assert.deepEqual(
    s.list().map((l) => l.dir),
    ['y'],
  );
  assert.equal(s.listPlans('acme/infra', 2).length, 1);
  // without discardPlans, plans stay
  const r2 = s.unlockAllForPull('acme/infra', 2);
  assert.equal(r2.plans.length, 0);
  assert.equal(s.listPlans('acme/infra', 2).length, 1);
  assert.equal(s.list().length, 0);
  s.close();
});

test('plans: save, replace, get, delete, paths under the data dir', () => {
  const dir = tmpDir();
  const s = LockStore.open(dir);
  const p = s.planPath(K, 7);
  assert.ok(p.startsWith(path.join(dir, 'plans', 'acme', 'infra', '7')), p);
  assert.ok(p.endsWith(`${path.sep}envs%2Fprod.default.tfplan`), p);
  assert.ok(s.planPath({ ...K, dir: '.' }, 7).endsWith(`${path.sep}%2E.default.tfplan`));
  assert.ok(s.planPath(K, 7, 'prod').endsWith(`${path.sep}envs%2Fprod.default.prod.tfplan`));
  s.savePlan({ ...K, pull: 7, planPath: p, headSha: 'a1', project: 'prod' });
  s.savePlan({ ...K, pull: 7, planPath: p, headSha: 'b2', project: 'prod' });
  assert.equal(s.getPlan('acme/infra', 7, K.dir, K.workspace)?.headSha, 'b2');
  assert.equal(s.listPlans('acme/infra', 7).length, 1);
  s.savePlan({ ...K, pull: 7, planPath: p, headSha: 'c3' });
  assert.equal(s.deletePlan('acme/infra', 7, K.dir, K.workspace)?.headSha, 'c3');
  s.close();
});

test("unlockIfOwnedBy releases the pull's own lock only", () => {
  const s = LockStore.open(tmpDir());
  s.tryLock(K, { pull: 3, user: 'u' });
  assert.equal(s.unlockIfOwnedBy(K, 4), undefined);
  assert.equal(s.getLock(K)?.pull, 3);
  assert.equal(s.unlockIfOwnedBy(K, 3)?.pull, 3);
  assert.equal(s.getLock(K), undefined);
  s.close();
});

test('pull status: merged for one head, fresh for a new head, replaced, deleted, durable across reopen', () => {
  const dir = tmpDir();
  let s = LockStore.open(dir);
  const R = 'acme/infra';
  const d = (x: string) => ({ dir: x, workspace: 'default', project: '' });
  assert.equal(s.getPullStatus(R, 1), undefined);
  s.updatePullStatus(R, 1, 'h1', [
    { ...d('dir1'), command: 'plan', ok: true },
    { ...d('dir2'), command: 'plan', ok: true, noChanges: true },
  ]);
  s.updatePullStatus(R, 1, 'h1', [{ ...d('dir1'), command: 'apply', ok: true }]);
  s.close();
  s = LockStore.open(dir);
  assert.deepEqual(s.getPullStatus(R, 1), {
    headSha: 'h1',
    projects: [
      { ...d('dir1'), status: 'applied' },
      { ...d('dir2'), status: 'planned_no_changes' },
    ],
  });
  assert.deepEqual(s.updatePullStatus(R, 1, 'h2', [{ ...d('dir3'), command: 'plan', ok: false }]).projects, [
    { ...d('dir3'), status: 'plan_errored' },
  ]);
  assert.deepEqual(s.updatePullStatus(R, 1, 'h2', [], { replace: true }), { headSha: 'h2', projects: [] });
  assert.equal(s.getPullStatus(R, 2), undefined, 'per pull');
  s.deletePullStatus(R, 1);
  assert.equal(s.getPullStatus(R, 1), undefined);
  s.close();
});

test('queue: enqueue, takeAll in order, empties the queue', () => {
  const s = LockStore.open(tmpDir());
  for (let i = 0; i < 5; i++) s.enqueue('acme/infra', i, { comment: `atlantis plan ${i}`, n: i });
  assert.equal(s.queueLength(), 5);
  const all = s.takeAll();
  assert.deepEqual(
    all.map((q) => (q.payload as { n: number }).n),
    [0, 1, 2, 3, 4],
  );
  assert.deepEqual(
    all.map((q) => q.pull),
    [0, 1, 2, 3, 4],
  );
  assert.equal(s.queueLength(), 0);
  assert.deepEqual(s.takeAll(), []);
  s.close();
});

test('job journal: unfinished jobs and recent jobs', () => {
  let t = 0;
  const s = LockStore.open(tmpDir(), { now: () => new Date(1_700_000_000_000 + 1000 * t++) });
  s.jobStarted({ id: 'j1', command: 'plan', repo: 'acme/infra', pull: 1, dir: '.', workspace: 'default' });
  s.jobStarted({ id: 'j2', command: 'apply', repo: 'acme/infra', pull: 1, project: 'p' });
  s.jobFinished('j1', 'success', 'Plan: 1 to add');
  assert.deepEqual(
    s.unfinishedJobs().map((j) => j.id),
    ['j2'],
  );
  const recent = s.recentJobs();
  assert.deepEqual(
    recent.map((j) => j.id),
    ['j2', 'j1'],
  );
  assert.equal(recent[1]?.result, 'success');
  assert.equal(recent[1]?.summary, 'Plan: 1 to add');
  assert.equal(recent[0]?.project, 'p');
  s.jobFinished('j2', 'interrupted');
  assert.equal(s.unfinishedJobs().length, 0);
  assert.equal(s.pruneJobs(1), 1);
  assert.equal(s.recentJobs().length, 1);
  s.close();
});

test('reopen after close keeps everything; WAL and synchronous settings', () => {
  const dir = tmpDir();
  const s = LockStore.open(dir);
  s.tryLock(K, { pull: 9, user: 'u', project: 'prod' });
  s.savePlan({ ...K, pull: 9, planPath: '/x.tfplan', headSha: 'sha' });
  s.enqueue('acme/infra', 9, { a: 1 });
  s.jobStarted({ id: 'j', command: 'apply', repo: 'acme/infra', pull: 9 });
  assert.ok(s.isHealthy());
  s.close();
  assert.equal(s.isHealthy(), false);
  const s2 = LockStore.open(dir);
  assert.equal(s2.getLock(K)?.project, 'prod');
  assert.equal(s2.getPlan('acme/infra', 9, K.dir, K.workspace)?.planPath, '/x.tfplan');
  assert.deepEqual(
    s2.takeAll().map((q) => q.payload),
    [{ a: 1 }],
  );
  assert.deepEqual(
    s2.unfinishedJobs().map((j) => j.id),
    ['j'],
  );
  assert.equal(s2.integrityCheck(), 'ok');
  s2.close();
  const raw = new Database(path.join(dir, STORE_FILENAME));
  assert.equal(raw.pragma('journal_mode', { simple: true }), 'wal');
  raw.close();
});

test('isHealthy is false when the database file is removed', () => {
  const dir = tmpDir();
  const s = LockStore.open(dir);
  assert.ok(s.isHealthy());
  fs.rmSync(path.join(dir, STORE_FILENAME));
  assert.equal(s.isHealthy(), false);
  s.close();
});

test('two stores on one file: only one pull gets the lock', () => {
  const dir = tmpDir();
  const a = LockStore.open(dir);
  const b = LockStore.open(dir);
  assert.equal(a.tryLock(K, { pull: 1, user: 'a' }).acquired, true);
  const r = b.tryLock(K, { pull: 2, user: 'b' });
  assert.equal(r.acquired, false);
  a.close();
  b.close();
});

test('SIGKILL in the middle of a write loop leaves a store that opens and passes integrity_check', async () => {
  const dir = tmpDir();
  const child = path.join(dir, 'writer.ts');
  fs.writeFileSync(
    child,
    `import { LockStore } from ${JSON.stringify(storeModule)};
const s = LockStore.open(process.argv[2]);
let i = 0;
const big = 'x'.repeat(20000);
function loop() {
  for (let k = 0; k < 50; k++, i++) {
    s.tryLock({ repo: 'r/r', dir: 'd' + (i % 200), workspace: 'default' }, { pull: i, user: 'u' });
    s.savePlan({ repo: 'r/r', pull: i % 7, dir: 'd' + (i % 50), workspace: 'w', planPath: big, headSha: String(i) });
    s.enqueue('r/r', i, { big, i });
    s.unlockAllForPull('r/r', i - 100, { discardPlans: true });
    if (i % 3 === 0) s.takeAll();
    s.jobStarted({ id: 'j' + i, command: 'plan', repo: 'r/r', pull: i });
    s.jobFinished('j' + (i - 1), 'success');
  }
  if (i === 50) process.stdout.write('ready\\n');
  setImmediate(loop);
}
loop();
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
    const s = LockStore.open(dir);
    assert.equal(s.integrityCheck(), 'ok');
    assert.ok(s.isHealthy());
    // Readable and internally consistent: at most one lock per key by construction.
    const locks = s.list();
    assert.equal(new Set(locks.map((l) => `${l.repo}|${l.dir}|${l.workspace}`)).size, locks.length);
    assert.ok(s.recentJobs(5).length > 0);
    s.close();
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
  const s = LockStore.open(dir);
  const before = s.getPlan('acme/infra', 1, 'app1', 'default');
  assert.equal(before?.planPath, '/old.tfplan');
  assert.equal(before?.planSha256, undefined);
  const file = path.join(dir, 'p.tfplan');
  fs.writeFileSync(file, 'plan bytes');
  const sha = await fileSha256(file);
  assert.equal(sha, createHash('sha256').update('plan bytes').digest('hex'));
  s.savePlan({ ...K, pull: 2, planPath: file, headSha: 'h', planSha256: sha });
  s.close();
  const again = LockStore.open(dir);
  assert.equal(again.getPlan('acme/infra', 2, K.dir, K.workspace)?.planSha256, sha);
  again.close();
});
