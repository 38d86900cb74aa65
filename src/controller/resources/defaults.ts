// The CRD's defaults (hack/crd/, crds/atlantisdeployments...yaml) applied in code as well, so render
// functions and the planner give the same answer for an object the API server has not
// defaulted yet (tests, dry runs, an older stored object). maxSurge has no schema default:
// it depends on lockingDB, which a schema default cannot look at.
import type { AtlantisDeploymentSpec, AtlantisDeploymentSpecInput, LockingDB, LockingDBInput } from '../types.js';

export const DEFAULTS = {
  replicas: 1,
  storageSize: '5Gi',
  maxUnavailable: 1,
  drainTimeoutSeconds: 3600,
  onDrainTimeout: 'Wait',
  paused: false,
  terminationGracePeriodSeconds: 120,
  serviceType: 'ClusterIP',
  servicePort: 80,
  lockingDBType: 'boltdb',
  redisPort: 6379,
  redisDB: 0,
  redisTLS: false,
  redisInsecureSkipVerify: false,
  maxSurgeRedis: 1,
  repoConfigKey: 'repos.yaml',
} as const;

/** The store after defaulting. The redis block is read only with type redis (ignored otherwise). */
export function lockingDBWithDefaults(input: LockingDBInput | undefined): LockingDB {
  if ((input?.type ?? DEFAULTS.lockingDBType) !== 'redis') return { type: 'boltdb' };
  const r = input?.redis;
  return {
    type: 'redis',
    redis: {
      // The schema wants host or sentinel with type redis; empty with sentinel (not rendered).
      host: r?.host ?? '',
      port: r?.port ?? DEFAULTS.redisPort,
      db: r?.db ?? DEFAULTS.redisDB,
      tls: r?.tls ?? DEFAULTS.redisTLS,
      insecureSkipVerify: r?.insecureSkipVerify ?? DEFAULTS.redisInsecureSkipVerify,
      ...(r?.usernameSecretRef ? { usernameSecretRef: r.usernameSecretRef } : {}),
      ...(r?.passwordSecretRef ? { passwordSecretRef: r.passwordSecretRef } : {}),
      ...(r?.sentinel ? { sentinel: r.sentinel } : {}),
      ...(r?.sharedStateKeySecretRef ? { sharedStateKeySecretRef: r.sharedStateKeySecretRef } : {}),
      ...(r?.podIPFamily ? { podIPFamily: r.podIPFamily } : {}),
    },
  };
}

/**
 * 1 with Redis, 0 with the embedded store. A surge given with the embedded store (the CRD
 * refuses it; an object stored before the rule existed) is 0: each pod owns its data
 * volume, so a second pod of an ordinal cannot run beside it.
 */
export function maxSurgeWithDefaults(given: number | undefined, lockingDB: LockingDB): number {
  if (lockingDB.type !== 'redis') return 0;
  return given ?? DEFAULTS.maxSurgeRedis;
}

export function withDefaults(spec: AtlantisDeploymentSpecInput): AtlantisDeploymentSpec {
  const lockingDB = lockingDBWithDefaults(spec.atlantis?.lockingDB);
  return {
    image: spec.image,
    replicas: spec.replicas ?? DEFAULTS.replicas,
    atlantis: { ...(spec.atlantis ?? {}), lockingDB },
    storage: {
      size: spec.storage?.size ?? DEFAULTS.storageSize,
      storageClassName: spec.storage?.storageClassName ?? null,
    },
    updateStrategy: {
      maxUnavailable: spec.updateStrategy?.maxUnavailable ?? DEFAULTS.maxUnavailable,
      maxSurge: maxSurgeWithDefaults(spec.updateStrategy?.maxSurge, lockingDB),
      drainTimeoutSeconds: spec.updateStrategy?.drainTimeoutSeconds ?? DEFAULTS.drainTimeoutSeconds,
      onDrainTimeout: spec.updateStrategy?.onDrainTimeout ?? DEFAULTS.onDrainTimeout,
    },
    paused: spec.paused ?? DEFAULTS.paused,
    terminationGracePeriodSeconds: spec.terminationGracePeriodSeconds ?? DEFAULTS.terminationGracePeriodSeconds,
    ...(spec.podTemplate ? { podTemplate: spec.podTemplate } : {}),
    service: {
      ...(spec.service ?? {}),
      type: spec.service?.type ?? DEFAULTS.serviceType,
      port: spec.service?.port ?? DEFAULTS.servicePort,
    },
    ...(spec.serviceAccount ? { serviceAccount: spec.serviceAccount } : {}),
    ...(spec.ingress ? { ingress: spec.ingress } : {}),
  };
}
