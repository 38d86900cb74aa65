// Carries out the drain state machine's effects: flips the tracker's shutting-down flag,
// arms the deadline and last-resort timers, interrupts terraform, and asks the server to
// exit. All decisions live in drain-state.ts; this file only does I/O and timing.
import { type LongTimeout, setLongTimeout } from '../../async.js';
import type { DrainTrigger } from '../../contract/drain-protocol.js';
import type { LogFields, Logger } from '../../log.js';
import type { ServerMetrics } from '../metrics.js';
import type { ProcessRunner } from '../terraform/runner.js';
import { type DrainEffect, type DrainEvent, type DrainState, type DrainTimings, initialDrainState, nextDrainState } from './drain-state.js';
import type { OperationTracker } from './operation-tracker.js';

export interface DrainCoordinatorDeps {
  tracker: OperationTracker;
  runner: ProcessRunner;
  timings: DrainTimings;
  logger: Logger;
  metrics: ServerMetrics;
  /** Called once, with the exit code, when the drain is over. */
  onExit: (code: number) => void;
}

export class DrainCoordinator {
  private current: DrainState = initialDrainState;
  private readonly timers = new Set<LongTimeout>();

  constructor(private readonly deps: DrainCoordinatorDeps) {}

  get state(): DrainState {
    return this.current;
  }

  /**
   * A drain request from a signal, the pod annotation, or the `drain` command; `details`
   * (e.g. the annotation's value) go in its log line. The request that starts the drain is
   * logged as "Drain started" once it has taken effect (see refuseNewWork); later ones as
   * "Drain requested".
   */
  trigger(trigger: DrainTrigger, details: LogFields = {}): void {
    const { phase } = this.current;
    const inProgressOperations = this.deps.tracker.inProgress;
    if (phase !== 'serving') this.deps.logger.info('Drain requested', { trigger, ...details, inProgressOperations, phase });
    this.dispatch({ type: 'trigger', trigger, at: new Date(), inProgress: inProgressOperations }, details);
  }

  /** Stops the timers, e.g. when a test closes the server. */
  dispose(): void {
    for (const t of this.timers) t.clear();
    this.timers.clear();
  }

  /** `details`: extra fields for the log line of the trigger being dispatched. */
  private dispatch(event: DrainEvent, details: LogFields = {}): void {
    const { state, effects } = nextDrainState(this.current, event, this.deps.timings);
    this.current = state;
    for (const e of effects) this.apply(e, details);
  }

  private apply(effect: DrainEffect, details: LogFields): void {
    const { tracker, runner, logger, metrics } = this.deps;
    switch (effect.type) {
      case 'refuseNewWork':
        // First, before any log line: when nothing runs, shutDown() answers the /status
        // requests held for this drain, and on a node short of CPU every statement ahead of
        // that answer can cost a time slice. `since` is when the drain took effect.
        tracker.shutDown();
        metrics.draining.set(1);
        logger.info('Drain started', {
          reason: this.current.reason,
          ...details,
          since: this.current.since?.toISOString(),
          inProgressOperations: tracker.inProgress,
        });
        // No operation can start any more, so the first idle moment is final.
        void tracker.waitIdle().then(() => this.dispatch({ type: 'idle', at: new Date() }));
        break;
      case 'armDeadline':
        this.arm(effect.at, () => this.dispatch({ type: 'deadline', at: new Date(), inProgress: tracker.inProgress }));
        break;
      case 'interruptTerraform':
        logger.warn('Drain deadline reached, interrupting terraform', {
          inProgressOperations: tracker.inProgress,
          processes: runner.running().length,
        });
        runner.interruptAll();
        break;
      case 'armForceExit':
        this.arm(effect.at, () => this.dispatch({ type: 'forceExit', at: new Date() }));
        break;
      case 'exit':
        this.dispose();
        logger.info('Drain finished', { exitCode: effect.code, interrupted: this.current.interrupted });
        this.deps.onExit(effect.code);
        break;
    }
  }

  private arm(at: Date, fn: () => void): void {
    // A long --drain-timeout (720h) must not overflow Node's timer and fire at once.
    const t = setLongTimeout(
      () => {
        this.timers.delete(t);
        fn();
      },
      Math.max(0, at.getTime() - Date.now()),
    );
    this.timers.add(t);
  }
}
