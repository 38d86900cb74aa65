// spec.podTemplate, spec.service, spec.serviceAccount and spec.ingress: what the pods and the
// objects around them carry beyond the server's settings. Every Kubernetes type here is the
// real one (KubernetesSchemas), with our bounds and rules around it.
import { RESERVED_VOLUMES } from '../../src/controller/resources/reserved.js';
import type { KubernetesSchemas } from './k8s-schemas.js';
import { type Schema, described, int32, listMarkers, listOf, obj, rules, str, stringMap, userAnnotations, userLabels } from './helpers.js';

/** A Kubernetes list field (`PodSpec.volumes`) bounded, its list markers kept, `itemRules` on each item. */
function boundedList(k8s: KubernetesSchemas, field: string, maxItems: number, description: string, itemRules: Schema = {}): Schema {
  const list = k8s.core(field);
  return listOf({ ...(list.items as Schema), ...itemRules }, maxItems, description, listMarkers(list));
}

function podSpec(k8s: KubernetesSchemas): Schema {
  const P = 'spec.podTemplate.spec';
  const sources = k8s.coreFields('Volume').filter((f) => f !== 'name');
  return obj({
    resources: described(k8s.core('ResourceRequirements'), 'Core ResourceRequirements of the server container (chart: resources).'),
    nodeSelector: stringMap(),
    tolerations: boundedList(k8s, 'PodSpec.tolerations', 64, 'Core Tolerations.'),
    affinity: described(k8s.core('Affinity'), 'Core Affinity.'),
    securityContext: described(
      k8s.core('PodSecurityContext'),
      'Core PodSecurityContext; merged over the default (runAsNonRoot, uid/gid/fsGroup 1000, fsGroupChangePolicy OnRootMismatch, seccomp RuntimeDefault) field by field.',
    ),
    containerSecurityContext: described(
      k8s.core('SecurityContext'),
      'Core SecurityContext of the server container (chart: containerSecurityContext); merged over the default (no privilege escalation, all capabilities dropped) field by field.',
    ),
    serviceAccountName: str('Run the pods as this account instead of <name>-atlantis-<ordinal> (the Role is bound to it).', {
      maxLength: 253,
    }),
    imagePullSecrets: boundedList(k8s, 'PodSpec.imagePullSecrets', 16, 'Secrets to pull the images with (core LocalObjectReference).'),
    priorityClassName: str("The pods' PriorityClass.", { maxLength: 253 }),
    topologySpreadConstraints: boundedList(k8s, 'PodSpec.topologySpreadConstraints', 16, 'Core TopologySpreadConstraints.'),
    hostAliases: boundedList(k8s, 'PodSpec.hostAliases', 64, "Entries added to the pods' /etc/hosts (core HostAlias)."),
    dnsPolicy: str('Core dnsPolicy: ClusterFirst (unset), ClusterFirstWithHostNet, Default or None (then dnsConfig is required).', {
      enum: ['ClusterFirst', 'ClusterFirstWithHostNet', 'Default', 'None'],
    }),
    dnsConfig: described(k8s.core('PodDNSConfig'), 'Core PodDNSConfig.'),
    extraVolumes: boundedList(
      k8s,
      'PodSpec.volumes',
      64,
      'More volumes of the pod (core Volume; chart: extraVolumes). A change to the data of a Secret or ConfigMap in them rolls the pods.',
      {
        'x-kubernetes-validations': [
          {
            rule: `[${sources.map((s) => `has(self.${s})`).join(', ')}].exists_one(x, x)`,
            messageExpression: `'${P}.extraVolumes: volume ' + self.name + ' needs exactly one source (configMap, secret, emptyDir, persistentVolumeClaim, projected, ...); a misspelt source is dropped as an unknown field'`,
          },
          {
            rule: `!(self.name in [${RESERVED_VOLUMES.map((v) => `'${v}'`).join(', ')}])`,
            messageExpression: `'${P}.extraVolumes: the name ' + self.name + ' is the operator\\'s (its volumes: ${RESERVED_VOLUMES.join(', ')})'`,
          },
        ],
      },
    ),
    extraVolumeMounts: boundedList(
      k8s,
      'Container.volumeMounts',
      64,
      'More mounts of the server container (core VolumeMount; chart: extraVolumeMounts).',
      {
        'x-kubernetes-validations': [
          {
            rule: "self.mountPath != '/atlantis'",
            message: `${P}.extraVolumeMounts: /atlantis is the data dir, mounted by the operator`,
          },
        ],
      },
    ),
    initContainers: boundedList(
      k8s,
      'PodSpec.initContainers',
      16,
      'Init containers (core Container; chart: initContainers), run before the server.',
    ),
    extraContainers: boundedList(
      k8s,
      'PodSpec.containers',
      16,
      'Containers beside the server, e.g. an oauth2-proxy (core Container; chart: extraContainers).',
      {
        'x-kubernetes-validations': [
          { rule: "self.name != 'atlantis'", message: `${P}.extraContainers: the name atlantis is the server container's` },
        ],
      },
    ),
    lifecycle: described(
      k8s.core('Lifecycle'),
      "Hooks of the server container (core Lifecycle; chart: lifecycle). The drain still happens: it starts at SIGTERM, which the kubelet sends after a preStop hook ends; a preStop's time counts against terminationGracePeriodSeconds (a sleep hook's is taken off the server's drain timeout).",
    ),
  });
}

export function podTemplateSchema(k8s: KubernetesSchemas): Schema {
  return obj(
    {
      metadata: obj({
        labels: userLabels('spec.podTemplate.metadata.labels'),
        annotations: userAnnotations('spec.podTemplate.metadata.annotations', ' (the drain annotation is set per pod)'),
      }),
      spec: podSpec(k8s),
    },
    { description: 'Extra pod metadata and pod settings. Any change is a new revision (rolled out).' },
  );
}

export function serviceSchema(k8s: KubernetesSchemas): Schema {
  const P = 'spec.service';
  const ports = k8s.core('ServiceSpec.ports');
  return obj(
    {
      type: str(undefined, { default: 'ClusterIP', enum: ['ClusterIP', 'NodePort', 'LoadBalancer'] }),
      port: int32("Service port; it targets the server's port 4141.", {
        default: 80,
        ...rules({ rule: 'self >= 1 && self <= 65535', message: `${P}.port must be between 1 and 65535` }),
      }),
      nodePort: int32('The node port with type NodePort or LoadBalancer (unset: allocated).', {
        ...rules({ rule: 'self >= 1 && self <= 65535', message: `${P}.nodePort must be between 1 and 65535` }),
      }),
      annotations: stringMap("The Service's annotations (e.g. a cloud load balancer's settings).", { maxProperties: 128 }),
      labels: userLabels(`${P}.labels`),
      extraPorts: listOf(
        {
          ...(ports.items as Schema),
          'x-kubernetes-validations': [
            { rule: "!has(self.name) || self.name != 'http'", message: `${P}.extraPorts: the port name http is the server's` },
          ],
        },
        8,
        'More ports of the Service (core ServicePort; chart: service.extraPorts), e.g. to a sidecar such as an oauth2-proxy.',
        listMarkers(ports),
      ),
      loadBalancerSourceRanges: listOf(
        str(undefined, {
          maxLength: 64,
          ...rules({
            rule: 'isCIDR(self)',
            messageExpression: `'${P}.loadBalancerSourceRanges: ' + self + ' is not a CIDR such as 203.0.113.0/24'`,
          }),
        }),
        64,
        "With type LoadBalancer: the client ranges allowed (e.g. GitHub's hook addresses).",
      ),
    },
    {
      default: {},
      'x-kubernetes-validations': [
        { rule: "!has(self.nodePort) || self.type != 'ClusterIP'", message: `${P}.nodePort needs type NodePort or LoadBalancer` },
        {
          rule: "!has(self.loadBalancerSourceRanges) || self.type == 'LoadBalancer'",
          message: `${P}.loadBalancerSourceRanges needs type LoadBalancer`,
        },
      ],
    },
  );
}

export function serviceAccountSchema(): Schema {
  const P = 'spec.serviceAccount';
  return obj(
    {
      annotations: userAnnotations(
        `${P}.annotations`,
        '',
        'Annotations of every ServiceAccount the operator makes for the pods (e.g. eks.amazonaws.com/role-arn, iam.gke.io/gcp-service-account).',
      ),
      labels: userLabels(`${P}.labels`),
    },
    {
      description:
        'The ServiceAccounts the operator makes for the pods (one per ordinal, <name>-atlantis-<ordinal>, each reading only its own Pod; chart: serviceAccount). Not used with podTemplate.spec.serviceAccountName.',
    },
  );
}

export function ingressSchema(k8s: KubernetesSchemas): Schema {
  const P = 'spec.ingress';
  const tls = k8s.networking('IngressSpec.tls');
  return obj(
    {
      ingressClassName: str('The IngressClass (unset: the cluster default).', { maxLength: 253 }),
      host: str('The host name GitHub sends webhooks to, e.g. atlantis.example.com.', {
        maxLength: 253,
        ...rules({
          rule: "self.matches('^(\\\\*\\\\.)?[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')",
          message: `${P}.host must be a lowercase DNS name such as atlantis.example.com`,
        }),
      }),
      tls: listOf(tls.items as Schema, 16, 'Core IngressTLS: the Secret holding the certificate of the hosts.', listMarkers(tls)),
      annotations: stringMap("The Ingress's annotations (e.g. cert-manager.io/cluster-issuer, the controller's settings).", {
        maxProperties: 128,
      }),
      labels: userLabels(`${P}.labels`),
      exposeUI: {
        type: 'boolean',
        default: false,
        description:
          'false: only /events (the webhooks). true: every path (the web pages, job logs, /api), which needs spec.atlantis.basicAuth.',
      },
    },
    {
      description:
        'An Ingress for the Service <name> (networking.k8s.io/v1; chart: ingress, webhook_ingress). Removing the field deletes it.',
      required: ['host'],
    },
  );
}
