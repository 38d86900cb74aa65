// Pod status like kubelet's: phase, conditions and container statuses from the runtime
// records, written with a strategic-merge patch only when it changed.
import type { V1ContainerStatus, V1Pod, V1PodCondition } from '@kubernetes/client-node';
import { kubeRequest, STRATEGIC_MERGE_PATCH } from '../../src/k8s/client.js';
import { containerIdOf, isPodContainer } from './container-runtime.js';
import { isOurImage } from './env.js';
import { now, type CRt, type NodeCtx, type PodRt, type TerminatedInfo } from './types.js';

export function containerStatus(n: NodeCtx, rt: PodRt, c: CRt): V1ContainerStatus {
  const term = (t: TerminatedInfo) => ({
    exitCode: t.exitCode,
    signal: t.signal,
    reason: t.reason,
    message: t.message,
    startedAt: t.startedAt,
    finishedAt: t.finishedAt,
    containerID: t.containerID,
  });
  let state: Record<string, unknown>;
  if (c.state === 'running') state = { running: { startedAt: c.startedAt }, waiting: null, terminated: null };
  else if (c.state === 'terminated' && c.terminated) state = { terminated: term(c.terminated), waiting: null, running: null };
  else
    state = {
      waiting: {
        reason: c.waitingReason || rt.setupError?.reason || 'ContainerCreating',
        ...(c.waitingMessage || rt.setupError?.message ? { message: c.waitingMessage ?? rt.setupError?.message } : {}),
      },
      running: null,
      terminated: null,
    };
  const last = c.lastTerminated ? { terminated: term(c.lastTerminated), waiting: null, running: null } : {};
  const ours = isOurImage(n, c.spec.image);
  return {
    name: c.spec.name,
    image: c.spec.image ?? '',
    imageID: isPodContainer(c.proc) ? `sha256:${c.proc.imageId}` : ours ? `local://${c.spec.image}` : '',
    ...(c.proc ? { containerID: containerIdOf(c.proc) } : {}),
    ready: c.ready,
    started: c.state === 'running' && c.started,
    restartCount: c.restartCount,
    state,
    lastState: last,
  } as unknown as V1ContainerStatus;
}

export function podStatus(n: NodeCtx, rt: PodRt): Record<string, unknown> {
  const cs = [...rt.containers.values()];
  const policy = rt.pod.spec?.restartPolicy ?? 'Always';
  const anyRunning = cs.some((c) => c.state === 'running');
  const everRan = cs.some((c) => c.state !== 'waiting' || c.restartCount > 0 || c.lastTerminated);
  const allDone = cs.length > 0 && cs.every((c) => c.state === 'terminated');
  let phase = 'Pending';
  if (allDone && policy !== 'Always') {
    const allOk = cs.every((c) => c.terminated?.exitCode === 0);
    phase = allOk ? 'Succeeded' : policy === 'Never' ? 'Failed' : 'Running';
  } else if (anyRunning || everRan) phase = 'Running';
  if (rt.evicted) phase = 'Failed';
  const notReady = cs.filter((c) => !c.ready).map((c) => c.spec.name);
  const gates = (rt.pod.spec?.readinessGates ?? []).every((g) =>
    rt.pod.status?.conditions?.some((x) => x.type === g.conditionType && x.status === 'True'),
  );
  const containersReady = notReady.length === 0 && !rt.terminating;
  const ready = containersReady && gates;
  const prev = rt.pod.status?.conditions ?? [];
  const t = now();
  const cond = (type: string, status: boolean, reason?: string, message?: string): V1PodCondition => {
    const s = status ? 'True' : 'False';
    const old = prev.find((p) => p.type === type);
    return {
      type,
      status: s,
      reason: reason ?? (null as unknown as undefined),
      message: message ?? (null as unknown as undefined),
      lastProbeTime: null as unknown as undefined,
      lastTransitionTime: (old && old.status === s ? old.lastTransitionTime : t) as unknown as Date,
    };
  };
  const unready = notReady.length ? `containers with unready status: [${notReady.join(' ')}]` : undefined;
  const conditions = [
    cond('PodReadyToStartContainers', rt.setupDone),
    cond('Initialized', true),
    cond('ContainersReady', containersReady, containersReady ? undefined : 'ContainersNotReady', containersReady ? undefined : unready),
    cond(
      'Ready',
      ready,
      ready ? undefined : containersReady ? 'ReadinessGatesNotReady' : 'ContainersNotReady',
      ready ? undefined : containersReady ? 'the status of pod readiness gate is not "True"' : unready,
    ),
    cond('PodScheduled', true),
    ...(rt.evicted ? [cond('DisruptionTarget', true, 'TerminationByKubelet', rt.evicted.message)] : []),
  ];
  const status: Record<string, unknown> = {
    phase,
    conditions,
    hostIP: '127.0.0.1',
    hostIPs: [{ ip: '127.0.0.1' }],
    startTime: rt.startTime,
    containerStatuses: cs.map((c) => containerStatus(n, rt, c)),
  };
  if (rt.evicted) {
    status.reason = 'Evicted';
    status.message = rt.evicted.message;
  }
  if (rt.ip) {
    status.podIP = rt.ip;
    status.podIPs = [{ ip: rt.ip }];
  }
  return status;
}

export async function writeStatus(n: NodeCtx, rt: PodRt): Promise<void> {
  if (rt.removed || n.stopped) return;
  if (rt.statusWriting) {
    rt.statusAgain = true;
    return;
  }
  rt.statusWriting = true;
  try {
    for (let i = 0; i < 10; i++) {
      rt.statusAgain = false;
      const status = podStatus(n, rt);
      const key = JSON.stringify(status, (k, v: unknown) => (k === 'lastTransitionTime' ? undefined : v));
      if (key !== rt.lastStatus) {
        const res = await kubeRequest<V1Pod>(
          n.kc,
          'PATCH',
          `/api/v1/namespaces/${rt.namespace}/pods/${rt.name}/status`,
          { metadata: { uid: rt.uid }, status },
          { contentType: STRATEGIC_MERGE_PATCH },
        );
        if (res.status === 200) {
          rt.lastStatus = key;
          if (res.body?.metadata?.uid === rt.uid) rt.pod = { ...rt.pod, status: res.body.status };
        } else if (res.status === 404 || res.status === 409) {
          return;
        } else {
          throw new Error(`HTTP ${res.status}: ${JSON.stringify(res.body).slice(0, 300)}`);
        }
      }
      if (!rt.statusAgain) break;
    }
  } finally {
    rt.statusWriting = false;
  }
}
