// The CRD's defaults (crds/atlantisdeployments...yaml) applied in code as well, so render
// functions and the planner give the same answer for an object the API server has not
// defaulted yet (tests, dry runs, an older stored object).
import type { AtlantisDeploymentSpec, AtlantisDeploymentSpecInput } from '../types.js';

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
} as const;

export function withDefaults(spec: AtlantisDeploymentSpecInput): AtlantisDeploymentSpec {
  return {
    image: spec.image,
    replicas: spec.replicas ?? DEFAULTS.replicas,
    atlantis: spec.atlantis ?? {},
    storage: {
      size: spec.storage?.size ?? DEFAULTS.storageSize,
      storageClassName: spec.storage?.storageClassName ?? null,
    },
    updateStrategy: {
      maxUnavailable: spec.updateStrategy?.maxUnavailable ?? DEFAULTS.maxUnavailable,
      drainTimeoutSeconds: spec.updateStrategy?.drainTimeoutSeconds ?? DEFAULTS.drainTimeoutSeconds,
      onDrainTimeout: spec.updateStrategy?.onDrainTimeout ?? DEFAULTS.onDrainTimeout,
    },
    paused: spec.paused ?? DEFAULTS.paused,
    terminationGracePeriodSeconds: spec.terminationGracePeriodSeconds ?? DEFAULTS.terminationGracePeriodSeconds,
    ...(spec.podTemplate ? { podTemplate: spec.podTemplate } : {}),
    service: {
      type: spec.service?.type ?? DEFAULTS.serviceType,
      port: spec.service?.port ?? DEFAULTS.servicePort,
    },
  };
}
