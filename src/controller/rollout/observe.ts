// The planner's view of a pod, and how to build it from a V1Pod plus the last /status poll.
// Kept separate so the planner never depends on client-node object details.
import type { V1Pod } from '@kubernetes/client-node';
import {
  ANNOTATION_DRAIN,
  ANNOTATION_DRAIN_STARTED_AT,
  LABEL_ORDINAL,
  LABEL_REVISION,
  SERVER_CONTAINER,
  type StatusProbe,
} from '../types.js';
import { parseOrdinal } from '../resources/names.js';

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
  createdAt: Date | null;
  /** The last /status poll; null when not polled (no pod IP yet, or not draining). */
  status: StatusProbe | null;
}

function asPhase(p: string | undefined): PodPhase {
  return p === 'Pending' || p === 'Running' || p === 'Succeeded' || p === 'Failed' ? p : 'Unknown';
}

function asDate(d: Date | string | undefined): Date | null {
  if (d === undefined) return null;
  const v = d instanceof Date ? d : new Date(d);
  return Number.isNaN(v.getTime()) ? null : v;
}

/** null when the pod has no valid ordinal label (then it is not one of ours to plan for). */
export function observePod(pod: V1Pod, status: StatusProbe | null = null): PodObservation | null {
  const md = pod.metadata ?? {};
  const ordinal = parseOrdinal(md.labels?.[LABEL_ORDINAL]);
  if (ordinal === null || !md.name || !md.uid) return null;
  const containers = pod.status?.containerStatuses ?? [];
  const server = containers.find((c) => c.name === SERVER_CONTAINER) ?? containers[0];
  return {
    ordinal,
    name: md.name,
    uid: md.uid,
    revision: md.labels?.[LABEL_REVISION] ?? null,
    phase: asPhase(pod.status?.phase),
    ready: (pod.status?.conditions ?? []).some((c) => c.type === 'Ready' && c.status === 'True'),
    deletionTimestamp: asDate(md.deletionTimestamp),
    drainAnnotation: md.annotations?.[ANNOTATION_DRAIN] ?? null,
    drainStartedAtAnnotation: md.annotations?.[ANNOTATION_DRAIN_STARTED_AT] ?? null,
    waitingReason: server?.state?.waiting?.reason ?? null,
    createdAt: asDate(md.creationTimestamp),
    status,
  };
}
