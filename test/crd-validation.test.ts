// The AtlantisDeployment CRD on the real API server (SPEC section 6): a valid object is
// accepted and defaulted; every schema and CEL rule rejects a bad object with 422 and a
// message naming the field, through the API and through `kubectl apply`; unknown fields
// are pruned (or refused under strict field validation); the scale subresource, printer
// columns, the status subresource and the short name work. lockingDB and maxSurge: Redis
// settings defaulted and checked, a surge refused with the embedded store (on create and on
// update), the Redis example accepted.
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { MERGE_PATCH, apiPath, kubeRequest, kubeRequestOk } from '../src/k8s/client.js';
import { parseAllDocuments } from 'yaml';
import { API_VERSION, KIND, PLURAL, type AtlantisDeployment } from '../src/controller/types.js';
import { CRD_FILE, ensureCrd, getAd } from './support/controller.js';
import { type BadCase, type Obj, assertRefused, at, crObject, statusOf } from './support/crd-objects.js';
import { deleteNamespace, freshNamespace, getCluster, type TestCluster } from './support/k8s.js';

let cluster: TestCluster;
let ns: string;

before(async () => {
  cluster = await getCluster();
  await ensureCrd(cluster);
  ns = await freshNamespace('crd');
});
after(async () => {
  if (ns) await deleteNamespace(ns);
});

/** A minimal valid object in this file's namespace; `mutate` edits a deep copy. */
const cr = (name: string, mutate?: (o: { metadata: Obj; spec: Obj }) => void): Obj => crObject(ns, name, mutate);

/** The shared state key's Secret ref every Redis store needs. */
const KEY_REF = { name: 'atlantis-shared-state', key: 'key' };
/** A Redis store with its required host and key; `extra` is merged into lockingDB.redis. */
const redisDB = (extra: Obj = {}): Obj => ({
  type: 'redis',
  redis: { host: 'redis.infra.svc', sharedStateKeySecretRef: KEY_REF, ...extra },
});
const withStore = (o: { spec: Obj }, db: Obj): void => {
  at(o.spec, 'atlantis').lockingDB = db;
};
const SURGE_WHY = 'with the embedded store each pod owns its data volume, so a second pod cannot run beside it';

const BAD: BadCase[] = [
  { what: 'missing image', obj: (n) => cr(n, (o) => delete o.spec.image), expect: ['spec.image', 'Required value'] },
  { what: 'empty image', obj: (n) => cr(n, (o) => (o.spec.image = '')), expect: ['spec.image', 'spec.image must not be empty'] },
  {
    what: 'image with whitespace',
    obj: (n) => cr(n, (o) => (o.spec.image = 'atlantis-operator: v1')),
    expect: ['spec.image', 'must not contain whitespace'],
  },
  { what: 'replicas -1', obj: (n) => cr(n, (o) => (o.spec.replicas = -1)), expect: ['spec.replicas', 'spec.replicas must be 0 or more'] },
  { what: 'replicas above the maximum', obj: (n) => cr(n, (o) => (o.spec.replicas = 1001)), expect: ['spec.replicas', '1000'] },
  {
    what: 'maxUnavailable 0',
    obj: (n) => cr(n, (o) => (at(o.spec, 'updateStrategy').maxUnavailable = 0)),
    expect: ['spec.updateStrategy.maxUnavailable', 'must be at least 1'],
  },
  {
    what: 'drainTimeoutSeconds -1',
    obj: (n) => cr(n, (o) => (at(o.spec, 'updateStrategy').drainTimeoutSeconds = -1)),
    expect: ['spec.updateStrategy.drainTimeoutSeconds', 'must be 0 (no timeout) or more'],
  },
  {
    what: 'onDrainTimeout Foo',
    obj: (n) => cr(n, (o) => (at(o.spec, 'updateStrategy').onDrainTimeout = 'Foo')),
    expect: ['spec.updateStrategy.onDrainTimeout', 'Unsupported value', '"Wait"', '"Interrupt"'],
  },
  {
    what: 'service.port 70000',
    obj: (n) => cr(n, (o) => (at(o.spec, 'service').port = 70000)),
    expect: ['spec.service.port', 'must be between 1 and 65535'],
  },
  {
    what: 'service.port 0',
    obj: (n) => cr(n, (o) => (at(o.spec, 'service').port = 0)),
    expect: ['spec.service.port', 'must be between 1 and 65535'],
  },
  {
    what: 'service.type Foo',
    obj: (n) => cr(n, (o) => (at(o.spec, 'service').type = 'Foo')),
    expect: ['spec.service.type', 'Unsupported value'],
  },
  {
    what: 'terminationGracePeriodSeconds 29 (CEL minimum 30)',
    obj: (n) => cr(n, (o) => (o.spec.terminationGracePeriodSeconds = 29)),
    expect: ['spec.terminationGracePeriodSeconds', 'must be at least 30'],
  },
  {
    what: 'terminationGracePeriodSeconds above the maximum',
    obj: (n) => cr(n, (o) => (o.spec.terminationGracePeriodSeconds = 604801)),
    expect: ['spec.terminationGracePeriodSeconds', '604800'],
  },
  {
    what: 'missing github.tokenSecretRef.name',
    obj: (n) => cr(n, (o) => delete at(o.spec, 'atlantis.github.tokenSecretRef').name),
    expect: ['spec.atlantis.github.tokenSecretRef.name', 'Required value'],
  },
  {
    what: 'empty github.tokenSecretRef.name',
    obj: (n) => cr(n, (o) => (at(o.spec, 'atlantis.github.tokenSecretRef').name = '')),
    expect: ['spec.atlantis.github.tokenSecretRef', 'needs a non-empty name and key'],
  },
  {
    what: 'github.webhookSecretRef.key with a slash',
    obj: (n) => cr(n, (o) => (at(o.spec, 'atlantis.github.webhookSecretRef').key = 'a/b')),
    expect: ['spec.atlantis.github.webhookSecretRef', 'may contain only letters'],
  },
  {
    what: 'atlantis.url not http(s)',
    obj: (n) => cr(n, (o) => (at(o.spec, 'atlantis').url = 'ftp://atlantis.example.com')),
    expect: ['spec.atlantis.url', 'must be an absolute http:// or https:// URL'],
  },
  {
    what: 'atlantis.url relative',
    obj: (n) => cr(n, (o) => (at(o.spec, 'atlantis').url = '/atlantis')),
    expect: ['spec.atlantis.url', 'must be an absolute http:// or https:// URL'],
  },
  {
    what: 'env sets POD_NAME',
    obj: (n) => cr(n, (o) => (at(o.spec, 'atlantis').env = [{ name: 'POD_NAME', value: 'x' }])),
    expect: ['spec.atlantis.env[0]', 'must not set POD_NAME'],
  },
  {
    what: 'env item without a name',
    obj: (n) => cr(n, (o) => (at(o.spec, 'atlantis').env = [{ value: 'x' }])),
    expect: ['spec.atlantis.env[0].name', 'Required value'],
  },
  {
    what: 'storage.size not a quantity',
    obj: (n) => cr(n, (o) => (at(o.spec, 'storage').size = 'lots')),
    expect: ['spec.storage.size', 'must be a positive quantity'],
  },
  {
    what: 'storage.size zero',
    obj: (n) => cr(n, (o) => (at(o.spec, 'storage').size = '0')),
    expect: ['spec.storage.size', 'must be a positive quantity'],
  },
  {
    what: 'podTemplate label of the operator',
    obj: (n) => cr(n, (o) => (at(o.spec, 'podTemplate.metadata').labels = { 'app.kubernetes.io/instance': 'other' })),
    expect: ['spec.podTemplate.metadata.labels', 'must not set app.kubernetes.io/name, instance'],
  },
  {
    what: 'podTemplate atlantis-operator.dev/ label',
    obj: (n) => cr(n, (o) => (at(o.spec, 'podTemplate.metadata').labels = { 'atlantis-operator.dev/revision': 'x' })),
    expect: ['spec.podTemplate.metadata.labels', 'atlantis-operator.dev/*'],
  },
  {
    what: 'podTemplate drain annotation',
    obj: (n) => cr(n, (o) => (at(o.spec, 'podTemplate.metadata').annotations = { 'atlantis-operator.dev/drain': 'now' })),
    expect: ['spec.podTemplate.metadata.annotations', 'must not set atlantis-operator.dev/* annotations'],
  },
  {
    what: 'toleration seconds as a string (the real Toleration schema)',
    obj: (n) => cr(n, (o) => (at(o.spec, 'podTemplate.spec').tolerations = [{ key: 'a', operator: 'Exists', tolerationSeconds: 'ten' }])),
    expect: ['spec.podTemplate.spec.tolerations[0].tolerationSeconds', 'must be of type integer'],
  },
  {
    what: 'replicas as a string',
    obj: (n) => cr(n, (o) => (o.spec.replicas = 'three')),
    expect: ['spec.replicas', 'must be of type integer'],
  },
  { what: 'paused as a string', obj: (n) => cr(n, (o) => (o.spec.paused = 'yes')), expect: ['spec.paused', 'must be of type boolean'] },
  {
    what: 'lockingDB.type Foo',
    obj: (n) => cr(n, (o) => withStore(o, { type: 'etcd' })),
    expect: ['spec.atlantis.lockingDB.type', 'Unsupported value', '"boltdb"', '"redis"'],
  },
  {
    what: 'lockingDB redis without settings',
    obj: (n) => cr(n, (o) => withStore(o, { type: 'redis' })),
    expect: ['spec.atlantis.lockingDB', 'spec.atlantis.lockingDB.redis.host (or redis.sentinel) is required with type redis'],
  },
  {
    what: 'lockingDB redis without a host or sentinel',
    obj: (n) => cr(n, (o) => withStore(o, { type: 'redis', redis: { port: 6379 } })),
    expect: ['spec.atlantis.lockingDB.redis', 'spec.atlantis.lockingDB.redis.host (or redis.sentinel) is required with type redis'],
  },
  {
    what: 'lockingDB redis without the shared state key',
    obj: (n) => cr(n, (o) => withStore(o, { type: 'redis', redis: { host: 'redis.infra.svc' } })),
    expect: [
      'spec.atlantis.lockingDB',
      'spec.atlantis.lockingDB.redis.sharedStateKeySecretRef is required with type redis: the pods sign what they keep in Redis with that key, which Redis never sees',
    ],
  },
  {
    what: 'redis.sharedStateKeySecretRef with an empty key',
    obj: (n) => cr(n, (o) => withStore(o, redisDB({ sharedStateKeySecretRef: { name: 's', key: '' } }))),
    expect: ['spec.atlantis.lockingDB.redis.sharedStateKeySecretRef', 'needs a non-empty name and key'],
  },
  {
    what: 'redis.sharedStateKeySecretRef key with a slash',
    obj: (n) => cr(n, (o) => withStore(o, redisDB({ sharedStateKeySecretRef: { name: 's', key: '../key' } }))),
    expect: ['spec.atlantis.lockingDB.redis.sharedStateKeySecretRef.key', "may contain only letters, digits, '-', '_' and '.'"],
  },
  {
    what: 'redis.host empty',
    obj: (n) => cr(n, (o) => withStore(o, redisDB({ host: '' }))),
    expect: ['spec.atlantis.lockingDB.redis.host', 'must not be empty'],
  },
  {
    what: 'redis.host a URL',
    obj: (n) => cr(n, (o) => withStore(o, redisDB({ host: 'redis://redis:6379' }))),
    expect: ['spec.atlantis.lockingDB.redis.host', "without whitespace or '/'"],
  },
  {
    what: 'redis.port 0',
    obj: (n) => cr(n, (o) => withStore(o, redisDB({ port: 0 }))),
    expect: ['spec.atlantis.lockingDB.redis.port', 'must be between 1 and 65535'],
  },
  {
    what: 'redis.port 65536',
    obj: (n) => cr(n, (o) => withStore(o, redisDB({ port: 65536 }))),
    expect: ['spec.atlantis.lockingDB.redis.port', 'must be between 1 and 65535'],
  },
  {
    what: 'redis.db -1',
    obj: (n) => cr(n, (o) => withStore(o, redisDB({ db: -1 }))),
    expect: ['spec.atlantis.lockingDB.redis.db', 'must be 0 or more'],
  },
  {
    what: 'redis.tls as a string',
    obj: (n) => cr(n, (o) => withStore(o, redisDB({ tls: 'yes' }))),
    expect: ['spec.atlantis.lockingDB.redis.tls', 'must be of type boolean'],
  },
  {
    what: 'redis.passwordSecretRef without a key',
    obj: (n) => cr(n, (o) => withStore(o, redisDB({ passwordSecretRef: { name: 'redis' } }))),
    expect: ['spec.atlantis.lockingDB.redis.passwordSecretRef.key', 'Required value'],
  },
  {
    what: 'redis.passwordSecretRef empty name',
    obj: (n) => cr(n, (o) => withStore(o, redisDB({ passwordSecretRef: { name: '', key: 'password' } }))),
    expect: ['spec.atlantis.lockingDB.redis.passwordSecretRef', 'needs a non-empty name and key'],
  },
  {
    what: 'redis.usernameSecretRef key with a slash',
    obj: (n) => cr(n, (o) => withStore(o, redisDB({ usernameSecretRef: { name: 'redis', key: 'a/b' } }))),
    expect: ['spec.atlantis.lockingDB.redis.usernameSecretRef', 'may contain only letters'],
  },
  {
    what: 'maxSurge 1 with the embedded store (lockingDB unset)',
    obj: (n) => cr(n, (o) => (at(o.spec, 'updateStrategy').maxSurge = 1)),
    expect: ['spec.updateStrategy.maxSurge', 'maxSurge needs spec.atlantis.lockingDB.type redis', SURGE_WHY],
  },
  {
    what: 'maxSurge 2 with lockingDB boltdb',
    obj: (n) =>
      cr(n, (o) => {
        withStore(o, { type: 'boltdb', redis: { host: 'ignored' } });
        at(o.spec, 'updateStrategy').maxSurge = 2;
      }),
    expect: ['spec.updateStrategy.maxSurge', SURGE_WHY],
  },
  {
    what: 'maxSurge -1',
    obj: (n) =>
      cr(n, (o) => {
        withStore(o, redisDB());
        at(o.spec, 'updateStrategy').maxSurge = -1;
      }),
    expect: ['spec.updateStrategy.maxSurge', 'must be 0 or more'],
  },
  {
    what: 'maxSurge above the maximum',
    obj: (n) =>
      cr(n, (o) => {
        withStore(o, redisDB());
        at(o.spec, 'updateStrategy').maxSurge = 1001;
      }),
    expect: ['spec.updateStrategy.maxSurge', '1000'],
  },
  {
    what: 'maxSurge as a percentage',
    obj: (n) =>
      cr(n, (o) => {
        withStore(o, redisDB());
        at(o.spec, 'updateStrategy').maxSurge = '25%';
      }),
    expect: ['spec.updateStrategy.maxSurge', 'must be of type integer'],
  },
  {
    what: 'env sets ATLANTIS_LOCKING_DB_TYPE',
    obj: (n) => cr(n, (o) => (at(o.spec, 'atlantis').env = [{ name: 'ATLANTIS_LOCKING_DB_TYPE', value: 'redis' }])),
    expect: ['spec.atlantis.env[0]', 'must not set ATLANTIS_LOCKING_DB_TYPE', 'set spec.atlantis.lockingDB instead'],
  },
  {
    what: 'env sets ATLANTIS_REDIS_PASSWORD',
    obj: (n) =>
      cr(n, (o) => {
        withStore(o, redisDB());
        at(o.spec, 'atlantis').env = [
          { name: 'ATLANTIS_LOG_LEVEL', value: 'debug' },
          { name: 'ATLANTIS_REDIS_PASSWORD', valueFrom: { secretKeyRef: { name: 'r', key: 'p' } } },
        ];
      }),
    expect: ['spec.atlantis.env[1]', 'must not set ATLANTIS_REDIS_PASSWORD', 'set spec.atlantis.lockingDB instead'],
  },
  {
    what: 'missing spec',
    obj: (n) => {
      const o = cr(n);
      delete o.spec;
      return o;
    },
    expect: ['spec', 'Required value'],
  },
];

const NAME_CASES: Array<{ what: string; name: string; expect: string[] }> = [
  // Valid DNS subdomains (the generic name check passes) that break the CRD's own rules.
  { what: 'name with a dot', name: 'my.atlantis', expect: ['metadata.name must start with a lowercase letter'] },
  { what: 'name starting with a digit', name: '1atlantis', expect: ['metadata.name must start with a lowercase letter'] },
  { what: 'name longer than 63 characters', name: `a${'b'.repeat(63)}`, expect: ['metadata.name must be at most 63 characters'] },
];

async function kubectlApply(obj: Obj): Promise<{ exitCode: number; stdout: string; stderr: string }> {
  return cluster.kubectl(['apply', '-f', '-'], { input: JSON.stringify(obj) });
}

describe('valid AtlantisDeployment', () => {
  it('is accepted and defaulted by the API server', async () => {
    const created = await kubeRequestOk<AtlantisDeployment>(cluster.kc, 'POST', apiPath(API_VERSION, PLURAL, ns), cr('valid'));
    const s = created.spec;
    assert.equal(s.replicas, 1, 'replicas defaults to 1');
    assert.deepEqual(s.storage, { size: '5Gi' }, 'storage.size defaults to 5Gi (storageClassName stays unset)');
    assert.deepEqual(s.updateStrategy, { maxUnavailable: 1, drainTimeoutSeconds: 3600, onDrainTimeout: 'Wait' });
    assert.deepEqual(s.service, { type: 'ClusterIP', port: 80 });
    assert.equal(s.terminationGracePeriodSeconds, 120);
    assert.equal(s.paused, false);
    assert.equal(s.image, 'atlantis-operator:v1');
    // Defaults are persisted, not only in the create response.
    const got = await getAd(cluster.kc, ns, 'valid');
    assert.deepEqual(got.spec, created.spec);
  });

  it('lockingDB is stored as written: absent stays absent, a redis block gets its defaults, maxSurge is left to the controller', async () => {
    const created = await kubeRequestOk<AtlantisDeployment>(cluster.kc, 'POST', apiPath(API_VERSION, PLURAL, ns), cr('store-default'));
    assert.equal(created.spec.atlantis?.lockingDB, undefined, 'no lockingDB written, none stored (the controller defaults boltdb)');
    const empty = await kubeRequestOk<AtlantisDeployment>(
      cluster.kc,
      'POST',
      apiPath(API_VERSION, PLURAL, ns),
      cr('store-empty', (o) => withStore(o, {})),
    );
    assert.deepEqual(empty.spec.atlantis?.lockingDB, { type: 'boltdb' });
    const redis = await kubeRequestOk<AtlantisDeployment>(
      cluster.kc,
      'POST',
      apiPath(API_VERSION, PLURAL, ns),
      cr('store-redis', (o) => withStore(o, redisDB({ passwordSecretRef: { name: 'redis', key: 'password' } }))),
    );
    assert.deepEqual(redis.spec.atlantis?.lockingDB, {
      type: 'redis',
      redis: {
        host: 'redis.infra.svc',
        port: 6379,
        db: 0,
        tls: false,
        insecureSkipVerify: false,
        passwordSecretRef: { name: 'redis', key: 'password' },
        sharedStateKeySecretRef: KEY_REF,
      },
    });
    assert.equal(redis.spec.updateStrategy?.maxSurge, undefined, 'no schema default: it depends on lockingDB');
    assert.deepEqual((await getAd(cluster.kc, ns, 'store-redis')).spec, redis.spec, 'defaults are persisted');
  });

  it('accepts the store at the edges: redis with every setting and a surge, boltdb with maxSurge 0 and an unused redis block', async () => {
    // [name, lockingDB, updateStrategy, env]
    const rows: Array<[string, Obj | undefined, Obj | undefined, Obj[] | undefined]> = [
      [
        'edge-redis',
        redisDB({
          host: '10.0.0.7',
          port: 65535,
          db: 15,
          tls: true,
          insecureSkipVerify: true,
          usernameSecretRef: { name: 'redis', key: 'user.name' },
          passwordSecretRef: { name: 'redis', key: 'pass_word-1' },
        }),
        { maxUnavailable: 1, maxSurge: 1000 },
        undefined,
      ],
      ['edge-redis-port-1', redisDB({ port: 1, db: 0 }), undefined, undefined],
      ['edge-redis-no-surge', redisDB(), { maxSurge: 0 }, undefined],
      ['edge-bolt-surge-0', { type: 'boltdb', redis: { host: 'unused' } }, { maxSurge: 0 }, undefined],
      ['edge-unset-surge-0', undefined, { maxSurge: 0 }, undefined],
      ['edge-redis-ipv6', redisDB({ podIPFamily: 'IPv6' }), undefined, undefined],
    ];
    for (const [name, db, updateStrategy, env] of rows) {
      const mutate = (o: { spec: Obj }): void => {
        if (db) withStore(o, db);
        if (updateStrategy) o.spec.updateStrategy = updateStrategy;
        if (env) at(o.spec, 'atlantis').env = env;
      };
      const r = await kubeRequest<AtlantisDeployment>(cluster.kc, 'POST', apiPath(API_VERSION, PLURAL, ns), cr(name, mutate));
      assert.equal(r.status, 201, `${name} accepted; got ${r.status}: ${statusOf(r.body).message}`);
    }
  });

  it('accepts values at the edges of every rule', async () => {
    const edge = cr('edge', (o) => {
      o.spec.replicas = 0;
      o.spec.terminationGracePeriodSeconds = 30;
      o.spec.updateStrategy = { maxUnavailable: 1, drainTimeoutSeconds: 0, onDrainTimeout: 'Interrupt' };
      o.spec.service = { type: 'NodePort', port: 65535 };
      o.spec.storage = { size: '100Mi', storageClassName: null };
      at(o.spec, 'atlantis').url = 'http://10.0.0.1:4141/atlantis';
      at(o.spec, 'atlantis').env = [
        { name: 'ATLANTIS_LOG_LEVEL', value: 'debug' },
        { name: 'TF_TOKEN', valueFrom: { secretKeyRef: { name: 'x', key: 'y' } } },
      ];
      o.spec.podTemplate = {
        metadata: { labels: { team: 'infra' }, annotations: { 'kubectl.kubernetes.io/restartedAt': '2026-01-01T00:00:00Z' } },
        spec: {
          nodeSelector: { disk: 'ssd' },
          tolerations: [{ key: 'a', operator: 'Exists', effect: 'NoSchedule' }],
          resources: { requests: { cpu: '100m' } },
        },
      };
    });
    const r = await kubeRequest<AtlantisDeployment>(cluster.kc, 'POST', apiPath(API_VERSION, PLURAL, ns), edge);
    assert.equal(r.status, 201, `edge values accepted; got ${r.status}: ${statusOf(r.body).message}`);
    assert.equal(r.body.spec.replicas, 0);
    assert.equal(r.body.spec.updateStrategy?.onDrainTimeout, 'Interrupt');
    assert.deepEqual(r.body.spec.podTemplate?.spec?.resources, { requests: { cpu: '100m' } }, 'resources kept as written');
  });
});

describe('bad AtlantisDeployments are rejected through the API with 422 and a readable message', () => {
  for (const [i, c] of BAD.entries()) {
    it(c.what, () => assertRefused(cluster.kc, ns, `bad-api-${i}`, c));
  }
  for (const c of NAME_CASES) {
    it(c.what, async () => {
      const r = await kubeRequest(cluster.kc, 'POST', apiPath(API_VERSION, PLURAL, ns), cr(c.name));
      const st = statusOf(r.body);
      assert.equal(r.status, 422, `${c.what}: want 422, got ${r.status}: ${st.message}`);
      for (const s of c.expect)
        assert.ok(st.message?.includes(s), `${c.what}: message should contain ${JSON.stringify(s)}; got: ${st.message}`);
    });
  }

  it('storage.size cannot be changed after creation (transition rule)', async () => {
    await kubeRequestOk(cluster.kc, 'POST', apiPath(API_VERSION, PLURAL, ns), cr('immutable-size'));
    const r = await kubeRequest(
      cluster.kc,
      'PATCH',
      apiPath(API_VERSION, PLURAL, ns, 'immutable-size'),
      { spec: { storage: { size: '10Gi' } } },
      { contentType: MERGE_PATCH },
    );
    const st = statusOf(r.body);
    assert.equal(r.status, 422, `want 422, got ${r.status}: ${st.message}`);
    assert.ok(st.message?.includes('spec.storage.size cannot be changed'), `message: ${st.message}`);
    assert.equal((await getAd(cluster.kc, ns, 'immutable-size')).spec.storage?.size, '5Gi');
    // Other fields stay mutable.
    const ok = await kubeRequest(
      cluster.kc,
      'PATCH',
      apiPath(API_VERSION, PLURAL, ns, 'immutable-size'),
      { spec: { replicas: 2, image: 'atlantis-operator:v2' } },
      { contentType: MERGE_PATCH },
    );
    assert.equal(ok.status, 200, `other fields may change: ${statusOf(ok.body).message}`);
  });

  it('a surge and the embedded store cannot meet through an update either', async () => {
    const patch = (name: string, spec: Obj) =>
      kubeRequest(cluster.kc, 'PATCH', apiPath(API_VERSION, PLURAL, ns, name), { spec }, { contentType: MERGE_PATCH });
    // A boltdb object given a surge.
    await kubeRequestOk(cluster.kc, 'POST', apiPath(API_VERSION, PLURAL, ns), cr('surge-bolt'));
    const bad = await patch('surge-bolt', { updateStrategy: { maxSurge: 1 } });
    assert.equal(bad.status, 422, `want 422, got ${bad.status}: ${statusOf(bad.body).message}`);
    assert.ok(statusOf(bad.body).message?.includes(SURGE_WHY), `message: ${statusOf(bad.body).message}`);
    assert.equal((await getAd(cluster.kc, ns, 'surge-bolt')).spec.updateStrategy?.maxSurge, undefined);
    // The store and the surge in one change are fine.
    const ok = await patch('surge-bolt', { atlantis: { lockingDB: redisDB() }, updateStrategy: { maxSurge: 2 } });
    assert.equal(ok.status, 200, `redis and a surge together: ${statusOf(ok.body).message}`);
    // Back to the embedded store while the surge stays: refused, the object keeps Redis.
    const back = await patch('surge-bolt', { atlantis: { lockingDB: { type: 'boltdb' } } });
    assert.equal(back.status, 422, `want 422, got ${back.status}: ${statusOf(back.body).message}`);
    assert.ok(statusOf(back.body).message?.includes('spec.updateStrategy.maxSurge'), `message: ${statusOf(back.body).message}`);
    assert.equal((await getAd(cluster.kc, ns, 'surge-bolt')).spec.atlantis?.lockingDB?.type, 'redis');
    // With the surge dropped in the same change it goes through.
    const both = await patch('surge-bolt', {
      atlantis: { lockingDB: { type: 'boltdb', redis: null } },
      updateStrategy: { maxSurge: null },
    });
    assert.equal(both.status, 200, `boltdb without a surge: ${statusOf(both.body).message}`);
    assert.deepEqual((await getAd(cluster.kc, ns, 'surge-bolt')).spec.atlantis?.lockingDB, { type: 'boltdb' });
  });

  it('an update breaking a rule is rejected too (maxUnavailable 0 on an existing object)', async () => {
    await kubeRequestOk(cluster.kc, 'POST', apiPath(API_VERSION, PLURAL, ns), cr('update-bad'));
    const r = await kubeRequest(
      cluster.kc,
      'PATCH',
      apiPath(API_VERSION, PLURAL, ns, 'update-bad'),
      { spec: { updateStrategy: { maxUnavailable: 0 } } },
      { contentType: MERGE_PATCH },
    );
    assert.equal(r.status, 422);
    assert.match(statusOf(r.body).message ?? '', /spec\.updateStrategy\.maxUnavailable must be at least 1/);
    assert.equal((await getAd(cluster.kc, ns, 'update-bad')).spec.updateStrategy?.maxUnavailable, 1);
  });
});

describe('unknown fields', () => {
  it('are pruned by the structural schema (default field validation)', async () => {
    const r = await kubeRequest<AtlantisDeployment>(
      cluster.kc,
      'POST',
      apiPath(API_VERSION, PLURAL, ns),
      cr('pruned', (o) => {
        o.spec.imagePullPolicy = 'Always';
        at(o.spec, 'updateStrategy').partition = 2;
      }),
    );
    assert.equal(r.status, 201, `created: ${statusOf(r.body).message}`);
    const warning = r.headers.get('warning') ?? '';
    assert.match(
      warning,
      /unknown field \\?"spec\.imagePullPolicy/,
      `the API server warns about the unknown field; warning header: ${warning}`,
    );
    const got = (await getAd(cluster.kc, ns, 'pruned')) as unknown as { spec: Obj & { updateStrategy: Obj } };
    assert.equal(got.spec.imagePullPolicy, undefined, 'spec.imagePullPolicy pruned');
    assert.equal(got.spec.updateStrategy.partition, undefined, 'spec.updateStrategy.partition pruned');
  });

  it('are refused with fieldValidation=Strict', async () => {
    const r = await kubeRequest(
      cluster.kc,
      'POST',
      apiPath(API_VERSION, PLURAL, ns),
      cr('strict', (o) => (o.spec.imagePullPolicy = 'Always')),
      { query: { fieldValidation: 'Strict' } },
    );
    const st = statusOf(r.body);
    assert.ok(r.status === 400 || r.status === 422, `want 400/422, got ${r.status}: ${st.message}`);
    assert.match(st.message ?? '', /unknown field "spec\.imagePullPolicy"/);
  });
});

describe('kubectl apply', () => {
  const KUBECTL_CASES = [
    'missing image',
    'image with whitespace',
    'replicas -1',
    'maxUnavailable 0',
    'onDrainTimeout Foo',
    'service.port 70000',
    'terminationGracePeriodSeconds 29 (CEL minimum 30)',
    'missing github.tokenSecretRef.name',
    'env sets POD_NAME',
    'maxSurge 1 with the embedded store (lockingDB unset)',
    'lockingDB redis without settings',
  ];
  for (const what of KUBECTL_CASES) {
    it(`refuses: ${what}`, async () => {
      const c = BAD.find((b) => b.what === what)!;
      const name = `bad-kubectl-${KUBECTL_CASES.indexOf(what)}`;
      const r = await kubectlApply(c.obj(name));
      assert.notEqual(r.exitCode, 0, `kubectl apply should fail; stdout: ${r.stdout}`);
      assert.match(r.stderr, new RegExp(`The AtlantisDeployment "${name}" is invalid`), `stderr: ${r.stderr}`);
      for (const s of c.expect) assert.ok(r.stderr.includes(s), `stderr should contain ${JSON.stringify(s)}; got: ${r.stderr}`);
      assert.equal((await kubeRequest(cluster.kc, 'GET', apiPath(API_VERSION, PLURAL, ns, name))).status, 404);
    });
  }

  it('refuses an unknown field (kubectl validates strictly by default)', async () => {
    const r = await kubectlApply(cr('kubectl-unknown', (o) => (o.spec.replica = 3)));
    assert.notEqual(r.exitCode, 0, `stdout: ${r.stdout}`);
    assert.match(r.stderr, /unknown field "spec\.replica"/, `stderr: ${r.stderr}`);
  });

  it('accepts a valid object', async () => {
    const r = await kubectlApply(cr('kubectl-ok'));
    assert.equal(r.exitCode, 0, `stderr: ${r.stderr}`);
    assert.match(r.stdout, /atlantisdeployment\.atlantis-operator\.dev\/kubectl-ok created/);
  });

  it('accepts the Redis example (manifests/example-redis) in a server-side dry run', async () => {
    const built = await cluster.kubectl(['kustomize', path.join(path.dirname(CRD_FILE), '..', 'manifests', 'example-redis')]);
    assert.equal(built.exitCode, 0, built.stderr);
    // Into the test's namespace: a dry-run Namespace would not exist for the objects after it.
    const docs = parseAllDocuments(built.stdout)
      .map((d) => d.toJSON() as Obj & { metadata: Obj })
      .filter((d) => d.kind !== 'Namespace')
      .map((d) => ({ ...d, metadata: { ...d.metadata, namespace: ns } }));
    const r = await cluster.kubectl(['apply', '--dry-run=server', '-o', 'json', '-f', '-'], {
      input: JSON.stringify({ apiVersion: 'v1', kind: 'List', items: docs }),
    });
    assert.equal(r.exitCode, 0, `stderr: ${r.stderr}`);
    const items = (JSON.parse(r.stdout) as { items: Obj[] }).items;
    const ad = items.find((i) => i.kind === KIND) as unknown as AtlantisDeployment | undefined;
    assert.ok(ad, `the example has an AtlantisDeployment: ${items.map((i) => i.kind).join(', ')}`);
    assert.equal(ad.spec.atlantis?.lockingDB?.type, 'redis');
    assert.deepEqual(ad.spec.atlantis?.lockingDB?.redis?.passwordSecretRef, { name: 'redis', key: 'password' });
  });
});

describe('subresources, short name, printer columns', () => {
  it('kubectl scale atd/x changes spec.replicas through the scale subresource', async () => {
    await kubeRequestOk(cluster.kc, 'POST', apiPath(API_VERSION, PLURAL, ns), cr('scaled'));
    const r = await cluster.kubectl(['-n', ns, 'scale', 'atd/scaled', '--replicas=3']);
    assert.equal(r.exitCode, 0, `kubectl scale: ${r.stderr}`);
    assert.match(r.stdout, /scaled/);
    assert.equal((await getAd(cluster.kc, ns, 'scaled')).spec.replicas, 3);
    const scale = await kubeRequestOk<{ kind: string; spec: { replicas: number } }>(
      cluster.kc,
      'GET',
      apiPath(API_VERSION, PLURAL, ns, 'scaled', 'scale'),
    );
    assert.equal(scale.kind, 'Scale');
    assert.equal(scale.spec.replicas, 3);
    // The scale subresource enforces the schema too.
    const bad = await cluster.kubectl(['-n', ns, 'scale', 'atd/scaled', '--replicas=1001']);
    assert.notEqual(bad.exitCode, 0, 'scaling above the maximum fails');
    assert.equal((await getAd(cluster.kc, ns, 'scaled')).spec.replicas, 3);
  });

  it('the status subresource: the main resource ignores status, /status ignores spec', async () => {
    await kubeRequestOk(cluster.kc, 'POST', apiPath(API_VERSION, PLURAL, ns), { ...cr('columns'), status: { readyReplicas: 9 } });
    assert.equal((await getAd(cluster.kc, ns, 'columns')).status, undefined, 'status sent on create is dropped');
    const r = await kubeRequest(
      cluster.kc,
      'PATCH',
      apiPath(API_VERSION, PLURAL, ns, 'columns', 'status'),
      {
        spec: { replicas: 7 },
        status: {
          replicas: 3,
          readyReplicas: 2,
          updatedReplicas: 1,
          drainingReplicas: 1,
          updateRevision: 'abc123',
          selector: 'app.kubernetes.io/instance=columns',
        },
      },
      { contentType: MERGE_PATCH },
    );
    assert.equal(r.status, 200, JSON.stringify(r.body));
    const got = await getAd(cluster.kc, ns, 'columns');
    assert.equal(got.spec.replicas, 1, 'spec is not changed through /status');
    assert.equal(got.status?.readyReplicas, 2);
  });

  it('kubectl get atd shows the printer columns (short name and category work)', async () => {
    const r = await cluster.kubectl(['-n', ns, 'get', 'atd', 'columns']);
    assert.equal(r.exitCode, 0, r.stderr);
    const [header, row] = r.stdout.trim().split('\n');
    assert.deepEqual(header!.trim().split(/\s+/), ['NAME', 'REPLICAS', 'READY', 'UP-TO-DATE', 'DRAINING', 'SURGE', 'PHASE', 'AGE']);
    assert.deepEqual(row!.trim().split(/\s+/).slice(0, 5), ['columns', '1', '2', '1', '1']);

    const wide = await cluster.kubectl(['-n', ns, 'get', 'atd', 'columns', '-o', 'wide']);
    assert.equal(wide.exitCode, 0, wide.stderr);
    const wh = wide.stdout.trim().split('\n')[0]!.trim().split(/\s+/);
    assert.ok(wh.includes('PAUSED') && wh.includes('REVISION'), `-o wide headers: ${wh.join(' ')}`);
    assert.match(wide.stdout, /abc123/);

    for (const resource of ['atlantisdeployments', 'atlantisdeployment', 'atlantis']) {
      const g = await cluster.kubectl(['-n', ns, 'get', resource, '-o', 'name']);
      assert.equal(g.exitCode, 0, `${resource}: ${g.stderr}`);
      assert.match(g.stdout, /atlantisdeployment\.atlantis-operator\.dev\/columns/, `kubectl get ${resource}`);
    }
  });
});
