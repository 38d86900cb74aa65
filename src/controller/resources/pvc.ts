// One PVC per ordinal, owned by the AtlantisDeployment: kept on scale-down (a scale back up
// finds its locks, plans and queued commands), removed with the CR by the garbage collector.
// Only with the embedded store: with Redis the state is shared there and pods need no claim.
import type { V1PersistentVolumeClaim } from '@kubernetes/client-node';
import { LABEL_ORDINAL, type AtlantisDeployment, type AtlantisDeploymentSpec } from '../types.js';
import { withDefaults } from './defaults.js';
import { commonLabels, ownerReference, pvcName, requireName } from './names.js';

/** Whether each ordinal's data dir is its own PVC (the embedded store) rather than an emptyDir (Redis). */
export function usesDataClaims(spec: AtlantisDeploymentSpec): boolean {
  return spec.atlantis.lockingDB.type !== 'redis';
}

export function renderPVC(ad: AtlantisDeployment, ordinal: number): V1PersistentVolumeClaim {
  const { name, namespace } = requireName(ad);
  const { storage } = withDefaults(ad.spec);
  return {
    apiVersion: 'v1',
    kind: 'PersistentVolumeClaim',
    metadata: {
      name: pvcName(name, ordinal),
      namespace,
      labels: { ...commonLabels(name), [LABEL_ORDINAL]: String(ordinal) },
      ownerReferences: [ownerReference(ad)],
    },
    spec: {
      accessModes: ['ReadWriteOnce'],
      resources: { requests: { storage: storage.size } },
      // Omitted (not null) when unset, so the cluster's default StorageClass applies.
      ...(storage.storageClassName ? { storageClassName: storage.storageClassName } : {}),
    },
  };
}
