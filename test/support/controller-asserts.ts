// Observation helpers for the controller tests on the real cluster: a pod recorder that polls
// the pods of one AtlantisDeployment and keeps, per pod UID, when it was first seen draining,
// deleting, gone and Ready (so tests can assert the order of replacements and the
// unavailability budget), plus small status and /status helpers.
import type { V1Pod } from '@kubernetes/client-node';
import type { KubeClientConfig } from '../../src/k8s/kubeconfig.js';
import type { StatusResponse } from '../../src/server/http/app.js';
import { apiPath, kubeRequestOk } from '../../src/k8s/client.js';
import { KIND, type AtlantisCondition, type AtlantisDeployment, type ConditionType } from '../../src/controller/types.js';
import { getAd, isReady, listPods } from './controller.js';
import { readFileOr, waitFor, type LocalNodeHandle } from './k8s.js';

export const DRAIN = 'atlantis-operator.dev/drain';
export const REVISION = 'atlantis-operator.dev/revision';

export interface PodRecord {
  uid: string;
  name: string;
  revision: string;
  /** Order numbers (a global counter, increasing with every poll) and wall times. */
  firstSeen: number;
  drainSeen?: number;
  deletingSeen?: number;
  goneSeen?: number;
  readySeen?: number;
  /** /status answers seen while the pod was draining (when `probeDraining`). */
  statuses: StatusResponse[];
}

export interface PodRecorder {
  records: Map<string, PodRecord>;
  /** Most pods at once that were not Ready-and-not-draining (missing ordinals below `replicas()` count). */
  maxUnavailable(): number;
  /** UIDs in the order they were first seen deleting (or gone). */
  deletionOrder(): PodRecord[];
  /** UIDs in the order their drain was first seen. */
  drainOrder(): PodRecord[];
  /** Samples taken so far. */
  samples(): number;
  stop(): Promise<void>;
}

/**
 * Polls the pods of `instance` every `intervalMs`. `replicas` gives the desired count used for
 * the unavailability count (it may change during a test). With `probeDraining`, the /status of
 * draining pods is fetched at each poll.
 */
export function recordPods(kc: KubeClientConfig, ns: string, instance: string, opts: { replicas: () => number; intervalMs?: number; probeDraining?: boolean }): PodRecorder {
  const records = new Map<string, PodRecord>();
  let tick = 0;
  let maxUnavail = 0;
  let running = true;
  let samples = 0;
  const loop = (async () => {
    while (running) {
      let pods: V1Pod[];
      try {
        pods = await listPods(kc, ns, instance);
      } catch {
        await sleep(opts.intervalMs ?? 100);
        continue;
      }
      tick++;
      samples++;
      const seen = new Set<string>();
      for (const p of pods) {
        const uid = p.metadata!.uid!;
        seen.add(uid);
        let r = records.get(uid);
        if (!r) {
          r = { uid, name: p.metadata!.name!, revision: p.metadata?.labels?.[REVISION] ?? '', firstSeen: tick, statuses: [] };
          records.set(uid, r);
        }
        if (p.metadata?.annotations?.[DRAIN] && r.drainSeen === undefined) r.drainSeen = tick;
        if (p.metadata?.deletionTimestamp && r.deletingSeen === undefined) r.deletingSeen = tick;
        if (isReady(p) && r.readySeen === undefined) r.readySeen = tick;
        if (opts.probeDraining && p.metadata?.annotations?.[DRAIN] && p.status?.podIP) {
          const st = await serverStatus(p.status.podIP);
          if (st) r.statuses.push(st);
        }
      }
      for (const r of records.values()) if (!seen.has(r.uid) && r.goneSeen === undefined) r.goneSeen = tick;
      const R = opts.replicas();
      const available = new Set(
        pods
          .filter((p) => isReady(p) && !p.metadata?.annotations?.[DRAIN])
          .map((p) => Number(p.metadata?.labels?.['atlantis-operator.dev/ordinal']))
          .filter((o) => o < R),
      ).size;
      maxUnavail = Math.max(maxUnavail, R - available);
      await sleep(opts.intervalMs ?? 100);
    }
  })();
  const order = (key: 'drainSeen' | 'deletingSeen') => () =>
    [...records.values()]
      .filter((r) => r[key] !== undefined || (key === 'deletingSeen' && r.goneSeen !== undefined))
      .sort((a, b) => (a[key] ?? a.goneSeen!) - (b[key] ?? b.goneSeen!));
  return {
    records,
    maxUnavailable: () => maxUnavail,
    deletionOrder: order('deletingSeen'),
    drainOrder: order('drainSeen'),
    samples: () => samples,
    stop: async () => {
      running = false;
      await loop;
    },
  };
}

export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/** GET http://<ip>:4141/status; undefined when it does not answer. */
export async function serverStatus(ip: string, timeoutMs = 1000): Promise<StatusResponse | undefined> {
  try {
    const r = await fetch(`http://${ip}:4141/status`, { signal: AbortSignal.timeout(timeoutMs) });
    if (r.status !== 200) return undefined;
    return (await r.json()) as StatusResponse;
  } catch {
    return undefined;
  }
}

export function cond(ad: AtlantisDeployment, type: ConditionType): AtlantisCondition | undefined {
  return ad.status?.conditions?.find((c) => c.type === type);
}

/** A one-line summary of an AtlantisDeployment's status, for failure messages. */
export function describeStatus(ad: AtlantisDeployment | undefined): string {
  if (!ad) return '(no object)';
  const s = ad.status;
  if (!s) return `generation ${ad.metadata.generation}, no status`;
  const conds = (s.conditions ?? []).map((c) => `${c.type}=${c.status}/${c.reason}${c.status !== 'True' || c.type === 'Degraded' ? ` (${c.message})` : ''}`).join(', ');
  return `generation ${ad.metadata.generation} observed ${s.observedGeneration}; replicas ${s.replicas} ready ${s.readyReplicas} updated ${s.updatedReplicas} draining ${s.drainingReplicas}; rev ${s.currentRevision}->${s.updateRevision}; ${conds}`;
}

/** Waits until the AtlantisDeployment's status satisfies `pred` (with its generation observed). */
export async function waitForAd(kc: KubeClientConfig, ns: string, name: string, what: string, pred: (ad: AtlantisDeployment) => boolean, timeoutMs = 90_000): Promise<AtlantisDeployment> {
  let last: AtlantisDeployment | undefined;
  try {
    return await waitFor(what, async () => {
      last = await getAd(kc, ns, name);
      return last.status?.observedGeneration === last.metadata.generation && pred(last) ? last : undefined;
    }, { timeoutMs, intervalMs: 250 });
  } catch (e) {
    throw new Error(`${(e as Error).message}; last status: ${describeStatus(last)}`);
  }
}

/** Rollout complete at the current generation: Progressing=True/RolloutComplete and `replicas` Ready at updateRevision. */
export function rolloutComplete(replicas: number): (ad: AtlantisDeployment) => boolean {
  return (ad) => {
    const p = cond(ad, 'Progressing');
    const s = ad.status!;
    return p?.status === 'True' && p.reason === 'RolloutComplete' && s.readyReplicas === replicas && s.updatedReplicas === replicas && s.replicas === replicas && s.currentRevision === s.updateRevision;
  };
}

/** Pods of `instance`, waiting until exactly `names` exist, all Ready, none terminating/draining, all at `revision` when given. */
export async function waitForReadyPods(kc: KubeClientConfig, ns: string, instance: string, names: string[], opts: { revision?: string; timeoutMs?: number } = {}): Promise<V1Pod[]> {
  let last: V1Pod[] = [];
  try {
    return await waitFor(`pods ${names.join(', ')} Ready${opts.revision ? ` at revision ${opts.revision}` : ''}`, async () => {
      last = await listPods(kc, ns, instance);
      const ok =
        last.length === names.length &&
        last.every((p, i) => p.metadata?.name === [...names].sort()[i] && isReady(p) && !p.metadata?.annotations?.[DRAIN] && (!opts.revision || p.metadata?.labels?.[REVISION] === opts.revision));
      return ok ? last : undefined;
    }, { timeoutMs: opts.timeoutMs ?? 90_000, intervalMs: 200 });
  } catch (e) {
    throw new Error(`${(e as Error).message}; pods: ${describePods(last)}`);
  }
}

export function describePods(pods: V1Pod[]): string {
  return pods
    .map((p) => {
      const cs = p.status?.containerStatuses?.[0];
      const waiting = cs?.state?.waiting?.reason;
      return `${p.metadata?.name}(${p.status?.phase}${waiting ? `/${waiting}` : ''}${isReady(p) ? ',Ready' : ''}${p.metadata?.annotations?.[DRAIN] ? ',draining' : ''}${p.metadata?.deletionTimestamp ? ',deleting' : ''},rev ${p.metadata?.labels?.[REVISION]})`;
    })
    .join(' ') || '(none)';
}

export interface AdEvent { name: string; reason: string; message: string; type: string }

/** core/v1 Events about one AtlantisDeployment (involvedObject kind and name), in creation order. */
export async function adEvents(kc: KubeClientConfig, ns: string, name: string): Promise<AdEvent[]> {
  const r = await kubeRequestOk<{ items: Array<{ metadata: { name: string; creationTimestamp?: string; resourceVersion?: string }; reason: string; message: string; type: string; involvedObject: { kind: string; name: string } }> }>(kc, 'GET', apiPath('v1', 'events', ns));
  return r.items
    .filter((e) => e.involvedObject.kind === KIND && e.involvedObject.name === name)
    .sort((a, b) => Number(a.metadata.resourceVersion ?? 0) - Number(b.metadata.resourceVersion ?? 0))
    .map((e) => ({ name: e.metadata.name, reason: e.reason, message: e.message, type: e.type }));
}

/** Returns a function giving the events of the AtlantisDeployment created after this call. */
export async function eventsSince(kc: KubeClientConfig, ns: string, name: string): Promise<() => Promise<AdEvent[]>> {
  const before = new Set((await adEvents(kc, ns, name)).map((e) => e.name));
  return async () => (await adEvents(kc, ns, name)).filter((e) => !before.has(e.name));
}

/** One JSON log line (a server's or the controller's), with its `time` as epoch ms in `at`. */
export interface JsonLogLine { msg: string; time: string; at: number; [field: string]: unknown }

/** The JSON lines of a log's text; a line cut short (by a kill) is skipped: not evidence of anything. */
export function parseJsonLog(text: string): JsonLogLine[] {
  const out: JsonLogLine[] = [];
  for (const line of text.split('\n')) {
    if (!line.startsWith('{')) continue;
    try {
      const o = JSON.parse(line) as { msg?: unknown; time?: unknown };
      if (typeof o.msg === 'string' && typeof o.time === 'string') out.push({ ...o, msg: o.msg, time: o.time, at: Date.parse(o.time) });
    } catch {
      // cut short
    }
  }
  return out;
}

/**
 * The log of one server pod (by UID) as written by the local node. Tests use it as evidence of
 * what the server did and when, since polling from the outside can miss a drain that starts
 * and ends between two polls.
 */
export function serverLog(node: LocalNodeHandle, ns: string, pod: string, uid: string): JsonLogLine[] {
  return parseJsonLog(readFileOr(node.logPath(ns, pod, 'atlantis', uid)));
}

/** When the server pod's apply command ended, by its own "Command finished" line (undefined: it did not). */
export function applyEndedAt(node: LocalNodeHandle, ns: string, pod: string, uid: string): number | undefined {
  return serverLog(node, ns, pod, uid).find((l) => l.msg === 'Command finished' && l.command === 'apply')?.at;
}
