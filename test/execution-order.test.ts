// The order of a command's projects (execution_order_group, parallel_plan/apply,
// abort_on_execution_order_fail, cancel), table-tested against Atlantis v0.47's rules
// (server/events/project_command_pool_executor.go).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { setTimeout as delay } from 'node:timers/promises';
import { CancellationTracker, executionGroups, runInExecutionOrder } from '../src/server/workflow/repo-config/execution-order.js';

interface P {
  name: string;
  executionOrderGroup: number;
  fails?: boolean;
}
const p = (name: string, executionOrderGroup = 0, fails = false): P => ({ name, executionOrderGroup, fails });
const names = (groups: P[][]): string[][] => groups.map((g) => g.map((x) => x.name));

describe('executionGroups', () => {
  const rows: Array<[string, P[], boolean, string[][]]> = [
    ['no projects', [], false, []],
    ['one group, sequential: each project on its own', [p('a'), p('b'), p('c')], false, [['a'], ['b'], ['c']]],
    ['one group, parallel: one group', [p('a'), p('b')], true, [['a', 'b']]],
    ['groups sorted by number, order kept inside', [p('a', 2), p('b', 1), p('c', 2), p('d', -1)], false, [['d'], ['b'], ['a', 'c']]],
    ['several groups in parallel mode', [p('a', 1), p('b', 0), p('c', 1)], true, [['b'], ['a', 'c']]],
  ];
  for (const [what, items, parallel, want] of rows) it(what, () => assert.deepEqual(names(executionGroups(items, parallel)), want));
});

/** Runs the projects, each taking `ms`, and records when each starts and ends. */
async function runAll(items: P[], opts: { parallel: boolean; abortOnFail?: boolean; cancelAfterStart?: string; ms?: number }) {
  const events: string[] = [];
  const tracker = new CancellationTracker();
  const results = await runInExecutionOrder(items, {
    parallel: opts.parallel,
    abortOnFail: opts.abortOnFail ?? false,
    isCancelled: () => tracker.isCancelled('acme/infra', 1),
    run: async (it, gate) => {
      if (!gate()) return `${it.name}:cancelled`;
      events.push(`start ${it.name}`);
      if (it.name === opts.cancelAfterStart) tracker.cancel('acme/infra', 1);
      await delay(opts.ms ?? 5);
      events.push(`end ${it.name}`);
      return `${it.name}:${it.fails ? 'failed' : 'ok'}`;
    },
    failed: (r) => r.endsWith(':failed'),
    cancelled: (it) => `${it.name}:cancelled`,
  });
  return { events, results };
}

describe('runInExecutionOrder', () => {
  it('sequential: one project ends before the next starts', async () => {
    const { events, results } = await runAll([p('a'), p('b'), p('c')], { parallel: false });
    assert.deepEqual(events, ['start a', 'end a', 'start b', 'end b', 'start c', 'end c']);
    assert.deepEqual(results, ['a:ok', 'b:ok', 'c:ok']);
  });

  it('parallel: a group starts together, the next group only after it', async () => {
    const { events } = await runAll([p('a', 0), p('b', 0), p('c', 1)], { parallel: true });
    assert.deepEqual(events.slice(0, 2).sort(), ['start a', 'start b']);
    assert.equal(events.indexOf('start c'), 4, 'group 1 starts after both of group 0 ended');
  });

  it('abort_on_execution_order_fail in parallel mode: later groups give no result', async () => {
    const { results } = await runAll([p('a', 0, true), p('b', 0), p('c', 1)], { parallel: true, abortOnFail: true });
    assert.deepEqual(results, ['a:failed', 'b:ok']);
  });

  it('abort_on_execution_order_fail is not honoured without parallel (as Atlantis)', async () => {
    const { results } = await runAll([p('a', 0, true), p('c', 1)], { parallel: false, abortOnFail: true });
    assert.deepEqual(results, ['a:failed', 'c:ok']);
  });

  it('a failure without abort_on_execution_order_fail runs the next groups', async () => {
    const { results } = await runAll([p('a', 0, true), p('c', 1)], { parallel: true });
    assert.deepEqual(results, ['a:failed', 'c:ok']);
  });

  it('cancel: the running project finishes, the ones not started are cancelled', async () => {
    const { events, results } = await runAll([p('a'), p('b'), p('c')], { parallel: false, cancelAfterStart: 'a' });
    assert.deepEqual(events, ['start a', 'end a']);
    assert.deepEqual(results, ['a:ok', 'b:cancelled', 'c:cancelled']);
  });

  it('cancel stops later execution order groups, not the rest of a sequential group', async () => {
    const { results } = await runAll([p('a', 0), p('b', 0), p('c', 1)], { parallel: false, cancelAfterStart: 'a' });
    assert.deepEqual(results, ['a:ok', 'b:ok', 'c:cancelled']);
  });

  it('cancel in a parallel group stops members still waiting for their turn', async () => {
    const items = [p('a', 0), p('b', 0), p('c', 1)];
    const tracker = new CancellationTracker();
    let active = 0;
    const queue: Array<() => void> = [];
    // A pool of one: b waits for a's slot, and a cancels the PR while it runs.
    const results = await runInExecutionOrder(items, {
      parallel: true,
      abortOnFail: false,
      isCancelled: () => tracker.isCancelled('r', 2),
      run: async (it, gate) => {
        if (active > 0) await new Promise<void>((r) => queue.push(r));
        active++;
        try {
          if (!gate()) return `${it.name}:cancelled`;
          if (it.name === 'a') tracker.cancel('r', 2);
          await delay(5);
          return `${it.name}:ok`;
        } finally {
          active--;
          queue.shift()?.();
        }
      },
      failed: () => false,
      cancelled: (it) => `${it.name}:cancelled`,
    });
    assert.deepEqual(results, ['a:ok', 'b:cancelled', 'c:cancelled']);
  });
});

describe('CancellationTracker', () => {
  it('is per pull request and cleared explicitly', () => {
    const t = new CancellationTracker();
    t.cancel('acme/infra', 1);
    assert.equal(t.isCancelled('acme/infra', 1), true);
    assert.equal(t.isCancelled('acme/infra', 2), false);
    assert.equal(t.isCancelled('acme/other', 1), false);
    t.clear('acme/infra', 1);
    assert.equal(t.isCancelled('acme/infra', 1), false);
  });
});
