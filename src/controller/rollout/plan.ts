// The rollout planner's input and output: what it observes, the actions it plans, and why
// pods wait. Shared by the planner's parts (classify, guards, status, events).
import type { AtlantisDeploymentStatus, OnDrainTimeout, StatusProbe } from '../types.js';

export type PodPhase = 'Pending' | 'Running' | 'Succeeded' | 'Failed' | 'Unknown';

export interface PodObservation {
  ordinal: number;
  name: string;
  uid: string;
  /** Value of the revision label; null when missing (a pod from elsewhere is always outdated). */
  revision: string | null;
  phase: PodPhase;
  /** The pod's Ready condition. */
  ready: boolean;
  deletionTimestamp: Date | null;
  /** Raw drain annotation; null or '' = not draining. */
  drainAnnotation: string | null;
  /** Raw drain-started-at annotation (written by the controller for hand drains). */
  drainStartedAtAnnotation: string | null;
  /** The server container's state.waiting.reason (CrashLoopBackOff, ImagePullBackOff, ...). */
  waitingReason: string | null;
  /** The server container's restartCount: a /status answer belongs to one container. */
  restarts?: number;
  /** PodScheduled=False with reason Unschedulable: no node fits the pod (now). */
  unschedulable?: boolean;
  createdAt: Date | null;
  /** The last /status poll; null when not polled (no pod IP yet, or not draining). */
  status: StatusProbe | null;
}

/** The named rollout guards (guards.ts); each can hold a pod back on its own. */
export type GuardName =
  | 'Paused'
  | 'ReplacementRejected'
  | 'MaxUnavailableReached'
  | 'HigherOrdinalFirst'
  | 'DrainInProgress'
  | 'OperationsInProgress'
  | 'StatusUnreachable'
  | 'DrainTimeout'
  | 'WaitingForReadiness'
  | 'Terminating'
  | 'WaitingForTermination'
  | SurgeGuardName;

/** Guards consulted only with maxSurge > 0. */
export type SurgeGuardName = 'MaxSurgeReached' | 'WaitingForSurgePod' | 'ReplacementNotReady' | 'LeavingService';

export interface RolloutSpec {
  replicas: number;
  /** Revision of the current spec (podTemplateRevision). */
  updateRevision: string;
  maxUnavailable: number;
  paused: boolean;
  /** 0 = no timeout. */
  drainTimeoutSeconds: number;
  onDrainTimeout: OnDrainTimeout;
  /**
   * New-revision pods started beside the old ones (updateStrategy.maxSurge, defaulted).
   * Absent = 0. Only honoured when pods need no PVC (`dataClaims` false).
   */
  maxSurge?: number;
  /**
   * Each ordinal's pod mounts the ordinal's PVC (the embedded store): pods are named
   * `<name>-<ordinal>` and an ordinal has one pod at a time. false (Redis): no PVC, pods named
   * `<name>-<ordinal>-<revision>`. Absent = true.
   */
  dataClaims?: boolean;
}

export interface ObservedState {
  name: string;
  namespace: string;
  /** metadata.generation, reported as observedGeneration. */
  generation: number;
  spec: RolloutSpec;
  /** Every pod owned by the AtlantisDeployment, any ordinal, terminating ones included. */
  pods: PodObservation[];
  /** Ordinals whose PVC exists. */
  pvcOrdinals: number[];
  /** status as last written, so conditions keep lastTransitionTime and events fire once. */
  previousStatus?: AtlantisDeploymentStatus | null;
  /**
   * The API server's message when it refused a dry-run create of a pod at
   * spec.updateRevision; null/absent = accepted or not checked (no replacement needed).
   */
  replacementRejected?: string | null;
}

export interface PlannerOptions {
  /** How soon to poll /status again while a drain is in progress. */
  statusPollIntervalMs?: number;
  /** An up-to-date pod not Ready after this long since creation makes the deployment Degraded. */
  progressDeadlineSeconds?: number;
}

export const DEFAULT_STATUS_POLL_INTERVAL_MS = 500;
export const DEFAULT_PROGRESS_DEADLINE_SECONDS = 600;

export type EventReason =
  | 'DrainStarted'
  | 'Drained'
  | 'DrainTimeout'
  | 'PodReplaced'
  | 'ReplacementRejected'
  | 'RolloutComplete'
  | 'SurgePodCreated';

/** Why a pod is deleted: Drained (status said shutting_down and 0 operations), DrainTimeout
 * (onDrainTimeout Interrupt), NotRunning (no terraform can run in it), Failed (phase Failed/Succeeded). */
export type DeleteReason = 'Drained' | 'DrainTimeout' | 'NotRunning' | 'Failed';

export type Action =
  | { type: 'createPVC'; ordinal: number; name: string }
  /** `surge`: created beside the ordinal's live pod(s), which are drained once it is Ready. */
  | { type: 'createPod'; ordinal: number; name: string; revision: string; surge?: boolean }
  /** Patch metadata.annotations[atlantis-operator.dev/drain] = value (an RFC 3339 time). */
  | { type: 'startDrain'; ordinal: number; podName: string; uid: string; value: string }
  /** Patch atlantis-operator.dev/drain-started-at = value on a hand-drained pod, so its timeout has a start. */
  | { type: 'stampDrainStart'; ordinal: number; podName: string; uid: string; value: string }
  /** Delete with preconditions.uid = uid. `replace`: the ordinal is recreated once the pod is gone. */
  | {
      type: 'deletePod';
      ordinal: number;
      podName: string;
      uid: string;
      reason: DeleteReason;
      replace: boolean;
      /** Seconds from drain start to this delete, for atlantis_operator_drain_duration_seconds; null when not drained. */
      drainDurationSeconds: number | null;
    }
  | { type: 'emitEvent'; eventType: 'Normal' | 'Warning'; reason: EventReason; message: string; podName: string | null };

export type ActionType = Action['type'];

export interface PodWait {
  ordinal: number;
  podName: string;
  guards: GuardName[];
  message: string;
}

export interface Plan {
  actions: Action[];
  /** Pods (and missing ordinals) held back, with the guards holding them. */
  waiting: PodWait[];
  /** Requeue hint; null = only watch events need to wake the controller. */
  requeueAfterMs: number | null;
  status: AtlantisDeploymentStatus;
  /** Every desired pod exists, is up to date, Ready and not draining; nothing extra is left. */
  complete: boolean;
}
