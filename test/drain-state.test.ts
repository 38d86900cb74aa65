// Table tests of the pure drain state machine.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  type DrainEffect,
  type DrainEvent,
  type DrainState,
  type DrainTimings,
  EXIT_DRAINED,
  EXIT_INTERRUPTED,
  initialDrainState,
  nextDrainState,
} from '../src/server/drain/drain-state.js';

const T0 = new Date('2026-01-01T00:00:00Z');
const at = (s: number) => new Date(T0.getTime() + s * 1000);
const timings = (drainTimeoutS: number): DrainTimings => ({
  drainTimeoutMs: drainTimeoutS * 1000,
  interruptGraceMs: 60_000,
  forceExitMarginMs: 15_000,
});

function run(events: DrainEvent[], t: DrainTimings): { state: DrainState; effects: DrainEffect[] } {
  let state = initialDrainState;
  const effects: DrainEffect[] = [];
  for (const e of events) {
    const r = nextDrainState(state, e, t);
    state = r.state;
    effects.push(...r.effects);
  }
  return { state, effects };
}

const sig = (s: number, inProgress: number): DrainEvent => ({ type: 'trigger', trigger: 'signal', at: at(s), inProgress });
const ann = (s: number, inProgress: number): DrainEvent => ({ type: 'trigger', trigger: 'annotation', at: at(s), inProgress });
const cli = (s: number, inProgress: number): DrainEvent => ({ type: 'trigger', trigger: 'cli', at: at(s), inProgress });
const deadline = (s: number, inProgress: number): DrainEvent => ({ type: 'deadline', at: at(s), inProgress });
const idle = (s: number): DrainEvent => ({ type: 'idle', at: at(s) });

interface Row {
  name: string;
  timeoutS: number;
  events: DrainEvent[];
  phase: DrainState['phase'];
  reason: DrainState['reason'];
  effects: Array<DrainEffect['type']>;
  exitCode?: number;
  deadlineAt?: Date | null;
}

const rows: Row[] = [
  { name: 'serving stays serving with no event', timeoutS: 0, events: [], phase: 'serving', reason: null, effects: [] },
  {
    name: 'SIGTERM when idle exits 0 at once',
    timeoutS: 0,
    events: [sig(0, 0)],
    phase: 'exited',
    reason: 'signal',
    effects: ['refuseNewWork', 'exit'],
    exitCode: EXIT_DRAINED,
  },
  {
    name: 'SIGTERM while busy, no timeout: drains without deadline',
    timeoutS: 0,
    events: [sig(0, 2)],
    phase: 'draining',
    reason: 'signal',
    effects: ['refuseNewWork'],
    deadlineAt: null,
  },
  {
    name: 'SIGTERM while busy with timeout arms the deadline',
    timeoutS: 30,
    events: [sig(0, 2)],
    phase: 'draining',
    reason: 'signal',
    effects: ['refuseNewWork', 'armDeadline'],
    deadlineAt: at(30),
  },
  {
    name: 'busy then idle exits 0',
    timeoutS: 30,
    events: [sig(0, 1), idle(5)],
    phase: 'exited',
    reason: 'signal',
    effects: ['refuseNewWork', 'armDeadline', 'exit'],
    exitCode: EXIT_DRAINED,
  },
  {
    name: 'deadline while busy interrupts terraform',
    timeoutS: 30,
    events: [sig(0, 1), deadline(30, 1)],
    phase: 'interrupting',
    reason: 'signal',
    effects: ['refuseNewWork', 'armDeadline', 'interruptTerraform', 'armForceExit'],
  },
  {
    name: 'idle after interrupt exits non-zero',
    timeoutS: 30,
    events: [sig(0, 1), deadline(30, 1), idle(31)],
    phase: 'exited',
    reason: 'signal',
    effects: ['refuseNewWork', 'armDeadline', 'interruptTerraform', 'armForceExit', 'exit'],
    exitCode: EXIT_INTERRUPTED,
  },
  {
    name: 'second signal is the deadline, even with no timeout',
    timeoutS: 0,
    events: [sig(0, 1), sig(2, 1)],
    phase: 'interrupting',
    reason: 'signal',
    effects: ['refuseNewWork', 'interruptTerraform', 'armForceExit'],
  },
  {
    name: 'third signal while interrupting does nothing more',
    timeoutS: 0,
    events: [sig(0, 1), sig(2, 1), sig(3, 1)],
    phase: 'interrupting',
    reason: 'signal',
    effects: ['refuseNewWork', 'interruptTerraform', 'armForceExit'],
  },
  {
    name: 'force exit after the interrupt grace exits non-zero',
    timeoutS: 0,
    events: [sig(0, 1), sig(1, 1), { type: 'forceExit', at: at(80) }],
    phase: 'exited',
    reason: 'signal',
    effects: ['refuseNewWork', 'interruptTerraform', 'armForceExit', 'exit'],
    exitCode: EXIT_INTERRUPTED,
  },
  {
    name: 'annotation drain has no deadline',
    timeoutS: 30,
    events: [ann(0, 1)],
    phase: 'draining',
    reason: 'annotation',
    effects: ['refuseNewWork'],
    deadlineAt: null,
  },
  {
    name: 'annotation drain stays up when idle',
    timeoutS: 30,
    events: [ann(0, 1), idle(10)],
    phase: 'draining',
    reason: 'annotation',
    effects: ['refuseNewWork'],
  },
  {
    name: 'annotation drain idle from the start stays up',
    timeoutS: 30,
    events: [ann(0, 0)],
    phase: 'draining',
    reason: 'annotation',
    effects: ['refuseNewWork'],
  },
  {
    name: 'annotation drained then SIGTERM (pod deleted) exits 0',
    timeoutS: 30,
    events: [ann(0, 1), idle(10), sig(20, 0)],
    phase: 'exited',
    reason: 'annotation',
    effects: ['refuseNewWork', 'exit'],
    exitCode: EXIT_DRAINED,
  },
  {
    name: 'annotation drain busy then SIGTERM starts the deadline clock',
    timeoutS: 30,
    events: [ann(0, 1), sig(20, 1)],
    phase: 'draining',
    reason: 'annotation',
    effects: ['refuseNewWork', 'armDeadline'],
    deadlineAt: at(50),
  },
  {
    name: 'annotation, SIGTERM, deadline: interrupt',
    timeoutS: 30,
    events: [ann(0, 1), sig(20, 1), deadline(50, 1)],
    phase: 'interrupting',
    reason: 'annotation',
    effects: ['refuseNewWork', 'armDeadline', 'interruptTerraform', 'armForceExit'],
  },
  {
    name: 'annotation twice is one drain',
    timeoutS: 30,
    events: [ann(0, 1), ann(5, 1)],
    phase: 'draining',
    reason: 'annotation',
    effects: ['refuseNewWork'],
  },
  {
    name: 'cli drain when idle exits 0',
    timeoutS: 0,
    events: [cli(0, 0)],
    phase: 'exited',
    reason: 'cli',
    effects: ['refuseNewWork', 'exit'],
    exitCode: EXIT_DRAINED,
  },
  {
    name: 'cli drain arms the deadline',
    timeoutS: 10,
    events: [cli(0, 3)],
    phase: 'draining',
    reason: 'cli',
    effects: ['refuseNewWork', 'armDeadline'],
    deadlineAt: at(10),
  },
  {
    name: 'cli then SIGTERM: first signal, deadline unchanged',
    timeoutS: 10,
    events: [cli(0, 3), sig(5, 3)],
    phase: 'draining',
    reason: 'cli',
    effects: ['refuseNewWork', 'armDeadline'],
    deadlineAt: at(10),
  },
  {
    name: 'cli, SIGTERM, SIGTERM: deadline now',
    timeoutS: 10,
    events: [cli(0, 3), sig(5, 3), sig(6, 3)],
    phase: 'interrupting',
    reason: 'cli',
    effects: ['refuseNewWork', 'armDeadline', 'interruptTerraform', 'armForceExit'],
  },
  {
    name: 'deadline when already idle exits 0',
    timeoutS: 10,
    events: [sig(0, 1), deadline(10, 0)],
    phase: 'exited',
    reason: 'signal',
    effects: ['refuseNewWork', 'armDeadline', 'exit'],
    exitCode: EXIT_DRAINED,
  },
  {
    name: 'events after exit are ignored',
    timeoutS: 0,
    events: [sig(0, 0), sig(1, 0), idle(2)],
    phase: 'exited',
    reason: 'signal',
    effects: ['refuseNewWork', 'exit'],
    exitCode: EXIT_DRAINED,
  },
  {
    name: 'a stray deadline while serving does nothing',
    timeoutS: 10,
    events: [deadline(0, 2)],
    phase: 'serving',
    reason: null,
    effects: [],
  },
  { name: 'idle while serving does nothing', timeoutS: 10, events: [idle(0)], phase: 'serving', reason: null, effects: [] },
];

describe('drain state machine', () => {
  for (const r of rows) {
    it(r.name, () => {
      const { state, effects } = run(r.events, timings(r.timeoutS));
      assert.equal(state.phase, r.phase);
      assert.equal(state.reason, r.reason);
      assert.deepEqual(
        effects.map((e) => e.type),
        r.effects,
      );
      if (r.exitCode !== undefined) {
        const exit = effects.find((e) => e.type === 'exit');
        assert.ok(exit && exit.type === 'exit');
        assert.equal(exit.code, r.exitCode);
      }
      if (r.deadlineAt !== undefined) assert.deepEqual(state.deadlineAt, r.deadlineAt);
      if (state.phase !== 'serving') assert.deepEqual(state.since, r.events[0]!.at);
    });
  }

  it('the force-exit timer is armed after the interrupt grace plus margin', () => {
    const { effects } = run([sig(0, 1), sig(1, 1)], timings(0));
    const force = effects.find((e) => e.type === 'armForceExit');
    assert.ok(force && force.type === 'armForceExit');
    assert.deepEqual(force.at, at(1 + 60 + 15));
  });
});
