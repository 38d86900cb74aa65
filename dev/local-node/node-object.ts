// The Node object: registration with the node's labels, and the status a heartbeat posts.
import os from 'node:os';
import { kubeRequest, kubeRequestOk, MERGE_PATCH, STRATEGIC_MERGE_PATCH } from '../../src/k8s/client.js';
import { now, type NodeCtx } from './types.js';

export function nodeStatus(n: NodeCtx): Record<string, unknown> {
  const t = now();
  const cond = (type: string, status: string, reason: string, message: string) => ({ type, status, reason, message, lastHeartbeatTime: t });
  const mem = `${Math.floor(os.totalmem() / 1024)}Ki`;
  const cpu = String(os.cpus().length);
  return {
    conditions: [
      cond('Ready', 'True', 'KubeletReady', 'local node is posting ready status'),
      cond('MemoryPressure', 'False', 'KubeletHasSufficientMemory', 'local node has sufficient memory available'),
      cond('DiskPressure', 'False', 'KubeletHasNoDiskPressure', 'local node has no disk pressure'),
      cond('PIDPressure', 'False', 'KubeletHasSufficientPID', 'local node has sufficient PID available'),
    ],
    addresses: [
      { type: 'InternalIP', address: '127.0.0.1' },
      { type: 'Hostname', address: n.name },
    ],
    capacity: { cpu, memory: mem, pods: '250', 'ephemeral-storage': '100Gi' },
    allocatable: { cpu, memory: mem, pods: '250', 'ephemeral-storage': '100Gi' },
    daemonEndpoints: { kubeletEndpoint: { Port: 0 } },
    nodeInfo: {
      machineID: 'local',
      systemUUID: 'local',
      bootID: String(process.pid),
      kernelVersion: os.release(),
      osImage: `${os.type()} (atlantis-operator local node)`,
      containerRuntimeVersion: 'local://1.0.0',
      kubeletVersion: 'v0.0.0-local-node',
      kubeProxyVersion: '',
      operatingSystem: 'linux',
      architecture: n.labels['kubernetes.io/arch'],
    },
  };
}

export async function registerNode(n: NodeCtx): Promise<void> {
  const body = { apiVersion: 'v1', kind: 'Node', metadata: { name: n.name, labels: n.labels }, spec: {} };
  const res = await kubeRequest(n.kc, 'POST', '/api/v1/nodes', body);
  if (res.status === 409) {
    await kubeRequestOk(n.kc, 'PATCH', `/api/v1/nodes/${n.name}`, { metadata: { labels: n.labels } }, { contentType: MERGE_PATCH });
  } else if (res.status !== 201) {
    throw new Error(`Cannot register Node ${n.name}: HTTP ${res.status} ${JSON.stringify(res.body).slice(0, 300)}`);
  }
  await postNodeStatus(n);
}

export async function postNodeStatus(n: NodeCtx): Promise<void> {
  if (n.stopped) return;
  await kubeRequestOk(n.kc, 'PATCH', `/api/v1/nodes/${n.name}/status`, { status: nodeStatus(n) }, { contentType: STRATEGIC_MERGE_PATCH });
}
