// A Redis-mode AtlantisDeployment (spec.atlantis.lockingDB.type redis) on the real local
// control plane with the in-process controller and a real redis-server that needs a user and
// a password: the pods start on an emptyDir and no PVC is made; the store settings are env
// values and the credentials are secretKeyRefs only (the pods read back from the API server
// never hold them), yet the server processes got them from the kubelet and use them; each
// pod registers in Redis under its name with its pod IP as replica URL, its record sealed with
// the shared state key the kubelet mounted as a file from its Secret (never a value in the pod
// or its environment); a pod's ServiceAccount reads its own Pod and nothing else (not the
// Redis Secret, not the key's); and a new key written to that Secret rolls the pods, whose
// records are then sealed with it (the key in no object, event or log of the controller).
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import type { V1PersistentVolumeClaim, V1Pod } from '@kubernetes/client-node';
import { Redis } from 'ioredis';
import { MERGE_PATCH, apiPath, kubeRequest, kubeRequestOk } from '../src/k8s/client.js';
import { podNameFor } from '../src/controller/resources/index.js';
import {
  atlantisDeployment,
  controllerRevision,
  createAd,
  createSharedStateKeySecret,
  getAd,
  startController,
  type TestController,
} from './support/controller.js';
import { controllerTestNamespace } from './support/controller-suite.js';
import { SharedStateKey } from '../src/server/locks/shared-state-key.js';
import { openReplica } from '../src/server/replicas/replica-record.js';
import { rolloutComplete, serverEnviron, waitForAd, waitForReadyPods } from './support/controller-asserts.js';
import { deleteNamespace, getLocalNode, waitFor, type LocalNodeHandle, type TestCluster } from './support/k8s.js';
import { startRedisServer, type RedisServer } from './support/redis-server.js';

const NAME = 'shared';
const DB = 3;
const USER = 'atlantis';
// Random per run, so finding one in an object read back means it leaked there.
const PASSWORD = randomBytes(18).toString('hex');
const DEFAULT_PASSWORD = randomBytes(18).toString('hex');
let cluster: TestCluster;
let node: LocalNodeHandle;
let ctrl: TestController | undefined;
let redis: RedisServer | undefined;
let ns = '';
let sharedKey: { ref: { name: string; key: string }; key: string };

before(async () => {
  ({ cluster, ns } = await controllerTestNamespace('ctrl-redis'));
  node = await getLocalNode();
  // requirepass too, so a server that did not authenticate as the user would be refused.
  redis = await startRedisServer({ password: DEFAULT_PASSWORD, user: { name: USER, password: PASSWORD } });
  await kubeRequestOk(cluster.kc, 'POST', apiPath('v1', 'secrets', ns), {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: { name: 'redis', namespace: ns },
    type: 'Opaque',
    stringData: { username: USER, password: PASSWORD },
  });
  sharedKey = await createSharedStateKeySecret(cluster.kc, ns);
  // Referenced Secrets read every second (the default is 30 s): the rotation waits on the rollout, not the interval.
  ctrl = await startController(cluster.kc, ns, { contentIntervalMs: 1000 });
});
after(async () => {
  await ctrl?.stop();
  if (ns) await deleteNamespace(ns);
  await redis?.cleanup();
});

const envOf = (p: V1Pod, name: string) => p.spec!.containers[0]!.env!.find((e) => e.name === name);

async function canI(account: string, verb: string, resource: string, name?: string): Promise<boolean> {
  const r = await kubeRequestOk<{ status: { allowed: boolean } }>(
    cluster.kc,
    'POST',
    '/apis/authorization.k8s.io/v1/subjectaccessreviews',
    {
      apiVersion: 'authorization.k8s.io/v1',
      kind: 'SubjectAccessReview',
      spec: {
        user: `system:serviceaccount:${ns}:${account}`,
        groups: ['system:serviceaccounts', `system:serviceaccounts:${ns}`, 'system:authenticated'],
        resourceAttributes: { verb, group: '', resource, namespace: ns, ...(name ? { name } : {}) },
      },
    },
  );
  return r.status.allowed;
}

describe('AtlantisDeployment on Redis', () => {
  let pods: V1Pod[] = [];

  it('pods on an emptyDir without a PVC, store env with secretKeyRefs only, registered in Redis by pod IP', {
    timeout: 180_000,
  }, async () => {
    const r = redis!;
    const ad = atlantisDeployment(ns, NAME, {
      replicas: 2,
      terminationGracePeriodSeconds: 30,
      storage: { size: '1Gi' },
      atlantis: {
        lockingDB: {
          type: 'redis',
          redis: {
            host: r.host,
            port: r.port,
            db: DB,
            usernameSecretRef: { name: 'redis', key: 'username' },
            passwordSecretRef: { name: 'redis', key: 'password' },
            sharedStateKeySecretRef: sharedKey.ref,
          },
        },
      },
    });
    await createAd(cluster.kc, ad);
    const rev = await controllerRevision(cluster.kc, ad);
    // Redis pods are named by ordinal and revision (docs/controller.md).
    const names = [0, 1].map((i) => podNameFor(NAME, i, rev, 'revision'));
    // Ready means the server opened its store: it authenticated to Redis with the Secret's values.
    pods = await waitForReadyPods(cluster.kc, ns, NAME, names, { timeoutMs: 150_000 });
    await waitForAd(cluster.kc, ns, NAME, 'a complete rollout', rolloutComplete(2));

    const claims = await kubeRequestOk<{ items: V1PersistentVolumeClaim[] }>(
      cluster.kc,
      'GET',
      apiPath('v1', 'persistentvolumeclaims', ns),
      undefined,
      { query: { labelSelector: `app.kubernetes.io/instance=${NAME}` } },
    );
    assert.deepEqual(
      claims.items.map((c) => c.metadata!.name),
      [],
      'no PVC for a Redis-mode AtlantisDeployment',
    );

    for (const p of pods) {
      const name = p.metadata!.name!;
      // Beside the data volume the shared state key's Secret, and the token volume the API server's admission adds.
      const data = p.spec!.volumes!.filter((v) => !v.projected);
      assert.deepEqual(
        data,
        [
          { name: 'data', emptyDir: { sizeLimit: '1Gi' } },
          {
            name: 'shared-state-key',
            secret: { secretName: sharedKey.ref.name, items: [{ key: 'key', path: 'key' }], defaultMode: 0o440 },
          },
        ],
        `${name}: the data dir is an emptyDir, the key a Secret volume`,
      );
      // The pod as the API server stores it: settings as values, credentials by reference only.
      const stored = JSON.stringify(p);
      assert.ok(!stored.includes(PASSWORD), `${name}: the Redis password is not in the pod object`);
      assert.ok(!stored.includes(sharedKey.key), `${name}: the shared state key is not in the pod object`);
      assert.equal(envOf(p, 'ATLANTIS_SHARED_STATE_KEY_FILE')?.value, '/etc/atlantis/shared-state/key');
      assert.ok(!stored.includes(DEFAULT_PASSWORD), `${name}: no other Redis password either`);
      assert.equal(envOf(p, 'ATLANTIS_LOCKING_DB_TYPE')?.value, 'redis');
      assert.equal(envOf(p, 'ATLANTIS_REDIS_HOST')?.value, r.host);
      assert.equal(envOf(p, 'ATLANTIS_REDIS_PORT')?.value, String(r.port));
      assert.equal(envOf(p, 'ATLANTIS_REDIS_DB')?.value, String(DB));
      assert.deepEqual(envOf(p, 'ATLANTIS_REDIS_PASSWORD'), {
        name: 'ATLANTIS_REDIS_PASSWORD',
        valueFrom: { secretKeyRef: { name: 'redis', key: 'password' } },
      });
      assert.deepEqual(envOf(p, 'ATLANTIS_REDIS_USERNAME')?.valueFrom, { secretKeyRef: { name: 'redis', key: 'username' } });
      // The process got the resolved values from the kubelet.
      const environ = serverEnviron(node, p);
      const ip = p.status!.podIP!;
      assert.ok(!environ.includes(sharedKey.key), `${name}: the key is a file, not in the environment`);
      for (const want of [
        `ATLANTIS_REDIS_PASSWORD=${PASSWORD}`,
        `ATLANTIS_REDIS_USERNAME=${USER}`,
        `ATLANTIS_REPLICA_ID=${name}`,
        `ATLANTIS_REPLICA_URL=http://${ip}:4141`,
      ])
        assert.ok(environ.includes(want), `${name}: the process has ${want.replace(PASSWORD, '<password>')}`);
    }

    // Each server registered itself in the shared Redis, under its pod name, reachable at its pod IP.
    const client = new Redis({
      host: r.host,
      port: r.port,
      db: DB,
      password: DEFAULT_PASSWORD,
      lazyConnect: true,
      maxRetriesPerRequest: 1,
    });
    try {
      await client.connect();
      const want = Object.fromEntries(pods.map((p) => [p.metadata!.name!, `http://${p.status!.podIP}:4141`]));
      const seen = await waitFor(
        'both replicas in the registry',
        async () => {
          const all = await client.hgetall('atlantis:replicas');
          const urls = Object.fromEntries(Object.values(all).map((v) => [JSON.parse(v).id, JSON.parse(v).url] as [string, string]));
          return Object.keys(want).every((id) => urls[id] === want[id]) ? urls : undefined;
        },
        { timeoutMs: 30_000, intervalMs: 250 },
      );
      assert.deepEqual(seen, want);
      // Their heartbeats are sealed with the key the kubelet mounted from the Secret.
      const key = SharedStateKey.fromBytes(Buffer.from(sharedKey.key));
      for (const [id, raw] of Object.entries(await client.hgetall('atlantis:replicas')))
        assert.equal(openReplica(key, id, raw).ok, true, `${id}'s record is sealed with the Secret's key`);
      // Every server connection authenticated as the Secret's user (ours is the only default one).
      const lines = ((await client.client('LIST')) as string).trim().split('\n');
      const others = lines.filter((l) => !l.includes(' cmd=client|list '));
      assert.ok(others.length >= pods.length, `a connection per server at least: ${lines.join('\n')}`);
      for (const l of others) assert.match(l, new RegExp(` user=${USER} `), l);
    } finally {
      client.disconnect();
    }
  });

  it("a pod's ServiceAccount reads its own Pod and nothing else: not a sibling, not the Redis Secret", async () => {
    assert.equal(pods.length, 2, 'the pods of the previous step');
    for (const [i, p] of pods.entries()) {
      const account = p.spec!.serviceAccountName!;
      assert.equal(account, `${NAME}-atlantis-${i}`);
      const rows: Array<[string, string, string | undefined, boolean]> = [
        ['get', 'pods', p.metadata!.name!, true],
        ['watch', 'pods', p.metadata!.name!, true],
        ['get', 'pods', pods[1 - i]!.metadata!.name!, false],
        ['list', 'pods', undefined, false],
        ['get', 'secrets', 'redis', false],
        ['get', 'secrets', sharedKey.ref.name, false],
        ['get', 'secrets', 'vcs', false],
        ['list', 'secrets', undefined, false],
        ['get', 'configmaps', undefined, false],
        ['create', 'pods', undefined, false],
      ];
      for (const [verb, resource, name, allowed] of rows)
        assert.equal(await canI(account, verb, resource, name), allowed, `${account}: ${verb} ${resource}${name ? `/${name}` : ''}`);
    }
  });

  it('a new key in the Secret rolls the pods; the new ones seal their records with it', { timeout: 240_000 }, async () => {
    assert.equal(pods.length, 2, 'the pods of the first step');
    const r = redis!;
    const from = (await getAd(cluster.kc, ns, NAME)).status!.updateRevision;
    const oldKey = SharedStateKey.fromBytes(Buffer.from(sharedKey.key));
    const rotated = randomBytes(32).toString('hex');
    await kubeRequestOk(
      cluster.kc,
      'PATCH',
      apiPath('v1', 'secrets', ns, sharedKey.ref.name),
      { stringData: { [sharedKey.ref.key]: rotated } },
      { contentType: MERGE_PATCH },
    );
    const done = await waitForAd(
      cluster.kc,
      ns,
      NAME,
      'a rollout to a new revision',
      (ad) => ad.status!.updateRevision !== from && rolloutComplete(2)(ad),
      200_000,
    );
    const rev = done.status!.updateRevision;
    // Both ordinals replaced at the new revision (Redis pods are named by it), the old pods gone.
    const now = await waitForReadyPods(
      cluster.kc,
      ns,
      NAME,
      [0, 1].map((i) => podNameFor(NAME, i, rev, 'revision')),
      { timeoutMs: 60_000 },
    );
    assert.ok(
      ctrl!.logs.some((l) => l.msg === 'Referenced content changed' && l.fields.object === `secret/${sharedKey.ref.name}`),
      'the controller says the key Secret changed',
    );

    const newKey = SharedStateKey.fromBytes(Buffer.from(rotated));
    const client = new Redis({
      host: r.host,
      port: r.port,
      db: DB,
      password: DEFAULT_PASSWORD,
      lazyConnect: true,
      maxRetriesPerRequest: 1,
    });
    try {
      await client.connect();
      const names = now.map((p) => p.metadata!.name!);
      const records = await waitFor(
        'the new pods in the registry',
        async () => {
          const all = await client.hgetall('atlantis:replicas');
          return names.every((n) => all[n] !== undefined) ? all : undefined;
        },
        { timeoutMs: 30_000, intervalMs: 250 },
      );
      for (const n of names) {
        assert.equal(openReplica(newKey, n, records[n]!).ok, true, `${n}'s record is sealed with the new key`);
        assert.equal(openReplica(oldKey, n, records[n]!).ok, false, `${n}'s record does not pass with the old key`);
      }
    } finally {
      client.disconnect();
    }

    const ad = await getAd(cluster.kc, ns, NAME);
    const events = await kubeRequest(cluster.kc, 'GET', apiPath('v1', 'events', ns));
    for (const [where, text] of [
      ['the AtlantisDeployment and its status', JSON.stringify(ad)],
      ['the events', JSON.stringify(events.body)],
      ['the controller log', JSON.stringify(ctrl!.logs)],
      ['the pods', JSON.stringify(now)],
    ])
      for (const [what, value] of [
        ['the old key', sharedKey.key],
        ['the new key', rotated],
      ])
        assert.ok(!text.includes(value!), `${what} in ${where}`);
  });
});
