// A Redis-mode AtlantisDeployment whose Redis is found through Redis Sentinel
// (spec.atlantis.lockingDB.redis.sentinel) on the real local control plane with the in-process
// controller: a real master and replica with a password and three real sentinels with a
// password of their own (test/support/redis-sentinel.ts). The pods get the sentinels, the
// master's name and both passwords (by secretKeyRef only: the pods read back never hold
// them) and no host or port; they become Ready and register in the master; after the master
// is SIGKILLed and the sentinels promote the replica, they heartbeat into the new master and
// the same containers (not restarted) are Ready.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import type { V1Pod } from '@kubernetes/client-node';
import { apiPath, kubeRequestOk } from '../src/k8s/client.js';
import { podNameFor } from '../src/controller/resources/index.js';
import {
  atlantisDeployment,
  controllerRevision,
  createAd,
  isReady,
  listPods,
  startController,
  type TestController,
  createSharedStateKeySecret,
} from './support/controller.js';
import { controllerTestNamespace } from './support/controller-suite.js';
import { rolloutComplete, serverEnviron, waitForAd, waitForReadyPods } from './support/controller-asserts.js';
import { deleteNamespace, getLocalNode, waitFor, type LocalNodeHandle, type TestCluster } from './support/k8s.js';
import { startSentinelSetup, type SentinelSetup } from './support/redis-sentinel.js';

const NAME = 'sentinel';
// Random per run, so finding one in an object read back means it leaked there.
const PASSWORD = randomBytes(18).toString('hex');
const SENTINEL_PASSWORD = randomBytes(18).toString('hex');
let cluster: TestCluster;
let node: LocalNodeHandle;
let ctrl: TestController | undefined;
let setup: SentinelSetup | undefined;
let ns = '';
let sharedKeyRef: { name: string; key: string };

before(async () => {
  ({ cluster, ns } = await controllerTestNamespace('ctrl-sentinel'));
  node = await getLocalNode();
  setup = await startSentinelSetup({ password: PASSWORD, sentinelPassword: SENTINEL_PASSWORD });
  await kubeRequestOk(cluster.kc, 'POST', apiPath('v1', 'secrets', ns), {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: { name: 'redis', namespace: ns },
    type: 'Opaque',
    stringData: { password: PASSWORD, 'sentinel-password': SENTINEL_PASSWORD },
  });
  sharedKeyRef = (await createSharedStateKeySecret(cluster.kc, ns)).ref;
  ctrl = await startController(cluster.kc, ns);
});
after(async () => {
  await ctrl?.stop();
  if (ns) await deleteNamespace(ns);
  await setup?.cleanup();
});

const envOf = (p: V1Pod, name: string) => p.spec!.containers[0]!.env!.find((e) => e.name === name);

/** The newest heartbeat of `id` in a data server, ms since the epoch (undefined: none there). */
async function heartbeatAt(s: SentinelSetup, index: 0 | 1, id: string): Promise<number | undefined> {
  const c = s.client(s.nodes[index]);
  try {
    const v = await c.get(`atlantis:replica:${id}`);
    return v ? (JSON.parse(v) as { heartbeatAt: number }).heartbeatAt : undefined;
  } finally {
    c.disconnect();
  }
}

describe('AtlantisDeployment on Redis through Sentinel', () => {
  it('pods find the master through the sentinels, with secrets by reference only, and follow a failover', {
    timeout: 240_000,
  }, async () => {
    const s = setup!;
    const ad = atlantisDeployment(ns, NAME, {
      replicas: 2,
      terminationGracePeriodSeconds: 30,
      atlantis: {
        lockingDB: {
          type: 'redis',
          redis: {
            passwordSecretRef: { name: 'redis', key: 'password' },
            sharedStateKeySecretRef: sharedKeyRef,
            sentinel: {
              masterName: s.masterName,
              addresses: s.addresses.split(','),
              passwordSecretRef: { name: 'redis', key: 'sentinel-password' },
            },
          },
        },
      },
    });
    await createAd(cluster.kc, ad);
    const rev = await controllerRevision(cluster.kc, ad);
    const names = [0, 1].map((i) => podNameFor(NAME, i, rev, 'revision'));
    // Ready means the server opened its store: through the sentinels, authenticated to both.
    const pods = await waitForReadyPods(cluster.kc, ns, NAME, names, { timeoutMs: 150_000 });
    await waitForAd(cluster.kc, ns, NAME, 'a complete rollout', rolloutComplete(2));

    for (const p of pods) {
      const name = p.metadata!.name!;
      const stored = JSON.stringify(p);
      assert.ok(!stored.includes(PASSWORD) && !stored.includes(SENTINEL_PASSWORD), `${name}: no password in the pod object`);
      assert.equal(envOf(p, 'ATLANTIS_REDIS_HOST'), undefined, `${name}: no host beside the sentinels`);
      assert.equal(envOf(p, 'ATLANTIS_REDIS_PORT'), undefined, `${name}: no port beside the sentinels`);
      assert.equal(envOf(p, 'ATLANTIS_REDIS_SENTINEL_ADDRESSES')?.value, s.addresses);
      assert.equal(envOf(p, 'ATLANTIS_REDIS_SENTINEL_MASTER_NAME')?.value, s.masterName);
      assert.deepEqual(envOf(p, 'ATLANTIS_REDIS_SENTINEL_PASSWORD')?.valueFrom, {
        secretKeyRef: { name: 'redis', key: 'sentinel-password' },
      });
      assert.deepEqual(envOf(p, 'ATLANTIS_REDIS_PASSWORD')?.valueFrom, { secretKeyRef: { name: 'redis', key: 'password' } });
      const environ = serverEnviron(node, p);
      assert.ok(
        environ.includes(`ATLANTIS_REDIS_SENTINEL_PASSWORD=${SENTINEL_PASSWORD}`),
        `${name}: the process got the sentinel password`,
      );
      assert.ok(environ.includes(`ATLANTIS_REDIS_PASSWORD=${PASSWORD}`), `${name}: the process got the master's password`);
      await waitFor(`${name} heartbeating into the master`, async () => (await heartbeatAt(s, 0, name)) !== undefined, {
        timeoutMs: 30_000,
        intervalMs: 250,
      });
    }

    // The master dies; once every sentinel names the replica, the servers write there.
    await s.waitReplicated(s.nodes[0], s.nodes[1]);
    await s.nodes[0].kill();
    const promoted = await s.waitForMaster(s.nodes[1], 60_000);
    for (const name of names)
      await waitFor(`${name} heartbeating into the promoted master`, async () => ((await heartbeatAt(s, 1, name)) ?? 0) > promoted, {
        timeoutMs: 60_000,
        intervalMs: 250,
      });
    // While no master answers, /readyz says the store is unusable, so the pods may leave the
    // Service for a probe or two; the same containers are Ready again once they write.
    const uids = pods.map((p) => p.metadata!.uid!).sort();
    const again = await waitFor(
      'the same pods Ready again',
      async () => {
        const ps = await listPods(cluster.kc, ns, NAME);
        const same = JSON.stringify(ps.map((p) => p.metadata!.uid!).sort()) === JSON.stringify(uids);
        return same && ps.every(isReady) ? ps : undefined;
      },
      { timeoutMs: 60_000, intervalMs: 250 },
    );
    for (const p of again) assert.equal(p.status!.containerStatuses![0]!.restartCount, 0, `${p.metadata!.name}: not restarted`);
  });
});
