// The local node: a small kubelet (and scheduler) stand-in that runs the pods of this
// project's image as real local processes. Everything it does goes through the API server.
//
// What it does, like a kubelet (see docs/local-cluster.md for the whole contract):
//   - registers a Node (labels, Ready condition, heartbeat) and binds unscheduled pods
//     whose nodeSelector / required node affinity match its labels (pods/binding);
//     others get PodScheduled=False/Unschedulable and stay Pending;
//   - image `atlantis-operator[:tag]` (prefix configurable) runs `node <repo>/dist/atlantis-operator.cjs
//     <args>`; a `command` starting with `atlantis-operator` maps the same way (also for
//     exec hooks and exec probes); another command (e.g. `node script.mjs`, `sh -c ...`)
//     runs as is on the host. An image in local container storage named with a registry
//     host (`localhost/atlantis-operator:0.1.0` from `make image`) runs in a real container
//     (container-runtime.ts; images.ts has the rule). Any other image never starts:
//     ErrImageNeverPull (a `localhost/` image, or pull policy Never), else ErrImagePull /
//     ImagePullBackOff;
//   - emptyDir sizeLimit: a pod over it is evicted (eviction.ts);
//   - each pod gets its own loopback address 127.1.N.M (status.podIP) and the process gets
//     ATLANTIS_BIND_ADDRESS=<podIP>, KUBECONFIG=<per-pod kubeconfig with a bound
//     TokenRequest token for the pod's service account>, HOME=<pod dir>/home;
//   - env like kubelet: value with $(VAR) expansion, fieldRef, secretKeyRef,
//     configMapKeyRef, resourceFieldRef (node capacity), envFrom;
//   - volumes: persistentVolumeClaim -> <root>/pv/<namespace>/<claim> (survives pod
//     replacement; the node binds the claim to a hostPath PV it creates), emptyDir ->
//     fresh per pod, configMap / secret / projected (token, CA, namespace) / downwardAPI
//     -> files. Processes cannot chroot, so mounts are emulated: each volumeMount's
//     mountPath prefix is replaced by the host directory in the container's args and env
//     values (nothing else: a path compiled into a program is not rewritten);
//   - pod processes share one CPU cgroup (cgroup v1 `cpu` controller, when the machine lets
//     us create one) like a kubelet's kubepods cgroup, with kubelet's cpu.shares for it (the
//     node's allocatable CPU: 1024 per core), and run at nice 10. The API server, etcd and
//     the controller share this machine's cores with every pod: however many pods there
//     are, together they weigh one ordinary thread per core. Inside it each pod has a
//     cgroup of its own with kubelet's cpu.shares for its CPU requests (2 without any), so
//     a pod's share does not depend on how many threads its neighbours run: a hundred
//     servers starting do not starve an old one that has to answer its drain;
//   - cwd <pod dir>/cwd; stdout+stderr appended to <pod dir>/logs/<container>.log;
//   - status like kubelet: phase, PodScheduled/PodReadyToStartContainers/Initialized/
//     ContainersReady/Ready, containerStatuses; readiness, liveness and startup probes
//     (httpGet on podIP, tcpSocket, exec); restartPolicy with CrashLoopBackOff backoff;
//   - deletion like kubelet: preStop hook, SIGTERM to the process group, wait the grace
//     period, SIGKILL, then delete the Pod with gracePeriodSeconds 0 and a UID precondition.
//   - every signal and lifecycle step is recorded as a NodeEvent (in memory and as JSON
//     lines in <root>/events.jsonl), so tests can assert e.g. "no SIGKILL".
// Init containers, ephemeral containers and resource limits are not implemented.
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { V1Pod } from '@kubernetes/client-node';
import { kubeRequest } from '../../src/k8s/client.js';
import { type KubeClientConfig, kubeConfigFromFile } from '../../src/k8s/kubeconfig.js';
import { Informer } from '../../src/k8s/informer.js';
import { nullLogger } from '../../src/log.js';
import { repoRoot } from '../binaries.js';
import { makePodCgroup, removePodCgroup } from './cgroups.js';
import { removeNodeContainerCgroups } from './container-runtime.js';
import { startContainer, stopContainer } from './containers.js';
import { findPodDir, NodeEventLog } from './events.js';
import { emptyDirOverLimit } from './eviction.js';
import { allocatePodAddress, releaseLoopbackAddress } from './ip.js';
import { postNodeStatus, registerNode } from './node-object.js';
import { removeOrphanContainers } from './podman.js';
import { stopProbes } from './probes.js';
import { schedule } from './scheduler.js';
import { writeStatus } from './status.js';
import { requestToken, writePodKubeconfig } from './tokens.js';
import { pvDir, setupVolume } from './volumes.js';
import { errMsg, now, SetupError, type LocalNodeOptions, type NodeCtx, type NodeEvent, type PodRt } from './types.js';

export { podCpuShares } from './cgroups.js';
export { claimLoopbackAddress, releaseLoopbackAddress } from './ip.js';
export { findPodDir, readNodeEvents } from './events.js';
export { expandVars, rewriteMounts } from './env.js';
export type { LocalNodeOptions, NodeEvent, NodeEventType } from './types.js';

export class LocalNode {
  readonly name: string;
  readonly root: string;
  readonly labels: Record<string, string>;
  readonly kc: KubeClientConfig;
  /** What the rooms share (see types.ts). */
  private readonly n: NodeCtx;
  private readonly heartbeatMs: number;
  private readonly pods = new Map<string, PodRt>(); // by uid
  /** Pods this node ended: a watch event about one that arrives late must not start it again. */
  private readonly ended = new Set<string>();
  private readonly eventLog: NodeEventLog;
  private unscheduled: Informer<V1Pod> | undefined;
  private mine: Informer<V1Pod> | undefined;
  private heartbeat: NodeJS.Timeout | undefined;
  private evictionCheck: NodeJS.Timeout | undefined;
  private readonly evictionCheckMs: number;
  private readonly ipCounter = { next: Math.floor(Math.random() * 254 * 254) };
  private readonly scheduling = new Set<string>();

  constructor(opts: LocalNodeOptions) {
    this.kc = kubeConfigFromFile(opts.kubeconfigPath);
    this.name = opts.name ?? 'local-node';
    this.root = opts.root ?? fs.mkdtempSync(path.join(os.tmpdir(), 'atlantis-node-'));
    this.labels = {
      ...(opts.labels ?? {}),
      'kubernetes.io/hostname': this.name,
      'kubernetes.io/os': 'linux',
      'kubernetes.io/arch': process.arch === 'x64' ? 'amd64' : process.arch,
    };
    const log = (opts.logger ?? nullLogger()).child({ node: this.name });
    this.heartbeatMs = opts.heartbeatMs ?? 10_000;
    this.evictionCheckMs = opts.evictionCheckMs ?? 10_000;
    this.eventLog = new NodeEventLog(this.root, log);
    this.n = {
      name: this.name,
      root: this.root,
      labels: this.labels,
      kc: this.kc,
      kubeconfigPath: opts.kubeconfigPath,
      log,
      imagePrefix: opts.imagePrefix ?? 'atlantis-operator',
      cliPath: opts.cliPath ?? path.join(repoRoot, 'dist/atlantis-operator.cjs'),
      containerMode: opts.containerMode ?? true,
      backoffBase: opts.crashBackoffBaseMs ?? 10_000,
      podNice: opts.podNice ?? 10,
      podCpuShares: opts.podCpuShares ?? os.cpus().length * 1024,
      podCgroup: undefined,
      stopped: false,
      record: (e) => this.eventLog.record(e),
      scheduleStatus: (rt) => this.scheduleStatus(rt),
    };
    fs.mkdirSync(path.join(this.root, 'pods'), { recursive: true });
    fs.mkdirSync(path.join(this.root, 'pv'), { recursive: true });
  }

  async start(): Promise<void> {
    this.n.podCgroup = makePodCgroup(this.n);
    if (this.n.containerMode) await removeOrphanContainers();
    await registerNode(this.n);
    this.heartbeat = setInterval(
      () => void postNodeStatus(this.n).catch((e) => this.n.log.warn('Node heartbeat failed', { err: errMsg(e) })),
      this.heartbeatMs,
    );
    this.heartbeat.unref();
    this.evictionCheck = setInterval(() => this.checkEviction(), this.evictionCheckMs);
    this.evictionCheck.unref();
    this.mine = new Informer<V1Pod>(this.kc, '/api/v1/pods', {
      fieldSelector: `spec.nodeName=${this.name}`,
      logger: this.n.log,
      silenceTimeoutMs: 30_000,
    });
    this.mine.onEvent((type, pod) => this.onMyPod(type, pod));
    this.unscheduled = new Informer<V1Pod>(this.kc, '/api/v1/pods', {
      fieldSelector: 'spec.nodeName=',
      logger: this.n.log,
      silenceTimeoutMs: 30_000,
    });
    this.unscheduled.onEvent((type, pod) => {
      if (type !== 'DELETED') void schedule(this.n, pod, this.scheduling);
    });
    await this.mine.start();
    await this.unscheduled.start();
  }

  /** Kills every pod process (SIGTERM, then SIGKILL after graceMs) and stops watching. Pod objects are left as they are. */
  async stop(graceMs = 2_000): Promise<void> {
    if (this.n.stopped) return;
    this.n.stopped = true;
    if (this.heartbeat) clearInterval(this.heartbeat);
    if (this.evictionCheck) clearInterval(this.evictionCheck);
    this.mine?.stop();
    this.unscheduled?.stop();
    const all: Promise<void>[] = [];
    for (const rt of this.pods.values()) {
      if (rt.resync) clearInterval(rt.resync);
      if (rt.statusTimer) clearTimeout(rt.statusTimer);
      for (const c of rt.containers.values()) {
        stopProbes(c);
        if (c.restartTimer) clearTimeout(c.restartTimer);
        if (c.proc) all.push(c.proc.stop(graceMs));
      }
    }
    await Promise.all(all);
    for (const rt of this.pods.values()) if (rt.ip) releaseLoopbackAddress(rt.ip);
    for (const rt of this.pods.values()) removePodCgroup(this.n, rt);
    removeNodeContainerCgroups(this.n);
    if (this.n.podCgroup) {
      try {
        fs.rmdirSync(path.dirname(this.n.podCgroup));
      } catch {
        // A process of a pod still in it (it outlived its grace): the directory stays.
      }
    }
  }

  /** Lifecycle and signal events so far (optionally of one pod). */
  events(filter: { namespace?: string; pod?: string } = {}): NodeEvent[] {
    return this.eventLog.events(filter);
  }

  onNodeEvent(listener: (e: NodeEvent) => void): void {
    this.eventLog.onEvent(listener);
  }

  /** The directory of a pod (by namespace/name; the newest when several pods had that name). */
  podDir(namespace: string, name: string, uid?: string): string | undefined {
    return findPodDir(this.root, namespace, name, uid);
  }

  /** The log file of a pod's container. */
  logPath(namespace: string, name: string, container: string, uid?: string): string | undefined {
    const d = this.podDir(namespace, name, uid);
    return d ? path.join(d, 'logs', `${container}.log`) : undefined;
  }

  /** Host directory of a PersistentVolumeClaim (when the node created its volume). */
  pvDir(namespace: string, claim: string): string {
    return pvDir(this.root, namespace, claim);
  }

  // ---------------------------------------------------------------- a pod's lifecycle on this node

  private onMyPod(type: string, pod: V1Pod): void {
    if (this.n.stopped) return;
    const uid = pod.metadata?.uid ?? '';
    let rt = this.pods.get(uid);
    if (type === 'DELETED') {
      if (rt) {
        rt.removed = true;
        rt.pod = pod;
        // force-deleted (or deleted by us): stop what still runs, minimum grace 2 s
        rt.deadline = Math.min(rt.deadline, Date.now() + 2_000);
        void this.terminate(rt);
      }
      return;
    }
    if (!rt) {
      if (this.ended.has(uid)) return;
      if (pod.status?.phase === 'Succeeded' || pod.status?.phase === 'Failed') {
        if (pod.metadata?.deletionTimestamp) void this.deletePodObject(pod);
        return;
      }
      rt = this.newRuntime(pod);
      this.pods.set(uid, rt);
    }
    rt.pod = pod;
    void this.sync(rt);
  }

  private newRuntime(pod: V1Pod): PodRt {
    const md = pod.metadata!;
    const dir = path.join(this.root, 'pods', `${md.namespace}_${md.name}_${md.uid}`);
    const rt: PodRt = {
      uid: md.uid!,
      namespace: md.namespace!,
      name: md.name!,
      pod,
      ip: '',
      dir,
      ready: false,
      setupDone: false,
      mounts: new Map(),
      containers: new Map(),
      startTime: now(),
      deadline: Infinity,
      removed: false,
      lastStatus: '',
      statusWriting: false,
      statusAgain: false,
      syncing: false,
      syncAgain: false,
      kubeconfigFile: path.join(dir, 'kubeconfig'),
    };
    for (const c of pod.spec?.containers ?? []) {
      rt.containers.set(c.name, {
        spec: c,
        state: 'waiting',
        waitingReason: 'ContainerCreating',
        restartCount: 0,
        ready: false,
        started: false,
        backoffSteps: 0,
        probeTimers: [],
        imagePullAttempts: 0,
      });
    }
    // periodic resync: retries of setup errors, ErrImagePull -> ImagePullBackOff, stale status
    rt.resync = setInterval(() => void this.sync(rt), 1_000);
    rt.resync.unref();
    return rt;
  }

  /** Serialized per pod: runs again when an event arrived while it ran. */
  private async sync(rt: PodRt): Promise<void> {
    if (rt.syncing) {
      rt.syncAgain = true;
      return;
    }
    rt.syncing = true;
    try {
      do {
        rt.syncAgain = false;
        await this.syncOnce(rt);
      } while (rt.syncAgain && !this.n.stopped);
    } catch (err) {
      this.n.log.warn('Pod sync failed', { pod: `${rt.namespace}/${rt.name}`, err: errMsg(err) });
    } finally {
      rt.syncing = false;
    }
  }

  private async syncOnce(rt: PodRt): Promise<void> {
    if (this.n.stopped) return;
    if (rt.pod.metadata?.deletionTimestamp || rt.removed) {
      const grace = rt.pod.metadata?.deletionGracePeriodSeconds ?? rt.pod.spec?.terminationGracePeriodSeconds ?? 30;
      rt.deadline = Math.min(rt.deadline, Date.now() + grace * 1000);
      void this.terminate(rt);
      return;
    }
    if (rt.terminating !== undefined) return;
    if (rt.evicted) {
      this.scheduleStatus(rt);
      return;
    }
    if (!rt.setupDone) {
      try {
        await this.setup(rt);
        rt.setupDone = true;
        rt.setupError = undefined;
      } catch (err) {
        rt.setupError =
          err instanceof SetupError ? { reason: err.reason, message: err.message } : { reason: 'ContainerCreating', message: errMsg(err) };
        this.scheduleStatus(rt);
        return;
      }
    }
    for (const c of rt.containers.values()) {
      if (c.state === 'waiting' && !c.restartTimer && !c.proc) await startContainer(this.n, rt, c);
    }
    this.scheduleStatus(rt);
  }

  /** kubelet's eviction of pods whose emptyDir exceeds its sizeLimit (eviction.ts): killed at once, Failed, not restarted. */
  private checkEviction(): void {
    for (const rt of this.pods.values()) {
      if (rt.terminating || rt.evicted || !rt.setupDone || this.n.stopped) continue;
      const message = emptyDirOverLimit(rt);
      if (!message) continue;
      rt.evicted = { message };
      this.n.record({ type: 'Evicted', namespace: rt.namespace, pod: rt.name, uid: rt.uid, message });
      for (const c of rt.containers.values()) {
        if (c.restartTimer) clearTimeout(c.restartTimer);
        c.restartTimer = undefined;
        stopProbes(c);
        c.ready = false;
        if (c.proc?.signal('SIGKILL'))
          this.n.record({
            type: 'SIGKILL sent',
            namespace: rt.namespace,
            pod: rt.name,
            uid: rt.uid,
            container: c.spec.name,
            pid: c.proc.pid,
            message,
          });
      }
      this.scheduleStatus(rt);
    }
  }

  /** A free pod address, not one this node's pods or its informer's pods already have. */
  private allocateIp(): string {
    const used = new Set<string>();
    for (const rt of this.pods.values()) if (rt.ip) used.add(rt.ip);
    for (const p of this.mine?.list() ?? []) if (p.status?.podIP) used.add(p.status.podIP);
    const ip = allocatePodAddress(used, this.ipCounter);
    if (!ip) throw new SetupError('FailedCreatePodSandBox', 'no free loopback address');
    return ip;
  }

  private async setup(rt: PodRt): Promise<void> {
    const pod = rt.pod;
    await fsp.mkdir(path.join(rt.dir, 'logs'), { recursive: true });
    await fsp.mkdir(path.join(rt.dir, 'cwd'), { recursive: true });
    await fsp.mkdir(path.join(rt.dir, 'home'), { recursive: true });
    if (!rt.ip) rt.ip = this.allocateIp();
    const token = await requestToken(this.n, rt, undefined, undefined);
    await writePodKubeconfig(this.n, rt, token);
    for (const v of pod.spec?.volumes ?? []) {
      rt.mounts.set(v.name, await setupVolume(this.n, rt, v));
    }
  }

  private terminate(rt: PodRt): Promise<void> {
    if (!rt.terminating) rt.terminating = this.doTerminate(rt);
    return rt.terminating;
  }

  private async doTerminate(rt: PodRt): Promise<void> {
    if (!Number.isFinite(rt.deadline)) {
      const grace = rt.pod.metadata?.deletionGracePeriodSeconds ?? rt.pod.spec?.terminationGracePeriodSeconds ?? 30;
      rt.deadline = Date.now() + grace * 1000;
    }
    for (const c of rt.containers.values()) {
      if (c.restartTimer) clearTimeout(c.restartTimer);
      c.restartTimer = undefined;
      stopProbes(c);
      c.ready = false;
    }
    this.scheduleStatus(rt);
    await Promise.all([...rt.containers.values()].map((c) => stopContainer(this.n, rt, c)));
    if (rt.resync) clearInterval(rt.resync);
    // final status, then the Pod object goes
    if (!rt.removed) {
      await writeStatus(this.n, rt).catch(() => {});
      await this.deletePodObject(rt.pod);
    }
    this.ended.add(rt.uid);
    this.n.record({ type: 'PodDeleted', namespace: rt.namespace, pod: rt.name, uid: rt.uid });
    if (rt.statusTimer) clearTimeout(rt.statusTimer);
    if (rt.ip) releaseLoopbackAddress(rt.ip);
    removePodCgroup(this.n, rt);
    this.pods.delete(rt.uid);
  }

  private async deletePodObject(pod: V1Pod): Promise<void> {
    const md = pod.metadata ?? {};
    const res = await kubeRequest(this.kc, 'DELETE', `/api/v1/namespaces/${md.namespace}/pods/${md.name}`, {
      apiVersion: 'v1',
      kind: 'DeleteOptions',
      gracePeriodSeconds: 0,
      preconditions: { uid: md.uid },
    }).catch((e: unknown) => ({ status: 0, body: errMsg(e) }));
    if (res.status !== 200 && res.status !== 404 && res.status !== 409) {
      this.n.log.warn('Pod delete failed', { pod: `${md.namespace}/${md.name}`, status: res.status });
    }
  }

  /** Coalesces status writes: one write shortly after a burst of changes. */
  private scheduleStatus(rt: PodRt): void {
    if (rt.statusTimer || this.n.stopped) return;
    rt.statusTimer = setTimeout(() => {
      rt.statusTimer = undefined;
      void writeStatus(this.n, rt).catch((e) =>
        this.n.log.warn('Pod status update failed', { pod: `${rt.namespace}/${rt.name}`, err: errMsg(e) }),
      );
    }, 10);
    rt.statusTimer.unref();
  }
}
