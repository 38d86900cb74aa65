// The server pod (SPEC section 6). renderPodTemplate gives everything that does not depend
// on the ordinal; its hash is the revision. renderPod adds the ordinal's name, labels and,
// with the embedded store, its PVC. The env is pod-env.ts's, the volumes pod-volumes.ts's;
// the Secrets and ConfigMaps the pod reads enter the revision through content.ts.
import type { V1Container, V1Pod, V1PodSecurityContext, V1PodSpec, V1SecurityContext } from '@kubernetes/client-node';
import { LIVENESS_PATH, READINESS_PATH, SERVER_PORT } from '../../contract/drain-protocol.js';
import { SERVER_CONTAINER, type AtlantisDeployment } from '../types.js';
import { ANNOTATION_REFERENCED_CONTENT, type ReferencedContent, contentAnnotation, contentKeys, referencedObjects } from './content.js';
import { withDefaults } from './defaults.js';
import { commonLabels, ownerReference, podAccountName, podLabels, podName, pvcName, requireName } from './names.js';
import { serverEnv } from './pod-env.js';
import { DATA_VOLUME, podVolumes, serverMounts } from './pod-volumes.js';
import { hashRevision } from './revision.js';

export { atlantisUrl, fromSecret, lockingDBEnv, serverEnv } from './pod-env.js';
// Likewise the serviceAccountName, unless the user names one: renderPod sets the ordinal's own.
const ACCOUNT_PLACEHOLDER = '';

/** The pod template without per-ordinal parts: metadata.labels/annotations and spec. */
export interface PodTemplate {
  metadata: { labels: Record<string, string>; annotations: Record<string, string> };
  spec: V1PodSpec;
}

// A non-root default that works with a PVC: fsGroup makes the volume writable for the user,
// and OnRootMismatch changes the ownership of a big volume only when its root is not right
// already, not recursively at every start. A user's podTemplate.spec.securityContext replaces
// these field by field.
const DEFAULT_POD_SECURITY_CONTEXT: V1PodSecurityContext = {
  runAsNonRoot: true,
  runAsUser: 1000,
  runAsGroup: 1000,
  fsGroup: 1000,
  fsGroupChangePolicy: 'OnRootMismatch',
  seccompProfile: { type: 'RuntimeDefault' },
};

// The root filesystem stays writable: terraform writes plugin caches and temp files outside
// the data dir, and those paths depend on the user's workflows. A user's
// podTemplate.spec.containerSecurityContext replaces these field by field.
const CONTAINER_SECURITY_CONTEXT: V1SecurityContext = {
  allowPrivilegeEscalation: false,
  capabilities: { drop: ['ALL'] },
};

/**
 * `content`: the tokens of the Secrets and ConfigMaps the pods read (content.ts), as the
 * controller fetched them; without it the template has no content annotation (a pure render,
 * for tests and tools that do not read the cluster).
 */
export function renderPodTemplate(ad: AtlantisDeployment, content?: ReferencedContent): PodTemplate {
  const { name } = requireName(ad);
  const spec = withDefaults(ad.spec);
  const user = spec.podTemplate ?? {};
  const us = user.spec ?? {};
  const server: V1Container = {
    name: SERVER_CONTAINER,
    image: spec.image,
    args: ['server', ...(spec.atlantis.extraArgs ?? [])],
    ports: [{ name: 'http', containerPort: SERVER_PORT, protocol: 'TCP' }],
    env: serverEnv(spec),
    // After the variables of whole ConfigMaps and Secrets: `env` wins over them in Kubernetes.
    ...(spec.atlantis.envFrom?.length ? { envFrom: spec.atlantis.envFrom } : {}),
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
    volumeMounts: serverMounts(spec),
    securityContext: { ...CONTAINER_SECURITY_CONTEXT, ...(us.containerSecurityContext ?? {}) },
    ...(us.resources ? { resources: us.resources } : {}),
    // The drain is not a hook: it starts at SIGTERM, which the kubelet sends once a preStop
    // hook has ended, so a user's hook runs before it and never in place of it.
    ...(us.lifecycle ? { lifecycle: us.lifecycle } : {}),
  };
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
    ...(us.initContainers?.length ? { initContainers: us.initContainers } : {}),
    containers: [server, ...(us.extraContainers ?? [])],
    volumes: podVolumes(spec),
    ...(us.nodeSelector ? { nodeSelector: us.nodeSelector } : {}),
    ...(us.tolerations ? { tolerations: us.tolerations } : {}),
    ...(us.affinity ? { affinity: us.affinity } : {}),
    ...(us.imagePullSecrets?.length ? { imagePullSecrets: us.imagePullSecrets } : {}),
    ...(us.priorityClassName ? { priorityClassName: us.priorityClassName } : {}),
    ...(us.topologySpreadConstraints?.length ? { topologySpreadConstraints: us.topologySpreadConstraints } : {}),
    ...(us.hostAliases?.length ? { hostAliases: us.hostAliases } : {}),
    ...(us.dnsPolicy ? { dnsPolicy: us.dnsPolicy } : {}),
    ...(us.dnsConfig ? { dnsConfig: us.dnsConfig } : {}),
  };
  const annotations = { ...(user.metadata?.annotations ?? {}) };
  const hash = content ? contentAnnotation(contentKeys(referencedObjects(podSpec)), content) : undefined;
  if (hash) annotations[ANNOTATION_REFERENCED_CONTENT] = hash;
  return {
    // Our labels are applied over the user's so a template can never break the selector.
    metadata: { labels: { ...(user.metadata?.labels ?? {}), ...commonLabels(name) }, annotations },
    spec: podSpec,
  };
}

/** The Secrets and ConfigMaps the pods of this spec read: the content the controller fetches for the revision. */
export function podReferences(ad: AtlantisDeployment): ReturnType<typeof referencedObjects> {
  return referencedObjects(renderPodTemplate(ad).spec);
}

/** The revision label value for the AtlantisDeployment's current spec (and, given, the content it references). */
export function podTemplateRevision(ad: AtlantisDeployment, content?: ReferencedContent): string {
  return hashRevision(renderPodTemplate(ad, content));
}

export function renderPod(
  ad: AtlantisDeployment,
  ordinal: number,
  revision: string = podTemplateRevision(ad),
  content?: ReferencedContent,
): V1Pod {
  const { name, namespace } = requireName(ad);
  const t = renderPodTemplate(ad, content);
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
