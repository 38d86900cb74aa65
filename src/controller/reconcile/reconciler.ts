// Reconcile one AtlantisDeployment, controller-runtime style: given a key, observe (informer
// caches plus a /status poll of draining pods), decide (the pure rollout planner), act (the
// plan's actions, in order), write status, and return when to look again. Nothing is
// remembered between calls: the cluster is the memory, so a restarted or newly elected
// controller carries on from what it observes.
import { randomBytes } from 'node:crypto';
import type { V1PersistentVolumeClaim, V1Pod } from '@kubernetes/client-node';
import type { KubeClientConfig } from '../../k8s/kubeconfig.js';
import { KubeApiError, MERGE_PATCH } from '../../k8s/client.js';
import { type CallOptions, ResourceClient, type ResourceKind, isConflict, isNotFound } from '../../k8s/resources.js';
import type { KubeObject } from '../../k8s/informer.js';
import type { Logger } from '../../log.js';
import type { ControllerMetrics } from '../metrics.js';
import {
  accessPodNames,
  drainPatch,
  drainStartedPatch,
  podDeleteOptions,
  podNameFor,
  podNaming,
  podReferences,
  podTemplateRevision,
  type ReferencedContent,
  renderIngress,
  ingressName,
  renderEvent,
  renderPDB,
  renderPod,
  renderPodRole,
  renderPodRoleBinding,
  renderPodServiceAccount,
  renderPVC,
  renderRole,
  renderRoleBinding,
  renderService,
  renderServiceAccount,
  serverAccess,
  usesDataClaims,
  withDefaults,
} from '../resources/index.js';
import {
  type Action,
  type ObservedState,
  type Plan,
  isDraining,
  isRunning,
  observeDeployment,
  observePod,
  planRollout,
  replacementNeeded,
} from '../rollout/index.js';
import { canonicalJSON } from '../resources/revision.js';
import type { AtlantisDeployment, StatusProbe } from '../types.js';
import { AppliedVersions, applyOwned, deleteOwned } from './owned-objects.js';
import { ReferencedContentReader } from './referenced-content.js';
import { probeServerStatus } from './status-probe.js';
import { DEFAULT_WAIT_SECONDS, type DrainWatch, type DrainWatchTarget } from './drain-watch.js';
import { Expectations } from './expectations.js';
import { StatusWriter } from './status-writer.js';
import { WrittenObjects } from './written-objects.js';
import { REJECTED_RECHECK_MS, type ReplacementVerdict, dryRunCreate, rejectionOf, usableVerdict } from './replacement-check.js';
import { withTimeout } from '../../async.js';

export { WrittenObjects };

export const OWNED_KINDS = {
  services: { apiVersion: 'v1', plural: 'services' },
  serviceaccounts: { apiVersion: 'v1', plural: 'serviceaccounts' },
  roles: { apiVersion: 'rbac.authorization.k8s.io/v1', plural: 'roles' },
  rolebindings: { apiVersion: 'rbac.authorization.k8s.io/v1', plural: 'rolebindings' },
  poddisruptionbudgets: { apiVersion: 'policy/v1', plural: 'poddisruptionbudgets' },
  ingresses: { apiVersion: 'networking.k8s.io/v1', plural: 'ingresses' },
} as const satisfies Record<string, ResourceKind>;
export type OwnedKindName = keyof typeof OWNED_KINDS;

/** Read access to the informer caches. */
export interface ClusterCache {
  atlantisDeployment(namespace: string, name: string): AtlantisDeployment | undefined;
  /** Pods / PVCs labelled with app.kubernetes.io/instance=<name> in the namespace. */
  pods(namespace: string, instance: string): V1Pod[];
  pvcs(namespace: string, instance: string): V1PersistentVolumeClaim[];
  owned(kind: OwnedKindName, namespace: string, name: string): KubeObject | undefined;
}

export interface ReconcilerOptions {
  kc: KubeClientConfig;
  cache: ClusterCache;
  logger: Logger;
  metrics: ControllerMetrics;
  /** Reporting instance for Events (the controller's pod name). */
  instance: string;
  probe?: (podIP: string) => Promise<StatusProbe>;
  /**
   * Held `/status?wait_drained` requests to draining pods: the reconcile uses their last
   * answer instead of probing, and is enqueued when it changes.
   */
  drainWatch?: DrainWatch;
  /** A status write (done after the reconcile returned) failed: reconcile the key again. */
  onStatusWriteFailed?: (key: string, error: Error) => void;
  /** Ends status writes in flight (shutdown, lost leadership); reconciles get their own signal. */
  signal?: AbortSignal;
  now?: () => Date;
  /** How often a referenced Secret's or ConfigMap's content is read again (referenced-content.ts). */
  contentIntervalMs?: number;
}

/**
 * How old the watch's last answer may be and still stand in for a probe: a watched pod
 * answers at least every DEFAULT_WAIT_SECONDS, or fails within the probe timeout after it.
 */
const WATCHED_ANSWER_MAX_AGE_MS = (DEFAULT_WAIT_SECONDS + 5) * 1000;
/** Reconcile this often while a drain runs: the watch enqueues at once when an answer changes. */
const POLL_WITH_DRAIN_WATCH_MS = 5000;
/** How long the drain PATCH waits for the watch's first request to go out (DrainWatch.add). */
const WATCH_FIRST_MS = 1000;

export interface ReconcileResult {
  requeueAfterMs: number | null;
  plan?: Plan;
}

export class Reconciler {
  private readonly probe: (podIP: string) => Promise<StatusProbe>;
  private readonly now: () => Date;
  private readonly expectations = new Expectations();
  private readonly written = new WrittenObjects();
  private readonly statusWriter: StatusWriter;
  /** The guards last logged at info per AtlantisDeployment and pod: only for log volume, never for decisions. */
  private readonly loggedWaits = new Map<string, Map<string, string>>();
  /** The API server's last answer about a pod at the update revision, per key (replacement-check.ts). */
  private readonly verdicts = new Map<string, ReplacementVerdict>();
  private readonly applied = new AppliedVersions();
  private readonly podClient: ResourceClient<V1Pod>;
  private readonly pvcClient: ResourceClient<V1PersistentVolumeClaim>;
  private readonly eventClient: ResourceClient<KubeObject>;
  private readonly ownedClients: Record<OwnedKindName, ResourceClient<KubeObject>>;
  private readonly content: ReferencedContentReader;

  constructor(private readonly o: ReconcilerOptions) {
    this.probe = o.probe ?? ((ip) => probeServerStatus(ip));
    this.now = o.now ?? (() => new Date());
    this.podClient = new ResourceClient(o.kc, { apiVersion: 'v1', plural: 'pods' });
    this.pvcClient = new ResourceClient(o.kc, { apiVersion: 'v1', plural: 'persistentvolumeclaims' });
    this.eventClient = new ResourceClient(o.kc, { apiVersion: 'v1', plural: 'events' });
    this.ownedClients = Object.fromEntries(Object.entries(OWNED_KINDS).map(([k, kind]) => [k, new ResourceClient(o.kc, kind)])) as Record<
      OwnedKindName,
      ResourceClient<KubeObject>
    >;
    this.content = new ReferencedContentReader(o.kc, o.logger, { intervalMs: o.contentIntervalMs });
    this.statusWriter = new StatusWriter({
      kc: o.kc,
      logger: o.logger,
      signal: o.signal,
      onWritten: (key, ad) => this.written.record(key, ad),
      onFailed: (key, e) => o.onStatusWriteFailed?.(key, e),
    });
  }

  /** Stops writing status (leadership lost, shutdown): waits for the write in flight. */
  stop(): Promise<void> {
    return this.statusWriter.stop();
  }

  /** `signal` ends every API request of this reconcile (shutdown, lost leadership, reconcile timeout). */
  async reconcile(namespace: string, name: string, reconcileID: string, signal?: AbortSignal): Promise<ReconcileResult> {
    const call: CallOptions = { signal };
    const log = this.o.logger.child({ atlantisDeployment: { namespace, name }, reconcileID });
    const key = `${namespace}/${name}`;
    const cached = this.o.cache.atlantisDeployment(namespace, name);
    // Gone or going: the garbage collector removes what it owned (ownerReferences).
    if (!cached || cached.metadata.deletionTimestamp) {
      this.written.forget(key, new Set());
      this.o.drainWatch?.sync(key, []);
      this.o.metrics.forgetDeployment(key);
      this.verdicts.delete(key);
      this.applied.forget(key);
      return { requeueAfterMs: null };
    }
    const ad = this.withPendingStatus(this.written.fresher(cached));
    const pods = this.o.cache.pods(namespace, name).map((p) => this.written.fresher(p));
    this.written.forget(key, new Set([ad.metadata.uid!, ...pods.map((p) => p.metadata!.uid!)]));

    // The Secrets and ConfigMaps the pods read are part of the revision: a change to their
    // content rolls the pods like a spec change (resources/content.ts).
    const refs = podReferences(ad);
    const content = await this.content.read(namespace, refs, call);
    const revision = podTemplateRevision(ad, content);
    const pvcs = this.o.cache.pvcs(namespace, name);
    if (!this.expectations.satisfied(key, { atlantisDeployment: ad, pods, pvcs })) {
      // The watch event that shows the write enqueues this key again; the requeue is only a
      // safety net, so it is slow: a fast poll would keep workers busy on a loaded API server,
      // where the cache lags by seconds.
      log.debug('Waiting for the cache to show our last writes');
      return { requeueAfterMs: 1000 };
    }
    await this.ensureOwnedObjects(ad, pods, revision, log, call);

    const probes = await this.probeDrainingPods(key, pods);
    const observed = observeDeployment(ad, revision, pods, pvcs, probes);
    observed.replacementRejected = await this.checkReplacement(key, ad, observed, content, log, call);
    const plan = planRollout(observed, this.now(), this.o.drainWatch ? { statusPollIntervalMs: POLL_WITH_DRAIN_WATCH_MS } : {});
    this.logWaits(key, plan, log);
    this.o.metrics.setSurgePods(key, plan.status.surgeReplicas ?? 0);

    const failedPods = new Set<string>();
    for (const action of plan.actions) {
      if (action.type === 'emitEvent' && action.podName && failedPods.has(action.podName)) continue;
      try {
        await this.execute(ad, action, pods, revision, content, log, call);
        this.o.metrics.recordExecuted(action);
        this.expectFor(key, action, pods);
      } catch (e) {
        const refused = action.type === 'createPod' && e instanceof KubeApiError ? rejectionOf(e.status, e.body) : null;
        if (refused !== null) {
          // The dry-run passed but the create did not (admission changed in between): the
          // next plan holds the rollout on this answer.
          this.recordVerdict(key, ad, revision, refused, log);
          plan.requeueAfterMs = Math.min(plan.requeueAfterMs ?? 1000, 1000);
          continue;
        }
        if (isNotFound(e) || isConflict(e)) {
          // Our cache was behind the cluster (pod already replaced, already deleted, changed
          // since): skip what depends on it and look again shortly.
          log.info('Action skipped: cluster changed', {
            action: action.type,
            pod: 'podName' in action ? action.podName : undefined,
            status: (e as KubeApiError).status,
          });
          if ('podName' in action && action.podName) failedPods.add(action.podName);
          plan.requeueAfterMs = Math.min(plan.requeueAfterMs ?? 1000, 1000);
          continue;
        }
        throw e;
      }
    }

    // Written after we return (status-writer.ts): the key is free for the next reconcile at once.
    this.submitStatus(ad, plan);
    const mutated = plan.actions.some((a) => a.type !== 'emitEvent');
    // After a write, look again soon even if the watch is slow to tell us.
    let requeue = mutated ? Math.min(plan.requeueAfterMs ?? 2000, 2000) : plan.requeueAfterMs;
    // A refusal may end without a spec change (namespace labels, admission): ask again then.
    if (observed.replacementRejected) requeue = Math.min(requeue ?? REJECTED_RECHECK_MS, REJECTED_RECHECK_MS);
    // Referenced content is read, not watched: look again within the interval.
    if (refs.secrets.length + refs.configMaps.length > 0) requeue = Math.min(requeue ?? this.content.interval, this.content.interval);
    return { requeueAfterMs: requeue, plan };
  }

  /**
   * The API server's refusal of a pod at the update revision, or null: asked (dry-run create)
   * only when the plan may replace or create a pod, once per revision while accepted.
   */
  private async checkReplacement(
    key: string,
    ad: AtlantisDeployment,
    observed: ObservedState,
    content: ReferencedContent,
    log: Logger,
    call: CallOptions,
  ): Promise<string | null> {
    if (!replacementNeeded(observed)) return null;
    const uid = ad.metadata.uid!;
    const revision = observed.spec.updateRevision;
    const known = usableVerdict(this.verdicts.get(key), uid, revision, this.now().getTime());
    if (known) return known.rejected;
    // Any desired ordinal will do: the name is generated, the rest is the revision's.
    const ordinal = Math.max(0, Math.floor(observed.spec.replicas) - 1);
    const rejected = await dryRunCreate(this.podClient, ad.metadata.namespace!, renderPod(ad, ordinal, revision, content), call);
    this.recordVerdict(key, ad, revision, rejected, log);
    return rejected;
  }

  private recordVerdict(key: string, ad: AtlantisDeployment, revision: string, rejected: string | null, log: Logger): void {
    const before = this.verdicts.get(key);
    const changed = !before || before.revision !== revision || before.rejected !== rejected;
    this.verdicts.set(key, { uid: ad.metadata.uid!, revision, rejected, at: this.now().getTime() });
    if (!changed) return;
    if (rejected !== null)
      log.warn('The API server refuses pods of the update revision: no pod is drained or deleted for it', { revision, error: rejected });
    else log.info('Pods of the update revision are accepted (dry-run create)', { revision });
  }

  /**
   * Why pods wait, by guard name: at info when a pod's guards change, else at debug. A
   * draining pod is looked at every 500 ms; logging each look would flood the log.
   */
  private logWaits(key: string, plan: Plan, log: Logger): void {
    const before = this.loggedWaits.get(key) ?? new Map<string, string>();
    const now = new Map<string, string>();
    for (const w of plan.waiting) {
      const guards = w.guards.join(',');
      now.set(w.podName, guards);
      const fields = { pod: w.podName, guards: w.guards, reason: w.message };
      if (before.get(w.podName) !== guards) log.info('Pod waiting', fields);
      else log.debug('Pod waiting', fields);
    }
    if (now.size > 0) this.loggedWaits.set(key, now);
    else this.loggedWaits.delete(key);
  }

  /**
   * /status of the pods whose drain decision depends on it (draining and running): the
   * watch's last answer, else (no answer yet, or stale) a probe now.
   */
  private async probeDrainingPods(key: string, pods: V1Pod[]): Promise<Map<string, StatusProbe>> {
    const probes = new Map<string, StatusProbe>();
    const targets = pods.flatMap((p) => drainWatchTarget(p) ?? []);
    this.o.drainWatch?.sync(key, targets);
    const now = this.now();
    await Promise.all(
      targets.map(async ({ uid, podIP: ip, restarts }) => {
        const watched = this.o.drainWatch?.observed(uid, restarts, now, WATCHED_ANSWER_MAX_AGE_MS);
        if (watched === 'pending') return; // no answer to plan with yet; it enqueues us when it comes
        if (watched) return void probes.set(uid, watched);
        const started = process.hrtime.bigint();
        const probe = await this.probe(ip);
        this.o.metrics.statusProbeDuration.observe({ result: probe.ok ? 'ok' : 'error' }, Number(process.hrtime.bigint() - started) / 1e9);
        probes.set(uid, probe);
      }),
    );
    return probes;
  }

  private async ensureOwnedObjects(ad: AtlantisDeployment, pods: V1Pod[], revision: string, log: Logger, call: CallOptions): Promise<void> {
    const { name, namespace } = { name: ad.metadata.name!, namespace: ad.metadata.namespace! };
    const spec = withDefaults(ad.spec);
    const existing = pods.flatMap((pod) => {
      const o = observePod(pod);
      return o ? [{ ordinal: o.ordinal, pod }] : [];
    });
    const access = serverAccess(ad, spec.replicas, existing);
    // Before the plan creates a pod: its Role names it already.
    const naming = podNaming(usesDataClaims(spec));
    const names = accessPodNames(ad, access, existing, (i) => podNameFor(name, i, revision, naming));
    // Accounts before Roles before bindings, and all of them before a pod that runs as one.
    // Per-ordinal objects of a scale-down stay, like its PVCs, until the AD is deleted.
    const desired: Array<[OwnedKindName, KubeObject]> = [
      ['serviceaccounts', renderServiceAccount(ad)],
      ['roles', renderRole(ad, access.shared, names.shared)],
      ['rolebindings', renderRoleBinding(ad)],
      ...access.perPod.flatMap(
        (i): Array<[OwnedKindName, KubeObject]> => [
          ['serviceaccounts', renderPodServiceAccount(ad, i)],
          ['roles', renderPodRole(ad, i, names.perPod.get(i))],
          ['rolebindings', renderPodRoleBinding(ad, i)],
        ],
      ),
      ['services', renderService(ad)],
      ['poddisruptionbudgets', renderPDB(ad)],
    ];
    const ingress = renderIngress(ad);
    if (ingress) desired.push(['ingresses', ingress]);
    else {
      const gone = await deleteOwned(this.ownedClients.ingresses, ad, this.o.cache.owned('ingresses', namespace, ingressName(name)), call);
      if (gone) log.info('Owned object deleted: spec.ingress was removed', { kind: 'ingresses', name: gone });
    }
    for (const [kind, obj] of desired) {
      const change = await applyOwned(
        this.ownedClients[kind],
        `${namespace}/${name}`,
        this.applied,
        obj,
        this.o.cache.owned(kind, namespace, obj.metadata?.name ?? ''),
        call,
      );
      if (change !== 'none') log.info('Owned object written', { kind, name: obj.metadata?.name, change, owner: name });
    }
  }

  private async execute(
    ad: AtlantisDeployment,
    a: Action,
    pods: V1Pod[],
    revision: string,
    content: ReferencedContent,
    log: Logger,
    call: CallOptions,
  ): Promise<void> {
    const ns = ad.metadata.namespace!;
    const key = `${ns}/${ad.metadata.name}`;
    switch (a.type) {
      case 'createPVC':
        log.info('Creating PVC', { pvc: a.name, ordinal: a.ordinal });
        await this.pvcClient.create(ns, renderPVC(ad, a.ordinal), call).catch(ignoreAlreadyExists);
        return;
      case 'createPod': {
        log.info('Creating pod', { pod: a.name, ordinal: a.ordinal, revision: a.revision, surge: a.surge ?? false });
        const pod = renderPod(ad, a.ordinal, revision, content);
        // The planner names it: by ordinal, or by ordinal and revision when old and new pods coexist.
        await this.podClient.create(ns, { ...pod, metadata: { ...pod.metadata, name: a.name } }, call);
        return;
      }
      case 'startDrain': {
        log.info('Starting drain', { pod: a.podName, uid: a.uid });
        const observed = pods.find((p) => p.metadata?.uid === a.uid);
        // Hold the /status request before the PATCH: the server sees the annotation through
        // its own watch, often before the PATCH's answer reaches us, and an idle server is
        // drained at once. Its answer then is already on the way. (A PATCH that fails leaves a
        // watch the next reconcile stops.)
        const target = observed && drainWatchTarget(observed, { drainStarting: true });
        // The watch's request goes out first (capped: a server that does not accept it
        // must not hold up the drain); see DrainWatch.add.
        if (target && this.o.drainWatch) await withTimeout(this.o.drainWatch.add(key, target), WATCH_FIRST_MS);
        // resourceVersion makes this conditional on the pod we observed, so a stale cache
        // cannot restart a drain's clock.
        const rv = observed?.metadata?.resourceVersion;
        const body = drainPatch(a.uid, a.value);
        const patched = await this.podClient.patch(
          ns,
          a.podName,
          rv ? { metadata: { ...body.metadata, resourceVersion: rv } } : body,
          MERGE_PATCH,
          call,
        );
        this.written.record(key, patched);
        return;
      }
      case 'stampDrainStart':
        this.written.record(key, await this.podClient.patch(ns, a.podName, drainStartedPatch(a.uid, a.value), MERGE_PATCH, call));
        return;
      case 'deletePod':
        log.info('Deleting pod', {
          pod: a.podName,
          uid: a.uid,
          reason: a.reason,
          replace: a.replace,
          drainDurationSeconds: a.drainDurationSeconds,
        });
        await this.podClient.delete(ns, a.podName, podDeleteOptions(a.uid), call);
        return;
      case 'emitEvent': {
        // Not awaited, like client-go's event recorder: an Event is a best-effort record, and
        // a slow API server must not hold up the next drain decision for this key.
        const suffix = `${Date.now().toString(16)}${randomBytes(3).toString('hex')}`;
        void this.eventClient
          .create(
            ns,
            renderEvent(ad, { eventType: a.eventType, reason: a.reason, message: a.message }, this.now(), suffix, this.o.instance),
            call,
          )
          .catch((e: unknown) => log.warn('Could not record event', { reason: a.reason, error: (e as Error).message }));
        return;
      }
    }
  }

  private expectFor(key: string, a: Action, pods: V1Pod[]): void {
    if (a.type === 'createPod') this.expectations.expect(key, { kind: 'exists', what: 'pod', name: a.name });
    if (a.type === 'createPVC') this.expectations.expect(key, { kind: 'exists', what: 'pvc', name: a.name });
    if (a.type === 'deletePod') this.expectations.expect(key, { kind: 'deleted', uid: a.uid });
    if (a.type === 'startDrain' || a.type === 'stampDrainStart') {
      const rv = pods.find((p) => p.metadata?.uid === a.uid)?.metadata?.resourceVersion;
      if (rv) this.expectations.expect(key, { kind: 'changed', what: 'pod', uid: a.uid, fromResourceVersion: rv });
    }
  }

  /** Queues the plan's status unless the object already has it (or it is on its way). */
  private submitStatus(ad: AtlantisDeployment, plan: Plan): void {
    // The API server drops null fields, so compare (and send) the status without them.
    const status = withoutNulls(plan.status);
    if (ad.status && canonicalJSON(ad.status) === canonicalJSON(status)) return;
    this.statusWriter.submit(ad, status);
  }

  /** The object as it will be once our status write lands: plan from what we asked for. */
  private withPendingStatus(ad: AtlantisDeployment): AtlantisDeployment {
    const pending = this.statusWriter.pendingFor(ad);
    return pending ? { ...ad, status: pending } : ad;
  }
}

/**
 * A pod whose drain decision depends on its /status (draining, or with `drainStarting` about
 * to be; running, with an IP), as the drain watch needs it.
 */
function drainWatchTarget(p: V1Pod, opts: { drainStarting?: boolean } = {}): DrainWatchTarget | undefined {
  const o = observePod(p);
  const ip = p.status?.podIP;
  if (!o || !ip || o.deletionTimestamp || !(opts.drainStarting || isDraining(o)) || !isRunning(o)) return undefined;
  return { uid: o.uid, podIP: ip, restarts: o.restarts ?? 0 };
}

function withoutNulls<T>(value: T): T {
  return JSON.parse(JSON.stringify(value, (_k, v: unknown) => (v === null ? undefined : v))) as T;
}

function ignoreAlreadyExists(e: unknown): void {
  if (isConflict(e)) return;
  throw e;
}
