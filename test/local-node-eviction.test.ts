// emptyDir sizeLimit on the local node, as a kubelet's eviction manager honours it: a pod
// whose emptyDir grows past its limit is evicted (containers killed at once, none restarted,
// the pod Failed with reason Evicted and kubelet's message), in process mode and in container
// mode; a pod under its limit, checked in the same pass, runs on. Judged from the node's own
// event records.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { test } from 'node:test';
import type { V1Container, V1Pod } from '@kubernetes/client-node';
import { quantityBytes } from '../dev/local-node/eviction.js';
import { kubeRequest, kubeRequestOk } from '../src/k8s/client.js';
import { IMAGE, ensureImage } from './support/container.js';
import { deleteNamespace, freshNamespace, getCluster, getLocalNode, waitFor } from './support/k8s.js';

test('quantities in bytes', () => {
  const rows: Array<[string, number | undefined]> = [
    ['1Gi', 2 ** 30],
    ['64Mi', 64 * 2 ** 20],
    ['500M', 5e8],
    ['1.5Ki', 1536],
    ['1e3', 1000],
    ['100', 100],
    ['lots', undefined],
  ];
  for (const [q, b] of rows) assert.equal(quantityBytes(q), b, q);
});

/** A pod that writes `mib` MiB into an emptyDir of `limit`, says so, and sleeps. */
function filler(image: string, mib: number, limit: string): NonNullable<V1Pod['spec']> {
  const c: V1Container = {
    name: 'fill',
    image,
    command: ['sh', '-c', `head -c ${mib * 1048576} /dev/zero > /scratch/fill && echo filled && sleep 600`],
    volumeMounts: [{ name: 'scratch', mountPath: '/scratch' }],
  };
  return {
    containers: [c],
    volumes: [{ name: 'scratch', emptyDir: { sizeLimit: limit } }],
    terminationGracePeriodSeconds: 30,
    securityContext: { runAsUser: 1000, runAsGroup: 1000 },
  };
}

async function run(ns: string, name: string, spec: V1Pod['spec']): Promise<void> {
  const c = await getCluster();
  await kubeRequestOk(c.kc, 'POST', `/api/v1/namespaces/${ns}/pods`, { apiVersion: 'v1', kind: 'Pod', metadata: { name }, spec });
  const node = await getLocalNode();
  await waitFor(
    `${name} to fill its emptyDir`,
    async () => {
      const log = node.logPath(ns, name, 'fill');
      return log !== undefined && fs.readFileSync(log, 'utf8').includes('filled');
    },
    { timeoutMs: 120_000, intervalMs: 200 },
  );
}

async function getPod(ns: string, name: string): Promise<V1Pod | undefined> {
  const c = await getCluster();
  const r = await kubeRequest<V1Pod>(c.kc, 'GET', `/api/v1/namespaces/${ns}/pods/${name}`);
  return r.status === 200 ? r.body : undefined;
}

for (const [mode, image] of [
  ['process', 'atlantis-operator:dev'],
  ['container', IMAGE],
] as const) {
  test(`${mode} mode: an emptyDir over its sizeLimit gets the pod evicted; one under its limit runs on`, async () => {
    if (mode === 'container') await ensureImage();
    const ns = await freshNamespace(`evict-${mode}`);
    const node = await getLocalNode();
    // The pod under its limit first: it is checked in every pass that can evict the other.
    await run(ns, 'under', filler(image, 1, '8Mi'));
    await run(ns, 'over', filler(image, 3, '1Mi'));
    const evicted = await waitFor(
      'the pod over its limit to be evicted',
      async () => {
        const p = await getPod(ns, 'over');
        return p?.status?.phase === 'Failed' ? p : undefined;
      },
      { timeoutMs: 60_000, intervalMs: 200 },
    );
    assert.equal(evicted.status?.reason, 'Evicted');
    assert.equal(evicted.status?.message, 'Usage of EmptyDir volume "scratch" exceeds the limit "1Mi". ');
    assert.equal(evicted.status?.conditions?.find((c) => c.type === 'DisruptionTarget')?.reason, 'TerminationByKubelet');
    await waitFor(
      'the evicted container to be terminated',
      async () => (await getPod(ns, 'over'))?.status?.containerStatuses?.[0]?.state?.terminated !== undefined,
      {
        timeoutMs: 30_000,
      },
    );
    const evs = node.events({ namespace: ns, pod: 'over' }).map((e) => e.type);
    assert.deepEqual(
      evs.filter((e) => e !== 'Scheduled'),
      ['ContainerStarted', 'Evicted', 'SIGKILL sent', 'ContainerExited'],
      'killed at once, not restarted',
    );
    const under = await getPod(ns, 'under');
    assert.equal(under?.status?.phase, 'Running');
    assert.ok(!node.events({ namespace: ns, pod: 'under' }).some((e) => e.type === 'Evicted'));
    await deleteNamespace(ns);
  });
}
