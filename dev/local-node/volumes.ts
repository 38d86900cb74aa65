// Volumes as host directories: persistentVolumeClaim (the node provisions and binds a hostPath
// PV), emptyDir, and configMap / secret / projected / downwardAPI written out as files, with
// items (a key to a path), and their modes as kubelet sets them: an item's mode, else the
// volume's defaultMode, else 0644. (Processes run as the node's user, who owns the files, so
// ownership and fsGroup are not emulated.)
import fsp from 'node:fs/promises';
import path from 'node:path';
import type { V1PersistentVolumeClaim, V1Volume } from '@kubernetes/client-node';
import { kubeRequest, kubeRequestOk, MERGE_PATCH } from '../../src/k8s/client.js';
import { fieldValue, getObj } from './env.js';
import { caPem, requestToken } from './tokens.js';
import { SetupError, type NodeCtx, type PodRt } from './types.js';

/** Host directory of a PersistentVolumeClaim the node provisioned. */
export function pvDir(root: string, namespace: string, claim: string): string {
  return path.join(root, 'pv', namespace, claim);
}

/** kubelet's mode for a projected file without one. */
const DEFAULT_FILE_MODE = 0o644;

/** `rel` inside `dir`: the API server refuses absolute item paths and `..`, this keeps the node safe from one that slips by. */
function safeJoin(dir: string, rel: string): string {
  const f = path.resolve(dir, rel);
  if (!f.startsWith(`${path.resolve(dir)}${path.sep}`))
    throw new SetupError('ContainerCreating', `volume item path ${rel} leaves the volume`);
  return f;
}

export async function setupVolume(n: NodeCtx, rt: PodRt, v: V1Volume): Promise<string> {
  const vdir = path.join(rt.dir, 'volumes', v.name);
  if (v.persistentVolumeClaim) return bindClaim(n, rt, v.persistentVolumeClaim.claimName);
  await fsp.mkdir(vdir, { recursive: true });
  if (v.emptyDir) return vdir;
  const defaultMode = v.configMap?.defaultMode ?? v.secret?.defaultMode ?? v.projected?.defaultMode ?? v.downwardAPI?.defaultMode;
  type Item = { key: string; path: string; mode?: number };
  // Bytes as stored: a Secret's or binaryData's value is not necessarily text.
  // An item whose key is missing stops the pod, as kubelet does, unless the source is optional.
  const writeItems = async (data: Record<string, string | Buffer>, items: Item[] | undefined, source = '', optional = true) => {
    const list: Item[] = items && items.length > 0 ? items : Object.keys(data).map((k) => ({ key: k, path: k }));
    for (const it of list) {
      if (data[it.key] === undefined) {
        if (optional) continue;
        throw new SetupError('ContainerCreating', `couldn't find key ${it.key} in ${source}`);
      }
      const f = safeJoin(vdir, it.path);
      await fsp.mkdir(path.dirname(f), { recursive: true });
      await fsp.writeFile(f, data[it.key]!);
      await fsp.chmod(f, it.mode ?? defaultMode ?? DEFAULT_FILE_MODE);
    }
  };
  const cmData = async (name: string, optional?: boolean) => {
    const cm = await getObj<{ data?: Record<string, string>; binaryData?: Record<string, string> }>(
      n,
      `/api/v1/namespaces/${rt.namespace}/configmaps/${name}`,
    );
    if (!cm) {
      if (optional) return {};
      throw new SetupError('ContainerCreating', `configmap "${name}" not found`);
    }
    const out: Record<string, string | Buffer> = { ...(cm.data ?? {}) };
    for (const [k, b] of Object.entries(cm.binaryData ?? {})) out[k] = Buffer.from(b, 'base64');
    return out;
  };
  const secretData = async (name: string, optional?: boolean) => {
    const s = await getObj<{ data?: Record<string, string> }>(n, `/api/v1/namespaces/${rt.namespace}/secrets/${name}`);
    if (!s) {
      if (optional) return {};
      throw new SetupError('ContainerCreating', `secret "${name}" not found`);
    }
    const out: Record<string, Buffer> = {};
    for (const [k, b] of Object.entries(s.data ?? {})) out[k] = Buffer.from(b, 'base64');
    return out;
  };
  const ns = rt.namespace;
  if (v.configMap) {
    const { name = '', optional = false, items } = v.configMap;
    await writeItems(await cmData(name, optional), items, `ConfigMap ${ns}/${name}`, optional);
  } else if (v.secret) {
    const { secretName = '', optional = false, items } = v.secret;
    await writeItems(await secretData(secretName, optional), items, `Secret ${ns}/${secretName}`, optional);
  } else if (v.projected) {
    for (const src of v.projected.sources ?? []) {
      if (src.serviceAccountToken) {
        const tok = await requestToken(n, rt, src.serviceAccountToken.audience, src.serviceAccountToken.expirationSeconds);
        await writeItems({ token: tok }, [{ key: 'token', path: src.serviceAccountToken.path }]);
      } else if (src.configMap) {
        // kube-root-ca.crt is published by kube-controller-manager; fall back to the node's CA
        const data =
          src.configMap.name === 'kube-root-ca.crt'
            ? { 'ca.crt': caPem(n) }
            : await cmData(src.configMap.name ?? '', src.configMap.optional);
        await writeItems(data, src.configMap.items, `ConfigMap ${ns}/${src.configMap.name}`, src.configMap.optional ?? false);
      } else if (src.secret) {
        const { name = '', optional = false, items } = src.secret;
        await writeItems(await secretData(name, optional), items, `Secret ${ns}/${name}`, optional);
      } else if (src.downwardAPI) {
        const data: Record<string, string> = {};
        const items: Array<{ key: string; path: string }> = [];
        for (const it of src.downwardAPI.items ?? []) {
          if (it.fieldRef) {
            data[it.path] = fieldValue(n, rt, it.fieldRef.fieldPath);
            items.push({ key: it.path, path: it.path, ...(it.mode !== undefined ? { mode: it.mode } : {}) });
          }
        }
        await writeItems(data, items);
      }
    }
  } else if (v.downwardAPI) {
    const data: Record<string, string> = {};
    for (const it of v.downwardAPI.items ?? []) if (it.fieldRef) data[it.path] = fieldValue(n, rt, it.fieldRef.fieldPath);
    await writeItems(data, undefined);
  } else if (v.hostPath) {
    return v.hostPath.path;
  }
  return vdir;
}

/**
 * Acts as the storage provisioner and PV binder: a claim that is not bound gets a hostPath
 * PV (pvc-<claim uid>) pointing at <root>/pv/<namespace>/<claim>, pre-bound to it; the
 * claim and the volume are then marked Bound. A claim already bound to a hostPath PV uses
 * that path.
 */
export async function bindClaim(n: NodeCtx, rt: PodRt, claim: string): Promise<string> {
  const ns = rt.namespace;
  const pvc = await getObj<V1PersistentVolumeClaim>(n, `/api/v1/namespaces/${ns}/persistentvolumeclaims/${claim}`);
  if (!pvc) throw new SetupError('ContainerCreating', `persistentvolumeclaim "${claim}" not found`);
  if (pvc.metadata?.deletionTimestamp) throw new SetupError('ContainerCreating', `persistentvolumeclaim "${claim}" is being deleted`);
  const dir = pvDir(n.root, ns, claim);
  const bound = pvc.spec?.volumeName;
  if (bound) {
    const pv = await getObj<{ spec?: { hostPath?: { path?: string } } }>(n, `/api/v1/persistentvolumes/${bound}`);
    const p = pv?.spec?.hostPath?.path;
    const target = p ?? dir;
    await fsp.mkdir(target, { recursive: true });
    if (pvc.status?.phase !== 'Bound') await markClaimBound(n, pvc, bound);
    return target;
  }
  await fsp.mkdir(dir, { recursive: true });
  const pvName = `pvc-${pvc.metadata?.uid}`;
  const storage = pvc.spec?.resources?.requests?.storage ?? '1Gi';
  const pvRes = await kubeRequest(n.kc, 'POST', '/api/v1/persistentvolumes', {
    apiVersion: 'v1',
    kind: 'PersistentVolume',
    metadata: {
      name: pvName,
      annotations: { 'pv.kubernetes.io/provisioned-by': 'atlantis-operator.dev/local-node' },
      labels: { 'atlantis-operator.dev/local-node': n.name },
    },
    spec: {
      capacity: { storage },
      accessModes: pvc.spec?.accessModes?.length ? pvc.spec.accessModes : ['ReadWriteOnce'],
      persistentVolumeReclaimPolicy: 'Retain',
      storageClassName: pvc.spec?.storageClassName ?? '',
      volumeMode: pvc.spec?.volumeMode ?? 'Filesystem',
      hostPath: { path: dir, type: 'DirectoryOrCreate' },
      claimRef: { apiVersion: 'v1', kind: 'PersistentVolumeClaim', namespace: ns, name: claim, uid: pvc.metadata?.uid },
      nodeAffinity: {
        required: { nodeSelectorTerms: [{ matchExpressions: [{ key: 'kubernetes.io/hostname', operator: 'In', values: [n.name] }] }] },
      },
    },
  });
  if (pvRes.status !== 201 && pvRes.status !== 409)
    throw new Error(`create PV ${pvName}: HTTP ${pvRes.status} ${JSON.stringify(pvRes.body).slice(0, 300)}`);
  await kubeRequestOk(
    n.kc,
    'PATCH',
    `/api/v1/namespaces/${ns}/persistentvolumeclaims/${claim}`,
    {
      metadata: { annotations: { 'pv.kubernetes.io/bind-completed': 'yes', 'pv.kubernetes.io/bound-by-controller': 'yes' } },
      spec: { volumeName: pvName },
    },
    { contentType: MERGE_PATCH },
  );
  await kubeRequest(
    n.kc,
    'PATCH',
    `/api/v1/persistentvolumes/${pvName}/status`,
    { status: { phase: 'Bound' } },
    { contentType: MERGE_PATCH },
  );
  await markClaimBound(n, pvc, pvName);
  return dir;
}

export async function markClaimBound(n: NodeCtx, pvc: V1PersistentVolumeClaim, _pv: string): Promise<void> {
  const ns = pvc.metadata?.namespace;
  await kubeRequestOk(
    n.kc,
    'PATCH',
    `/api/v1/namespaces/${ns}/persistentvolumeclaims/${pvc.metadata?.name}/status`,
    {
      status: {
        phase: 'Bound',
        accessModes: pvc.spec?.accessModes?.length ? pvc.spec.accessModes : ['ReadWriteOnce'],
        capacity: { storage: pvc.spec?.resources?.requests?.storage ?? '1Gi' },
      },
    },
    { contentType: MERGE_PATCH },
  );
}
