// The AtlantisDeployment CRD (SPEC section 6) as data: the one source of
// crds/atlantisdeployments.atlantis-operator.dev.yaml and the Helm chart's copy, written by
// hack/crd/generate.ts (`make crds`); test/crd-generate.test.ts fails when they drift.
//
// Where a field goes: spec.atlantis.* in atlantis.ts; podTemplate, service, serviceAccount and
// ingress in pod.ts; the status here. CEL rules sit beside the field they check, or on the
// nearest object holding every field they read.
import { atlantisSchema } from './atlantis.js';
import { type Schema, bool, int32, int64, obj, rules, str } from './helpers.js';
import type { KubernetesSchemas } from './k8s-schemas.js';
import { ingressSchema, podTemplateSchema, serviceAccountSchema, serviceSchema } from './pod.js';

export const CRD_NAME = 'atlantisdeployments.atlantis-operator.dev';

function specSchema(k8s: KubernetesSchemas): Schema {
  return obj(
    {
      image: str('Container image of atlantis-operator; pods run it with the `server` argument.', {
        maxLength: 1024,
        ...rules(
          { rule: 'size(self) > 0', message: 'spec.image must not be empty' },
          { rule: '!self.matches("[ \\t\\n\\r]")', message: 'spec.image must not contain whitespace' },
        ),
      }),
      replicas: int32('Number of server pods (0 or more). With the embedded store (lockingDB boltdb) each ordinal keeps its own PVC.', {
        default: 1,
        maximum: 1000,
        ...rules({ rule: 'self >= 0', message: 'spec.replicas must be 0 or more' }),
      }),
      atlantis: atlantisSchema(k8s),
      storage: obj(
        {
          size: str(undefined, {
            default: '5Gi',
            maxLength: 64,
            ...rules(
              {
                rule: "isQuantity(self) && quantity(self).isGreaterThan(quantity('0'))",
                message: 'spec.storage.size must be a positive quantity such as 5Gi',
              },
              {
                rule: 'self == oldSelf',
                message: 'spec.storage.size cannot be changed: existing PVCs keep their size (resize them directly)',
              },
            ),
          }),
          storageClassName: str('StorageClass of new PVCs; unset = the cluster default.', { nullable: true, maxLength: 253 }),
        },
        {
          default: {},
          description:
            'The data dir. With the embedded store: one PersistentVolumeClaim per pod ordinal, kept on scale-down. With Redis: an emptyDir per pod, size as its sizeLimit.',
        },
      ),
      updateStrategy: obj(
        {
          maxUnavailable: int32('Most pods not-ready-or-draining at once during a rollout.', {
            default: 1,
            ...rules({ rule: 'self >= 1', message: 'spec.updateStrategy.maxUnavailable must be at least 1' }),
          }),
          // No schema default: it depends on lockingDB, so the controller defaults it.
          maxSurge: int32(
            'Most pods of the new revision started beside the old ones during a rollout. Unset: 1 with lockingDB redis, 0 with the embedded store. Above 0 only with redis: with the embedded store each pod owns its data volume.',
            { maximum: 1000, ...rules({ rule: 'self >= 0', message: 'spec.updateStrategy.maxSurge must be 0 or more' }) },
          ),
          drainTimeoutSeconds: int64('How long a drain may take before onDrainTimeout applies; 0 = no limit.', {
            default: 3600,
            ...rules({ rule: 'self >= 0', message: 'spec.updateStrategy.drainTimeoutSeconds must be 0 (no timeout) or more' }),
          }),
          onDrainTimeout: str(
            'Wait: keep waiting and report DrainTimeout. Interrupt: delete the pod; its server interrupts terraform cleanly.',
            {
              default: 'Wait',
              enum: ['Wait', 'Interrupt'],
            },
          ),
        },
        { default: {} },
      ),
      paused: bool('Stop starting new drains. Drains already started finish; missing pods are still created.', { default: false }),
      terminationGracePeriodSeconds: int64(
        'Pod grace period G. The server gets --terraform-interrupt-grace I = min(60, G/3) and --drain-timeout D = G - I - 10 (less a preStop sleep).',
        {
          default: 120,
          maximum: 604800,
          ...rules({
            rule: 'self >= 30',
            message:
              'spec.terminationGracePeriodSeconds must be at least 30 so the server drain timeout (G - min(60, G/3) - 10) and terraform interrupt grace (min(60, G/3)) fit in it',
          }),
        },
      ),
      podTemplate: podTemplateSchema(k8s),
      service: serviceSchema(k8s),
      serviceAccount: serviceAccountSchema(),
      ingress: ingressSchema(k8s),
    },
    {
      required: ['image'],
      'x-kubernetes-validations': [
        // Here, not on maxSurge: the rule reads another field. lockingDB has no schema
        // default (stored objects stay as written), hence the has() chain.
        {
          rule: "!has(self.updateStrategy) || !has(self.updateStrategy.maxSurge) || self.updateStrategy.maxSurge == 0 || (has(self.atlantis) && has(self.atlantis.lockingDB) && has(self.atlantis.lockingDB.type) && self.atlantis.lockingDB.type == 'redis')",
          fieldPath: '.updateStrategy.maxSurge',
          message:
            'spec.updateStrategy.maxSurge needs spec.atlantis.lockingDB.type redis: with the embedded store each pod owns its data volume, so a second pod cannot run beside it',
        },
        {
          rule: '!has(self.ingress) || !self.ingress.exposeUI || (has(self.atlantis) && has(self.atlantis.basicAuth))',
          fieldPath: '.ingress.exposeUI',
          message:
            'spec.ingress.exposeUI needs spec.atlantis.basicAuth: without it anyone who reaches the Ingress reads the job logs and can discard locks (only /events is exposed otherwise)',
        },
        // A preStop sleep delays the SIGTERM that starts the drain: the server's drain timeout
        // is shortened by it, and must stay at least 10 s.
        {
          rule: '!has(self.podTemplate) || !has(self.podTemplate.spec) || !has(self.podTemplate.spec.lifecycle) || !has(self.podTemplate.spec.lifecycle.preStop) || !has(self.podTemplate.spec.lifecycle.preStop.sleep) || self.terminationGracePeriodSeconds - (self.terminationGracePeriodSeconds / 3 < 60 ? self.terminationGracePeriodSeconds / 3 : 60) - 10 - self.podTemplate.spec.lifecycle.preStop.sleep.seconds >= 10',
          fieldPath: '.podTemplate.spec.lifecycle.preStop.sleep.seconds',
          message:
            'spec.podTemplate.spec.lifecycle.preStop.sleep.seconds is too long for terminationGracePeriodSeconds: the drain starts after the sleep, and G - min(60, G/3) - 10 - sleep must leave the server at least 10 s',
        },
      ],
    },
  );
}

const condition: Schema = {
  type: 'object',
  required: ['type', 'status', 'lastTransitionTime', 'reason', 'message'],
  properties: {
    type: { type: 'string', maxLength: 316 },
    status: { type: 'string', enum: ['True', 'False', 'Unknown'] },
    observedGeneration: { type: 'integer', format: 'int64', minimum: 0 },
    lastTransitionTime: { type: 'string', format: 'date-time' },
    reason: { type: 'string', maxLength: 1024, minLength: 1, pattern: '^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$' },
    message: { type: 'string', maxLength: 32768 },
  },
};

const statusSchema: Schema = obj({
  observedGeneration: int64(),
  replicas: int32(),
  readyReplicas: int32(),
  updatedReplicas: int32(),
  drainingReplicas: int32(),
  surgeReplicas: int32(
    'Live pods of desired ordinals beyond one per ordinal (new-revision pods started beside the old ones, updateStrategy.maxSurge).',
  ),
  rolloutPhase: str('Where the rollout is (docs/controller.md), the first that holds.', {
    enum: ['Complete', 'Stalled', 'Paused', 'Draining', 'Surging', 'ScalingDown', 'Updating'],
  }),
  currentRevision: str(),
  updateRevision: str(),
  selector: str(),
  conditions: { type: 'array', 'x-kubernetes-list-type': 'map', 'x-kubernetes-list-map-keys': ['type'], items: condition },
  pods: {
    type: 'array',
    items: obj(
      {
        name: str(),
        revision: str(),
        ready: bool(),
        drainingSince: str(undefined, { format: 'date-time', nullable: true }),
        inProgressOperations: int32(undefined, { nullable: true }),
      },
      { required: ['name'] },
    ),
  },
  timedOutPods: {
    description:
      'Pods whose drain passed drainTimeoutSeconds and that wait (onDrainTimeout Wait). The DrainTimeout event fires when a pod joins this list.',
    type: 'array',
    items: { type: 'string' },
  },
});

const printerColumns = [
  { name: 'Replicas', type: 'integer', jsonPath: '.spec.replicas' },
  { name: 'Ready', type: 'integer', jsonPath: '.status.readyReplicas' },
  { name: 'Up-to-date', type: 'integer', jsonPath: '.status.updatedReplicas' },
  { name: 'Draining', type: 'integer', jsonPath: '.status.drainingReplicas' },
  { name: 'Surge', type: 'integer', jsonPath: '.status.surgeReplicas' },
  { name: 'Phase', type: 'string', jsonPath: '.status.rolloutPhase' },
  { name: 'Paused', type: 'boolean', jsonPath: '.spec.paused', priority: 1 },
  { name: 'Revision', type: 'string', jsonPath: '.status.updateRevision', priority: 1 },
  { name: 'Age', type: 'date', jsonPath: '.metadata.creationTimestamp' },
];

export function atlantisDeploymentCRD(k8s: KubernetesSchemas): Schema {
  return {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: {
      name: CRD_NAME,
      labels: { 'app.kubernetes.io/name': 'atlantis-operator', 'app.kubernetes.io/part-of': 'atlantis-operator' },
    },
    spec: {
      group: 'atlantis-operator.dev',
      scope: 'Namespaced',
      names: {
        kind: 'AtlantisDeployment',
        listKind: 'AtlantisDeploymentList',
        plural: 'atlantisdeployments',
        singular: 'atlantisdeployment',
        shortNames: ['atd'],
        categories: ['atlantis'],
      },
      versions: [
        {
          name: 'v1alpha1',
          served: true,
          storage: true,
          subresources: {
            status: {},
            scale: { specReplicasPath: '.spec.replicas', statusReplicasPath: '.status.replicas', labelSelectorPath: '.status.selector' },
          },
          additionalPrinterColumns: printerColumns,
          schema: {
            openAPIV3Schema: {
              type: 'object',
              description: 'Atlantis server pods that the controller rolls out without killing terraform runs.',
              required: ['spec'],
              'x-kubernetes-validations': [
                // The name becomes the Service name (DNS-1035 label) and a label value (63 characters).
                {
                  rule: 'size(self.metadata.name) <= 63',
                  message: 'metadata.name must be at most 63 characters: it names the Service and labels the pods',
                },
                {
                  rule: "self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')",
                  message:
                    "metadata.name must start with a lowercase letter and contain only lowercase letters, digits and '-': it names the Service",
                },
              ],
              properties: {
                apiVersion: { type: 'string' },
                kind: { type: 'string' },
                metadata: { type: 'object' },
                spec: specSchema(k8s),
                status: statusSchema,
              },
            },
          },
        },
      ],
    },
  };
}
