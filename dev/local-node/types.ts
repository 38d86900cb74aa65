// What the local node's rooms share: the options, the per-pod and per-container runtime
// records, the node events tests read, and the context every room's functions take.
import type { V1Container, V1Pod } from '@kubernetes/client-node';
import type { KubeClientConfig } from '../../src/k8s/kubeconfig.js';
import type { Logger } from '../../src/log.js';
import type { GroupProcess } from '../procs.js';

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
  /** the CLI the project's image runs (default <repo>/dist/atlantis-operator.cjs) */
  cliPath?: string;
  /**
   * Run images found in local container storage (a reference with a registry host, e.g.
   * `localhost/atlantis-operator:0.1.0` from `make image`) in real containers with podman
   * (default true; images.ts, container-runtime.ts). Short `atlantis-operator...` names run as
   * processes either way.
   */
  containerMode?: boolean;
  /** first CrashLoopBackOff delay (kubelet: 10 s), doubled up to 5 min */
  crashBackoffBaseMs?: number;
  /** Node heartbeat period (default 10 s) */
  heartbeatMs?: number;
  /** How often emptyDir usage is checked against sizeLimit (kubelet's housekeeping: 10 s) */
  evictionCheckMs?: number;
  /**
   * Niceness of pod processes (default 10; 0 = same priority as the node). Stands in for the
   * CPU a kubelet reserves for system components: without it, many servers starting at once
   * on a small machine starve the API server and etcd (docs/local-cluster.md).
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
  | 'Evicted'
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

export type ContainerState = 'waiting' | 'running' | 'terminated';

export interface TerminatedInfo {
  exitCode: number;
  signal?: number;
  reason: string;
  message?: string;
  startedAt: string;
  finishedAt: string;
  containerID?: string;
}

export interface CRt {
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
  /** crashes since the backoff last reset: the next restart waits backoffDelay(backoffSteps) */
  backoffSteps: number;
  restartTimer?: NodeJS.Timeout;
  probeTimers: NodeJS.Timeout[];
  imagePullAttempts: number;
}

export interface PodRt {
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
  /** Evicted (an emptyDir over its sizeLimit): Failed, nothing restarts (eviction.ts). */
  evicted?: { message: string };
}

/** The node's shared state and the two callbacks every room may use. */
export interface NodeCtx {
  readonly name: string;
  readonly root: string;
  readonly labels: Record<string, string>;
  readonly kc: KubeClientConfig;
  readonly kubeconfigPath: string;
  readonly log: Logger;
  readonly imagePrefix: string;
  readonly cliPath: string;
  readonly containerMode: boolean;
  readonly backoffBase: number;
  readonly podNice: number;
  readonly podCpuShares: number;
  /** cgroup.procs of the pods' CPU cgroup, when one could be made */
  podCgroup: string | undefined;
  stopped: boolean;
  record(e: Omit<NodeEvent, 'time'>): void;
  scheduleStatus(rt: PodRt): void;
}

export const now = () => new Date().toISOString().replace(/\.\d{3}Z$/, 'Z');
export const errMsg = (e: unknown) => (e instanceof Error ? e.message : String(e));

export class SetupError extends Error {
  constructor(
    readonly reason: string,
    message: string,
  ) {
    super(message);
  }
}
