// How the planner's view of a pod (PodObservation, plan.ts) is built from a V1Pod plus the last
// /status poll. Kept separate so the planner never depends on client-node object details.
import type { V1OwnerReference, V1PersistentVolumeClaim, V1Pod } from '@kubernetes/client-node';
import { ANNOTATION_DRAIN } from '../../contract/drain-protocol.js';
import {
  ANNOTATION_DRAIN_STARTED_AT,
  LABEL_INSTANCE,
  LABEL_ORDINAL,
  LABEL_REVISION,
  SERVER_CONTAINER,
  type AtlantisDeployment,
  type StatusProbe,
} from '../types.js';
import { parseOrdinal } from '../resources/names.js';
import { withDefaults } from '../resources/defaults.js';
import { usesDataClaims } from '../resources/pvc.js';
import type { ObservedState, PodObservation, PodPhase } from './plan.js';

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
    restarts: server?.restartCount ?? 0,
    unschedulable: (pod.status?.conditions ?? []).some(
      (c) => c.type === 'PodScheduled' && c.status === 'False' && c.reason === 'Unschedulable',
    ),
    createdAt: asDate(md.creationTimestamp),
    status,
  };
}

/**
 * The planner's input from an AtlantisDeployment, the pods and PVCs the informers hold, and
 * the last /status poll per pod uid. Pods owned by another object (by uid) or without an
 * ordinal are left out; PVC ordinals come from their names (`<name>-data-<ordinal>`).
 */
export function observeDeployment(
  ad: AtlantisDeployment,
  updateRevision: string,
  pods: readonly V1Pod[],
  pvcs: readonly V1PersistentVolumeClaim[],
  probes: ReadonlyMap<string, StatusProbe>,
): ObservedState {
  const name = ad.metadata.name ?? '';
  const uid = ad.metadata.uid;
  const spec = withDefaults(ad.spec);
  const owned = (refs: V1OwnerReference[] | undefined): boolean => !uid || !refs?.length || refs.some((r) => r.uid === uid);
  const observed: PodObservation[] = [];
  for (const p of pods) {
    if (!owned(p.metadata?.ownerReferences)) continue;
    if (p.metadata?.labels?.[LABEL_INSTANCE] !== name) continue;
    const o = observePod(p, (p.metadata?.uid && probes.get(p.metadata.uid)) || null);
    if (o) observed.push(o);
  }
  const prefix = `${name}-data-`;
  const pvcOrdinals: number[] = [];
  for (const c of pvcs) {
    const n = c.metadata?.name ?? '';
    if (!n.startsWith(prefix) || c.metadata?.deletionTimestamp) continue;
    const ord = parseOrdinal(n.slice(prefix.length));
    if (ord !== null) pvcOrdinals.push(ord);
  }
  // Pods without a PVC (Redis) are named by revision; a surge needs them (two pods cannot share one PVC).
  const dataClaims = usesDataClaims(spec);
  const maxSurge = dataClaims ? 0 : spec.updateStrategy.maxSurge;
  return {
    name,
    namespace: ad.metadata.namespace ?? '',
    generation: ad.metadata.generation ?? 0,
    spec: {
      replicas: spec.replicas,
      updateRevision,
      maxUnavailable: spec.updateStrategy.maxUnavailable,
      paused: spec.paused,
      drainTimeoutSeconds: spec.updateStrategy.drainTimeoutSeconds,
      onDrainTimeout: spec.updateStrategy.onDrainTimeout,
      // Only when they differ from the embedded store's, which their absence means.
      ...(maxSurge > 0 ? { maxSurge } : {}),
      ...(dataClaims ? {} : { dataClaims: false }),
    },
    pods: observed,
    pvcOrdinals: pvcOrdinals.sort((a, b) => a - b),
    previousStatus: ad.status ?? null,
  };
}
