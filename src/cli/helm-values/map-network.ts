// The chart's Service, Ingresses (ingress, webhook_ingress) and Gateway API routes. The
// operator makes one Service (port `http` to the server's 4141) and at most one Ingress, which
// routes only /events (the webhooks, which carry their own signature) unless the web pages
// are behind basic auth. Pure.
import type { V1IngressTLS, V1ServicePort } from '@kubernetes/client-node';
import type { IngressSettings, ServiceType } from '../../controller/types.js';
import { asK8s, type Conversion } from './conversion.js';
import { allowedKeys, reservedLabel } from './map-pod.js';
import { isObj, type Json, truthy, ValuesError, type Values } from './values.js';

const SERVICE_TYPES: ServiceType[] = ['ClusterIP', 'NodePort', 'LoadBalancer'];
const HOST = /^(\*\.)?[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
/** Paths that send every request to Atlantis (the chart's default is `/*`). */
const EVERY_PATH = ['/', '/*', '/.*', ''];
const EVENTS_PATH = ['/events', '/events/', '/events/*'];

export function mapNetwork(v: Values, c: Conversion): void {
  mapService(v, c);
  mapIngress(v, c);
  const route = v.obj('route');
  for (const [k, r] of Object.entries(route))
    if (isObj(r) && truthy(r.enabled))
      c.notMapped(
        `route.${k}`,
        `Gateway API routes are not made by the operator: write an HTTPRoute to the Service ${c.names.name}, port http (/events for the webhooks)`,
      );
}

function mapService(v: Values, c: Conversion): void {
  const type = v.str('service', 'type');
  const port = v.int(['service', 'port'], { orString: true });
  const nodePort = v.int(['service', 'nodePort'], { orString: true });
  const svc: NonNullable<typeof c.spec.service> = {};
  if (type && SERVICE_TYPES.includes(type as ServiceType)) svc.type = type as ServiceType;
  else if (type) c.notMapped('service.type', `spec.service.type is one of ${SERVICE_TYPES.join(', ')}`);
  if (port !== undefined) {
    if (port >= 1 && port <= 65535) svc.port = port;
    else c.notMapped('service.port', 'not a port (1 to 65535)');
  }
  if (nodePort !== undefined) {
    if ((svc.type ?? 'ClusterIP') === 'ClusterIP')
      c.notMapped('service.nodePort', 'a node port needs service.type NodePort or LoadBalancer');
    else svc.nodePort = nodePort;
  }
  const n = c.names.fullname;
  if (svc.type === 'LoadBalancer')
    c.note(
      'service.type',
      `the Service ${c.names.name} gets a load balancer of its own, at a new address unless your cloud's annotations pin one: point GitHub's webhook (or your DNS) at it`,
    );
  else if (svc.type === 'NodePort' && nodePort === undefined)
    c.note(
      'service.nodePort',
      `Kubernetes gave the chart's Service a node port; the new Service gets another unless spec.service.nodePort is set to it (kubectl get service ${n} -o jsonpath='{.spec.ports[0].nodePort}')`,
    );
  if (!v.isDefault('service', 'portName') && v.get('service', 'portName') !== undefined)
    c.notMapped('service.portName', "the Service's port is named http");
  else v.get('service', 'portName');
  const extraPorts = v.list(['service', 'extraPorts'], 'mapping').flatMap((p, i) => {
    if ((p as { name?: Json }).name === 'http') {
      c.notMapped(`service.extraPorts[${i}]`, "the port name http is the server's");
      return [];
    }
    return [asK8s<V1ServicePort>(p)];
  });
  if (extraPorts.length) svc.extraPorts = extraPorts;
  if (v.get('service', 'loadBalancerIP') !== undefined)
    c.notMapped(
      'service.loadBalancerIP',
      "spec.service has no loadBalancerIP (deprecated in Kubernetes; your load balancer's annotation sets it)",
    );
  const ranges = v.list(['service', 'loadBalancerSourceRanges'], 'string') as string[];
  if (ranges.length) {
    if (svc.type === 'LoadBalancer') svc.loadBalancerSourceRanges = ranges;
    else c.notMapped('service.loadBalancerSourceRanges', 'only with service.type LoadBalancer (Kubernetes ignores them otherwise)');
  }
  for (const f of ['externalTrafficPolicy', 'internalTrafficPolicy', 'sessionAffinity', 'sessionAffinityConfig'])
    if (v.get('service', f) !== undefined)
      c.notMapped(
        `service.${f}`,
        `spec.service has no ${f}; the controller leaves alone what it does not set, so \`kubectl patch service ${c.names.name}\` with it stays`,
      );
  const annotations = { ...v.strMap('service', 'annotations'), ...c.extraAnnotations };
  if (truthy(annotations)) svc.annotations = annotations;
  if (truthy(c.commonLabels)) svc.labels = { ...c.commonLabels };
  c.spec.service = svc;
}

interface ChartIngress {
  key: string;
  enabled: boolean;
  host?: string;
  hosts: Json[];
  path?: string;
  paths: Json[];
  tls: Json[];
  className?: string;
  annotations: Record<string, string>;
  labels: Record<string, string>;
}

function readIngress(v: Values, key: string): ChartIngress {
  const className = v.get(key, 'ingressClassName');
  if (className !== undefined && typeof className !== 'string') throw new ValuesError(`${key}.ingressClassName must be a string`);
  const r: ChartIngress = {
    key,
    enabled: v.bool(key, 'enabled') ?? false,
    host: v.str(key, 'host'),
    hosts: v.list([key, 'hosts'], 'mapping'),
    path: v.str(key, 'path'),
    paths: v.list([key, 'paths'], 'mapping'),
    tls: v.list([key, 'tls'], 'mapping'),
    ...(className ? { className } : {}),
    annotations: v.strMap(key, 'annotations'),
    labels: v.strMap(key, 'labels'),
  };
  v.str(key, 'pathType');
  // Whatever else the chart's schema lets an Ingress carry, the chart does not read.
  v.get(key);
  return r;
}

function mapIngress(v: Values, c: Conversion): void {
  const ui = readIngress(v, 'ingress');
  const hooks = readIngress(v, 'webhook_ingress');
  const src = hooks.enabled ? hooks : ui.enabled ? ui : undefined;
  if (hooks.enabled && ui.enabled)
    c.notMapped(
      'ingress',
      `the operator makes one Ingress, webhook_ingress's, for the webhooks; this one (the web pages) is not made: expose them with spec.ingress.exposeUI and spec.atlantis.basicAuth, or an Ingress of yours to the Service ${c.names.name}`,
    );
  if (!src) return;
  let host = src.host;
  let paths = [src.path ?? '/*'];
  if (src.hosts.length) {
    const only = src.hosts[0] as { host?: Json; paths?: Json; service?: Json };
    if (src.hosts.length === 1 && !only.service && typeof only.host === 'string' && Array.isArray(only.paths)) {
      host = only.host;
      paths = only.paths.map(String);
    } else {
      c.notMapped(`${src.key}.hosts`, "several hosts, or another Service: the operator's Ingress has one host, to its own Service");
      return;
    }
  }
  if (!host) {
    c.notMapped(src.key, "no host: the chart's Ingress answers every host; spec.ingress needs one (set host)");
    return;
  }
  if (!HOST.test(host)) {
    c.notMapped(`${src.key}.host`, 'not a lowercase DNS name, which spec.ingress.host must be');
    return;
  }
  if (src.paths.length) c.notMapped(`${src.key}.paths`, "routes to other Services: the operator's Ingress routes to its own");
  let exposeUI = false;
  if (paths.some((p) => EVERY_PATH.includes(p))) {
    if (c.atlantis.basicAuth) exposeUI = true;
    else
      c.notMapped(
        `${src.key}.path`,
        "the chart sends every path (the web pages, job logs, /api) to Atlantis; without basic auth the operator's Ingress sends only /events (spec.ingress.exposeUI needs spec.atlantis.basicAuth)",
      );
  } else if (!paths.every((p) => EVENTS_PATH.includes(p)))
    c.notMapped(`${src.key}.path`, "the operator's Ingress routes /events, or every path with spec.ingress.exposeUI");
  const annotations = { ...src.annotations, ...c.extraAnnotations };
  const own = allowedKeys(c, `${src.key}.labels`, src.labels, reservedLabel, 'the operator selects its objects by this label');
  const labels = { ...own, ...c.commonLabels };
  const ing: IngressSettings = {
    host,
    ...(src.className ? { ingressClassName: src.className } : {}),
    ...(src.tls.length ? { tls: asK8s<V1IngressTLS[]>(src.tls as Json) } : {}),
    ...(truthy(annotations) ? { annotations } : {}),
    ...(truthy(labels) ? { labels } : {}),
    exposeUI,
  };
  c.spec.ingress = ing;
}
