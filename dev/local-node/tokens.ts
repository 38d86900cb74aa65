// A pod's credentials: bound service-account tokens (TokenRequest) and the per-pod kubeconfig
// its process gets as KUBECONFIG.
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import { KubeConfig } from '@kubernetes/client-node';
import { kubeRequest } from '../../src/k8s/client.js';
import { kubeconfigYaml } from '../../src/k8s/kubeconfig.js';
import { SetupError, type NodeCtx, type PodRt } from './types.js';

export async function requestToken(
  n: NodeCtx,
  rt: PodRt,
  audience: string | undefined,
  expirationSeconds: number | undefined,
): Promise<string> {
  const sa = rt.pod.spec?.serviceAccountName || 'default';
  const res = await kubeRequest<{ status?: { token?: string } }>(
    n.kc,
    'POST',
    `/api/v1/namespaces/${rt.namespace}/serviceaccounts/${sa}/token`,
    {
      apiVersion: 'authentication.k8s.io/v1',
      kind: 'TokenRequest',
      spec: {
        ...(audience ? { audiences: [audience] } : {}),
        expirationSeconds: expirationSeconds ?? 86_400,
        boundObjectRef: { apiVersion: 'v1', kind: 'Pod', name: rt.name, uid: rt.uid },
      },
    },
  );
  if (res.status !== 201 || !res.body.status?.token) {
    throw new SetupError('CreateContainerConfigError', `cannot get a token for serviceaccount ${rt.namespace}/${sa}: HTTP ${res.status}`);
  }
  return res.body.status.token;
}

export function caData(n: NodeCtx): string {
  // The API server's CA as the admin kubeconfig has it (data or file): client-node reads it.
  const full = new KubeConfig();
  full.loadFromFile(n.kubeconfigPath);
  const cluster = full.getCurrentCluster();
  if (cluster?.caData) return cluster.caData;
  if (cluster?.caFile) return fs.readFileSync(cluster.caFile).toString('base64');
  return '';
}

export function caPem(n: NodeCtx): string {
  const d = caData(n);
  return d ? Buffer.from(d, 'base64').toString('utf8') : '';
}

export async function writePodKubeconfig(n: NodeCtx, rt: PodRt, token: string): Promise<void> {
  const server = n.kc.getCurrentCluster()?.server ?? '';
  const text = kubeconfigYaml({ name: 'local', server, caData: caData(n), user: { token }, namespace: rt.namespace });
  await fsp.writeFile(rt.kubeconfigFile, text, { mode: 0o600 });
}
