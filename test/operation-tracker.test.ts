import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { type DrainState, initialDrainState } from '../src/server/drain/drain-state.js';
import { OperationTracker } from '../src/server/drain/operation-tracker.js';
import { buildStatus, serializeStatus } from '../src/server/http/app.js';

const info = { command: 'plan', repo: 'acme/infra', pull: 1, project: null };

describe('OperationTracker', () => {
  it('counts started and finished operations', () => {
    const t = new OperationTracker();
    const a = t.tryStart(info)!;
    const b = t.tryStart({ ...info, command: 'apply' })!;
    assert.equal(t.inProgress, 2);
    assert.deepEqual(
      t.operations().map((o) => o.command),
      ['plan', 'apply'],
    );
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
    const p = t.waitIdle().then(() => {
      resolved = true;
    });
    t.finish(a.id);
    await Promise.resolve();
    assert.equal(resolved, false);
    t.finish(b.id);
    await p;
    assert.equal(resolved, true);
  });

  it('onDrained calls back once, synchronously, when shutting down with no operation left', () => {
    const t = new OperationTracker();
    const a = t.tryStart(info)!;
    let calls = 0;
    t.onDrained(() => {
      calls++;
    });
    t.finish(a.id); // idle, but still serving: not drained
    assert.equal(calls, 0);
    const b = t.tryStart(info)!;
    t.shutDown(); // shutting down, one operation left
    assert.equal(calls, 0);
    t.finish(b.id);
    assert.equal(calls, 1, 'called in the same statement that ended the drain');
    t.shutDown();
    t.finish(b.id);
    assert.equal(calls, 1, 'never twice');
    let late = 0;
    t.onDrained(() => {
      late++;
    });
    assert.equal(late, 1, 'at once once drained');
  });

  it('onShutDown calls back once, in the shutDown call, before any operation could start after it', () => {
    const t = new OperationTracker();
    const seen: string[] = [];
    t.onShutDown(() => seen.push(`shutting down=${t.isShuttingDown}, may start=${t.tryStart(info) !== undefined}`));
    t.tryStart(info);
    assert.deepEqual(seen, []);
    t.shutDown();
    t.shutDown();
    assert.deepEqual(seen, ['shutting down=true, may start=false'], 'once, with the flag already set');
    let late = 0;
    t.onShutDown(() => late++);
    assert.equal(late, 1, 'at once when the drain has started');
  });

  it('a listener that throws does not stop shutDown half way; its error is thrown again later', () => {
    const t = new OperationTracker();
    const later: Array<() => void> = [];
    const real = globalThis.queueMicrotask;
    globalThis.queueMicrotask = (cb) => {
      later.push(cb);
    };
    let second = 0;
    try {
      t.onDrained(() => {
        throw new Error('boom');
      });
      t.onDrained(() => {
        second++;
      });
      assert.equal(t.shutDown(), true);
    } finally {
      globalThis.queueMicrotask = real;
    }
    assert.equal(second, 1, 'the next listener still ran');
    assert.equal(t.isDrained, true);
    assert.equal(later.length, 1);
    assert.throws(() => later[0]!(), /boom/);
  });

  it('onDrained fires inside shutDown when nothing runs', () => {
    const t = new OperationTracker();
    const order: string[] = [];
    t.onDrained(() => order.push('drained'));
    t.shutDown();
    order.push('after shutDown');
    assert.deepEqual(order, ['drained', 'after shutDown']);
  });
});

describe('serializeStatus', () => {
  it('gives the JSON of buildStatus, reusing each operation part while it lasts', () => {
    const t = new OperationTracker();
    const ops = Array.from(
      { length: 5 },
      (_, i) => t.tryStart({ command: 'plan', repo: 'acme/"quoted"\\repo', pull: i, project: i % 2 ? null : `dir${i}/ws` })!,
    );
    let parts = new Map<string, string>();
    const check = (drain: DrainState) => {
      const r = serializeStatus(t, drain, parts);
      assert.equal(r.json, JSON.stringify(buildStatus(t, drain)));
      assert.deepEqual(JSON.parse(r.json), buildStatus(t, drain));
      return r;
    };
    const first = check(initialDrainState);
    parts = first.parts;
    t.finish(ops[1]!.id);
    t.tryStart({ command: 'apply', repo: 'acme/infra', pull: 9, project: 'x' });
    t.shutDown();
    const draining: DrainState = { ...initialDrainState, phase: 'draining', reason: 'annotation', since: new Date('2026-11-30T08:00:00Z') };
    const second = check(draining);
    assert.equal(second.parts.size, 5, 'the finished operation is gone, the new one (started before shutdown) is there');
    assert.equal(second.parts.has(ops[1]!.id), false);
    assert.equal(second.parts.get(ops[0]!.id), first.parts.get(ops[0]!.id), 'an unchanged operation keeps its part');
    for (const o of t.operations()) t.finish(o.id);
    assert.equal(check(draining).json.endsWith('"operations":[]}'), true);
  });
});
