// Types of the AtlantisDeployment custom resource (SPEC section 6). The CRD schema (source:
// hack/crd/, written to crds/ by make crds) is the source of truth for validation and
// defaults; these types mirror it for the controller's code. What the controller shares with the server (the drain annotation,
// /status, the port) is in src/contract/drain-protocol.ts.
import type {
  V1Affinity,
  V1Condition,
  V1Container,
  V1EnvFromSource,
  V1EnvVar,
  V1HostAlias,
  V1IngressTLS,
  V1Lifecycle,
  V1LocalObjectReference,
  V1ObjectMeta,
  V1PodDNSConfig,
  V1PodSecurityContext,
  V1ResourceRequirements,
  V1SecurityContext,
  V1ServicePort,
  V1Toleration,
  V1TopologySpreadConstraint,
  V1Volume,
  V1VolumeMount,
} from '@kubernetes/client-node';
import { type DrainStatus, GROUP } from '../contract/drain-protocol.js';

export { GROUP };
/** The CRD's version (not the program's: that is src/version.ts). */
export const CRD_VERSION = 'v1alpha1';
export const API_VERSION = `${GROUP}/${CRD_VERSION}`;
export const KIND = 'AtlantisDeployment';
export const PLURAL = 'atlantisdeployments';

/** Label and annotation keys the controller reads and writes. */
export const LABEL_NAME = 'app.kubernetes.io/name';
export const LABEL_INSTANCE = 'app.kubernetes.io/instance';
export const LABEL_MANAGED_BY = 'app.kubernetes.io/managed-by';
export const LABEL_COMPONENT = 'app.kubernetes.io/component';
export const LABEL_ORDINAL = `${GROUP}/ordinal`;
export const LABEL_REVISION = `${GROUP}/revision`;
/** Written by the controller when a drain annotation's value is not a time (hand drain), so the timeout has a start. */
export const ANNOTATION_DRAIN_STARTED_AT = `${GROUP}/drain-started-at`;
export const APP_NAME = 'atlantis';
export const MANAGED_BY = 'atlantis-operator';
/** Name of the server container in every pod; used to read its waiting reason. */
export const SERVER_CONTAINER = 'atlantis';
/** Where the data volume (PVC, or emptyDir with Redis) is mounted and the server keeps its data (ATLANTIS_DATA_DIR). */
export const DATA_DIR = '/atlantis';

export interface SecretKeyRef {
  name: string;
  key: string;
}

export interface GithubSettings {
  user?: string;
  tokenSecretRef?: SecretKeyRef;
  webhookSecretRef?: SecretKeyRef;
}

/** spec.atlantis.githubApp: the server's --gh-app-* flags; the key is mounted as a file. */
export interface GithubAppSettings {
  id: number;
  installationId?: number;
  slug?: string;
  keySecretRef: SecretKeyRef;
}

/** A ConfigMap key; `key` has a schema default. */
export interface ConfigMapKeyRef {
  name: string;
  key?: string;
}

/** spec.atlantis.repoConfig: the server-side repos.yaml, from a ConfigMap. */
export interface RepoConfigSettings {
  configMapRef: ConfigMapKeyRef;
}

/** spec.atlantis.api: the /api endpoints' secret (--api-secret). */
export interface ApiSettings {
  secretRef: SecretKeyRef;
}

/** spec.atlantis.basicAuth: --web-basic-auth with its user and password. */
export interface BasicAuthSettings {
  username?: string;
  usernameSecretRef?: SecretKeyRef;
  passwordSecretRef: SecretKeyRef;
}

export type LockingDBType = 'boltdb' | 'redis';

/** spec.atlantis.lockingDB.redis.sentinel: the server's --redis-sentinel-* flags (ours). */
export interface SentinelSettingsInput {
  masterName: string;
  /** `host:port` or a host alone (port 26379), as --redis-sentinel-addresses. */
  addresses: string[];
  /** The sentinels' own ACL user and password; the master's are the redis block's. */
  usernameSecretRef?: SecretKeyRef;
  passwordSecretRef?: SecretKeyRef;
}

/** spec.atlantis.lockingDB.redis as a user may write it (the server's --redis-* flags). */
export interface RedisSettingsInput {
  /** One Redis; with `sentinel` the sentinels name the master instead (the schema wants one of them). */
  host?: string;
  sentinel?: SentinelSettingsInput;
  port?: number;
  db?: number;
  tls?: boolean;
  /** With tls: accept any certificate and host name (--redis-insecure-skip-verify). */
  insecureSkipVerify?: boolean;
  usernameSecretRef?: SecretKeyRef;
  passwordSecretRef?: SecretKeyRef;
  /**
   * The replicas' shared state key (--shared-state-key-file): mounted as a file from this
   * Secret key; the controller reads only the Secret's metadata (a change rolls the pods).
   * The schema requires it with type redis.
   */
  sharedStateKeySecretRef?: SecretKeyRef;
  /** The family of status.podIP, which ATLANTIS_REPLICA_URL is built from (IPv6 in brackets); unset: IPv4. */
  podIPFamily?: 'IPv4' | 'IPv6';
}

/** spec.atlantis.lockingDB as a user may write it. */
export interface LockingDBInput {
  type?: LockingDBType;
  /** Read only with type redis. */
  redis?: RedisSettingsInput;
}

type OptionalRedisSetting = 'usernameSecretRef' | 'passwordSecretRef' | 'sentinel' | 'sharedStateKeySecretRef' | 'podIPFamily';
export type RedisSettings = Required<Omit<RedisSettingsInput, OptionalRedisSetting>> & Pick<RedisSettingsInput, OptionalRedisSetting>;

/** The store after defaulting: the embedded one in each pod's data dir, or one Redis shared by all pods. */
export type LockingDB = { type: 'boltdb' } | { type: 'redis'; redis: RedisSettings };

export interface AtlantisSettings {
  url?: string;
  repoAllowlist?: string;
  github?: GithubSettings;
  githubApp?: GithubAppSettings;
  repoConfig?: RepoConfigSettings;
  api?: ApiSettings;
  basicAuth?: BasicAuthSettings;
  lockingDB?: LockingDBInput;
  /** Extra env appended after the operator's own env, so a user's value wins (later entries win in Kubernetes). */
  env?: V1EnvVar[];
  /** Whole ConfigMaps and Secrets as variables; every `env` entry wins over them. */
  envFrom?: V1EnvFromSource[];
  /** Arguments after `server`. */
  extraArgs?: string[];
}

export interface StorageSpec {
  size: string;
  storageClassName?: string | null;
}

export type OnDrainTimeout = 'Wait' | 'Interrupt';

export interface UpdateStrategy {
  maxUnavailable: number;
  /**
   * Pods of the new revision started beside the old ones during a rollout. Defaulted by the
   * controller, not the schema (it depends on lockingDB): 1 with Redis, 0 with the embedded
   * store, where each pod owns its data volume.
   */
  maxSurge: number;
  /** 0 = no timeout: wait for the drain forever (as the server's `--drain-timeout 0`). */
  drainTimeoutSeconds: number;
  onDrainTimeout: OnDrainTimeout;
}

export interface PodTemplateOverrides {
  metadata?: { labels?: Record<string, string>; annotations?: Record<string, string> };
  spec?: {
    resources?: V1ResourceRequirements;
    nodeSelector?: Record<string, string>;
    tolerations?: V1Toleration[];
    affinity?: V1Affinity;
    securityContext?: V1PodSecurityContext;
    containerSecurityContext?: V1SecurityContext;
    serviceAccountName?: string;
    imagePullSecrets?: V1LocalObjectReference[];
    priorityClassName?: string;
    topologySpreadConstraints?: V1TopologySpreadConstraint[];
    hostAliases?: V1HostAlias[];
    dnsPolicy?: string;
    dnsConfig?: V1PodDNSConfig;
    extraVolumes?: V1Volume[];
    /** Mounts of the server container. */
    extraVolumeMounts?: V1VolumeMount[];
    initContainers?: V1Container[];
    extraContainers?: V1Container[];
    /** Hooks of the server container; the drain still starts at SIGTERM, after a preStop hook. */
    lifecycle?: V1Lifecycle;
  };
}

export type ServiceType = 'ClusterIP' | 'NodePort' | 'LoadBalancer';

export interface ServiceSpec {
  type: ServiceType;
  port: number;
  nodePort?: number;
  annotations?: Record<string, string>;
  labels?: Record<string, string>;
  loadBalancerSourceRanges?: string[];
  /** More ports, e.g. to a sidecar; the server's is `http`. */
  extraPorts?: V1ServicePort[];
}

/** spec.serviceAccount: metadata of every ServiceAccount the operator makes for the pods. */
export interface ServiceAccountSettings {
  annotations?: Record<string, string>;
  labels?: Record<string, string>;
}

/** spec.ingress: an Ingress for the Service; only /events unless exposeUI. */
export interface IngressSettings {
  host: string;
  ingressClassName?: string;
  tls?: V1IngressTLS[];
  annotations?: Record<string, string>;
  labels?: Record<string, string>;
  exposeUI?: boolean;
}

/** spec.atlantis after defaulting: lockingDB is always present. */
export interface AtlantisSettingsResolved extends Omit<AtlantisSettings, 'lockingDB'> {
  lockingDB: LockingDB;
}

/** The spec after defaulting (every defaulted field present). */
export interface AtlantisDeploymentSpec {
  image: string;
  replicas: number;
  atlantis: AtlantisSettingsResolved;
  storage: StorageSpec;
  updateStrategy: UpdateStrategy;
  paused: boolean;
  terminationGracePeriodSeconds: number;
  podTemplate?: PodTemplateOverrides;
  service: ServiceSpec;
  serviceAccount?: ServiceAccountSettings;
  ingress?: IngressSettings;
}

/** The spec as a user may write it (before defaulting). */
export interface AtlantisDeploymentSpecInput {
  image: string;
  replicas?: number;
  atlantis?: AtlantisSettings;
  storage?: Partial<StorageSpec>;
  updateStrategy?: Partial<UpdateStrategy>;
  paused?: boolean;
  terminationGracePeriodSeconds?: number;
  podTemplate?: PodTemplateOverrides;
  service?: Partial<ServiceSpec>;
  serviceAccount?: ServiceAccountSettings;
  ingress?: IngressSettings;
}

export type ConditionType = 'Available' | 'Progressing' | 'Paused' | 'Degraded' | 'Reconciling' | 'Stalled' | 'Ready';
export type ConditionStatus = 'True' | 'False' | 'Unknown';

/**
 * metav1.Condition as it travels in JSON: client-node's V1Condition has a Date
 * lastTransitionTime, but status is written as a raw custom-object patch, so here it is the
 * RFC 3339 string the API server stores.
 */
export interface AtlantisCondition extends Omit<V1Condition, 'lastTransitionTime' | 'type' | 'status'> {
  type: ConditionType;
  status: ConditionStatus;
  lastTransitionTime: string;
  observedGeneration: number;
}

export interface PodStatusSummary {
  name: string;
  revision: string;
  ready: boolean;
  /** RFC 3339; null when the pod is not draining. */
  drainingSince: string | null;
  /** From the last `/status` answer; null when unknown. */
  inProgressOperations: number | null;
}

/** status.rolloutPhase: where a rollout is, for `kubectl get atd` (docs/controller.md). */
export type RolloutPhase = 'Complete' | 'Stalled' | 'Paused' | 'Draining' | 'Surging' | 'ScalingDown' | 'Updating';

export interface AtlantisDeploymentStatus {
  observedGeneration: number;
  replicas: number;
  readyReplicas: number;
  updatedReplicas: number;
  drainingReplicas: number;
  /** Live pods of desired ordinals beyond one per ordinal (a surge); absent in a status written before it existed. */
  surgeReplicas?: number;
  rolloutPhase?: RolloutPhase;
  currentRevision: string;
  updateRevision: string;
  /** Label selector string, for the scale subresource (labelSelectorPath). */
  selector: string;
  conditions: AtlantisCondition[];
  pods: PodStatusSummary[];
  /**
   * Pods whose drain passed drainTimeoutSeconds and that wait (onDrainTimeout Wait). The
   * controller always writes it; absent in a status written before the field existed.
   */
  timedOutPods?: string[];
}

export interface AtlantisDeployment {
  apiVersion: typeof API_VERSION;
  kind: typeof KIND;
  metadata: V1ObjectMeta;
  spec: AtlantisDeploymentSpecInput;
  status?: AtlantisDeploymentStatus;
}

/** The controller's last poll of a pod's `/status`. */
export type StatusProbe = { ok: true; body: DrainStatus; at: Date } | { ok: false; error: string; at: Date };
