// emptyDir sizeLimit, as a kubelet's eviction manager honours it: every housekeeping period the
// disk usage of each emptyDir with a sizeLimit is measured (du: allocated blocks), and a pod
// whose emptyDir exceeds its limit is evicted: its containers are killed at once (grace 0),
// none restarts, and the pod is Failed with reason Evicted and kubelet's message, its object
// left for its owner to replace (the controller does: test/local-node-eviction.test.ts).
import fs from 'node:fs';
import path from 'node:path';
import type { PodRt } from './types.js';

const SUFFIX: Record<string, number> = {
  Ki: 2 ** 10,
  Mi: 2 ** 20,
  Gi: 2 ** 30,
  Ti: 2 ** 40,
  Pi: 2 ** 50,
  Ei: 2 ** 60,
  k: 1e3,
  M: 1e6,
  G: 1e9,
  T: 1e12,
  P: 1e15,
  E: 1e18,
  m: 1e-3,
  '': 1,
};

/** Pure: a Kubernetes quantity in bytes ("1Gi", "500M", "1e6", "1.5Gi"); undefined when it is not one. */
export function quantityBytes(q: string | number | undefined): number | undefined {
  if (q === undefined) return undefined;
  if (typeof q === 'number') return q;
  const m = /^([+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E|m)?$/.exec(q.trim());
  if (!m) return undefined;
  return Number(m[1]) * (SUFFIX[m[2] ?? ''] ?? 1);
}

/** Bytes allocated under a directory (as du counts them), counting stops once above `stopAbove`. */
export function dirUsage(dir: string, stopAbove = Number.POSITIVE_INFINITY): number {
  let total = 0;
  const stack = [dir];
  while (stack.length > 0 && total <= stopAbove) {
    const d = stack.pop()!;
    let names: string[];
    try {
      names = fs.readdirSync(d);
    } catch {
      continue;
    }
    for (const name of names) {
      const p = path.join(d, name);
      const st = fs.lstatSync(p, { throwIfNoEntry: false });
      if (!st) continue;
      total += st.blocks * 512;
      if (st.isDirectory()) stack.push(p);
    }
  }
  return total;
}

/** kubelet's eviction message for an emptyDir over its limit, when one of the pod's is. */
export function emptyDirOverLimit(rt: PodRt): string | undefined {
  for (const v of rt.pod.spec?.volumes ?? []) {
    const limit = quantityBytes(v.emptyDir?.sizeLimit as string | number | undefined);
    const dir = rt.mounts.get(v.name);
    if (limit === undefined || limit <= 0 || !dir) continue;
    if (dirUsage(dir, limit) > limit) return `Usage of EmptyDir volume "${v.name}" exceeds the limit "${v.emptyDir!.sizeLimit}". `;
  }
  return undefined;
}
