// A container's environment and command line like kubelet's: env, envFrom, fieldRef,
// $(VAR) expansion, and emulated mounts (a mountPath in args and env values becomes the host
// directory: processes cannot chroot).
import os from 'node:os';
import path from 'node:path';
import type { V1Container, V1EnvVar, V1VolumeMount } from '@kubernetes/client-node';
import { kubeRequest } from '../../src/k8s/client.js';
import { SetupError, type NodeCtx, type PodRt } from './types.js';

export function fieldValue(n: NodeCtx, rt: PodRt, fieldPath: string): string {
  const p = rt.pod;
  const md = p.metadata ?? {};
  const m = /^metadata\.(labels|annotations)\['(.*)'\]$/.exec(fieldPath);
  if (m) return (m[1] === 'labels' ? md.labels : md.annotations)?.[m[2]!] ?? '';
  switch (fieldPath) {
    case 'metadata.name':
      return md.name ?? '';
    case 'metadata.namespace':
      return md.namespace ?? '';
    case 'metadata.uid':
      return md.uid ?? '';
    case 'spec.nodeName':
      return n.name;
    case 'spec.serviceAccountName':
      return p.spec?.serviceAccountName ?? 'default';
    case 'status.podIP':
    case 'status.podIPs':
      return rt.ip;
    case 'status.hostIP':
    case 'status.hostIPs':
      return '127.0.0.1';
    default:
      throw new SetupError('CreateContainerConfigError', `unsupported fieldRef ${fieldPath}`);
  }
}

export async function resolveEnv(n: NodeCtx, rt: PodRt, c: V1Container): Promise<Record<string, string>> {
  const env: Record<string, string> = {};
  const put = (k: string, v: string) => {
    env[k] = v;
  };
  for (const from of c.envFrom ?? []) {
    const prefix = from.prefix ?? '';
    if (from.configMapRef) {
      const cm = await getObj<{ data?: Record<string, string> }>(
        n,
        `/api/v1/namespaces/${rt.namespace}/configmaps/${from.configMapRef.name}`,
      );
      if (!cm && !from.configMapRef.optional)
        throw new SetupError('CreateContainerConfigError', `configmap "${from.configMapRef.name}" not found`);
      for (const [k, v] of Object.entries(cm?.data ?? {})) put(prefix + k, v);
    } else if (from.secretRef) {
      const s = await getObj<{ data?: Record<string, string> }>(n, `/api/v1/namespaces/${rt.namespace}/secrets/${from.secretRef.name}`);
      if (!s && !from.secretRef.optional) throw new SetupError('CreateContainerConfigError', `secret "${from.secretRef.name}" not found`);
      for (const [k, v] of Object.entries(s?.data ?? {})) put(prefix + k, Buffer.from(v, 'base64').toString('utf8'));
    }
  }
  for (const e of c.env ?? []) put(e.name, await envValue(n, rt, e, env));
  return env;
}

export async function envValue(n: NodeCtx, rt: PodRt, e: V1EnvVar, sofar: Record<string, string>): Promise<string> {
  if (!e.valueFrom) return expandVars(e.value ?? '', sofar);
  const vf = e.valueFrom;
  if (vf.fieldRef) return fieldValue(n, rt, vf.fieldRef.fieldPath);
  if (vf.secretKeyRef) {
    const s = await getObj<{ data?: Record<string, string> }>(n, `/api/v1/namespaces/${rt.namespace}/secrets/${vf.secretKeyRef.name}`);
    const v = s?.data?.[vf.secretKeyRef.key];
    if (v === undefined) {
      if (vf.secretKeyRef.optional) return '';
      throw new SetupError(
        'CreateContainerConfigError',
        s
          ? `couldn't find key ${vf.secretKeyRef.key} in Secret ${rt.namespace}/${vf.secretKeyRef.name}`
          : `secret "${vf.secretKeyRef.name}" not found`,
      );
    }
    return Buffer.from(v, 'base64').toString('utf8');
  }
  if (vf.configMapKeyRef) {
    const cm = await getObj<{ data?: Record<string, string> }>(
      n,
      `/api/v1/namespaces/${rt.namespace}/configmaps/${vf.configMapKeyRef.name}`,
    );
    const v = cm?.data?.[vf.configMapKeyRef.key];
    if (v === undefined) {
      if (vf.configMapKeyRef.optional) return '';
      throw new SetupError(
        'CreateContainerConfigError',
        cm
          ? `couldn't find key ${vf.configMapKeyRef.key} in ConfigMap ${rt.namespace}/${vf.configMapKeyRef.name}`
          : `configmap "${vf.configMapKeyRef.name}" not found`,
      );
    }
    return v;
  }
  if (vf.resourceFieldRef) {
    const r = vf.resourceFieldRef.resource;
    if (r.includes('cpu')) return String(os.cpus().length);
    if (r.includes('memory')) return String(os.totalmem());
    return '0';
  }
  return '';
}

/** mountPath -> host dir for a container, longest mountPath first. */
export function mountMap(_n: NodeCtx, rt: PodRt, c: V1Container): Array<[string, string]> {
  const out: Array<[string, string]> = [];
  for (const m of c.volumeMounts ?? ([] as V1VolumeMount[])) {
    const host = rt.mounts.get(m.name);
    if (!host) continue;
    out.push([m.mountPath.replace(/\/+$/, '') || '/', m.subPath ? path.join(host, m.subPath) : host]);
  }
  return out.sort((a, b) => b[0].length - a[0].length);
}

export function isOurImage(n: NodeCtx, image: string | undefined): boolean {
  return Boolean(image?.startsWith(n.imagePrefix));
}

/** argv for a command line of the container (exec hook, exec probe or the entrypoint). */
export function mapCommand(n: NodeCtx, cmd: string[], mounts: Array<[string, string]>): string[] {
  const [first, ...rest] = cmd;
  if (first === undefined) throw new SetupError('RunContainerError', 'empty command');
  const mapped = rest.map((a) => rewriteMounts(a, mounts));
  if (first === 'atlantis-operator' || first.endsWith('/atlantis-operator')) return [process.execPath, n.cliPath, ...mapped];
  if (first === 'node' || first.endsWith('/node')) return [process.execPath, ...mapped];
  return [rewriteMounts(first, mounts), ...mapped];
}

export function containerArgv(n: NodeCtx, c: V1Container, env: Record<string, string>, mounts: Array<[string, string]>): string[] {
  const args = (c.args ?? []).map((a) => expandVars(a, env));
  if (c.command && c.command.length > 0) return mapCommand(n, [...c.command.map((a) => expandVars(a, env)), ...args], mounts);
  return mapCommand(n, ['atlantis-operator', ...args], mounts);
}

export async function processEnv(n: NodeCtx, rt: PodRt, c: V1Container): Promise<Record<string, string>> {
  const mounts = mountMap(n, rt, c);
  const specEnv = await resolveEnv(n, rt, c);
  const base: Record<string, string> = {
    PATH: process.env.PATH ?? '/usr/local/bin:/usr/bin:/bin',
    HOME: path.join(rt.dir, 'home'),
    HOSTNAME: rt.name,
    KUBECONFIG: rt.kubeconfigFile,
    ATLANTIS_BIND_ADDRESS: rt.ip,
  };
  for (const k of ['LANG', 'LC_ALL', 'TZ', 'TMPDIR']) if (process.env[k]) base[k] = process.env[k]!;
  const env: Record<string, string> = { ...base };
  for (const [k, v] of Object.entries(specEnv)) env[k] = rewriteMounts(v, mounts);
  return env;
}

/** Kubernetes $(VAR) expansion: defined variables are replaced, $$ escapes, others stay as written. */
export function expandVars(s: string, env: Record<string, string>): string {
  return s.replace(/\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)/g, (m, name: string | undefined) => {
    if (m === '$$') return '$';
    return name !== undefined && env[name] !== undefined ? env[name]! : m;
  });
}

/**
 * Replaces mount paths with host directories in one argument or env value: a mountPath is
 * rewritten where it starts the string or follows '=', ':', ',', whitespace or a quote, and
 * is followed by '/', the end, ':', ',', ';', whitespace or a quote (so `--data-dir=/data`,
 * `/data/x` and `sh -c "echo > /data/f"` work). Mounts must be sorted longest mountPath first.
 */
export function rewriteMounts(value: string, mounts: Array<[string, string]>): string {
  let out = value;
  for (const [mp, host] of mounts) {
    if (mp === '/') continue;
    const esc = mp.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
    out = out.replace(new RegExp(`(^|[=:,\\s'"])${esc}(?=/|$|[:,\\s'";])`, 'g'), (_m, pre: string) => `${pre}${host}`);
  }
  return out;
}

/** GET of an object; undefined when it does not exist. */
export async function getObj<T>(n: NodeCtx, p: string): Promise<T | undefined> {
  const r = await kubeRequest<T>(n.kc, 'GET', p);
  if (r.status === 404) return undefined;
  if (r.status !== 200) throw new Error(`GET ${p}: HTTP ${r.status}`);
  return r.body;
}
