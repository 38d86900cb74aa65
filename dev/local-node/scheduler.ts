// The scheduler for this one node: binds pending pods whose nodeSelector and required node
// affinity match the node's labels; others get PodScheduled=False/Unschedulable.
import type { V1NodeSelectorRequirement, V1Pod } from '@kubernetes/client-node';
import { kubeRequest, STRATEGIC_MERGE_PATCH } from '../../src/k8s/client.js';
import { errMsg, now, type NodeCtx } from './types.js';

export function fits(n: NodeCtx, pod: V1Pod): { ok: boolean; why?: string } {
  for (const [k, v] of Object.entries(pod.spec?.nodeSelector ?? {})) {
    if (n.labels[k] !== v) return { ok: false, why: "node(s) didn't match Pod's node affinity/selector" };
  }
  const terms = pod.spec?.affinity?.nodeAffinity?.requiredDuringSchedulingIgnoredDuringExecution?.nodeSelectorTerms;
  if (terms && terms.length > 0) {
    const any = terms.some(
      (t) =>
        (t.matchExpressions ?? []).every((e) => matchExpr(n, e)) &&
        (t.matchFields ?? []).every((e) => e.key !== 'metadata.name' || matchExpr(n, { ...e, key: '__name' })),
    );
    if (!any) return { ok: false, why: "node(s) didn't match Pod's node affinity/selector" };
  }
  return { ok: true };
}

export function matchExpr(n: NodeCtx, e: V1NodeSelectorRequirement): boolean {
  const val = e.key === '__name' ? n.name : n.labels[e.key];
  const vals = e.values ?? [];
  switch (e.operator) {
    case 'In':
      return val !== undefined && vals.includes(val);
    case 'NotIn':
      return val === undefined || !vals.includes(val);
    case 'Exists':
      return val !== undefined;
    case 'DoesNotExist':
      return val === undefined;
    case 'Gt':
      return val !== undefined && Number(val) > Number(vals[0]);
    case 'Lt':
      return val !== undefined && Number(val) < Number(vals[0]);
    default:
      return false;
  }
}

/** `inFlight` holds the uids being scheduled, so that a pod is bound once. */
export async function schedule(n: NodeCtx, pod: V1Pod, inFlight: Set<string>): Promise<void> {
  const md = pod.metadata ?? {};
  if (n.stopped || pod.spec?.nodeName || md.deletionTimestamp) return;
  const sched = pod.spec?.schedulerName;
  if (sched && sched !== 'default-scheduler') return;
  if (pod.status?.phase === 'Succeeded' || pod.status?.phase === 'Failed') return;
  const key = md.uid ?? '';
  if (inFlight.has(key)) return;
  inFlight.add(key);
  try {
    const fit = fits(n, pod);
    const ns = md.namespace ?? 'default';
    if (!fit.ok) {
      const msg = `0/1 nodes are available: 1 ${fit.why}. preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.`;
      const cur = pod.status?.conditions?.find((c) => c.type === 'PodScheduled');
      if (cur?.status === 'False' && cur.message === msg) return;
      await kubeRequest(
        n.kc,
        'PATCH',
        `/api/v1/namespaces/${ns}/pods/${md.name}/status`,
        {
          status: {
            phase: 'Pending',
            conditions: [
              {
                type: 'PodScheduled',
                status: 'False',
                reason: 'Unschedulable',
                message: msg,
                lastProbeTime: null,
                lastTransitionTime: now(),
              },
            ],
          },
        },
        { contentType: STRATEGIC_MERGE_PATCH },
      );
      return;
    }
    const res = await kubeRequest(n.kc, 'POST', `/api/v1/namespaces/${ns}/pods/${md.name}/binding`, {
      apiVersion: 'v1',
      kind: 'Binding',
      metadata: { name: md.name, namespace: ns, uid: md.uid },
      target: { apiVersion: 'v1', kind: 'Node', name: n.name },
    });
    if (res.status === 201 || res.status === 200) {
      n.record({ type: 'Scheduled', namespace: ns, pod: md.name ?? '', uid: key, message: `bound to ${n.name}` });
    } else if (res.status !== 409 && res.status !== 404) {
      n.log.warn('Binding failed', { pod: `${ns}/${md.name}`, status: res.status });
    }
  } catch (err) {
    n.log.warn('Scheduling failed', { err: errMsg(err) });
  } finally {
    inFlight.delete(key);
  }
}
