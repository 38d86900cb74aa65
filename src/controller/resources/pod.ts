// The server pod (SPEC section 6). renderPodTemplate gives everything that does not depend
// on the ordinal; its hash is the revision. renderPod adds the ordinal's name, labels and,
// with the embedded store, its PVC.
import type { V1EnvVar, V1Pod, V1PodSecurityContext, V1PodSpec, V1SecurityContext, V1Volume, V1VolumeMount } from '@kubernetes/client-node';
import { LIVENESS_PATH, READINESS_PATH, SERVER_PORT } from '../../contract/drain-protocol.js';
import {
  DATA_DIR,
  SERVER_CONTAINER,
  type AtlantisDeployment,
  type AtlantisDeploymentSpec,
  type LockingDB,
  type SecretKeyRef,
  type SentinelSettingsInput,
} from '../types.js';
import { withDefaults } from './defaults.js';
import { commonLabels, ownerReference, podAccountName, podLabels, podName, pvcName, requireName } from './names.js';
import { usesDataClaims } from './pvc.js';
import { hashRevision } from './revision.js';
import { drainTiming, goDuration } from './timing.js';

export const DATA_VOLUME = 'data';
/** The shared state key's Secret volume (Redis only): one file, read-only, readable by the pod's fsGroup. */
export const SHARED_STATE_KEY_VOLUME = 'shared-state-key';
export const SHARED_STATE_KEY_DIR = '/etc/atlantis/shared-state';
export const SHARED_STATE_KEY_FILE = `${SHARED_STATE_KEY_DIR}/key`;
// The template's claimName before renderPod sets the ordinal's PVC; constant so the hash is too.
const CLAIM_PLACEHOLDER = '';
// Likewise the serviceAccountName, unless the user names one: renderPod sets the ordinal's own.
const ACCOUNT_PLACEHOLDER = '';

/** The pod template without per-ordinal parts: metadata.labels/annotations and spec. */
export interface PodTemplate {
  metadata: { labels: Record<string, string>; annotations: Record<string, string> };
  spec: V1PodSpec;
}

// A non-root default that works with a PVC: fsGroup makes the volume writable for the user.
// A user's podTemplate.spec.securityContext replaces these field by field.
const DEFAULT_POD_SECURITY_CONTEXT: V1PodSecurityContext = {
  runAsNonRoot: true,
  runAsUser: 1000,
  runAsGroup: 1000,
  fsGroup: 1000,
  seccompProfile: { type: 'RuntimeDefault' },
};

// The root filesystem stays writable: terraform writes plugin caches and temp files outside
// the data dir, and those paths depend on the user's workflows.
const CONTAINER_SECURITY_CONTEXT: V1SecurityContext = {
  allowPrivilegeEscalation: false,
  capabilities: { drop: ['ALL'] },
};

/**
 * The --locking-db-type and --redis-* settings. Nothing for the embedded store: it is the
 * server's default, and pods rendered before lockingDB existed keep their revision.
 * Credentials only as secretKeyRef, so they are never in the pod spec.
 */
export function lockingDBEnv(db: LockingDB): V1EnvVar[] {
  if (db.type !== 'redis') return [];
  const r = db.redis;
  const env: V1EnvVar[] = [{ name: 'ATLANTIS_LOCKING_DB_TYPE', value: 'redis' }];
  // With Sentinel the sentinels name the master: the server refuses a host or port beside them.
  if (r.sentinel) env.push(...sentinelEnv(r.sentinel));
  else {
    if (r.host) env.push({ name: 'ATLANTIS_REDIS_HOST', value: r.host });
    env.push({ name: 'ATLANTIS_REDIS_PORT', value: String(r.port) });
  }
  env.push(
    { name: 'ATLANTIS_REDIS_DB', value: String(r.db) },
    { name: 'ATLANTIS_REDIS_TLS_ENABLED', value: String(r.tls) },
    { name: 'ATLANTIS_REDIS_INSECURE_SKIP_VERIFY', value: String(r.insecureSkipVerify) },
  );
  env.push(...fromSecret('ATLANTIS_REDIS_USERNAME', r.usernameSecretRef), ...fromSecret('ATLANTIS_REDIS_PASSWORD', r.passwordSecretRef));
  if (r.sharedStateKeySecretRef) env.push({ name: 'ATLANTIS_SHARED_STATE_KEY_FILE', value: SHARED_STATE_KEY_FILE });
  return env;
}

/**
 * The shared state key as a file from its Secret (Redis only): the kubelet mounts it, the
 * controller never reads it, and it never appears in the pod spec or its env. 0440 with the
 * pod's fsGroup: the server's user reads it through its group, nobody else.
 */
export function sharedStateKeyVolume(db: LockingDB): { volumes: V1Volume[]; mounts: V1VolumeMount[] } {
  const ref = db.type === 'redis' ? db.redis.sharedStateKeySecretRef : undefined;
  if (!ref) return { volumes: [], mounts: [] };
  return {
    volumes: [
      {
        name: SHARED_STATE_KEY_VOLUME,
        secret: { secretName: ref.name, items: [{ key: ref.key, path: 'key' }], defaultMode: 0o440 },
      },
    ],
    mounts: [{ name: SHARED_STATE_KEY_VOLUME, mountPath: SHARED_STATE_KEY_DIR, readOnly: true }],
  };
}

/** The variable read from a Secret key by the kubelet, or nothing without a ref. */
function fromSecret(env: string, ref: SecretKeyRef | undefined): V1EnvVar[] {
  return ref ? [{ name: env, valueFrom: { secretKeyRef: { name: ref.name, key: ref.key } } }] : [];
}

function sentinelEnv(s: SentinelSettingsInput): V1EnvVar[] {
  return [
    { name: 'ATLANTIS_REDIS_SENTINEL_ADDRESSES', value: s.addresses.join(',') },
    { name: 'ATLANTIS_REDIS_SENTINEL_MASTER_NAME', value: s.masterName },
    ...fromSecret('ATLANTIS_REDIS_SENTINEL_USERNAME', s.usernameSecretRef),
    ...fromSecret('ATLANTIS_REDIS_SENTINEL_PASSWORD', s.passwordSecretRef),
  ];
}

/**
 * How the replicas sharing a Redis name and reach each other. The id is the pod's name, given
 * explicitly: the host name is cut to 63 characters, which can make two pods' ids equal. The
 * URL is the pod IP (a pod's host name does not resolve); POD_IP comes first so kubelet's
 * $(VAR) expansion sees it.
 */
function replicaEnv(db: LockingDB): V1EnvVar[] {
  if (db.type !== 'redis') return [];
  return [
    { name: 'POD_IP', valueFrom: { fieldRef: { fieldPath: 'status.podIP' } } },
    { name: 'ATLANTIS_REPLICA_ID', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } },
    { name: 'ATLANTIS_REPLICA_URL', value: `http://$(POD_IP):${SERVER_PORT}` },
  ];
}

export function serverEnv(spec: AtlantisDeploymentSpec): V1EnvVar[] {
  const timing = drainTiming(spec.terminationGracePeriodSeconds);
  const a = spec.atlantis;
  const env: V1EnvVar[] = [
    { name: 'ATLANTIS_PORT', value: String(SERVER_PORT) },
    { name: 'ATLANTIS_DATA_DIR', value: DATA_DIR },
  ];
  if (a.url) env.push({ name: 'ATLANTIS_ATLANTIS_URL', value: a.url });
  if (a.repoAllowlist) env.push({ name: 'ATLANTIS_REPO_ALLOWLIST', value: a.repoAllowlist });
  if (a.github?.user) env.push({ name: 'ATLANTIS_GH_USER', value: a.github.user });
  env.push(
    ...fromSecret('ATLANTIS_GH_TOKEN', a.github?.tokenSecretRef),
    ...fromSecret('ATLANTIS_GH_WEBHOOK_SECRET', a.github?.webhookSecretRef),
  );
  env.push(...lockingDBEnv(a.lockingDB));
  env.push(
    { name: 'ATLANTIS_DRAIN_TIMEOUT', value: goDuration(timing.drainTimeoutSeconds) },
    { name: 'ATLANTIS_TERRAFORM_INTERRUPT_GRACE', value: goDuration(timing.interruptGraceSeconds) },
    { name: 'POD_NAME', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } },
    { name: 'POD_NAMESPACE', valueFrom: { fieldRef: { fieldPath: 'metadata.namespace' } } },
    ...replicaEnv(a.lockingDB),
  );
  // Appended last: for duplicate names Kubernetes uses the last entry, so the user's env wins.
  return [...env, ...(a.env ?? [])];
}

/**
 * With the embedded store the data dir is the ordinal's PVC (its locks and plans outlive the
 * pod). With Redis it holds only working copies, which a new pod clones again: an emptyDir,
 * so a pod of a new revision can start beside the old one. Its sizeLimit makes the kubelet
 * evict a pod that fills it rather than let it fill the node.
 */
function dataVolume(spec: AtlantisDeploymentSpec): V1Volume {
  if (usesDataClaims(spec)) return { name: DATA_VOLUME, persistentVolumeClaim: { claimName: CLAIM_PLACEHOLDER } };
  return { name: DATA_VOLUME, emptyDir: { sizeLimit: spec.storage.size } };
}

export function renderPodTemplate(ad: AtlantisDeployment): PodTemplate {
  const { name } = requireName(ad);
  const spec = withDefaults(ad.spec);
  const user = spec.podTemplate ?? {};
  const us = user.spec ?? {};
  const key = sharedStateKeyVolume(spec.atlantis.lockingDB);
  const podSpec: V1PodSpec = {
    serviceAccountName: us.serviceAccountName ?? ACCOUNT_PLACEHOLDER,
    // The server watches its own Pod for the drain annotation, so it needs its token.
    automountServiceAccountToken: true,
    // Service links would inject ATLANTIS_* variables for a Service named "atlantis", which the
    // server reads as flags.
    enableServiceLinks: false,
    restartPolicy: 'Always',
    terminationGracePeriodSeconds: spec.terminationGracePeriodSeconds,
    securityContext: { ...DEFAULT_POD_SECURITY_CONTEXT, ...(us.securityContext ?? {}) },
    containers: [
      {
        name: SERVER_CONTAINER,
        image: spec.image,
        args: ['server'],
        ports: [{ name: 'http', containerPort: SERVER_PORT, protocol: 'TCP' }],
        env: serverEnv(spec),
        // Drops out of the Service within seconds of a drain starting (/readyz is 503 then).
        readinessProbe: {
          httpGet: { path: READINESS_PATH, port: SERVER_PORT },
          periodSeconds: 2,
          timeoutSeconds: 2,
          failureThreshold: 1,
          successThreshold: 1,
        },
        // Liveness starts only once the server answered: a start that is slow because many
        // pods start on a busy node (crash recovery, a starved CPU) gets 5 minutes instead
        // of being killed and started over, which only adds to the load.
        startupProbe: {
          httpGet: { path: LIVENESS_PATH, port: SERVER_PORT },
          periodSeconds: 2,
          timeoutSeconds: 5,
          failureThreshold: 150,
        },
        // /healthz stays 200 while draining, so a long drain never gets the pod killed.
        livenessProbe: {
          httpGet: { path: LIVENESS_PATH, port: SERVER_PORT },
          periodSeconds: 10,
          timeoutSeconds: 5,
          failureThreshold: 6,
        },
        volumeMounts: [{ name: DATA_VOLUME, mountPath: DATA_DIR }, ...key.mounts],
        securityContext: CONTAINER_SECURITY_CONTEXT,
        ...(us.resources ? { resources: us.resources } : {}),
      },
    ],
    volumes: [dataVolume(spec), ...key.volumes],
    ...(us.nodeSelector ? { nodeSelector: us.nodeSelector } : {}),
    ...(us.tolerations ? { tolerations: us.tolerations } : {}),
    ...(us.affinity ? { affinity: us.affinity } : {}),
  };
  return {
    // Our labels are applied over the user's so a template can never break the selector.
    metadata: {
      labels: { ...(user.metadata?.labels ?? {}), ...commonLabels(name) },
      annotations: { ...(user.metadata?.annotations ?? {}) },
    },
    spec: podSpec,
  };
}

/** The revision label value for the AtlantisDeployment's current spec. */
export function podTemplateRevision(ad: AtlantisDeployment): string {
  return hashRevision(renderPodTemplate(ad));
}

export function renderPod(ad: AtlantisDeployment, ordinal: number, revision: string = podTemplateRevision(ad)): V1Pod {
  const { name, namespace } = requireName(ad);
  const t = renderPodTemplate(ad);
  const spec: V1PodSpec = {
    ...t.spec,
    serviceAccountName: t.spec.serviceAccountName === ACCOUNT_PLACEHOLDER ? podAccountName(name, ordinal) : t.spec.serviceAccountName,
    volumes: (t.spec.volumes ?? []).map((v) =>
      v.name === DATA_VOLUME && v.persistentVolumeClaim
        ? { name: DATA_VOLUME, persistentVolumeClaim: { claimName: pvcName(name, ordinal) } }
        : v,
    ),
  };
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name: podName(name, ordinal),
      namespace,
      labels: { ...t.metadata.labels, ...podLabels(name, ordinal, revision) },
      annotations: t.metadata.annotations,
      ownerReferences: [ownerReference(ad)],
    },
    spec,
  };
}
