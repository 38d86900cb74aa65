// An AtlantisDeployment that uses every field a real install configures (issue 32), for the
// CRD validation test (accepted, read back as written) and the controller test (the pod and
// the objects around it carry them).
import type { AtlantisDeployment } from '../../src/controller/types.js';
import { API_VERSION, KIND } from '../../src/controller/types.js';

export function everyField(namespace: string, name: string, image = 'atlantis-operator:v1'): AtlantisDeployment {
  return {
    apiVersion: API_VERSION,
    kind: KIND,
    metadata: { name, namespace },
    spec: {
      image,
      replicas: 1,
      terminationGracePeriodSeconds: 90,
      atlantis: {
        repoAllowlist: 'github.com/acme/*',
        github: { webhookSecretRef: { name: 'vcs', key: 'webhook-secret' } },
        githubApp: { id: 4242, installationId: 77, slug: 'acme-atlantis', keySecretRef: { name: 'github-app', key: 'key.pem' } },
        repoConfig: { configMapRef: { name: 'atlantis-repos', key: 'repos.yaml' } },
        api: { secretRef: { name: 'atlantis-api', key: 'secret' } },
        basicAuth: { username: 'admin', passwordSecretRef: { name: 'atlantis-web', key: 'password' } },
        env: [{ name: 'ATLANTIS_LOG_LEVEL', value: 'debug' }],
        envFrom: [{ configMapRef: { name: 'atlantis-env' } }, { secretRef: { name: 'cloud-env', optional: true }, prefix: 'TF_VAR_' }],
        extraArgs: ['--hide-prev-plan-comments'],
      },
      podTemplate: {
        metadata: { labels: { team: 'platform' }, annotations: { 'example.com/owner': 'platform' } },
        spec: {
          resources: { requests: { cpu: '100m', memory: '256Mi' }, limits: { memory: '1Gi' } },
          securityContext: { fsGroupChangePolicy: 'Always', supplementalGroups: [2000] },
          containerSecurityContext: { readOnlyRootFilesystem: false },
          imagePullSecrets: [{ name: 'regcred' }],
          priorityClassName: '',
          topologySpreadConstraints: [
            {
              maxSkew: 1,
              topologyKey: 'kubernetes.io/hostname',
              whenUnsatisfiable: 'ScheduleAnyway',
              labelSelector: { matchLabels: { 'app.kubernetes.io/instance': name } },
            },
          ],
          hostAliases: [{ ip: '127.0.0.1', hostnames: ['github.internal'] }],
          dnsConfig: { options: [{ name: 'ndots', value: '2' }] },
          tolerations: [{ key: 'dedicated', operator: 'Equal', value: 'atlantis', effect: 'NoSchedule' }],
          extraVolumes: [
            {
              name: 'cloud-credentials',
              projected: {
                defaultMode: 0o440,
                sources: [
                  { secret: { name: 'cloud-credentials', items: [{ key: 'aws', path: 'aws/credentials' }] } },
                  { configMap: { name: 'cloud-config', items: [{ key: 'aws-config', path: 'aws/config', mode: 0o444 }] } },
                ],
              },
            },
            { name: 'plugins', emptyDir: { sizeLimit: '300Mi' } },
          ],
          extraVolumeMounts: [
            { name: 'cloud-credentials', mountPath: '/home/atlantis/.cloud', readOnly: true },
            { name: 'plugins', mountPath: '/plugins' },
          ],
          initContainers: [
            {
              name: 'init-plugins',
              image,
              command: ['node', '-e', "require('fs').writeFileSync(process.argv[1] + '/ready', 'ok')", '/plugins'],
              volumeMounts: [{ name: 'plugins', mountPath: '/plugins' }],
            },
          ],
          extraContainers: [
            {
              name: 'sidecar',
              image,
              command: ['node', '-e', 'setInterval(() => {}, 1 << 30)'],
              ports: [{ name: 'proxy', containerPort: 4180, protocol: 'TCP' }],
              envFrom: [{ secretRef: { name: 'atlantis-web' } }],
              resources: { requests: { cpu: '10m', memory: '32Mi' } },
            },
          ],
          lifecycle: {
            postStart: { exec: { command: ['node', '-e', '0'] } },
            preStop: { sleep: { seconds: 5 } },
          },
        },
      },
      service: {
        type: 'LoadBalancer',
        port: 80,
        nodePort: 30480,
        annotations: { 'service.beta.kubernetes.io/aws-load-balancer-internal': 'true' },
        labels: { exposure: 'webhooks' },
        loadBalancerSourceRanges: ['140.82.112.0/20', '2606:50c0::/32'],
      },
      serviceAccount: {
        annotations: { 'eks.amazonaws.com/role-arn': 'arn:aws:iam::123456789012:role/atlantis' },
        labels: { team: 'platform' },
      },
      ingress: {
        host: 'atlantis.example.com',
        ingressClassName: 'nginx',
        tls: [{ hosts: ['atlantis.example.com'], secretName: 'atlantis-tls' }],
        annotations: { 'cert-manager.io/cluster-issuer': 'letsencrypt' },
        labels: { exposure: 'webhooks' },
        exposeUI: true,
      },
    },
  };
}
