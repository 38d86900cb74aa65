// Before the controller drains or deletes a pod to replace it, it asks the API server whether
// the replacement would be accepted: a server-side dry-run create (dryRun=All) of the pod at
// the update revision. The CRD cannot check everything a Pod carries (resources, affinity
// and securityContext are core types the API server validates only on the pod, admission
// such as PodSecurity runs only then), and a drained pod whose replacement is refused left
// an ordinal with nothing running. The answer (the API server's own message) goes to the
// planner, which holds every drain, delete and create of that revision (ReplacementRejected).
import type { V1Pod } from '@kubernetes/client-node';
import { KubeApiError, type KubeStatus } from '../../k8s/client.js';
import type { CallOptions, ResourceClient } from '../../k8s/resources.js';

/** The API server's answer to a dry-run (or a real) create of a pod at one revision. */
export interface ReplacementVerdict {
  /** AtlantisDeployment uid + revision the answer is for. */
  uid: string;
  revision: string;
  /** The API server's message when it refused the pod; null = accepted. */
  rejected: string | null;
  /** Epoch ms of the answer. */
  at: number;
}

/**
 * A refusal is asked again this often: it can depend on things outside the spec (the
 * namespace's PodSecurity labels, a LimitRange, an admission webhook) that may be fixed.
 */
export const REJECTED_RECHECK_MS = 30_000;

/**
 * Which answers mean "this pod will never be created as it is": invalid (422), malformed (400),
 * or refused by admission (403, e.g. PodSecurity). A quota refusal is not one of them: the
 * dry-run pod is one more pod, while a replacement takes the place of the pod it replaces.
 */
export function rejectionOf(status: number, body: unknown): string | null {
  if (status !== 400 && status !== 403 && status !== 422) return null;
  const st = (typeof body === 'object' && body !== null ? body : {}) as KubeStatus;
  const message = st.message ?? (typeof body === 'string' ? body : `HTTP ${status}`);
  if (status === 403 && /exceeded quota/i.test(message)) return null;
  return message;
}

/** The verdict to plan with when it is still good for this object and revision; else undefined (ask again). */
export function usableVerdict(
  v: ReplacementVerdict | undefined,
  uid: string,
  revision: string,
  now: number,
): ReplacementVerdict | undefined {
  if (!v || v.uid !== uid || v.revision !== revision) return undefined;
  if (v.rejected !== null && now - v.at >= REJECTED_RECHECK_MS) return undefined;
  return v;
}

/**
 * A dry-run create of `pod` under a generated name (`<pod name>-dry-run-xxxxx`): a dry-run
 * with the real name would meet the pod it replaces (409) before some checks. Throws on an
 * answer that says nothing about the pod (5xx, 404 namespace gone, network error): no drain
 * starts on a guess.
 */
export async function dryRunCreate(
  pods: ResourceClient<V1Pod>,
  namespace: string,
  pod: V1Pod,
  o: CallOptions = {},
): Promise<string | null> {
  const { name, ...metadata } = pod.metadata ?? {};
  const body: V1Pod = { ...pod, metadata: { ...metadata, generateName: `${name ?? 'pod'}-dry-run-` } };
  try {
    await pods.create(namespace, body, { ...o, query: { dryRun: 'All' } });
    return null;
  } catch (e) {
    if (!(e instanceof KubeApiError)) throw e;
    const rejected = rejectionOf(e.status, e.body);
    if (rejected !== null) return rejected;
    if (e.status === 403) return null; // quota: see rejectionOf
    throw e;
  }
}
