// The local node: a small kubelet (and scheduler) stand-in that runs the pods of this
// project's image as real local processes. Everything it does goes through the API server.
//
// What it does, like a kubelet (see docs/local-cluster.md for the whole contract):
//   - registers a Node (labels, Ready condition, heartbeat) and binds unscheduled pods
//     whose nodeSelector / required node affinity match its labels (pods/binding);
//     others get PodScheduled=False/Unschedulable and stay Pending;
//   - image `atlantis-operator[:tag]` (prefix configurable) runs `node <repo>/dist/atlantis-operator.mjs
//     <args>`; a `command` starting with `atlantis-operator` maps the same way (also for
//     exec hooks and exec probes); another command (e.g. `node script.mjs`, `sh -c ...`)
//     runs as is on the host. Any other image never starts: ErrImagePull / ImagePullBackOff;
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
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import type {
  V1Container,
  V1ContainerStatus,
  V1EnvVar,
  V1NodeSelectorRequirement,
  V1Pod,
  V1PodCondition,
  V1PersistentVolumeClaim,
  V1Probe,
  V1Volume,
  V1VolumeMount,
  V1ExecAction,
  V1HTTPGetAction,
} from '@kubernetes/client-node';
import { kubeRequest, kubeRequestOk, STRATEGIC_MERGE_PATCH, MERGE_PATCH } from '../src/k8s/client.js';
import { type KubeClientConfig, kubeConfigFromFile } from '../src/k8s/kubeconfig.js';
import { Informer } from '../src/k8s/informer.js';
import { nullLogger, type Logger } from '../src/log.js';
import { repoRoot } from './binaries.js';
import { spawnGroup, type GroupProcess } from './procs.js';

export interface LocalNodeOptions {
  /** kubeconfig the node talks to the API server with (admin) */
  kubeconfigPath: string;
  /** Node name (default "local-node") */
  name?: string;
  /** node state dir (pods, logs, PV dirs, events.jsonl); a fresh temp dir by default */
  root?: string;
  /** extra node labels (kubernetes.io/hostname, kubernetes.io/os, kubernetes.io/arch are always set) */
  labels?: Record<string, string>;
  /** images starting with this run the project's CLI (default "atlantis-operator") */
  imagePrefix?: string;
  /** the CLI the project's image runs (default <repo>/dist/atlantis-operator.mjs) */
  cliPath?: string;
  /** first CrashLoopBackOff delay (kubelet: 10 s), doubled up to 5 min */
  crashBackoffBaseMs?: number;
  /** Node heartbeat period (default 10 s) */
  heartbeatMs?: number;
  /**
   * Niceness of pod processes (default 10; 0 = same priority as the node). Stands in for the
   * CPU a kubelet reserves for system components: without it, 100 Node.js servers starting at
   * once on 2 cores starve the API server and etcd (seconds per request).
   */
  podNice?: number;
  /**
   * cpu.shares of the cgroup all pod processes share. Default: kubelet's for kubepods, the
   * node's allocatable CPU in shares (1024 per core; this node reports all its cores), so
   * all pods together weigh like that many ordinary threads. 0 = no cgroup. Needs a
   * writable cgroup v1 `cpu` hierarchy; without one only nice applies.
   */
  podCpuShares?: number;
  logger?: Logger;
}

export type NodeEventType =
  | 'Scheduled'
  | 'ContainerStarted'
  | 'ContainerExited'
  | 'PreStopStarted'
  | 'PreStopFinished'
  | 'SIGTERM sent'
  | 'SIGKILL sent'
  | 'LivenessFailed'
  | 'PodDeleted';

export interface NodeEvent {
  time: string;
  type: NodeEventType;
  namespace: string;
  pod: string;
  uid: string;
  container?: string;
  pid?: number;
  exitCode?: number | null;
  signal?: string | null;
  message?: string;
}

type ContainerState = 'waiting' | 'running' | 'terminated';

interface TerminatedInfo {
  exitCode: number;
  signal?: number;
  reason: string;
  message?: string;
  startedAt: string;
  finishedAt: string;
  containerID?: string;
}

interface CRt {
  spec: V1Container;
  state: ContainerState;
  waitingReason: string;
  waitingMessage?: string;
  proc?: GroupProcess;
  startedAt?: string;
  startedMs?: number;
  terminated?: TerminatedInfo;
  lastTerminated?: TerminatedInfo;
  restartCount: number;
  ready: boolean;
  started: boolean;
  backoffMs: number;
  restartTimer?: NodeJS.Timeout;
  probeTimers: NodeJS.Timeout[];
  imagePullAttempts: number;
}

interface PodRt {
  uid: string;
  namespace: string;
  name: string;
  pod: V1Pod;
  ip: string;
  dir: string;
  ready: boolean;
  setupDone: boolean;
  setupError?: { reason: string; message: string };
  mounts: Map<string, string>; // volume name -> host dir
  containers: Map<string, CRt>;
  startTime: string;
  terminating?: Promise<void>;
  deadline: number;
  removed: boolean; // the Pod object is gone
  lastStatus: string;
  statusTimer?: NodeJS.Timeout;
  statusWriting: boolean;
  statusAgain: boolean;
  syncing: boolean;
  syncAgain: boolean;
  resync?: NodeJS.Timeout;
  kubeconfigFile: string;
  /** cgroup.procs of the pod's own CPU cgroup (inside the pods' one), once made. */
  cgroupProcs?: string;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * kubelet's cpu.shares for a pod (MilliCPUToShares): its containers' CPU requests in
 * millicores x 1024 / 1000, at least 2; 2 for a pod without requests (BestEffort).
 */
export function podCpuShares(pod: V1Pod): number {
  let milli = 0;
  for (const c of pod.spec?.containers ?? []) {
    const q = c.resources?.requests?.cpu;
    if (q === undefined) continue;
    const text = String(q);
    milli += text.endsWith('m') ? Number(text.slice(0, -1)) : Number(text) * 1000;
  }
  return Number.isFinite(milli) ? Math.max(2, Math.floor((milli * 1024) / 1000)) : 2;
}

const now = () => new Date().toISOString().replace(/\.\d{3}Z$/, 'Z');
const errMsg = (e: unknown) => (e instanceof Error ? e.message : String(e));

const SIGNUM: Record<string, number> = { SIGHUP: 1, SIGINT: 2, SIGQUIT: 3, SIGABRT: 6, SIGKILL: 9, SIGSEGV: 11, SIGPIPE: 13, SIGTERM: 15 };

class SetupError extends Error {
  constructor(readonly reason: string, message: string) {
    super(message);
  }
}

export class LocalNode {
  readonly name: string;
  readonly root: string;
  readonly labels: Record<string, string>;
  readonly kc: KubeClientConfig;
  private readonly kubeconfigPath: string;
  private readonly log: Logger;
  private readonly imagePrefix: string;
  private readonly cliPath: string;
  private readonly backoffBase: number;
  private readonly heartbeatMs: number;
  private readonly podNice: number;
  private readonly podCpuShares: number;
  /** tasks file of the pods' CPU cgroup, when one could be made */
  private podCgroup: string | undefined;
  private readonly pods = new Map<string, PodRt>(); // by uid
  private readonly nodeEvents: NodeEvent[] = [];
  private readonly eventsFile: string;
  private readonly eventListeners: Array<(e: NodeEvent) => void> = [];
  private unscheduled: Informer<V1Pod> | undefined;
  private mine: Informer<V1Pod> | undefined;
  private heartbeat: NodeJS.Timeout | undefined;
  private stopped = false;
  private ipCounter = Math.floor(Math.random() * 254 * 254);
  private readonly scheduling = new Set<string>();
  private readonly unschedulableMarked = new Set<string>();

  constructor(opts: LocalNodeOptions) {
    this.kubeconfigPath = opts.kubeconfigPath;
    this.kc = kubeConfigFromFile(opts.kubeconfigPath);
    this.name = opts.name ?? 'local-node';
    this.root = opts.root ?? fs.mkdtempSync(path.join(os.tmpdir(), 'atlantis-node-'));
    this.labels = {
      ...(opts.labels ?? {}),
      'kubernetes.io/hostname': this.name,
      'kubernetes.io/os': 'linux',
      'kubernetes.io/arch': process.arch === 'x64' ? 'amd64' : process.arch,
    };
    this.log = (opts.logger ?? nullLogger()).child({ node: this.name });
    this.imagePrefix = opts.imagePrefix ?? 'atlantis-operator';
    this.cliPath = opts.cliPath ?? path.join(repoRoot, 'dist/atlantis-operator.mjs');
    this.backoffBase = opts.crashBackoffBaseMs ?? 10_000;
    this.heartbeatMs = opts.heartbeatMs ?? 10_000;
    this.podNice = opts.podNice ?? 10;
    this.podCpuShares = opts.podCpuShares ?? os.cpus().length * 1024;
    this.eventsFile = path.join(this.root, 'events.jsonl');
    fs.mkdirSync(path.join(this.root, 'pods'), { recursive: true });
    fs.mkdirSync(path.join(this.root, 'pv'), { recursive: true });
  }

  // ---------------------------------------------------------------- public API

  async start(): Promise<void> {
    this.podCgroup = this.makePodCgroup();
    await this.registerNode();
    this.heartbeat = setInterval(() => void this.postNodeStatus().catch((e) => this.log.warn('Node heartbeat failed', { err: errMsg(e) })), this.heartbeatMs);
    this.heartbeat.unref();
    this.mine = new Informer<V1Pod>(this.kc, '/api/v1/pods', { fieldSelector: `spec.nodeName=${this.name}`, logger: this.log, silenceTimeoutMs: 30_000 });
    this.mine.onEvent((type, pod) => this.onMyPod(type, pod));
    this.unscheduled = new Informer<V1Pod>(this.kc, '/api/v1/pods', { fieldSelector: 'spec.nodeName=', logger: this.log, silenceTimeoutMs: 30_000 });
    this.unscheduled.onEvent((type, pod) => {
      if (type !== 'DELETED') void this.schedule(pod);
    });
    await this.mine.start();
    await this.unscheduled.start();
  }

  /** Kills every pod process (SIGTERM, then SIGKILL after graceMs) and stops watching. Pod objects are left as they are. */
  async stop(graceMs = 2_000): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    if (this.heartbeat) clearInterval(this.heartbeat);
    this.mine?.stop();
    this.unscheduled?.stop();
    const all: Promise<void>[] = [];
    for (const rt of this.pods.values()) {
      if (rt.resync) clearInterval(rt.resync);
      if (rt.statusTimer) clearTimeout(rt.statusTimer);
      for (const c of rt.containers.values()) {
        this.stopProbes(c);
        if (c.restartTimer) clearTimeout(c.restartTimer);
        if (c.proc) all.push(c.proc.stop(graceMs));
      }
    }
    await Promise.all(all);
    for (const rt of this.pods.values()) if (rt.ip) releaseLoopbackAddress(rt.ip);
    for (const rt of this.pods.values()) this.removePodCgroup(rt);
    if (this.podCgroup) {
      try {
        fs.rmdirSync(path.dirname(this.podCgroup));
      } catch {
        // A process of a pod still in it (it outlived its grace): the directory stays.
      }
    }
  }

  /** Creates the pods' CPU cgroup; undefined (nice only) where the machine does not allow it. */
  private makePodCgroup(): string | undefined {
    if (this.podCpuShares <= 0) return undefined;
    const root = '/sys/fs/cgroup/cpu';
    const dir = path.join(root, `atlantis-local-node-${process.pid}-${this.name}`);
    try {
      fs.mkdirSync(dir, { recursive: true });
      fs.writeFileSync(path.join(dir, 'cpu.shares'), String(this.podCpuShares));
      this.log.info('Pods share a CPU cgroup', { cgroup: dir, cpuShares: this.podCpuShares });
      return path.join(dir, 'cgroup.procs');
    } catch (e) {
      this.log.info('No CPU cgroup for pods (nice only)', { err: errMsg(e) });
      return undefined;
    }
  }

  /** Lifecycle and signal events so far (optionally of one pod). */
  events(filter: { namespace?: string; pod?: string } = {}): NodeEvent[] {
    return this.nodeEvents.filter((e) => (!filter.namespace || e.namespace === filter.namespace) && (!filter.pod || e.pod === filter.pod));
  }

  onNodeEvent(listener: (e: NodeEvent) => void): void {
    this.eventListeners.push(listener);
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
    return path.join(this.root, 'pv', namespace, claim);
  }

  // ---------------------------------------------------------------- Node object

  private nodeStatus(): Record<string, unknown> {
    const t = now();
    const cond = (type: string, status: string, reason: string, message: string) => ({ type, status, reason, message, lastHeartbeatTime: t });
    const mem = `${Math.floor(os.totalmem() / 1024)}Ki`;
    const cpu = String(os.cpus().length);
    return {
      conditions: [
        cond('Ready', 'True', 'KubeletReady', 'local node is posting ready status'),
        cond('MemoryPressure', 'False', 'KubeletHasSufficientMemory', 'local node has sufficient memory available'),
        cond('DiskPressure', 'False', 'KubeletHasNoDiskPressure', 'local node has no disk pressure'),
        cond('PIDPressure', 'False', 'KubeletHasSufficientPID', 'local node has sufficient PID available'),
      ],
      addresses: [
        { type: 'InternalIP', address: '127.0.0.1' },
        { type: 'Hostname', address: this.name },
      ],
      capacity: { cpu, memory: mem, pods: '250', 'ephemeral-storage': '100Gi' },
      allocatable: { cpu, memory: mem, pods: '250', 'ephemeral-storage': '100Gi' },
      daemonEndpoints: { kubeletEndpoint: { Port: 0 } },
      nodeInfo: {
        machineID: 'local',
        systemUUID: 'local',
        bootID: String(process.pid),
        kernelVersion: os.release(),
        osImage: `${os.type()} (atlantis-operator local node)`,
        containerRuntimeVersion: 'local://1.0.0',
        kubeletVersion: 'v0.0.0-local-node',
        kubeProxyVersion: '',
        operatingSystem: 'linux',
        architecture: this.labels['kubernetes.io/arch'],
      },
    };
  }

  private async registerNode(): Promise<void> {
    const body = { apiVersion: 'v1', kind: 'Node', metadata: { name: this.name, labels: this.labels }, spec: {} };
    const res = await kubeRequest(this.kc, 'POST', '/api/v1/nodes', body);
    if (res.status === 409) {
      await kubeRequestOk(this.kc, 'PATCH', `/api/v1/nodes/${this.name}`, { metadata: { labels: this.labels } }, { contentType: MERGE_PATCH });
    } else if (res.status !== 201) {
      throw new Error(`Cannot register Node ${this.name}: HTTP ${res.status} ${JSON.stringify(res.body).slice(0, 300)}`);
    }
    await this.postNodeStatus();
  }

  private async postNodeStatus(): Promise<void> {
    if (this.stopped) return;
    await kubeRequestOk(this.kc, 'PATCH', `/api/v1/nodes/${this.name}/status`, { status: this.nodeStatus() }, { contentType: STRATEGIC_MERGE_PATCH });
  }

  // ---------------------------------------------------------------- scheduling

  private fits(pod: V1Pod): { ok: boolean; why?: string } {
    for (const [k, v] of Object.entries(pod.spec?.nodeSelector ?? {})) {
      if (this.labels[k] !== v) return { ok: false, why: "node(s) didn't match Pod's node affinity/selector" };
    }
    const terms = pod.spec?.affinity?.nodeAffinity?.requiredDuringSchedulingIgnoredDuringExecution?.nodeSelectorTerms;
    if (terms && terms.length > 0) {
      const any = terms.some((t) => (t.matchExpressions ?? []).every((e) => this.matchExpr(e)) && (t.matchFields ?? []).every((e) => e.key !== 'metadata.name' || this.matchExpr({ ...e, key: '__name' })));
      if (!any) return { ok: false, why: "node(s) didn't match Pod's node affinity/selector" };
    }
    return { ok: true };
  }

  private matchExpr(e: V1NodeSelectorRequirement): boolean {
    const val = e.key === '__name' ? this.name : this.labels[e.key];
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

  private async schedule(pod: V1Pod): Promise<void> {
    const md = pod.metadata ?? {};
    if (this.stopped || pod.spec?.nodeName || md.deletionTimestamp) return;
    const sched = pod.spec?.schedulerName;
    if (sched && sched !== 'default-scheduler') return;
    if (pod.status?.phase === 'Succeeded' || pod.status?.phase === 'Failed') return;
    const key = md.uid ?? '';
    if (this.scheduling.has(key)) return;
    this.scheduling.add(key);
    try {
      const fit = this.fits(pod);
      const ns = md.namespace ?? 'default';
      if (!fit.ok) {
        const msg = `0/1 nodes are available: 1 ${fit.why}. preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.`;
        const cur = pod.status?.conditions?.find((c) => c.type === 'PodScheduled');
        if (cur?.status === 'False' && cur.message === msg) return;
        await kubeRequest(this.kc, 'PATCH', `/api/v1/namespaces/${ns}/pods/${md.name}/status`,
          { status: { phase: 'Pending', conditions: [{ type: 'PodScheduled', status: 'False', reason: 'Unschedulable', message: msg, lastProbeTime: null, lastTransitionTime: now() }] } },
          { contentType: STRATEGIC_MERGE_PATCH });
        this.unschedulableMarked.add(key);
        return;
      }
      const res = await kubeRequest(this.kc, 'POST', `/api/v1/namespaces/${ns}/pods/${md.name}/binding`, {
        apiVersion: 'v1',
        kind: 'Binding',
        metadata: { name: md.name, namespace: ns, uid: md.uid },
        target: { apiVersion: 'v1', kind: 'Node', name: this.name },
      });
      if (res.status === 201 || res.status === 200) {
        this.record({ type: 'Scheduled', namespace: ns, pod: md.name ?? '', uid: key, message: `bound to ${this.name}` });
      } else if (res.status !== 409 && res.status !== 404) {
        this.log.warn('Binding failed', { pod: `${ns}/${md.name}`, status: res.status });
      }
    } catch (err) {
      this.log.warn('Scheduling failed', { err: errMsg(err) });
    } finally {
      this.scheduling.delete(key);
    }
  }

  // ---------------------------------------------------------------- pod events

  private onMyPod(type: string, pod: V1Pod): void {
    if (this.stopped) return;
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
        backoffMs: this.backoffBase,
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
      } while (rt.syncAgain && !this.stopped);
    } catch (err) {
      this.log.warn('Pod sync failed', { pod: `${rt.namespace}/${rt.name}`, err: errMsg(err) });
    } finally {
      rt.syncing = false;
    }
  }

  private async syncOnce(rt: PodRt): Promise<void> {
    if (this.stopped) return;
    if (rt.pod.metadata?.deletionTimestamp || rt.removed) {
      const grace = rt.pod.metadata?.deletionGracePeriodSeconds ?? rt.pod.spec?.terminationGracePeriodSeconds ?? 30;
      rt.deadline = Math.min(rt.deadline, Date.now() + grace * 1000);
      void this.terminate(rt);
      return;
    }
    if (rt.terminating) return;
    if (!rt.setupDone) {
      try {
        await this.setup(rt);
        rt.setupDone = true;
        rt.setupError = undefined;
      } catch (err) {
        rt.setupError = err instanceof SetupError ? { reason: err.reason, message: err.message } : { reason: 'ContainerCreating', message: errMsg(err) };
        this.scheduleStatus(rt);
        return;
      }
    }
    for (const c of rt.containers.values()) {
      if (c.state === 'waiting' && !c.restartTimer && !c.proc) await this.startContainer(rt, c);
    }
    this.scheduleStatus(rt);
  }

  // ---------------------------------------------------------------- pod setup

  /**
   * 127.1.1.1 ... 127.1.254.254 (pods live in 127.1.0.0/16; tests and the demo bind their own
   * servers in 127.0.0.0/16, so the two never collide), round robin from a random start (a freed address is not
   * reused at once). Several local nodes may run on one machine (tests of several people, a
   * dev/up.ts next to `make test`), so an address is also claimed machine-wide with a file in
   * <tmp>/atlantis-local-node-ips/ holding the node process's pid (stale claims of dead
   * processes are taken over).
   */
  private allocateIp(): string {
    const used = new Set<string>();
    for (const rt of this.pods.values()) if (rt.ip) used.add(rt.ip);
    for (const p of this.mine?.list() ?? []) if (p.status?.podIP) used.add(p.status.podIP);
    const size = 254 * 254;
    for (let i = 0; i < size; i++) {
      const n = this.ipCounter++ % size;
      const ip = `127.1.${Math.floor(n / 254) + 1}.${(n % 254) + 1}`;
      if (!used.has(ip) && claimLoopbackAddress(ip)) return ip;
    }
    throw new SetupError('FailedCreatePodSandBox', 'no free loopback address');
  }

  private async setup(rt: PodRt): Promise<void> {
    const pod = rt.pod;
    await fsp.mkdir(path.join(rt.dir, 'logs'), { recursive: true });
    await fsp.mkdir(path.join(rt.dir, 'cwd'), { recursive: true });
    await fsp.mkdir(path.join(rt.dir, 'home'), { recursive: true });
    if (!rt.ip) rt.ip = this.allocateIp();
    const token = await this.requestToken(rt, undefined, undefined);
    await this.writePodKubeconfig(rt, token);
    for (const v of pod.spec?.volumes ?? []) {
      rt.mounts.set(v.name, await this.setupVolume(rt, v));
    }
  }

  private async requestToken(rt: PodRt, audience: string | undefined, expirationSeconds: number | undefined): Promise<string> {
    const sa = rt.pod.spec?.serviceAccountName || 'default';
    const res = await kubeRequest<{ status?: { token?: string } }>(this.kc, 'POST', `/api/v1/namespaces/${rt.namespace}/serviceaccounts/${sa}/token`, {
      apiVersion: 'authentication.k8s.io/v1',
      kind: 'TokenRequest',
      spec: {
        ...(audience ? { audiences: [audience] } : {}),
        expirationSeconds: expirationSeconds ?? 86_400,
        boundObjectRef: { apiVersion: 'v1', kind: 'Pod', name: rt.name, uid: rt.uid },
      },
    });
    if (res.status !== 201 || !res.body.status?.token) {
      throw new SetupError('CreateContainerConfigError', `cannot get a token for serviceaccount ${rt.namespace}/${sa}: HTTP ${res.status}`);
    }
    return res.body.status.token;
  }

  private caData(): string {
    // The API server's CA as the admin kubeconfig has it (data or file): client-node reads it.
    const full = new KubeConfig();
    full.loadFromFile(this.kubeconfigPath);
    const cluster = full.getCurrentCluster();
    if (cluster?.caData) return cluster.caData;
    if (cluster?.caFile) return fs.readFileSync(cluster.caFile).toString('base64');
    return '';
  }

  private caPem(): string {
    const d = this.caData();
    return d ? Buffer.from(d, 'base64').toString('utf8') : '';
  }

  private async writePodKubeconfig(rt: PodRt, token: string): Promise<void> {
    const server = this.kc.getCurrentCluster()?.server ?? '';
    const text = [
      'apiVersion: v1',
      'kind: Config',
      'clusters:',
      '- name: local',
      '  cluster:',
      `    server: ${server}`,
      `    certificate-authority-data: ${this.caData()}`,
      'users:',
      '- name: pod',
      '  user:',
      `    token: ${token}`,
      'contexts:',
      '- name: pod',
      '  context:',
      '    cluster: local',
      '    user: pod',
      `    namespace: ${rt.namespace}`,
      'current-context: pod',
      '',
    ].join('\n');
    await fsp.writeFile(rt.kubeconfigFile, text, { mode: 0o600 });
  }

  private async getObj<T>(p: string): Promise<T | undefined> {
    const r = await kubeRequest<T>(this.kc, 'GET', p);
    if (r.status === 404) return undefined;
    if (r.status !== 200) throw new Error(`GET ${p}: HTTP ${r.status}`);
    return r.body;
  }

  private async setupVolume(rt: PodRt, v: V1Volume): Promise<string> {
    const vdir = path.join(rt.dir, 'volumes', v.name);
    if (v.persistentVolumeClaim) return this.bindClaim(rt, v.persistentVolumeClaim.claimName);
    await fsp.mkdir(vdir, { recursive: true });
    if (v.emptyDir) return vdir;
    const writeItems = async (data: Record<string, string>, items: Array<{ key: string; path: string }> | undefined) => {
      const list = items && items.length > 0 ? items : Object.keys(data).map((k) => ({ key: k, path: k }));
      for (const it of list) {
        if (data[it.key] === undefined) continue;
        const f = path.join(vdir, it.path);
        await fsp.mkdir(path.dirname(f), { recursive: true });
        await fsp.writeFile(f, data[it.key]!);
      }
    };
    const cmData = async (name: string, optional?: boolean) => {
      const cm = await this.getObj<{ data?: Record<string, string>; binaryData?: Record<string, string> }>(`/api/v1/namespaces/${rt.namespace}/configmaps/${name}`);
      if (!cm) {
        if (optional) return {};
        throw new SetupError('ContainerCreating', `configmap "${name}" not found`);
      }
      const out: Record<string, string> = { ...(cm.data ?? {}) };
      for (const [k, b] of Object.entries(cm.binaryData ?? {})) out[k] = Buffer.from(b, 'base64').toString('latin1');
      return out;
    };
    const secretData = async (name: string, optional?: boolean) => {
      const s = await this.getObj<{ data?: Record<string, string> }>(`/api/v1/namespaces/${rt.namespace}/secrets/${name}`);
      if (!s) {
        if (optional) return {};
        throw new SetupError('ContainerCreating', `secret "${name}" not found`);
      }
      const out: Record<string, string> = {};
      for (const [k, b] of Object.entries(s.data ?? {})) out[k] = Buffer.from(b, 'base64').toString('utf8');
      return out;
    };
    if (v.configMap) await writeItems(await cmData(v.configMap.name ?? '', v.configMap.optional), v.configMap.items);
    else if (v.secret) await writeItems(await secretData(v.secret.secretName ?? '', v.secret.optional), v.secret.items);
    else if (v.projected) {
      for (const src of v.projected.sources ?? []) {
        if (src.serviceAccountToken) {
          const tok = await this.requestToken(rt, src.serviceAccountToken.audience, src.serviceAccountToken.expirationSeconds);
          await writeItems({ token: tok }, [{ key: 'token', path: src.serviceAccountToken.path }]);
        } else if (src.configMap) {
          // kube-root-ca.crt is published by kube-controller-manager; fall back to the node's CA
          const data = src.configMap.name === 'kube-root-ca.crt' ? { 'ca.crt': this.caPem() } : await cmData(src.configMap.name ?? '', src.configMap.optional);
          await writeItems(data, src.configMap.items);
        } else if (src.secret) {
          await writeItems(await secretData(src.secret.name ?? '', src.secret.optional), src.secret.items);
        } else if (src.downwardAPI) {
          const data: Record<string, string> = {};
          const items: Array<{ key: string; path: string }> = [];
          for (const it of src.downwardAPI.items ?? []) {
            if (it.fieldRef) {
              data[it.path] = this.fieldValue(rt, it.fieldRef.fieldPath);
              items.push({ key: it.path, path: it.path });
            }
          }
          await writeItems(data, items);
        }
      }
    } else if (v.downwardAPI) {
      const data: Record<string, string> = {};
      for (const it of v.downwardAPI.items ?? []) if (it.fieldRef) data[it.path] = this.fieldValue(rt, it.fieldRef.fieldPath);
      await writeItems(data, undefined);
    } else if (v.hostPath) {
      return v.hostPath.path;
    }
    return vdir;
  }

  /**
   * Acts as the storage provisioner and PV binder: a claim that is not bound gets a hostPath
   * PV (pvc-<claim uid>) pointing at <root>/pv/<namespace>/<claim>, pre-bound to it; the
   * claim and the volume are then marked Bound. A claim already bound to a hostPath PV uses
   * that path.
   */
  private async bindClaim(rt: PodRt, claim: string): Promise<string> {
    const ns = rt.namespace;
    const pvc = await this.getObj<V1PersistentVolumeClaim>(`/api/v1/namespaces/${ns}/persistentvolumeclaims/${claim}`);
    if (!pvc) throw new SetupError('ContainerCreating', `persistentvolumeclaim "${claim}" not found`);
    if (pvc.metadata?.deletionTimestamp) throw new SetupError('ContainerCreating', `persistentvolumeclaim "${claim}" is being deleted`);
    const dir = this.pvDir(ns, claim);
    const bound = pvc.spec?.volumeName;
    if (bound) {
      const pv = await this.getObj<{ spec?: { hostPath?: { path?: string } } }>(`/api/v1/persistentvolumes/${bound}`);
      const p = pv?.spec?.hostPath?.path;
      const target = p ?? dir;
      await fsp.mkdir(target, { recursive: true });
      if (pvc.status?.phase !== 'Bound') await this.markClaimBound(pvc, bound);
      return target;
    }
    await fsp.mkdir(dir, { recursive: true });
    const pvName = `pvc-${pvc.metadata?.uid}`;
    const storage = pvc.spec?.resources?.requests?.storage ?? '1Gi';
    const pvRes = await kubeRequest(this.kc, 'POST', '/api/v1/persistentvolumes', {
      apiVersion: 'v1',
      kind: 'PersistentVolume',
      metadata: { name: pvName, annotations: { 'pv.kubernetes.io/provisioned-by': 'atlantis-operator.dev/local-node' }, labels: { 'atlantis-operator.dev/local-node': this.name } },
      spec: {
        capacity: { storage },
        accessModes: pvc.spec?.accessModes?.length ? pvc.spec.accessModes : ['ReadWriteOnce'],
        persistentVolumeReclaimPolicy: 'Retain',
        storageClassName: pvc.spec?.storageClassName ?? '',
        volumeMode: pvc.spec?.volumeMode ?? 'Filesystem',
        hostPath: { path: dir, type: 'DirectoryOrCreate' },
        claimRef: { apiVersion: 'v1', kind: 'PersistentVolumeClaim', namespace: ns, name: claim, uid: pvc.metadata?.uid },
        nodeAffinity: { required: { nodeSelectorTerms: [{ matchExpressions: [{ key: 'kubernetes.io/hostname', operator: 'In', values: [this.name] }] }] } },
      },
    });
    if (pvRes.status !== 201 && pvRes.status !== 409) throw new Error(`create PV ${pvName}: HTTP ${pvRes.status} ${JSON.stringify(pvRes.body).slice(0, 300)}`);
    await kubeRequestOk(this.kc, 'PATCH', `/api/v1/namespaces/${ns}/persistentvolumeclaims/${claim}`, {
      metadata: { annotations: { 'pv.kubernetes.io/bind-completed': 'yes', 'pv.kubernetes.io/bound-by-controller': 'yes' } },
      spec: { volumeName: pvName },
    }, { contentType: MERGE_PATCH });
    await kubeRequest(this.kc, 'PATCH', `/api/v1/persistentvolumes/${pvName}/status`, { status: { phase: 'Bound' } }, { contentType: MERGE_PATCH });
    await this.markClaimBound(pvc, pvName);
    return dir;
  }

  private async markClaimBound(pvc: V1PersistentVolumeClaim, _pv: string): Promise<void> {
    const ns = pvc.metadata?.namespace;
    await kubeRequestOk(this.kc, 'PATCH', `/api/v1/namespaces/${ns}/persistentvolumeclaims/${pvc.metadata?.name}/status`, {
      status: {
        phase: 'Bound',
        accessModes: pvc.spec?.accessModes?.length ? pvc.spec.accessModes : ['ReadWriteOnce'],
        capacity: { storage: pvc.spec?.resources?.requests?.storage ?? '1Gi' },
      },
    }, { contentType: MERGE_PATCH });
  }

  // ---------------------------------------------------------------- env and command

  private fieldValue(rt: PodRt, fieldPath: string): string {
    const p = rt.pod;
    const md = p.metadata ?? {};
    const m = /^metadata\.(labels|annotations)\['(.*)'\]$/.exec(fieldPath);
    if (m) return (m[1] === 'labels' ? md.labels : md.annotations)?.[m[2]!] ?? '';
    switch (fieldPath) {
      case 'metadata.name':
        return md.name ?? '';
      case 'metadata.namespace':
        return md.namespace ?? '';
      case 'metadata.uid':
        return md.uid ?? '';
      case 'spec.nodeName':
        return this.name;
      case 'spec.serviceAccountName':
        return p.spec?.serviceAccountName ?? 'default';
      case 'status.podIP':
      case 'status.podIPs':
        return rt.ip;
      case 'status.hostIP':
      case 'status.hostIPs':
        return '127.0.0.1';
      default:
        throw new SetupError('CreateContainerConfigError', `unsupported fieldRef ${fieldPath}`);
    }
  }

  private async resolveEnv(rt: PodRt, c: V1Container): Promise<Record<string, string>> {
    const env: Record<string, string> = {};
    const put = (k: string, v: string) => {
      env[k] = v;
    };
    for (const from of c.envFrom ?? []) {
      const prefix = from.prefix ?? '';
      if (from.configMapRef) {
        const cm = await this.getObj<{ data?: Record<string, string> }>(`/api/v1/namespaces/${rt.namespace}/configmaps/${from.configMapRef.name}`);
        if (!cm && !from.configMapRef.optional) throw new SetupError('CreateContainerConfigError', `configmap "${from.configMapRef.name}" not found`);
        for (const [k, v] of Object.entries(cm?.data ?? {})) put(prefix + k, v);
      } else if (from.secretRef) {
        const s = await this.getObj<{ data?: Record<string, string> }>(`/api/v1/namespaces/${rt.namespace}/secrets/${from.secretRef.name}`);
        if (!s && !from.secretRef.optional) throw new SetupError('CreateContainerConfigError', `secret "${from.secretRef.name}" not found`);
        for (const [k, v] of Object.entries(s?.data ?? {})) put(prefix + k, Buffer.from(v, 'base64').toString('utf8'));
      }
    }
    for (const e of c.env ?? []) put(e.name, await this.envValue(rt, e, env));
    return env;
  }

  private async envValue(rt: PodRt, e: V1EnvVar, sofar: Record<string, string>): Promise<string> {
    if (!e.valueFrom) return expandVars(e.value ?? '', sofar);
    const vf = e.valueFrom;
    if (vf.fieldRef) return this.fieldValue(rt, vf.fieldRef.fieldPath);
    if (vf.secretKeyRef) {
      const s = await this.getObj<{ data?: Record<string, string> }>(`/api/v1/namespaces/${rt.namespace}/secrets/${vf.secretKeyRef.name}`);
      const v = s?.data?.[vf.secretKeyRef.key];
      if (v === undefined) {
        if (vf.secretKeyRef.optional) return '';
        throw new SetupError('CreateContainerConfigError', s ? `couldn't find key ${vf.secretKeyRef.key} in Secret ${rt.namespace}/${vf.secretKeyRef.name}` : `secret "${vf.secretKeyRef.name}" not found`);
      }
      return Buffer.from(v, 'base64').toString('utf8');
    }
    if (vf.configMapKeyRef) {
      const cm = await this.getObj<{ data?: Record<string, string> }>(`/api/v1/namespaces/${rt.namespace}/configmaps/${vf.configMapKeyRef.name}`);
      const v = cm?.data?.[vf.configMapKeyRef.key];
      if (v === undefined) {
        if (vf.configMapKeyRef.optional) return '';
        throw new SetupError('CreateContainerConfigError', cm ? `couldn't find key ${vf.configMapKeyRef.key} in ConfigMap ${rt.namespace}/${vf.configMapKeyRef.name}` : `configmap "${vf.configMapKeyRef.name}" not found`);
      }
      return v;
    }
    if (vf.resourceFieldRef) {
      const r = vf.resourceFieldRef.resource;
      if (r.includes('cpu')) return String(os.cpus().length);
      if (r.includes('memory')) return String(os.totalmem());
      return '0';
    }
    return '';
  }

  /** mountPath -> host dir for a container, longest mountPath first. */
  private mountMap(rt: PodRt, c: V1Container): Array<[string, string]> {
    const out: Array<[string, string]> = [];
    for (const m of c.volumeMounts ?? ([] as V1VolumeMount[])) {
      const host = rt.mounts.get(m.name);
      if (!host) continue;
      out.push([m.mountPath.replace(/\/+$/, '') || '/', m.subPath ? path.join(host, m.subPath) : host]);
    }
    return out.sort((a, b) => b[0].length - a[0].length);
  }

  private isOurImage(image: string | undefined): boolean {
    return Boolean(image && image.startsWith(this.imagePrefix));
  }

  /** argv for a command line of the container (exec hook, exec probe or the entrypoint). */
  private mapCommand(cmd: string[], mounts: Array<[string, string]>): string[] {
    const [first, ...rest] = cmd;
    if (first === undefined) throw new SetupError('RunContainerError', 'empty command');
    const mapped = rest.map((a) => rewriteMounts(a, mounts));
    if (first === 'atlantis-operator' || first.endsWith('/atlantis-operator')) return [process.execPath, this.cliPath, ...mapped];
    if (first === 'node' || first.endsWith('/node')) return [process.execPath, ...mapped];
    return [rewriteMounts(first, mounts), ...mapped];
  }

  private containerArgv(c: V1Container, env: Record<string, string>, mounts: Array<[string, string]>): string[] {
    const args = (c.args ?? []).map((a) => expandVars(a, env));
    if (c.command && c.command.length > 0) return this.mapCommand([...c.command.map((a) => expandVars(a, env)), ...args], mounts);
    return this.mapCommand(['atlantis-operator', ...args], mounts);
  }

  private async processEnv(rt: PodRt, c: V1Container): Promise<Record<string, string>> {
    const mounts = this.mountMap(rt, c);
    const specEnv = await this.resolveEnv(rt, c);
    const base: Record<string, string> = {
      PATH: process.env.PATH ?? '/usr/local/bin:/usr/bin:/bin',
      HOME: path.join(rt.dir, 'home'),
      HOSTNAME: rt.name,
      KUBECONFIG: rt.kubeconfigFile,
      ATLANTIS_BIND_ADDRESS: rt.ip,
    };
    for (const k of ['LANG', 'LC_ALL', 'TZ', 'TMPDIR']) if (process.env[k]) base[k] = process.env[k]!;
    const env: Record<string, string> = { ...base };
    for (const [k, v] of Object.entries(specEnv)) env[k] = rewriteMounts(v, mounts);
    return env;
  }

  // ---------------------------------------------------------------- containers

  private async startContainer(rt: PodRt, c: CRt): Promise<void> {
    if (rt.terminating || this.stopped) return;
    if (!this.isOurImage(c.spec.image)) {
      // This node has no image registry: only the project's image exists.
      c.imagePullAttempts++;
      c.waitingReason = c.imagePullAttempts <= 1 ? 'ErrImagePull' : 'ImagePullBackOff';
      c.waitingMessage =
        c.imagePullAttempts <= 1
          ? `failed to pull image "${c.spec.image}": the local node only has images starting with "${this.imagePrefix}"`
          : `Back-off pulling image "${c.spec.image}"`;
      return;
    }
    let argv: string[];
    let env: Record<string, string>;
    try {
      env = await this.processEnv(rt, c.spec);
      argv = this.containerArgv(c.spec, env, this.mountMap(rt, c.spec));
      if (argv[1] === this.cliPath && !fs.existsSync(this.cliPath)) {
        throw new SetupError('CreateContainerError', `${this.cliPath} does not exist (run \`make build\`)`);
      }
    } catch (err) {
      c.waitingReason = err instanceof SetupError ? err.reason : 'CreateContainerConfigError';
      c.waitingMessage = errMsg(err);
      return;
    }
    if (rt.terminating || this.stopped || c.proc) return;
    const logFile = path.join(rt.dir, 'logs', `${c.spec.name}.log`);
    const fd = fs.openSync(logFile, 'a');
    let proc: GroupProcess;
    try {
      proc = spawnGroup(argv[0]!, argv.slice(1), { cwd: path.join(rt.dir, 'cwd'), env, stdio: ['ignore', fd, fd] });
    } finally {
      fs.closeSync(fd);
    }
    this.deprioritize(rt, proc);
    c.proc = proc;
    c.state = 'running';
    c.startedAt = now();
    c.startedMs = Date.now();
    c.terminated = undefined;
    c.ready = false;
    c.started = !c.spec.startupProbe;
    c.waitingReason = '';
    c.waitingMessage = undefined;
    this.record({ type: 'ContainerStarted', namespace: rt.namespace, pod: rt.name, uid: rt.uid, container: c.spec.name, pid: proc.pid, message: argv.join(' ') });
    void proc.exited.then(({ code, signal }) => this.onExit(rt, c, proc, code, signal));
    this.startProbes(rt, c);
    this.scheduleStatus(rt);
  }

  private onExit(rt: PodRt, c: CRt, proc: GroupProcess, code: number | null, signal: NodeJS.Signals | null): void {
    if (c.proc !== proc) return;
    c.proc = undefined;
    this.stopProbes(c);
    const exitCode = code ?? 128 + (signal ? SIGNUM[signal] ?? 0 : 0);
    c.terminated = {
      exitCode,
      ...(signal ? { signal: SIGNUM[signal] ?? 0 } : {}),
      reason: exitCode === 0 ? 'Completed' : 'Error',
      startedAt: c.startedAt ?? now(),
      finishedAt: now(),
      containerID: `local://${proc.pid}`,
    };
    c.state = 'terminated';
    c.ready = false;
    c.started = false;
    this.record({ type: 'ContainerExited', namespace: rt.namespace, pod: rt.name, uid: rt.uid, container: c.spec.name, pid: proc.pid, exitCode: code, signal });
    this.scheduleStatus(rt);
    if (rt.terminating || this.stopped) return;
    const policy = rt.pod.spec?.restartPolicy ?? 'Always';
    const restart = policy === 'Always' || (policy === 'OnFailure' && exitCode !== 0);
    if (!restart) return;
    // kubelet: the backoff resets after a container ran 10 minutes without a problem
    if (c.startedMs && Date.now() - c.startedMs > 600_000) c.backoffMs = this.backoffBase;
    const delay = c.backoffMs;
    c.backoffMs = Math.min(300_000, c.backoffMs * 2);
    c.lastTerminated = c.terminated;
    c.state = 'waiting';
    c.waitingReason = 'CrashLoopBackOff';
    c.waitingMessage = `back-off ${Math.round(delay / 1000)}s restarting failed container=${c.spec.name} pod=${rt.name}_${rt.namespace}(${rt.uid})`;
    c.restartTimer = setTimeout(() => {
      c.restartTimer = undefined;
      if (rt.terminating || this.stopped) return;
      c.restartCount++;
      void this.startContainer(rt, c);
    }, delay);
    c.restartTimer.unref();
  }

  // ---------------------------------------------------------------- probes

  private stopProbes(c: CRt): void {
    for (const t of c.probeTimers) clearTimeout(t);
    c.probeTimers = [];
  }

  private startProbes(rt: PodRt, c: CRt): void {
    const proc = c.proc;
    const loop = (probe: V1Probe, kind: 'readiness' | 'liveness' | 'startup') => {
      const period = Math.max(1, probe.periodSeconds ?? 10) * 1000;
      const successThreshold = Math.max(1, probe.successThreshold ?? 1);
      const failureThreshold = Math.max(1, probe.failureThreshold ?? 3);
      let ok = 0;
      let bad = 0;
      const tick = async () => {
        if (c.proc !== proc || rt.terminating || this.stopped) return;
        if (kind !== 'startup' && !c.started) {
          schedule(period);
          return;
        }
        if (kind === 'startup' && c.started) return;
        const success = await this.runProbe(rt, c, probe);
        if (c.proc !== proc || rt.terminating || this.stopped) return;
        if (success) {
          ok++;
          bad = 0;
        } else {
          bad++;
          ok = 0;
        }
        if (kind === 'readiness') {
          if (success && ok >= successThreshold && !c.ready) {
            c.ready = true;
            this.scheduleStatus(rt);
          } else if (!success && bad >= failureThreshold && c.ready) {
            c.ready = false;
            this.scheduleStatus(rt);
          }
        } else if (kind === 'startup') {
          if (success) {
            c.started = true;
            this.scheduleStatus(rt);
            return;
          }
          if (bad >= failureThreshold) {
            void this.killForRestart(rt, c, 'startup probe failed', probe);
            return;
          }
        } else if (!success && bad >= failureThreshold) {
          void this.killForRestart(rt, c, 'liveness probe failed', probe);
          return;
        }
        schedule(period);
      };
      const schedule = (ms: number) => {
        const t = setTimeout(() => void tick(), ms);
        t.unref();
        c.probeTimers.push(t);
        if (c.probeTimers.length > 16) c.probeTimers.splice(0, c.probeTimers.length - 16);
      };
      schedule(Math.max(0, (probe.initialDelaySeconds ?? 0) * 1000));
    };
    if (c.spec.startupProbe) loop(c.spec.startupProbe, 'startup');
    if (c.spec.readinessProbe) loop(c.spec.readinessProbe, 'readiness');
    else {
      // no readiness probe: ready as soon as it started
      const t = setInterval(() => {
        if (c.proc !== proc) return clearInterval(t);
        if (c.started && !c.ready) {
          c.ready = true;
          this.scheduleStatus(rt);
          clearInterval(t);
        }
      }, 50);
      t.unref();
      c.probeTimers.push(t);
    }
    if (c.spec.livenessProbe) loop(c.spec.livenessProbe, 'liveness');
  }

  private async killForRestart(rt: PodRt, c: CRt, why: string, probe: V1Probe): Promise<void> {
    const proc = c.proc;
    if (!proc) return;
    this.record({ type: 'LivenessFailed', namespace: rt.namespace, pod: rt.name, uid: rt.uid, container: c.spec.name, pid: proc.pid, message: why });
    const grace = (probe.terminationGracePeriodSeconds ?? rt.pod.spec?.terminationGracePeriodSeconds ?? 30) * 1000;
    this.stopProbes(c);
    c.ready = false;
    this.scheduleStatus(rt);
    if (proc.signal('SIGTERM')) this.record({ type: 'SIGTERM sent', namespace: rt.namespace, pod: rt.name, uid: rt.uid, container: c.spec.name, pid: proc.pid, message: why });
    const t = setTimeout(() => {
      if (proc.isRunning() && proc.signal('SIGKILL')) this.record({ type: 'SIGKILL sent', namespace: rt.namespace, pod: rt.name, uid: rt.uid, container: c.spec.name, pid: proc.pid, message: why });
    }, grace);
    t.unref();
    await proc.exited;
    clearTimeout(t);
  }

  private async runProbe(rt: PodRt, c: CRt, probe: V1Probe): Promise<boolean> {
    const timeout = Math.max(1, probe.timeoutSeconds ?? 1) * 1000;
    try {
      if (probe.httpGet) return await httpProbe(rt.ip, this.portOf(c.spec, probe.httpGet.port), probe.httpGet, timeout);
      if (probe.tcpSocket) return await tcpProbe(rt.ip, this.portOf(c.spec, probe.tcpSocket.port), timeout);
      if (probe.exec) return (await this.runExec(rt, c, probe.exec, timeout)) === 0;
    } catch {
      return false;
    }
    return false;
  }

  private portOf(c: V1Container, port: number | string | object): number {
    if (typeof port === 'number') return port;
    const s = String(port);
    if (/^\d+$/.test(s)) return Number(s);
    const p = (c.ports ?? []).find((x) => x.name === s);
    if (!p) throw new Error(`unknown port name ${s}`);
    return p.containerPort;
  }

  /** Lowers a pod process's CPU priority (its children, e.g. terraform, inherit it). */
  private deprioritize(rt: PodRt, p: GroupProcess): void {
    if (p.pid <= 0) return;
    try {
      if (this.podCgroup) fs.writeFileSync(this.podCgroupOf(rt), String(p.pid));
      if (this.podNice !== 0) os.setPriority(p.pid, this.podNice);
    } catch {
      // Already exited: nothing to lower.
    }
  }

  /** The pod's own cgroup.procs inside the pods' cgroup (made on first use); the shared one if it cannot be made. */
  private podCgroupOf(rt: PodRt): string {
    if (rt.cgroupProcs) return rt.cgroupProcs;
    const shared = this.podCgroup!;
    const dir = path.join(path.dirname(shared), `pod${rt.uid}`);
    try {
      fs.mkdirSync(dir, { recursive: true });
      fs.writeFileSync(path.join(dir, 'cpu.shares'), String(podCpuShares(rt.pod)));
      rt.cgroupProcs = path.join(dir, 'cgroup.procs');
    } catch (e) {
      this.log.warn('No CPU cgroup of its own for a pod (it shares the pods\' one)', { pod: rt.name, err: errMsg(e) });
      rt.cgroupProcs = shared;
    }
    return rt.cgroupProcs;
  }

  /** Removes the pod's own cgroup once its processes are gone (best effort: one that outlived its grace keeps it); never the shared one. */
  private removePodCgroup(rt: PodRt): void {
    if (!rt.cgroupProcs || rt.cgroupProcs === this.podCgroup) return;
    try {
      fs.rmdirSync(path.dirname(rt.cgroupProcs));
    } catch {
      // still in use, or already gone
    }
  }

  /** Runs an exec action (hook or probe) like the container's process: same env, cwd, mounts. Resolves with the exit code (null when killed at the timeout). */
  private async runExec(rt: PodRt, c: CRt, action: V1ExecAction, timeoutMs: number, logPrefix?: string): Promise<number | null> {
    const env = await this.processEnv(rt, c.spec);
    const argv = this.mapCommand(action.command ?? [], this.mountMap(rt, c.spec));
    const logFile = path.join(rt.dir, 'logs', `${c.spec.name}${logPrefix ? `.${logPrefix}` : '.exec'}.log`);
    const fd = fs.openSync(logFile, 'a');
    let p: GroupProcess;
    try {
      p = spawnGroup(argv[0]!, argv.slice(1), { cwd: path.join(rt.dir, 'cwd'), env, stdio: ['ignore', fd, fd] });
    } finally {
      fs.closeSync(fd);
    }
    this.deprioritize(rt, p);
    const t = setTimeout(() => p.signal('SIGKILL'), Math.max(1, timeoutMs));
    const r = await p.exited;
    clearTimeout(t);
    return r.signal ? null : r.code;
  }

  // ---------------------------------------------------------------- termination

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
      this.stopProbes(c);
      c.ready = false;
    }
    this.scheduleStatus(rt);
    await Promise.all([...rt.containers.values()].map((c) => this.stopContainer(rt, c)));
    if (rt.resync) clearInterval(rt.resync);
    // final status, then the Pod object goes
    if (!rt.removed) {
      await this.writeStatus(rt).catch(() => {});
      await this.deletePodObject(rt.pod);
    }
    this.record({ type: 'PodDeleted', namespace: rt.namespace, pod: rt.name, uid: rt.uid });
    if (rt.statusTimer) clearTimeout(rt.statusTimer);
    if (rt.ip) releaseLoopbackAddress(rt.ip);
    this.removePodCgroup(rt);
    this.pods.delete(rt.uid);
  }

  private async stopContainer(rt: PodRt, c: CRt): Promise<void> {
    const proc = c.proc;
    if (!proc) return;
    const ev = (type: NodeEventType, extra: Partial<NodeEvent> = {}) =>
      this.record({ type, namespace: rt.namespace, pod: rt.name, uid: rt.uid, container: c.spec.name, pid: proc.pid, ...extra });
    const hook = c.spec.lifecycle?.preStop;
    if (hook && !rt.removed) {
      ev('PreStopStarted');
      let result = '';
      try {
        const left = rt.deadline - Date.now();
        if (hook.exec) result = `exit code ${await this.runExec(rt, c, hook.exec, left, 'prestop')}`;
        else if (hook.httpGet) result = `http ${(await httpProbe(rt.ip, this.portOf(c.spec, hook.httpGet.port), hook.httpGet as V1HTTPGetAction, left)) ? 'ok' : 'failed'}`;
        else if (hook.sleep) await sleep(Math.min(left, hook.sleep.seconds * 1000));
      } catch (err) {
        result = `failed: ${errMsg(err)}`;
      }
      ev('PreStopFinished', { message: result });
      // kubelet grants 2 s more when the hook used up the grace period
      if (rt.deadline - Date.now() < 2_000) rt.deadline = Date.now() + 2_000;
    }
    if (proc.isRunning() && proc.signal('SIGTERM')) ev('SIGTERM sent');
    for (let i = 0; proc.isRunning() && i < 1_000_000; i++) {
      const left = rt.deadline - Date.now();
      if (left <= 0) break;
      await Promise.race([proc.exited, sleep(Math.min(left, 100))]);
    }
    if (proc.isRunning()) {
      if (proc.signal('SIGKILL')) ev('SIGKILL sent');
      await Promise.race([proc.exited, sleep(10_000)]);
    }
    // whatever else the process left in its group
    proc.signal('SIGKILL');
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
      this.log.warn('Pod delete failed', { pod: `${md.namespace}/${md.name}`, status: res.status });
    }
  }

  // ---------------------------------------------------------------- status

  private scheduleStatus(rt: PodRt): void {
    if (rt.statusTimer || this.stopped) return;
    rt.statusTimer = setTimeout(() => {
      rt.statusTimer = undefined;
      void this.writeStatus(rt).catch((e) => this.log.warn('Pod status update failed', { pod: `${rt.namespace}/${rt.name}`, err: errMsg(e) }));
    }, 10);
    rt.statusTimer.unref();
  }

  private containerStatus(rt: PodRt, c: CRt): V1ContainerStatus {
    const term = (t: TerminatedInfo) => ({ exitCode: t.exitCode, signal: t.signal, reason: t.reason, message: t.message, startedAt: t.startedAt, finishedAt: t.finishedAt, containerID: t.containerID });
    let state: Record<string, unknown>;
    if (c.state === 'running') state = { running: { startedAt: c.startedAt }, waiting: null, terminated: null };
    else if (c.state === 'terminated' && c.terminated) state = { terminated: term(c.terminated), waiting: null, running: null };
    else state = { waiting: { reason: c.waitingReason || rt.setupError?.reason || 'ContainerCreating', ...(c.waitingMessage || rt.setupError?.message ? { message: c.waitingMessage ?? rt.setupError?.message } : {}) }, running: null, terminated: null };
    const last = c.lastTerminated ? { terminated: term(c.lastTerminated), waiting: null, running: null } : {};
    const ours = this.isOurImage(c.spec.image);
    return {
      name: c.spec.name,
      image: c.spec.image ?? '',
      imageID: ours ? `local://${c.spec.image}` : '',
      ...(c.proc ? { containerID: `local://${c.proc.pid}` } : {}),
      ready: c.ready,
      started: c.state === 'running' && c.started,
      restartCount: c.restartCount,
      state,
      lastState: last,
    } as unknown as V1ContainerStatus;
  }

  private podStatus(rt: PodRt): Record<string, unknown> {
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
    const notReady = cs.filter((c) => !c.ready).map((c) => c.spec.name);
    const gates = (rt.pod.spec?.readinessGates ?? []).every((g) => rt.pod.status?.conditions?.some((x) => x.type === g.conditionType && x.status === 'True'));
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
      cond('Ready', ready, ready ? undefined : containersReady ? 'ReadinessGatesNotReady' : 'ContainersNotReady', ready ? undefined : containersReady ? 'the status of pod readiness gate is not "True"' : unready),
      cond('PodScheduled', true),
    ];
    const status: Record<string, unknown> = {
      phase,
      conditions,
      hostIP: '127.0.0.1',
      hostIPs: [{ ip: '127.0.0.1' }],
      startTime: rt.startTime,
      containerStatuses: cs.map((c) => this.containerStatus(rt, c)),
    };
    if (rt.ip) {
      status.podIP = rt.ip;
      status.podIPs = [{ ip: rt.ip }];
    }
    return status;
  }

  private async writeStatus(rt: PodRt): Promise<void> {
    if (rt.removed || this.stopped) return;
    if (rt.statusWriting) {
      rt.statusAgain = true;
      return;
    }
    rt.statusWriting = true;
    try {
      for (let i = 0; i < 10; i++) {
        rt.statusAgain = false;
        const status = this.podStatus(rt);
        const key = JSON.stringify(status, (k, v: unknown) => (k === 'lastTransitionTime' ? undefined : v));
        if (key !== rt.lastStatus) {
          const res = await kubeRequest<V1Pod>(this.kc, 'PATCH', `/api/v1/namespaces/${rt.namespace}/pods/${rt.name}/status`, { metadata: { uid: rt.uid }, status }, { contentType: STRATEGIC_MERGE_PATCH });
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

  private record(e: Omit<NodeEvent, 'time'>): void {
    const ev: NodeEvent = { time: new Date().toISOString(), ...e };
    this.nodeEvents.push(ev);
    if (this.nodeEvents.length > 10_000) this.nodeEvents.splice(0, 1_000);
    try {
      fs.appendFileSync(this.eventsFile, `${JSON.stringify(ev)}\n`);
    } catch {
      // the root dir may be gone at shutdown
    }
    for (const l of this.eventListeners) {
      try {
        l(ev);
      } catch {
        // a listener's problem is not the node's
      }
    }
    this.log.debug('Node event', { ...ev });
  }
}

// ---------------------------------------------------------------- helpers (exported for tests)

/** Kubernetes $(VAR) expansion: defined variables are replaced, $$ escapes, others stay as written. */
export function expandVars(s: string, env: Record<string, string>): string {
  return s.replace(/\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)/g, (m, name: string | undefined) => {
    if (m === '$$') return '$';
    return name !== undefined && env[name] !== undefined ? env[name]! : m;
  });
}

/**
 * Replaces mount paths with host directories in one argument or env value: a mountPath is
 * rewritten where it starts the string or follows '=', ':', ',', whitespace or a quote, and
 * is followed by '/', the end, ':', ',', ';', whitespace or a quote (so `--data-dir=/data`,
 * `/data/x` and `sh -c "echo > /data/f"` work). Mounts must be sorted longest mountPath first.
 */
export function rewriteMounts(value: string, mounts: Array<[string, string]>): string {
  let out = value;
  for (const [mp, host] of mounts) {
    if (mp === '/') continue;
    const esc = mp.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
    out = out.replace(new RegExp(`(^|[=:,\\s'"])${esc}(?=/|$|[:,\\s'";])`, 'g'), (_m, pre: string) => `${pre}${host}`);
  }
  return out;
}

/** The directory of a pod under a node root (newest when several pods had the name). */
export function findPodDir(root: string, namespace: string, name: string, uid?: string): string | undefined {
  const dir = path.join(root, 'pods');
  if (uid) {
    const d = path.join(dir, `${namespace}_${name}_${uid}`);
    return fs.existsSync(d) ? d : undefined;
  }
  let entries: string[];
  try {
    entries = fs.readdirSync(dir).filter((e) => e.startsWith(`${namespace}_${name}_`) && e.length === `${namespace}_${name}_`.length + 36);
  } catch {
    return undefined;
  }
  const withTime = entries.map((e) => ({ e, t: fs.statSync(path.join(dir, e)).mtimeMs })).sort((a, b) => b.t - a.t);
  return withTime[0] ? path.join(dir, withTime[0].e) : undefined;
}

/** Reads the node's events.jsonl. */
export function readNodeEvents(root: string, filter: { namespace?: string; pod?: string } = {}): NodeEvent[] {
  let text = '';
  try {
    text = fs.readFileSync(path.join(root, 'events.jsonl'), 'utf8');
  } catch {
    return [];
  }
  const out: NodeEvent[] = [];
  for (const line of text.split('\n')) {
    if (!line.trim()) continue;
    try {
      const e = JSON.parse(line) as NodeEvent;
      if ((!filter.namespace || e.namespace === filter.namespace) && (!filter.pod || e.pod === filter.pod)) out.push(e);
    } catch {
      // a torn last line
    }
  }
  return out;
}

const IP_CLAIMS = path.join(os.tmpdir(), 'atlantis-local-node-ips');

function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * Claims a loopback address machine-wide (the local nodes' pod addresses go through this);
 * false when another live process holds it. Tests that bind fixed 127.0.N.M addresses can
 * claim them here too, so that no pod gets the same address.
 */
export function claimLoopbackAddress(ip: string): boolean {
  fs.mkdirSync(IP_CLAIMS, { recursive: true });
  const f = path.join(IP_CLAIMS, ip);
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      fs.writeFileSync(f, `${process.pid}\n`, { flag: 'wx' });
      return true;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      let pid = 0;
      try {
        pid = Number(fs.readFileSync(f, 'utf8').trim());
      } catch {
        continue;
      }
      if (pid > 0 && pidAlive(pid)) return false;
      fs.rmSync(f, { force: true });
    }
  }
  return false;
}

/** Releases an address claimed by this process. */
export function releaseLoopbackAddress(ip: string): void {
  const f = path.join(IP_CLAIMS, ip);
  try {
    if (Number(fs.readFileSync(f, 'utf8').trim()) === process.pid) fs.rmSync(f, { force: true });
  } catch {
    // already gone
  }
}

function httpProbe(ip: string, port: number, get: V1HTTPGetAction, timeoutMs: number): Promise<boolean> {
  return new Promise((resolve) => {
    const headers: Record<string, string> = { 'user-agent': 'kube-probe/local-node' };
    for (const h of get.httpHeaders ?? []) headers[h.name] = h.value;
    const req = http.get({ host: ip, port, path: get.path ?? '/', headers, timeout: timeoutMs }, (res) => {
      res.resume();
      const code = res.statusCode ?? 0;
      resolve(code >= 200 && code < 400);
    });
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', () => resolve(false));
  });
}

function tcpProbe(ip: string, port: number, timeoutMs: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.connect({ host: ip, port, timeout: timeoutMs });
    s.on('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.on('timeout', () => {
      s.destroy();
      resolve(false);
    });
    s.on('error', () => resolve(false));
  });
}
