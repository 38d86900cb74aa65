// The drain lifecycle as a pure state machine: (state, event) -> (state, effects).
// The coordinator feeds it signals, annotation changes, timer expiries and "no operation
// left", and carries out the effects (refuse work, arm timers, interrupt terraform, exit).
//
// Rules (SPEC section 4, with the deviations documented in docs/drain.md):
// - The first trigger starts the drain; new work is refused from then on.
// - The --drain-timeout clock starts with the first SIGTERM/SIGINT or `drain` command.
//   A drain started by the pod annotation has no server-side deadline: the controller owns
//   that timeout (updateStrategy.onDrainTimeout) and ends it by deleting the pod.
// - A second SIGTERM/SIGINT means the deadline is reached now.
// - At the deadline, running terraform gets SIGINT (the runner escalates to SIGKILL after
//   --terraform-interrupt-grace); a last-resort timer makes sure the process still exits.
// - Idle after a signal or the `drain` command: exit 0, or EXIT_INTERRUPTED when terraform
//   had to be interrupted. Idle after an annotation drain: stay up reporting
//   shutting_down=true / 0 operations until the pod is deleted; exiting would only make the
//   kubelet restart the container, and the controller could miss the drained state.

import type { DrainTrigger } from '../../contract/drain-protocol.js';

export type DrainPhase = 'serving' | 'draining' | 'interrupting' | 'exited';

export const EXIT_DRAINED = 0;
export const EXIT_INTERRUPTED = 3;

export interface DrainState {
  phase: DrainPhase;
  /** The trigger that started the drain. */
  reason: DrainTrigger | null;
  since: Date | null;
  /** SIGTERM/SIGINT received so far. */
  signals: number;
  deadlineAt: Date | null;
  /** Whether reaching zero operations ends the process. */
  exitWhenIdle: boolean;
  /** Whether terraform had to be interrupted. */
  interrupted: boolean;
}

export type DrainEvent =
  | { type: 'trigger'; trigger: DrainTrigger; at: Date; inProgress: number }
  | { type: 'deadline'; at: Date; inProgress: number }
  | { type: 'idle'; at: Date }
  | { type: 'forceExit'; at: Date };

export type DrainEffect =
  | { type: 'refuseNewWork' }
  | { type: 'armDeadline'; at: Date }
  | { type: 'interruptTerraform' }
  | { type: 'armForceExit'; at: Date }
  | { type: 'exit'; code: number };

export interface DrainTimings {
  drainTimeoutMs: number;
  interruptGraceMs: number;
  /** Extra time after SIGKILL for the interrupted operations to post their comments. */
  forceExitMarginMs: number;
}

export const initialDrainState: DrainState = {
  phase: 'serving',
  reason: null,
  since: null,
  signals: 0,
  deadlineAt: null,
  exitWhenIdle: false,
  interrupted: false,
};

export interface Transition {
  state: DrainState;
  effects: DrainEffect[];
}

export function nextDrainState(state: DrainState, event: DrainEvent, t: DrainTimings): Transition {
  if (state.phase === 'exited') return { state, effects: [] };
  switch (event.type) {
    case 'trigger':
      return onTrigger(state, event.trigger, event.at, event.inProgress, t);
    case 'deadline':
      return reachDeadline(state, event.at, event.inProgress, t);
    case 'idle':
      return exitIfIdle(state, []);
    case 'forceExit':
      return { state: { ...state, phase: 'exited' }, effects: [{ type: 'exit', code: EXIT_INTERRUPTED }] };
  }
}

function onTrigger(state: DrainState, trigger: DrainTrigger, at: Date, inProgress: number, t: DrainTimings): Transition {
  const effects: DrainEffect[] = [];
  let s = { ...state };
  if (s.phase === 'serving') {
    s = { ...s, phase: 'draining', reason: trigger, since: at };
    effects.push({ type: 'refuseNewWork' });
  }
  if (trigger === 'signal') {
    s.signals += 1;
    if (s.signals >= 2) return reachDeadline(s, at, inProgress, t, effects);
  }
  if (trigger !== 'annotation') {
    s.exitWhenIdle = true;
    if (s.deadlineAt === null && t.drainTimeoutMs > 0 && s.phase === 'draining' && inProgress > 0) {
      s.deadlineAt = new Date(at.getTime() + t.drainTimeoutMs);
      effects.push({ type: 'armDeadline', at: s.deadlineAt });
    }
  }
  return inProgress === 0 ? exitIfIdle(s, effects) : { state: s, effects };
}

function reachDeadline(state: DrainState, at: Date, inProgress: number, t: DrainTimings, effects: DrainEffect[] = []): Transition {
  if (state.phase === 'serving') return { state, effects };
  // A deadline ends the drain whatever started it: the process is going away.
  const s = { ...state, exitWhenIdle: true };
  if (inProgress === 0) return exitIfIdle(s, effects);
  if (s.phase === 'interrupting') return { state: s, effects };
  const forceAt = new Date(at.getTime() + t.interruptGraceMs + t.forceExitMarginMs);
  return {
    state: { ...s, phase: 'interrupting', interrupted: true, deadlineAt: s.deadlineAt ?? at },
    effects: [...effects, { type: 'interruptTerraform' }, { type: 'armForceExit', at: forceAt }],
  };
}

function exitIfIdle(state: DrainState, effects: DrainEffect[]): Transition {
  if (state.phase === 'serving' || !state.exitWhenIdle) return { state, effects };
  return {
    state: { ...state, phase: 'exited' },
    effects: [...effects, { type: 'exit', code: state.interrupted ? EXIT_INTERRUPTED : EXIT_DRAINED }],
  };
}
