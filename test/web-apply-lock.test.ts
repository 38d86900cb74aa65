// The global apply lock's decision before an apply (src/server/workflow/commands/apply-lock.ts), every
// case: Atlantis's two texts, which one fails the PR's apply status, and that
// --disable-global-apply-lock never reads the store.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  APPLY_DISABLED_COMMENT,
  APPLY_LOCK_CHECK_FAILED_COMMENT,
  type ApplyLockGate,
  checkApplyLock,
  decideApplyLock,
} from '../src/server/workflow/commands/apply-lock.js';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { SqliteStore } from '../src/server/locks/sqlite-store.js';

const LOCK = { time: '2026-12-01T10:00:00.000Z', by: 'ops' };

describe('global apply lock: may an apply run', () => {
  const rows: Array<[string, boolean, Parameters<typeof decideApplyLock>[1], ApplyLockGate['kind'], string?, boolean?]> = [
    ['no lock', false, { lock: undefined }, 'run'],
    ['the lock is on', false, { lock: LOCK }, 'refuse', APPLY_DISABLED_COMMENT, false],
    ['the store failed', false, { error: new Error('connect ECONNREFUSED') }, 'refuse', APPLY_LOCK_CHECK_FAILED_COMMENT, true],
    ['feature off, lock on', true, { lock: LOCK }, 'run'],
    ['feature off, store failed', true, { error: new Error('x') }, 'run'],
    ['feature off, store not asked', true, undefined, 'run'],
  ];
  for (const [what, disabled, read, kind, comment, failStatus] of rows) {
    it(`${what}: ${kind}`, () => {
      const g = decideApplyLock(disabled, read);
      assert.equal(g.kind, kind);
      if (g.kind === 'refuse') {
        assert.equal(g.comment, comment);
        assert.equal(g.failStatus, failStatus);
      }
    });
  }

  it("Atlantis's texts, word for word", () => {
    assert.equal(APPLY_DISABLED_COMMENT, '**Error:** Running `atlantis apply` is disabled.');
    assert.equal(
      APPLY_LOCK_CHECK_FAILED_COMMENT,
      '**Error:** Failed to check global apply lock. Running `atlantis apply` is not allowed until the lock backend is reachable.',
    );
  });

  it('the store error is kept for the log line', () => {
    const g = decideApplyLock(false, { error: new Error('connect ECONNREFUSED 127.0.0.1:6379') });
    assert.equal(g.kind === 'refuse' && g.error, 'connect ECONNREFUSED 127.0.0.1:6379');
  });

  it('checkApplyLock on a real store: refused while on, run when off; a store that fails refuses, unless the feature is off', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'ato-apply-lock-'));
    const store = SqliteStore.open(dir);
    try {
      assert.equal((await checkApplyLock(store, false)).kind, 'run');
      await store.setApplyLock(true, 'ops');
      const on = await checkApplyLock(store, false);
      assert.equal(on.kind === 'refuse' && on.comment, APPLY_DISABLED_COMMENT);
      assert.equal((await checkApplyLock(store, true)).kind, 'run', 'the feature off: the lock is not consulted');
      await store.close();
      // A closed database throws on every read: the check fails.
      const failed = await checkApplyLock(store, false);
      assert.equal(failed.kind === 'refuse' && failed.comment, APPLY_LOCK_CHECK_FAILED_COMMENT);
      assert.ok(failed.kind === 'refuse' && failed.failStatus);
      assert.equal((await checkApplyLock(store, true)).kind, 'run', 'the feature off: the store is not even asked');
    } finally {
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
