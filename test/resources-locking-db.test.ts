// The store setting (spec.atlantis.lockingDB) and maxSurge: their defaults, the pod they
// render (env, secrets only by reference, the data volume), the revision, and the CRD's
// schema defaults in step with the code's.
import { parseFlags } from '../src/config/flags.js';
import { SERVER_FLAGS } from '../src/server/config.js';
import { storeConfigFromFlags } from '../src/server/locks/store-config.js';
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse } from 'yaml';
import type { V1EnvVar } from '@kubernetes/client-node';
import {
  DEFAULTS,
  lockingDBEnv,
  lockingDBWithDefaults,
  maxSurgeWithDefaults,
  podReferences,
  podTemplateRevision,
  renderPod,
  renderPodTemplate,
  usesDataClaims,
  withDefaults,
} from '../src/controller/resources/index.js';
import type { AtlantisDeployment, AtlantisDeploymentSpecInput, LockingDB, LockingDBInput } from '../src/controller/types.js';
import { sharedStateKeyFile } from './support/redis-server.js';

const REDIS: LockingDBInput = {
  type: 'redis',
  redis: {
    host: 'redis.infra.svc',
    usernameSecretRef: { name: 'redis', key: 'user' },
    passwordSecretRef: { name: 'redis', key: 'password' },
    sharedStateKeySecretRef: { name: 'atlantis-shared-state', key: 'key' },
  },
};

function ad(spec: Partial<AtlantisDeploymentSpecInput> = {}, lockingDB?: LockingDBInput): AtlantisDeployment {
  return {
    apiVersion: 'atlantis-operator.dev/v1alpha1',
    kind: 'AtlantisDeployment',
    metadata: { name: 'atlantis', namespace: 'infra', uid: 'uid-1', generation: 1 },
    spec: {
      image: 'ghcr.io/acme/atlantis-operator:1.0.0',
      atlantis: {
        url: 'https://atlantis.example.com',
        github: { user: 'atlantis-bot', tokenSecretRef: { name: 'vcs', key: 'token' } },
        ...(lockingDB ? { lockingDB } : {}),
      },
      ...spec,
    },
  };
}

const envOf = (list: V1EnvVar[] | undefined, name: string): V1EnvVar | undefined => list?.find((e) => e.name === name);
const containerEnv = (a: AtlantisDeployment, ordinal = 0): V1EnvVar[] => renderPod(a, ordinal).spec!.containers[0]!.env!;

test('lockingDB defaults', () => {
  const redisDefaults = { host: 'r', port: 6379, db: 0, tls: false, insecureSkipVerify: false };
  const rows: Array<[string, LockingDBInput | undefined, LockingDB]> = [
    ['unset: the embedded store', undefined, { type: 'boltdb' }],
    ['empty object', {}, { type: 'boltdb' }],
    ['boltdb', { type: 'boltdb' }, { type: 'boltdb' }],
    ['boltdb with a redis block: the block is ignored', { type: 'boltdb', redis: { host: 'r', port: 1 } }, { type: 'boltdb' }],
    ['redis with only a host', { type: 'redis', redis: { host: 'r' } }, { type: 'redis', redis: redisDefaults }],
    [
      'redis with every field',
      {
        type: 'redis',
        redis: {
          host: 'r',
          port: 6380,
          db: 3,
          tls: true,
          insecureSkipVerify: true,
          usernameSecretRef: { name: 's', key: 'u' },
          passwordSecretRef: { name: 's', key: 'p' },
        },
      },
      {
        type: 'redis',
        redis: {
          host: 'r',
          port: 6380,
          db: 3,
          tls: true,
          insecureSkipVerify: true,
          usernameSecretRef: { name: 's', key: 'u' },
          passwordSecretRef: { name: 's', key: 'p' },
        },
      },
    ],
    [
      'redis, db 0 and tls false given explicitly',
      { type: 'redis', redis: { host: 'r', db: 0, tls: false } },
      { type: 'redis', redis: redisDefaults },
    ],
    // The schema refuses it; an object it never saw renders without a host (the server's localhost).
    ['redis without a redis block', { type: 'redis' }, { type: 'redis', redis: { ...redisDefaults, host: '' } }],
  ];
  for (const [what, input, want] of rows) assert.deepEqual(lockingDBWithDefaults(input), want, what);
});

test('maxSurge defaults: 1 with Redis, 0 with the embedded store (never above 0 there)', () => {
  const redis = lockingDBWithDefaults({ type: 'redis', redis: { host: 'r' } });
  const bolt = lockingDBWithDefaults(undefined);
  const rows: Array<[string, number | undefined, LockingDB, number]> = [
    ['redis, unset', undefined, redis, 1],
    ['redis, 0', 0, redis, 0],
    ['redis, 3', 3, redis, 3],
    ['boltdb, unset', undefined, bolt, 0],
    ['boltdb, 0', 0, bolt, 0],
    ['boltdb, 2 (refused by the CRD; treated as 0)', 2, bolt, 0],
  ];
  for (const [what, given, db, want] of rows) assert.equal(maxSurgeWithDefaults(given, db), want, what);
  // Through withDefaults, as the planner reads it.
  assert.equal(withDefaults(ad({}, REDIS).spec).updateStrategy.maxSurge, 1);
  assert.equal(withDefaults(ad({ updateStrategy: { maxSurge: 2 } }, REDIS).spec).updateStrategy.maxSurge, 2);
  assert.equal(withDefaults(ad().spec).updateStrategy.maxSurge, 0);
  assert.equal(withDefaults(ad({ updateStrategy: { maxSurge: 2 } }).spec).updateStrategy.maxSurge, 0);
});

test('data claims only with the embedded store', () => {
  assert.equal(usesDataClaims(withDefaults(ad().spec)), true);
  assert.equal(usesDataClaims(withDefaults(ad({}, { type: 'boltdb' }).spec)), true);
  assert.equal(usesDataClaims(withDefaults(ad({}, REDIS).spec)), false);
});

test('redis pod: store env as values, credentials only as secretKeyRef, replica id and URL from the downward API', () => {
  const a = ad({}, { ...REDIS, redis: { ...REDIS.redis!, port: 6380, db: 2, tls: true } });
  const env = containerEnv(a, 1);
  assert.deepEqual(
    env.map((e) => e.name),
    [
      'ATLANTIS_PORT',
      'ATLANTIS_DATA_DIR',
      'ATLANTIS_ATLANTIS_URL',
      'ATLANTIS_GH_USER',
      'ATLANTIS_GH_TOKEN',
      'ATLANTIS_LOCKING_DB_TYPE',
      'ATLANTIS_REDIS_HOST',
      'ATLANTIS_REDIS_PORT',
      'ATLANTIS_REDIS_DB',
      'ATLANTIS_REDIS_TLS_ENABLED',
      'ATLANTIS_REDIS_INSECURE_SKIP_VERIFY',
      'ATLANTIS_REDIS_USERNAME',
      'ATLANTIS_REDIS_PASSWORD',
      'ATLANTIS_SHARED_STATE_KEY_FILE',
      'ATLANTIS_DRAIN_TIMEOUT',
      'ATLANTIS_TERRAFORM_INTERRUPT_GRACE',
      'POD_NAME',
      'POD_NAMESPACE',
      'POD_IP',
      'ATLANTIS_REPLICA_ID',
      'ATLANTIS_REPLICA_URL',
    ],
  );
  const values: Array<[string, string]> = [
    ['ATLANTIS_LOCKING_DB_TYPE', 'redis'],
    ['ATLANTIS_REDIS_HOST', 'redis.infra.svc'],
    ['ATLANTIS_REDIS_PORT', '6380'],
    ['ATLANTIS_REDIS_DB', '2'],
    ['ATLANTIS_REDIS_TLS_ENABLED', 'true'],
    ['ATLANTIS_REDIS_INSECURE_SKIP_VERIFY', 'false'],
    ['ATLANTIS_REPLICA_URL', 'http://$(POD_IP):4141'],
    ['ATLANTIS_SHARED_STATE_KEY_FILE', '/etc/atlantis/shared-state/key'],
  ];
  for (const [name, value] of values) assert.deepEqual(envOf(env, name), { name, value }, name);
  assert.deepEqual(envOf(env, 'ATLANTIS_REDIS_USERNAME'), {
    name: 'ATLANTIS_REDIS_USERNAME',
    valueFrom: { secretKeyRef: { name: 'redis', key: 'user' } },
  });
  assert.deepEqual(envOf(env, 'ATLANTIS_REDIS_PASSWORD'), {
    name: 'ATLANTIS_REDIS_PASSWORD',
    valueFrom: { secretKeyRef: { name: 'redis', key: 'password' } },
  });
  assert.deepEqual(envOf(env, 'POD_IP')?.valueFrom, { fieldRef: { fieldPath: 'status.podIP' } });
  assert.deepEqual(envOf(env, 'ATLANTIS_REPLICA_ID')?.valueFrom, { fieldRef: { fieldPath: 'metadata.name' } });
  // Kubernetes expands $(POD_IP) only from variables defined before it.
  assert.ok(
    env.findIndex((e) => e.name === 'POD_IP') < env.findIndex((e) => e.name === 'ATLANTIS_REPLICA_URL'),
    'POD_IP is defined before the URL that uses it',
  );
});

test('redis env: no credentials, no host, defaults as strings', () => {
  const r = lockingDBWithDefaults({ type: 'redis', redis: { host: '' } });
  assert.deepEqual(lockingDBEnv(r), [
    { name: 'ATLANTIS_LOCKING_DB_TYPE', value: 'redis' },
    { name: 'ATLANTIS_REDIS_PORT', value: '6379' },
    { name: 'ATLANTIS_REDIS_DB', value: '0' },
    { name: 'ATLANTIS_REDIS_TLS_ENABLED', value: 'false' },
    { name: 'ATLANTIS_REDIS_INSECURE_SKIP_VERIFY', value: 'false' },
  ]);
  assert.deepEqual(lockingDBEnv({ type: 'boltdb' }), [], 'the embedded store is the server default: no env');
});

test('redis through Sentinel: the sentinels and master name as values, no host or port, every secret by reference', () => {
  const sentinel = {
    masterName: 'atlantis',
    addresses: ['s0.redis.svc:26379', '[fd00::1]:26380', 's2'],
    usernameSecretRef: { name: 'sentinel', key: 'user' },
    passwordSecretRef: { name: 'sentinel', key: 'password' },
  };
  const db = lockingDBWithDefaults({
    type: 'redis',
    redis: { sentinel, db: 4, passwordSecretRef: { name: 'redis', key: 'pw' }, sharedStateKeySecretRef: { name: 'k', key: 'key' } },
  });
  assert.deepEqual(lockingDBEnv(db), [
    { name: 'ATLANTIS_LOCKING_DB_TYPE', value: 'redis' },
    { name: 'ATLANTIS_REDIS_SENTINEL_ADDRESSES', value: 's0.redis.svc:26379,[fd00::1]:26380,s2' },
    { name: 'ATLANTIS_REDIS_SENTINEL_MASTER_NAME', value: 'atlantis' },
    { name: 'ATLANTIS_REDIS_SENTINEL_USERNAME', valueFrom: { secretKeyRef: { name: 'sentinel', key: 'user' } } },
    { name: 'ATLANTIS_REDIS_SENTINEL_PASSWORD', valueFrom: { secretKeyRef: { name: 'sentinel', key: 'password' } } },
    { name: 'ATLANTIS_REDIS_DB', value: '4' },
    { name: 'ATLANTIS_REDIS_TLS_ENABLED', value: 'false' },
    { name: 'ATLANTIS_REDIS_INSECURE_SKIP_VERIFY', value: 'false' },
    { name: 'ATLANTIS_REDIS_PASSWORD', valueFrom: { secretKeyRef: { name: 'redis', key: 'pw' } } },
    { name: 'ATLANTIS_SHARED_STATE_KEY_FILE', value: '/etc/atlantis/shared-state/key' },
  ]);
  // The server reads these env names as its flags and finds the master through the sentinels
  // (the key file where the kubelet would mount it, here a test key's).
  const env = {
    ...Object.fromEntries(lockingDBEnv(db).map((e) => [e.name, e.value ?? (e.valueFrom?.secretKeyRef?.key === 'user' ? 'u' : 'secret')])),
    ATLANTIS_SHARED_STATE_KEY_FILE: sharedStateKeyFile(),
  };
  const store = storeConfigFromFlags(parseFlags([], SERVER_FLAGS, env).values);
  assert.ok(store.type === 'redis');
  assert.deepEqual(store.redis.sentinel, {
    addresses: [
      { host: 's0.redis.svc', port: 26379 },
      { host: 'fd00::1', port: 26380 },
      { host: 's2', port: 26379 },
    ],
    masterName: 'atlantis',
    username: 'u',
    password: 'secret',
  });
  assert.equal(store.redis.db, 4);
});

test('redis pod: the shared state key is a read-only file from its Secret, named by env; never a value in the spec', () => {
  const pod = renderPod(ad({}, REDIS), 0);
  const c = pod.spec!.containers[0]!;
  assert.deepEqual(
    pod.spec!.volumes?.find((v) => v.name === 'shared-state-key'),
    { name: 'shared-state-key', secret: { secretName: 'atlantis-shared-state', items: [{ key: 'key', path: 'key' }], defaultMode: 0o440 } },
  );
  assert.deepEqual(
    c.volumeMounts?.find((m) => m.name === 'shared-state-key'),
    { name: 'shared-state-key', mountPath: '/etc/atlantis/shared-state', readOnly: true },
  );
  assert.deepEqual(envOf(c.env, 'ATLANTIS_SHARED_STATE_KEY_FILE'), {
    name: 'ATLANTIS_SHARED_STATE_KEY_FILE',
    value: '/etc/atlantis/shared-state/key',
  });
  // The group that reads the 0440 file: the pod's fsGroup.
  assert.equal(pod.spec!.securityContext?.fsGroup, 1000);
  // Without the ref (an object stored before the schema required it): no volume, no env; the server refuses to start.
  const { sharedStateKeySecretRef: _k, ...without } = REDIS.redis!;
  const bare = renderPod(ad({}, { type: 'redis', redis: without }), 0);
  assert.equal(
    bare.spec!.volumes?.some((v) => v.name === 'shared-state-key'),
    false,
  );
  assert.equal(envOf(bare.spec!.containers[0]!.env, 'ATLANTIS_SHARED_STATE_KEY_FILE'), undefined);
  // Another key is another revision.
  assert.notEqual(
    podTemplateRevision(ad({}, REDIS)),
    podTemplateRevision(ad({}, { type: 'redis', redis: { ...REDIS.redis!, sharedStateKeySecretRef: { name: 'other', key: 'key' } } })),
  );
});

test("redis pod: the key's Secret is content the pods read, so a new key (its resourceVersion) is a new revision", () => {
  const a = ad({}, REDIS);
  assert.deepEqual(podReferences(a), { secrets: ['atlantis-shared-state', 'redis', 'vcs'], configMaps: [] });
  const content = (keyVersion: string) => ({ 'secret/vcs': 'rv:1', 'secret/redis': 'rv:2', 'secret/atlantis-shared-state': keyVersion });
  assert.equal(podTemplateRevision(a, content('rv:3')), podTemplateRevision(a, content('rv:3')));
  assert.notEqual(podTemplateRevision(a, content('rv:3')), podTemplateRevision(a, content('rv:9')), 'a rotation rolls the pods');
  // Without the key's token the revision cannot be made (it would change by itself once read).
  assert.throws(
    () => podTemplateRevision(a, { 'secret/vcs': 'rv:1', 'secret/redis': 'rv:2' }),
    /no content token for secret\/atlantis-shared-state/,
  );
});

test('the embedded store renders the pod as before: no store or replica env, the ordinal PVC', () => {
  for (const a of [ad(), ad({}, { type: 'boltdb' }), ad({}, { type: 'boltdb', redis: { host: 'ignored' } })]) {
    const names = containerEnv(a).map((e) => e.name);
    for (const n of names) assert.ok(!/^ATLANTIS_(LOCKING_DB_TYPE|REDIS_|REPLICA_)|^POD_IP$/.test(n), `no ${n} with boltdb`);
    assert.deepEqual(renderPod(a, 2).spec!.volumes, [{ name: 'data', persistentVolumeClaim: { claimName: 'atlantis-data-2' } }]);
  }
});

test('redis pod: the data dir is an emptyDir of spec.storage.size, no PVC', () => {
  const a = ad({ storage: { size: '20Gi', storageClassName: 'fast' } }, REDIS);
  for (const ordinal of [0, 3]) {
    const spec = renderPod(a, ordinal).spec!;
    assert.deepEqual(spec.volumes?.[0], { name: 'data', emptyDir: { sizeLimit: '20Gi' } });
    assert.deepEqual(spec.containers[0]!.volumeMounts?.[0], { name: 'data', mountPath: '/atlantis' });
    // Beside it only the shared state key's Secret (the test above).
    assert.deepEqual(
      spec.volumes?.map((v) => v.name),
      ['data', 'shared-state-key'],
    );
  }
  assert.deepEqual(renderPod(ad({}, REDIS), 0).spec!.volumes?.[0], { name: 'data', emptyDir: { sizeLimit: '5Gi' } }, 'default size');
  // Still writable for the non-root user: fsGroup applies to an emptyDir too.
  assert.equal(renderPodTemplate(a).spec.securityContext?.fsGroup, 1000);
});

test('revision: the store changes it, maxSurge does not', async (t) => {
  const base = podTemplateRevision(ad());
  const redis = podTemplateRevision(ad({}, REDIS));
  const rows: Array<[string, AtlantisDeployment, string, boolean]> = [
    ['lockingDB boltdb given explicitly', ad({}, { type: 'boltdb' }), base, false],
    ['boltdb with a (ignored) redis block', ad({}, { type: 'boltdb', redis: { host: 'x' } }), base, false],
    ['maxSurge on the embedded store', ad({ updateStrategy: { maxSurge: 0 } }), base, false],
    ['boltdb -> redis', ad({}, REDIS), base, true],
    ['redis: maxSurge', ad({ updateStrategy: { maxSurge: 3 } }, REDIS), redis, false],
    ['redis: replicas', ad({ replicas: 4 }, REDIS), redis, false],
    ['redis: host', ad({}, { ...REDIS, redis: { ...REDIS.redis!, host: 'other' } }), redis, true],
    ['redis: port', ad({}, { ...REDIS, redis: { ...REDIS.redis!, port: 6380 } }), redis, true],
    ['redis: db', ad({}, { ...REDIS, redis: { ...REDIS.redis!, db: 1 } }), redis, true],
    ['redis: tls', ad({}, { ...REDIS, redis: { ...REDIS.redis!, tls: true } }), redis, true],
    ['redis: insecureSkipVerify', ad({}, { ...REDIS, redis: { ...REDIS.redis!, insecureSkipVerify: true } }), redis, true],
    ['redis: password secret', ad({}, { ...REDIS, redis: { ...REDIS.redis!, passwordSecretRef: { name: 'r2', key: 'p' } } }), redis, true],
    ['redis: no username', ad({}, { ...REDIS, redis: { ...REDIS.redis!, usernameSecretRef: undefined } }), redis, true],
    ['redis: storage size (the emptyDir limit)', ad({ storage: { size: '9Gi' } }, REDIS), redis, true],
    ['redis: host -> sentinel', ad({}, { type: 'redis', redis: { sentinel: { masterName: 'm', addresses: ['s0'] } } }), redis, true],
    ['redis: storage class (no PVC)', ad({ storage: { size: '5Gi', storageClassName: 'fast' } }, REDIS), redis, false],
  ];
  for (const [what, a, against, differs] of rows) await t.test(what, () => assert.equal(podTemplateRevision(a) !== against, differs));
});

test('the CRD schema defaults of lockingDB are the code defaults; maxSurge has none', () => {
  const crdPath = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'crds', 'atlantisdeployments.atlantis-operator.dev.yaml');
  type Schema = { properties?: Record<string, Schema>; default?: unknown; enum?: unknown[]; required?: string[] };
  const crd = parse(fs.readFileSync(crdPath, 'utf8')) as { spec: { versions: Array<{ schema: { openAPIV3Schema: Schema } }> } };
  const spec = crd.spec.versions[0]!.schema.openAPIV3Schema.properties!.spec!;
  const at = (dotted: string): Schema =>
    dotted.split('.').reduce((s, k) => {
      const next = s.properties?.[k];
      assert.ok(next, `schema has ${dotted}`);
      return next;
    }, spec);
  assert.equal(at('atlantis.lockingDB.type').default, DEFAULTS.lockingDBType);
  assert.deepEqual(at('atlantis.lockingDB.type').enum, ['boltdb', 'redis']);
  assert.equal(at('atlantis.lockingDB.redis.port').default, DEFAULTS.redisPort);
  assert.equal(at('atlantis.lockingDB.redis.db').default, DEFAULTS.redisDB);
  assert.equal(at('atlantis.lockingDB.redis.tls').default, DEFAULTS.redisTLS);
  assert.equal(at('atlantis.lockingDB.redis.insecureSkipVerify').default, DEFAULTS.redisInsecureSkipVerify);
  // host or sentinel: a CEL rule wants one of them (crd-validation-sentinel.test.ts).
  assert.equal(at('atlantis.lockingDB.redis').required, undefined);
  assert.deepEqual(at('atlantis.lockingDB.redis.sentinel').required, ['masterName', 'addresses']);
  for (const ref of ['usernameSecretRef', 'passwordSecretRef', 'sentinel.usernameSecretRef', 'sentinel.passwordSecretRef'])
    assert.deepEqual(at(`atlantis.lockingDB.redis.${ref}`).required, ['name', 'key'], `${ref} has the secretKeyRef shape`);
  assert.equal(at('updateStrategy.maxSurge').default, undefined, 'maxSurge depends on lockingDB: the controller defaults it');
  assert.equal(at('atlantis.lockingDB').default, undefined, 'stored objects stay as written');
});
