import type { V1Service } from '@kubernetes/client-node';
import { SERVER_PORT } from '../../contract/drain-protocol.js';
import type { AtlantisDeployment } from '../types.js';
import { withDefaults } from './defaults.js';
import { commonLabels, ownerReference, requireName, selectorLabels, serviceName } from './names.js';

/**
 * The webhook endpoint. It selects every pod of the instance; endpoints only list Ready pods,
 * and a draining server is not Ready (/readyz 503), so webhooks stop reaching it. The user's
 * labels go under ours (the controller finds what it owns by them), annotations as given.
 */
export function renderService(ad: AtlantisDeployment): V1Service {
  const { name, namespace } = requireName(ad);
  const { service } = withDefaults(ad.spec);
  const annotations = service.annotations && Object.keys(service.annotations).length > 0 ? { annotations: service.annotations } : {};
  return {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: {
      name: serviceName(name),
      namespace,
      labels: { ...(service.labels ?? {}), ...commonLabels(name) },
      ...annotations,
      ownerReferences: [ownerReference(ad)],
    },
    spec: {
      type: service.type,
      selector: selectorLabels(name),
      ports: [
        {
          name: 'http',
          port: service.port,
          targetPort: SERVER_PORT,
          protocol: 'TCP',
          // Only where the type has node ports (the CRD refuses it on ClusterIP).
          ...(service.nodePort !== undefined && service.type !== 'ClusterIP' ? { nodePort: service.nodePort } : {}),
        },
        ...(service.extraPorts ?? []),
      ],
      ...(service.type === 'LoadBalancer' && service.loadBalancerSourceRanges?.length
        ? { loadBalancerSourceRanges: service.loadBalancerSourceRanges }
        : {}),
    },
  };
}
