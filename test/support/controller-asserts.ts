// Observation helpers for the controller tests on the real cluster: a pod recorder that
// watches the pods of one AtlantisDeployment and keeps, per pod UID, when it was first seen
// draining, deleting, gone and Ready (so tests can assert the order of replacements and the
// unavailability budget), plus small status and /status helpers.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import type { V1Pod } from '@kubernetes/client-node';
import type { KubeClientConfig } from '../../src/k8s/kubeconfig.js';
import { sleep } from '../../src/async.js';
import type { StatusBody } from '../../src/contract/drain-protocol.js';
import { apiPath, kubeRequestOk, openKubeStream, type KubeStream } from '../../src/k8s/client.js';
import { KIND, type AtlantisCondition, type AtlantisDeployment, type ConditionType } from '../../src/controller/types.js';
import { getAd, isReady, listPods } from './controller.js';
import { readFileOr, waitFor, type LocalNodeHandle } from './k8s.js';

export const DRAIN = 'atlantis-operator.dev/drain';
export const REVISION = 'atlantis-operator.dev/revision';

export interface PodRecord {
  uid: string;
  name: string;
  revision: string;
  /** Sequence numbers of the watch events (increasing with every event, across pods). */
  firstSeen: number;
  drainSeen?: number;
  deletingSeen?: number;
  goneSeen?: number;
  readySeen?: number;
  /** First seen not Ready once its drain had started: out of the Service. */
  unreadySeen?: number;
}

export interface PodRecorder {
  records: Map<string, PodRecord>;
  /** Most pods at once that were not Ready-and-not-draining (missing ordinals below `replicas()` count). */
  maxUnavailable(): number;
  /** UIDs in the order they were first seen deleting (or gone). */
  deletionOrder(): PodRecord[];
  /** UIDs in the order their drain was first seen. */
  drainOrder(): PodRecord[];
  /** Watch events seen so far (the list counts as one). */
  samples(): number;
  stop(): Promise<void>;
}

interface PodList {
  metadata: { resourceVersion: string };
  items: V1Pod[];
}
interface WatchEvent {
  type: string;
  object: V1Pod & { code?: number };
}

/**
 * Watches the pods of `instance` (a list, then a watch from its resourceVersion, resumed
 * from the last one seen when the API server ends it). A watch delivers every change in
 * the order etcd made them, across pods, so a drain annotation set and removed with the
 * pod between two looks is still seen, and "A before B" is the cluster's own order; a poll
 * missed an idle pod annotated, drained and deleted within one interval. Resolves once the
 * watch is open: what happens after that is recorded. `replicas` gives the desired count
 * for the unavailability count (it may change during a test).
 */
export async function recordPods(
  kc: KubeClientConfig,
  ns: string,
  instance: string,
  opts: { replicas: () => number },
): Promise<PodRecorder> {
  const records = new Map<string, PodRecord>();
  const current = new Map<string, V1Pod>();
  let seq = 0;
  let maxUnavail = 0;
  let running = true;
  const labelSelector = `app.kubernetes.io/instance=${instance}`;

  const account = (): void => {
    const R = opts.replicas();
    const available = new Set(
      [...current.values()]
        .filter((p) => isReady(p) && !p.metadata?.annotations?.[DRAIN])
        .map((p) => Number(p.metadata?.labels?.['atlantis-operator.dev/ordinal']))
        .filter((o) => o < R),
    ).size;
    maxUnavail = Math.max(maxUnavail, R - available);
  };
  const see = (p: V1Pod): void => {
    const uid = p.metadata!.uid!;
    current.set(uid, p);
    let r = records.get(uid);
    if (!r) {
      r = { uid, name: p.metadata!.name!, revision: p.metadata?.labels?.[REVISION] ?? '', firstSeen: seq };
      records.set(uid, r);
    }
    if (p.metadata?.annotations?.[DRAIN] && r.drainSeen === undefined) r.drainSeen = seq;
    if (p.metadata?.deletionTimestamp && r.deletingSeen === undefined) r.deletingSeen = seq;
    if (isReady(p) && r.readySeen === undefined) r.readySeen = seq;
    if (r.drainSeen !== undefined && !isReady(p) && r.unreadySeen === undefined) r.unreadySeen = seq;
  };
  const gone = (uid: string): void => {
    current.delete(uid);
    const r = records.get(uid);
    if (r && r.goneSeen === undefined) r.goneSeen = seq;
  };
  const list = async (): Promise<string> => {
    const l = await kubeRequestOk<PodList>(kc, 'GET', apiPath('v1', 'pods', ns), undefined, { query: { labelSelector } });
    seq++;
    const live = new Set(l.items.map((p) => p.metadata!.uid!));
    for (const uid of [...current.keys()]) if (!live.has(uid)) gone(uid);
    for (const p of l.items) see(p);
    account();
    return l.metadata.resourceVersion;
  };

  let rv = await list();
  let stream: KubeStream | undefined;
  let closed: (() => void) | undefined;
  const watchOnce = (): Promise<{ opened: Promise<boolean>; ended: Promise<'gone' | 'closed'> }> => {
    let open!: (ok: boolean) => void;
    const opened = new Promise<boolean>((r) => (open = r));
    let end!: (why: 'gone' | 'closed') => void;
    const ended = new Promise<'gone' | 'closed'>((r) => (end = r));
    closed = () => end('closed');
    return openKubeStream(
      kc,
      apiPath('v1', 'pods', ns),
      { labelSelector, watch: true, resourceVersion: rv, allowWatchBookmarks: true, timeoutSeconds: 60 },
      {
        onResponse: (status) => {
          open(status === 200);
          if (status === 410) end('gone');
        },
        onLine: (line) => {
          const ev = JSON.parse(line) as WatchEvent;
          if (ev.type === 'ERROR') {
            if (ev.object.code === 410) end('gone');
            return;
          }
          if (ev.object.metadata?.resourceVersion) rv = ev.object.metadata.resourceVersion;
          if (ev.type === 'BOOKMARK') return;
          seq++;
          if (ev.type === 'DELETED') gone(ev.object.metadata!.uid!);
          else see(ev.object);
          account();
        },
        onClose: () => {
          open(false);
          end('closed');
        },
      },
    ).then((st) => {
      stream = st;
      return { opened, ended };
    });
  };

  const first = await watchOnce();
  if (!(await first.opened)) throw new Error(`the pod watch of ${ns}/${instance} did not open`);
  const loop = (async () => {
    let ended = first.ended;
    // Bounded: a test runs minutes, a watch lasts up to 60 s.
    for (let i = 0; i < 1000 && running; i++) {
      const why = await ended;
      if (!running) return;
      if (why === 'gone') rv = await list(); // compacted away: start over from the present
      await sleep(50);
      if (!running) return;
      ended = (await watchOnce()).ended;
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
    samples: () => seq,
    stop: async () => {
      running = false;
      stream?.abort();
      closed?.();
      await loop;
    },
  };
}

export { sleep } from '../../src/async.js';

/** GET http://<ip>:4141/status; undefined when it does not answer. */
export async function serverStatus(ip: string, timeoutMs = 1000): Promise<StatusBody | undefined> {
  try {
    const r = await fetch(`http://${ip}:4141/status`, { signal: AbortSignal.timeout(timeoutMs) });
    if (r.status !== 200) return undefined;
    return (await r.json()) as StatusBody;
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
  const conds = (s.conditions ?? [])
    .map((c) => `${c.type}=${c.status}/${c.reason}${c.status !== 'True' || c.type === 'Degraded' ? ` (${c.message})` : ''}`)
    .join(', ');
  return `generation ${ad.metadata.generation} observed ${s.observedGeneration}; replicas ${s.replicas} ready ${s.readyReplicas} updated ${s.updatedReplicas} draining ${s.drainingReplicas}; rev ${s.currentRevision}->${s.updateRevision}; ${conds}`;
}

/** Waits until the AtlantisDeployment's status satisfies `pred` (with its generation observed). */
export async function waitForAd(
  kc: KubeClientConfig,
  ns: string,
  name: string,
  what: string,
  pred: (ad: AtlantisDeployment) => boolean,
  timeoutMs = 90_000,
): Promise<AtlantisDeployment> {
  let last: AtlantisDeployment | undefined;
  try {
    return await waitFor(
      what,
      async () => {
        last = await getAd(kc, ns, name);
        return last.status?.observedGeneration === last.metadata.generation && pred(last) ? last : undefined;
      },
      { timeoutMs, intervalMs: 250 },
    );
  } catch (e) {
    throw new Error(`${(e as Error).message}; last status: ${describeStatus(last)}`);
  }
}

/** Rollout complete at the current generation: Progressing=True/RolloutComplete and `replicas` Ready at updateRevision. */
export function rolloutComplete(replicas: number): (ad: AtlantisDeployment) => boolean {
  return (ad) => {
    const p = cond(ad, 'Progressing');
    const s = ad.status!;
    return (
      p?.status === 'True' &&
      p.reason === 'RolloutComplete' &&
      s.readyReplicas === replicas &&
      s.updatedReplicas === replicas &&
      s.replicas === replicas &&
      s.currentRevision === s.updateRevision
    );
  };
}

/** Pods of `instance`, waiting until exactly `names` exist, all Ready, none terminating/draining, all at `revision` when given. */
export async function waitForReadyPods(
  kc: KubeClientConfig,
  ns: string,
  instance: string,
  names: string[],
  opts: { revision?: string; timeoutMs?: number } = {},
): Promise<V1Pod[]> {
  let last: V1Pod[] = [];
  try {
    return await waitFor(
      `pods ${names.join(', ')} Ready${opts.revision ? ` at revision ${opts.revision}` : ''}`,
      async () => {
        last = await listPods(kc, ns, instance);
        const ok =
          last.length === names.length &&
          last.every(
            (p, i) =>
              p.metadata?.name === [...names].sort()[i] &&
              isReady(p) &&
              !p.metadata?.annotations?.[DRAIN] &&
              (!opts.revision || p.metadata?.labels?.[REVISION] === opts.revision),
          );
        return ok ? last : undefined;
      },
      { timeoutMs: opts.timeoutMs ?? 90_000, intervalMs: 200 },
    );
  } catch (e) {
    throw new Error(`${(e as Error).message}; pods: ${describePods(last)}`);
  }
}

export function describePods(pods: V1Pod[]): string {
  return (
    pods
      .map((p) => {
        const cs = p.status?.containerStatuses?.[0];
        const waiting = cs?.state?.waiting?.reason;
        return `${p.metadata?.name}(${p.status?.phase}${waiting ? `/${waiting}` : ''}${isReady(p) ? ',Ready' : ''}${p.metadata?.annotations?.[DRAIN] ? ',draining' : ''}${p.metadata?.deletionTimestamp ? ',deleting' : ''},rev ${p.metadata?.labels?.[REVISION]})`;
      })
      .join(' ') || '(none)'
  );
}

export interface AdEvent {
  name: string;
  reason: string;
  message: string;
  type: string;
}

/** core/v1 Events about one AtlantisDeployment (involvedObject kind and name), in creation order. */
export async function adEvents(kc: KubeClientConfig, ns: string, name: string): Promise<AdEvent[]> {
  const r = await kubeRequestOk<{
    items: Array<{
      metadata: { name: string; creationTimestamp?: string; resourceVersion?: string };
      reason: string;
      message: string;
      type: string;
      involvedObject: { kind: string; name: string };
    }>;
  }>(kc, 'GET', apiPath('v1', 'events', ns));
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
export interface JsonLogLine {
  msg: string;
  time: string;
  at: number;
  [field: string]: unknown;
}

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

/** The environment of a pod's server process as the node started it (its last start; not another container's). */
export function serverEnviron(node: LocalNodeHandle, p: V1Pod): string[] {
  const ns = p.metadata!.namespace!;
  const started = node
    .events({ namespace: ns, pod: p.metadata!.name! })
    .filter((e) => e.uid === p.metadata!.uid && e.type === 'ContainerStarted' && e.pid && e.container === 'atlantis');
  const pid = started.at(-1)?.pid;
  assert.ok(pid, `the node recorded the server process of ${p.metadata!.name}`);
  return fs.readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0');
}

/** When the server pod's apply command ended, by its own "Command finished" line (undefined: it did not). */
export function applyEndedAt(node: LocalNodeHandle, ns: string, pod: string, uid: string): number | undefined {
  return serverLog(node, ns, pod, uid).find((l) => l.msg === 'Command finished' && l.command === 'apply')?.at;
}
