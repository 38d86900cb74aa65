// The rollout's timeline from the cluster's own events: a watch on the instance's pods
// (created, Ready, drain started, deleting, gone, in the order the API server made them),
// the Service proxy's endpoint changes, and lines of the servers' own logs.
import type { V1Pod } from '@kubernetes/client-node';
import { sleep } from '../../src/async.js';
import { apiPath, type KubeStream, openKubeStream } from '../../src/k8s/client.js';
import type { KubeClientConfig } from '../../src/k8s/kubeconfig.js';

export const DRAIN_ANNOTATION = 'atlantis-operator.dev/drain';

export interface TimelineEntry {
  /** ms since the epoch */
  at: number;
  what: string;
}

export interface PodWatch {
  entries: TimelineEntry[];
  /** the most pods not terminating at once */
  maxLive(): number;
  stop(): void;
}

const isReady = (p: V1Pod) => (p.status?.conditions ?? []).some((c) => c.type === 'Ready' && c.status === 'True');

/** Watches the pods of `instance` until stopped (reopened when the API server ends the watch, at most 100 times). */
export function watchPods(kc: KubeClientConfig, ns: string, instance: string): PodWatch {
  const entries: TimelineEntry[] = [];
  const seen = new Set<string>();
  const live = new Set<string>();
  let most = 0;
  let running = true;
  let stream: KubeStream | undefined;
  const note = (key: string, what: string) => {
    if (seen.has(key)) return;
    seen.add(key);
    entries.push({ at: Date.now(), what });
  };
  const onPod = (type: string, p: V1Pod) => {
    const uid = p.metadata?.uid ?? '';
    const name = p.metadata?.name ?? '?';
    const image = p.spec?.containers[0]?.image ?? '';
    note(`created ${uid}`, `${name}: pod created (${image})`);
    if (type === 'DELETED') {
      live.delete(uid);
      note(`gone ${uid}`, `${name}: pod gone`);
      return;
    }
    if (p.metadata?.deletionTimestamp) live.delete(uid);
    else live.add(uid);
    most = Math.max(most, live.size);
    if (isReady(p) && !p.metadata?.deletionTimestamp) note(`ready ${uid}`, `${name}: Ready at ${p.status?.podIP}`);
    if (p.metadata?.annotations?.[DRAIN_ANNOTATION]) note(`drain ${uid}`, `${name}: drain started by the controller`);
    if (p.metadata?.deletionTimestamp) note(`deleting ${uid}`, `${name}: deleted by the controller (drained)`);
  };
  const open = (): Promise<void> =>
    new Promise<void>((ended) => {
      void openKubeStream(
        kc,
        apiPath('v1', 'pods', ns),
        { watch: true, labelSelector: `app.kubernetes.io/instance=${instance}`, timeoutSeconds: 300 },
        {
          onLine: (line) => {
            const ev = JSON.parse(line) as { type: string; object: V1Pod };
            if (ev.type === 'ADDED' || ev.type === 'MODIFIED' || ev.type === 'DELETED') onPod(ev.type, ev.object);
          },
          onClose: () => ended(),
        },
      ).then(
        (s) => {
          stream = s;
          if (!running) s.abort();
        },
        () => ended(),
      );
    });
  void (async () => {
    for (let i = 0; i < 100 && running; i++) {
      await open();
      if (running) await sleep(200);
    }
  })();
  return {
    entries,
    maxLive: () => most,
    stop: () => {
      running = false;
      stream?.abort();
    },
  };
}

/** "[  12.3s] what" lines, oldest first, relative to t0. */
export function formatTimeline(entries: readonly TimelineEntry[], t0: number): string[] {
  return [...entries].sort((a, b) => a.at - b.at).map((e) => `[${((e.at - t0) / 1000).toFixed(1).padStart(6)}s] ${e.what}`);
}
