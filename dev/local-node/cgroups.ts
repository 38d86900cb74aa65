// CPU weight of pod processes, like a kubelet's kubepods cgroup: all pods share one cgroup v1
// `cpu` cgroup weighing the node's allocatable CPU, each pod has its own inside it with its
// requests' shares, and processes run at a lower nice, so that the API server, etcd and a
// draining server keep their CPU however many pods start.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { V1Pod } from '@kubernetes/client-node';
import type { GroupProcess } from '../procs.js';
import { errMsg, type NodeCtx, type PodRt } from './types.js';

/**
 * kubelet's cpu.shares for a pod (MilliCPUToShares): its containers' CPU requests in
 * millicores x 1024 / 1000, at least 2; 2 for a pod without requests (BestEffort).
 */
export function podCpuShares(pod: V1Pod): number {
  let milli = 0;
  for (const c of pod.spec?.containers ?? []) {
    const q = c.resources?.requests?.cpu;
    if (q === undefined) continue;
    const text = String(q);
    milli += text.endsWith('m') ? Number(text.slice(0, -1)) : Number(text) * 1000;
  }
  return Number.isFinite(milli) ? Math.max(2, Math.floor((milli * 1024) / 1000)) : 2;
}

/** Creates the pods' CPU cgroup; undefined (nice only) where the machine does not allow it. */
export function makePodCgroup(n: NodeCtx): string | undefined {
  if (n.podCpuShares <= 0) return undefined;
  const root = '/sys/fs/cgroup/cpu';
  const dir = path.join(root, `atlantis-local-node-${process.pid}-${n.name}`);
  try {
    fs.mkdirSync(dir, { recursive: true });
    fs.writeFileSync(path.join(dir, 'cpu.shares'), String(n.podCpuShares));
    n.log.info('Pods share a CPU cgroup', { cgroup: dir, cpuShares: n.podCpuShares });
    return path.join(dir, 'cgroup.procs');
  } catch (e) {
    n.log.info('No CPU cgroup for pods (nice only)', { err: errMsg(e) });
    return undefined;
  }
}

/** Lowers a pod process's CPU priority (its children, e.g. terraform, inherit it). */
export function deprioritize(n: NodeCtx, rt: PodRt, p: GroupProcess): void {
  if (p.pid <= 0) return;
  try {
    if (n.podCgroup) fs.writeFileSync(podCgroupOf(n, rt), String(p.pid));
    if (n.podNice !== 0) os.setPriority(p.pid, n.podNice);
  } catch {
    // Already exited: nothing to lower.
  }
}

/** The pod's own cgroup.procs inside the pods' cgroup (made on first use); the shared one if it cannot be made. */
export function podCgroupOf(n: NodeCtx, rt: PodRt): string {
  if (rt.cgroupProcs) return rt.cgroupProcs;
  const shared = n.podCgroup!;
  const dir = path.join(path.dirname(shared), `pod${rt.uid}`);
  try {
    fs.mkdirSync(dir, { recursive: true });
    fs.writeFileSync(path.join(dir, 'cpu.shares'), String(podCpuShares(rt.pod)));
    rt.cgroupProcs = path.join(dir, 'cgroup.procs');
  } catch (e) {
    n.log.warn("No CPU cgroup of its own for a pod (it shares the pods' one)", { pod: rt.name, err: errMsg(e) });
    rt.cgroupProcs = shared;
  }
  return rt.cgroupProcs;
}

/** Removes the pod's own cgroup once its processes are gone (best effort: one that outlived its grace keeps it); never the shared one. */
export function removePodCgroup(n: NodeCtx, rt: PodRt): void {
  if (!rt.cgroupProcs || rt.cgroupProcs === n.podCgroup) return;
  try {
    fs.rmdirSync(path.dirname(rt.cgroupProcs));
  } catch {
    // still in use, or already gone
  }
}
