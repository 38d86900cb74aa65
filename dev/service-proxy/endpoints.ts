// The endpoints of a Service, derived from its Pods the way the EndpointSlice controller
// does (the local cluster runs no such controller, and the API server refuses loopback
// addresses in EndpointSlices), and the choices the proxy makes with them. Pure functions.
import type { V1Pod, V1Service, V1ServicePort } from '@kubernetes/client-node';

/** One Ready pod behind one TCP port of a Service. */
export interface Endpoint {
  /** the Service's port (spec.ports[].port) this endpoint serves */
  servicePort: number;
  podName: string;
  ip: string;
  /** the pod's port: the resolved targetPort */
  port: number;
}

/** Why a pod is not an endpoint of a Service (for the change log). */
export type Exclusion = 'not selected' | 'terminal' | 'no IP' | 'terminating' | 'not ready' | 'no such port';

/** Ports kube-proxy would program for a Service: TCP only (the proxy forwards TCP), none for ExternalName or headless. */
export function proxiedPorts(service: V1Service): V1ServicePort[] {
  const spec = service.spec;
  if (!spec || spec.type === 'ExternalName' || spec.clusterIP === 'None') return [];
  return (spec.ports ?? []).filter((p) => (p.protocol ?? 'TCP') === 'TCP');
}

/**
 * True when the Service selects the pod. A Service without a selector (or an empty one: the
 * API server stores it as none) gets no endpoints from the controller, so it selects nothing.
 */
export function selects(service: V1Service, pod: V1Pod): boolean {
  const sel = service.spec?.selector;
  if (!sel || Object.keys(sel).length === 0) return false;
  if ((pod.metadata?.namespace ?? '') !== (service.metadata?.namespace ?? '')) return false;
  const labels = pod.metadata?.labels ?? {};
  return Object.entries(sel).every(([k, v]) => labels[k] === v);
}

function podReady(pod: V1Pod): boolean {
  return pod.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') ?? false;
}

function podIP(pod: V1Pod): string | undefined {
  return pod.status?.podIP || pod.status?.podIPs?.[0]?.ip || undefined;
}

/** Why the pod is no endpoint of the Service at all (any port), or undefined when it is one. */
export function exclusionOf(service: V1Service, pod: V1Pod): Exclusion | undefined {
  if (!selects(service, pod)) return 'not selected';
  const phase = pod.status?.phase;
  if (phase === 'Succeeded' || phase === 'Failed') return 'terminal';
  if (!podIP(pod)) return 'no IP';
  // The controller marks an endpoint ready only when the pod is Ready and not terminating,
  // unless the Service publishes not-ready addresses.
  if (service.spec?.publishNotReadyAddresses) return undefined;
  if (pod.metadata?.deletionTimestamp) return 'terminating';
  if (!podReady(pod)) return 'not ready';
  return undefined;
}

/**
 * The pod's port for a Service port: a number as it is; a name looked up among the pod's
 * container ports of the same protocol (and those of sidecars: init containers with
 * restartPolicy Always); none when unset (the API server defaults it to `port`, as here).
 * Undefined when a named port is not found: the pod is then no endpoint of that port.
 */
export function targetPortOf(sp: V1ServicePort, pod: V1Pod): number | undefined {
  const t = sp.targetPort;
  if (t === undefined || t === '' || t === 0) return sp.port;
  if (typeof t === 'number') return t;
  const protocol = sp.protocol ?? 'TCP';
  const sidecars = (pod.spec?.initContainers ?? []).filter((c) => c.restartPolicy === 'Always');
  for (const c of [...(pod.spec?.containers ?? []), ...sidecars]) {
    for (const p of c.ports ?? []) if (p.name === t && (p.protocol ?? 'TCP') === protocol) return p.containerPort;
  }
  return undefined;
}

/** The Ready endpoints of each proxied port of the Service, sorted by service port, then pod name. */
export function endpointsOf(service: V1Service, pods: readonly V1Pod[]): Endpoint[] {
  const out: Endpoint[] = [];
  const ports = proxiedPorts(service);
  if (ports.length === 0) return out;
  for (const pod of pods) {
    if (exclusionOf(service, pod) !== undefined) continue;
    const ip = podIP(pod)!;
    const podName = pod.metadata?.name ?? '';
    for (const sp of ports) {
      const port = targetPortOf(sp, pod);
      if (port !== undefined) out.push({ servicePort: sp.port, podName, ip, port });
    }
  }
  return out.sort((a, b) => a.servicePort - b.servicePort || a.podName.localeCompare(b.podName));
}

/** `pod@ip:port`, the form endpoints take in the log. */
export function endpointText(e: Endpoint): string {
  return `${e.podName}@${e.ip}:${e.port}`;
}

export interface EndpointChange {
  added: Endpoint[];
  removed: Endpoint[];
}

/** What changed between two endpoint lists (of one Service); both empty when nothing did. */
export function diffEndpoints(before: readonly Endpoint[], after: readonly Endpoint[]): EndpointChange {
  const key = (e: Endpoint) => `${e.servicePort} ${endpointText(e)}`;
  const was = new Set(before.map(key));
  const now = new Set(after.map(key));
  return { added: after.filter((e) => !was.has(key(e))), removed: before.filter((e) => !now.has(key(e))) };
}

/**
 * The endpoint a new connection goes to: uniformly at random, as kube-proxy's iptables mode
 * picks (its `statistic --mode random` rules); `r` is a number in [0, 1). None without endpoints.
 */
export function pickEndpoint<E>(endpoints: readonly E[], r: number): E | undefined {
  if (endpoints.length === 0) return undefined;
  const i = Math.min(endpoints.length - 1, Math.max(0, Math.floor(r * endpoints.length)));
  return endpoints[i];
}
