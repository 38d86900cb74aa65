// Patch bodies for the planner's pod actions. Merge patches (application/merge-patch+json)
// that carry metadata.uid: the uid is immutable, so a patch meant for a pod that has since
// been replaced by a new pod of the same name fails instead of draining the new pod.
import type { V1DeleteOptions } from '@kubernetes/client-node';
import { ANNOTATION_DRAIN } from '../../contract/drain-protocol.js';
import { ANNOTATION_DRAIN_STARTED_AT } from '../types.js';

export interface PodAnnotationPatch {
  metadata: { uid: string; annotations: Record<string, string> };
}

export function drainPatch(uid: string, value: string): PodAnnotationPatch {
  return { metadata: { uid, annotations: { [ANNOTATION_DRAIN]: value } } };
}

export function drainStartedPatch(uid: string, value: string): PodAnnotationPatch {
  return { metadata: { uid, annotations: { [ANNOTATION_DRAIN_STARTED_AT]: value } } };
}

/** Delete only the pod the plan was made for (SPEC 7.2): a replacement with the same name has another uid. */
export function podDeleteOptions(uid: string): V1DeleteOptions {
  return { apiVersion: 'v1', kind: 'DeleteOptions', preconditions: { uid } };
}
