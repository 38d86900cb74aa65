import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { OperationTracker } from '../src/server/drain/operation-tracker.js';

const info = { command: 'plan', repo: 'acme/infra', pull: 1, project: null };

describe('OperationTracker', () => {
  it('counts started and finished operations', () => {
    const t = new OperationTracker();
    const a = t.tryStart(info)!;
    const b = t.tryStart({ ...info, command: 'apply' })!;
    assert.equal(t.inProgress, 2);
    assert.deepEqual(t.operations().map((o) => o.command), ['plan', 'apply']);
    t.finish(a.id);
    t.finish(a.id); // idempotent
    assert.equal(t.inProgress, 1);
    t.finish(b.id);
    assert.equal(t.inProgress, 0);
  });

  it('version changes with every change /status shows, and only then', () => {
    const t = new OperationTracker();
    const seen = [t.version];
    const a = t.tryStart(info)!;
    seen.push(t.version);
    t.finish(a.id);
    seen.push(t.version);
    t.finish(a.id); // no change: same version
    assert.equal(t.version, seen.at(-1));
    t.shutDown();
    seen.push(t.version);
    t.shutDown();
    assert.equal(t.tryStart(info), undefined); // refused: no change
    assert.equal(t.version, seen.at(-1));
    assert.equal(new Set(seen).size, 4, `versions ${seen.join(',')} must all differ`);
  });

  it('refuses new operations once shutting down, and the count only falls', () => {
    const t = new OperationTracker();
    const a = t.tryStart(info)!;
    assert.equal(t.shutDown(), true);
    assert.equal(t.shutDown(), false);
    assert.equal(t.tryStart(info), undefined);
    assert.equal(t.inProgress, 1);
    t.finish(a.id);
    assert.equal(t.inProgress, 0);
    for (let i = 0; i < 100; i++) assert.equal(t.tryStart(info), undefined);
    assert.equal(t.inProgress, 0);
  });

  it('waitIdle resolves when the last operation finishes', async () => {
    const t = new OperationTracker();
    await t.waitIdle(); // resolves at once when idle
    const a = t.tryStart(info)!;
    const b = t.tryStart(info)!;
    let resolved = false;
    const p = t.waitIdle().then(() => { resolved = true; });
    t.finish(a.id);
    await Promise.resolve();
    assert.equal(resolved, false);
    t.finish(b.id);
    await p;
    assert.equal(resolved, true);
  });

  it('waitDrained resolves only once shutting down with no operation left', async () => {
    const t = new OperationTracker();
    const a = t.tryStart(info)!;
    let drained = false;
    const p = t.waitDrained().then(() => { drained = true; });
    t.finish(a.id); // idle, but still serving: not drained
    await new Promise((r) => setImmediate(r));
    assert.equal(drained, false);
    const b = t.tryStart(info)!;
    t.shutDown(); // shutting down, one operation left
    await new Promise((r) => setImmediate(r));
    assert.equal(drained, false);
    t.finish(b.id);
    await p;
    assert.equal(drained, true);
    await t.waitDrained(); // at once once drained
  });
});
