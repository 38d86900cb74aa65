// Helpers of the surge rollout e2e (test/controller-surge.test.ts): pod histories from one or
// more watches in the cluster's own order, an AtlantisDeployment status watch, and webhook
// deliveries sent through the Service (dev/service-proxy), as GitHub's reach a cluster.
import { API_VERSION, type AtlantisDeployment, type AtlantisDeploymentStatus, PLURAL } from '../../src/controller/types.js';
import { apiPath, openKubeStream, type KubeStream } from '../../src/k8s/client.js';
import type { KubeClientConfig } from '../../src/k8s/kubeconfig.js';
import { sleep } from '../../src/async.js';
import { openedPayload, postWebhook, preparePull, type Target } from '../../dev/demo/deliveries.js';
import type { PodRecord, PodRecorder } from './controller-asserts.js';
import { terraformConfig } from './git-repos.js';
import type { WorkflowEnv } from './workflow-env.js';

/** A pod's history over several recorders (one per watch that ran), positions in one order. */
export interface PodHistory {
  uid: string;
  name: string;
  revision: string;
  ordinal: number;
  firstSeen: number;
  readySeen?: number;
  drainSeen?: number;
  /** Not Ready after its drain started (out of the Service). */
  unreadySeen?: number;
  /** Seen with a deletionTimestamp, or gone. */
  deletingSeen?: number;
}

/**
 * Recorders run one after the other (one stopped before the next starts), so recorder i's
 * events all come before recorder i+1's: a position is (i, the watch's sequence number).
 */
export function podHistories(recorders: readonly PodRecorder[], ordinalOf: (r: PodRecord) => number): Map<string, PodHistory> {
  const out = new Map<string, PodHistory>();
  const pos = (i: number, seq: number | undefined): number | undefined => (seq === undefined ? undefined : i * 1e9 + seq);
  const first = (a: number | undefined, b: number | undefined) => (a === undefined ? b : a);
  recorders.forEach((rec, i) => {
    // A pod of an earlier watch missing from this one's list was gone before it started.
    if (i > 0) for (const h of out.values()) if (h.deletingSeen === undefined && !rec.records.has(h.uid)) h.deletingSeen = pos(i, 0);
    for (const r of rec.records.values()) {
      const h = out.get(r.uid) ?? {
        uid: r.uid,
        name: r.name,
        revision: r.revision,
        ordinal: ordinalOf(r),
        firstSeen: pos(i, r.firstSeen)!,
      };
      h.readySeen = first(h.readySeen, pos(i, r.readySeen));
      h.drainSeen = first(h.drainSeen, pos(i, r.drainSeen));
      h.unreadySeen = first(h.unreadySeen, pos(i, r.unreadySeen));
      h.deletingSeen = first(h.deletingSeen, pos(i, r.deletingSeen ?? r.goneSeen));
      out.set(r.uid, h);
    }
  });
  return out;
}

/** Most pods live at once (seen, and not yet seen deleting or gone). */
export function maxLive(histories: Iterable<PodHistory>): number {
  const hs = [...histories];
  let most = 0;
  for (const at of new Set(hs.map((h) => h.firstSeen))) {
    const live = hs.filter((h) => h.firstSeen <= at && (h.deletingSeen === undefined || h.deletingSeen > at)).length;
    most = Math.max(most, live);
  }
  return most;
}

export interface StatusWatch {
  statuses: AtlantisDeploymentStatus[];
  stop(): void;
}

/** Every status the API server shows for one AtlantisDeployment from now on, in order (a watch, reopened when it ends). */
export async function watchStatuses(kc: KubeClientConfig, ns: string, name: string): Promise<StatusWatch> {
  const statuses: AtlantisDeploymentStatus[] = [];
  let running = true;
  let stream: KubeStream | undefined;
  const open = (): Promise<void> =>
    new Promise<void>((ended) => {
      void openKubeStream(
        kc,
        apiPath(API_VERSION, PLURAL, ns),
        { watch: true, fieldSelector: `metadata.name=${name}`, timeoutSeconds: 60 },
        {
          onLine: (line) => {
            const ev = JSON.parse(line) as { type: string; object: AtlantisDeployment };
            if ((ev.type === 'ADDED' || ev.type === 'MODIFIED') && ev.object.status) statuses.push(ev.object.status);
          },
          onClose: () => ended(),
        },
      ).then(
        (s) => {
          stream = s;
        },
        () => ended(),
      );
    });
  void (async () => {
    // Bounded: a phase lasts minutes, one watch up to 60 s.
    for (let i = 0; i < 200 && running; i++) {
      await open();
      if (running) await sleep(200);
    }
  })();
  return {
    statuses,
    stop: () => {
      running = false;
      stream?.abort();
    },
  };
}

export interface Delivery {
  pull: number;
  sentAt: number;
  answeredAt: number;
  /** The HTTP status; undefined when the connection failed (then `error`). */
  status?: number;
  error?: string;
}

export interface Deliveries {
  sent: Delivery[];
  /** Stops sending and waits for the delivery in flight. */
  stop(): Promise<Delivery[]>;
}

/**
 * Opens PRs one after another (an autoplan each), each webhook sent through the Service (the
 * Service proxy's address) on a new connection, as GitHub sends them. At most `max`.
 */
export function startDeliveries(
  env: WorkflowEnv,
  service: Target,
  opts: { firstPull: number; max: number; intervalMs: number },
): Deliveries {
  const sent: Delivery[] = [];
  let running = true;
  const loop = (async () => {
    for (let i = 0; i < opts.max && running; i++) {
      const pull = opts.firstPull + i;
      const branch = `surge-${pull}`;
      const sha = await preparePull(env, pull, branch, { [`sgd${pull}/main.tf`]: terraformConfig({ marker: `sgd${pull}` }) });
      const sentAt = Date.now();
      const d = await postWebhook(service, 'pull_request', openedPayload(env, pull, branch, sha)).then(
        (r) => ({ pull, sentAt, answeredAt: Date.now(), status: r.status }),
        (e: Error) => ({ pull, sentAt, answeredAt: Date.now(), error: e.message }),
      );
      sent.push(d);
      await sleep(opts.intervalMs);
    }
  })();
  return {
    sent,
    stop: async () => {
      running = false;
      await loop;
      return sent;
    },
  };
}
