// Guards against voluntary disruptions by others (node drains, cluster upgrades use the
// eviction API). The controller itself deletes pods directly, after its own drain, so the
// PDB never blocks a rollout.
//
// An integer minAvailable (replicas - maxUnavailable), not maxUnavailable: the two allow the
// same evictions, but with maxUnavailable the disruption controller reads the owner's scale
// subresource (a GET on the AtlantisDeployment) on every change of every pod it covers,
// several per pod in a rollout. The PDB is re-rendered when replicas or maxUnavailable
// change.
import type { V1PodDisruptionBudget } from '@kubernetes/client-node';
import type { AtlantisDeployment } from '../types.js';
import { withDefaults } from './defaults.js';
import { commonLabels, ownerReference, pdbName, requireName, selectorLabels } from './names.js';

export function renderPDB(ad: AtlantisDeployment): V1PodDisruptionBudget {
  const { name, namespace } = requireName(ad);
  const { replicas, updateStrategy } = withDefaults(ad.spec);
  return {
    apiVersion: 'policy/v1',
    kind: 'PodDisruptionBudget',
    metadata: { name: pdbName(name), namespace, labels: commonLabels(name), ownerReferences: [ownerReference(ad)] },
    spec: { minAvailable: Math.max(0, replicas - updateStrategy.maxUnavailable), selector: { matchLabels: selectorLabels(name) } },
  };
}
