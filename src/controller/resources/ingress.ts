// spec.ingress: an Ingress for the Service. By default it routes only /events, the webhooks,
// which carry their own signature; the web pages, job logs and /api only with exposeUI, which
// the CRD allows only with basic auth on (SECURITY.md: without it anyone who reaches them
// reads job logs and can discard locks).
import type { V1Ingress, V1HTTPIngressPath } from '@kubernetes/client-node';
import type { AtlantisDeployment } from '../types.js';
import { withDefaults } from './defaults.js';
import { commonLabels, ownerReference, requireName, serviceName } from './names.js';

export const EVENTS_PATH = '/events';
export const ingressName = (name: string): string => name;

/** The Ingress the spec asks for, or undefined (then an Ingress the controller made is deleted). */
export function renderIngress(ad: AtlantisDeployment): V1Ingress | undefined {
  const { name, namespace } = requireName(ad);
  const spec = withDefaults(ad.spec);
  const ing = spec.ingress;
  if (!ing) return undefined;
  const backend = { service: { name: serviceName(name), port: { name: 'http' } } };
  const paths: V1HTTPIngressPath[] = ing.exposeUI
    ? [{ path: '/', pathType: 'Prefix', backend }]
    : [{ path: EVENTS_PATH, pathType: 'Exact', backend }];
  return {
    apiVersion: 'networking.k8s.io/v1',
    kind: 'Ingress',
    metadata: {
      name: ingressName(name),
      namespace,
      labels: { ...(ing.labels ?? {}), ...commonLabels(name) },
      ...(ing.annotations && Object.keys(ing.annotations).length > 0 ? { annotations: ing.annotations } : {}),
      ownerReferences: [ownerReference(ad)],
    },
    spec: {
      ...(ing.ingressClassName ? { ingressClassName: ing.ingressClassName } : {}),
      ...(ing.tls?.length ? { tls: ing.tls } : {}),
      rules: [{ host: ing.host, http: { paths } }],
    },
  };
}
