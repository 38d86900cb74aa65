// spec.atlantis.lockingDB.redis.sentinel on the real API server: a Redis found through Redis
// Sentinel (the server's --redis-sentinel-* flags) instead of one host. Accepted at the edges
// and stored with the redis block's defaults; refused with 422 and a message naming the
// field when it is incomplete, malformed, or beside a host or port the server would refuse.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { apiPath, kubeRequest } from '../src/k8s/client.js';
import { API_VERSION, PLURAL, type AtlantisDeployment } from '../src/controller/types.js';
import { ensureCrd } from './support/controller.js';
import { type BadCase, type Obj, assertRefused, at, crObject, statusOf } from './support/crd-objects.js';
import { deleteNamespace, freshNamespace, getCluster, type TestCluster } from './support/k8s.js';

let cluster: TestCluster;
let ns: string;

before(async () => {
  cluster = await getCluster();
  await ensureCrd(cluster);
  ns = await freshNamespace('crd-sentinel');
});
after(async () => {
  if (ns) await deleteNamespace(ns);
});

const sentinel = (extra: Obj = {}): Obj => ({ masterName: 'atlantis', addresses: ['s0.infra.svc:26379', 's1.infra.svc'], ...extra });
/** A Redis found through Sentinel; `extra` is merged into lockingDB.redis. */
const KEY_REF = { name: 'atlantis-shared-state', key: 'key' };
const sentinelDB = (extra: Obj = {}): Obj => ({
  type: 'redis',
  redis: { sentinel: sentinel(), sharedStateKeySecretRef: KEY_REF, ...extra },
});
const withStore = (db: Obj) => (name: string) =>
  crObject(ns, name, (o) => {
    at(o.spec, 'atlantis').lockingDB = db;
  });
const withSentinel = (s: Obj) => withStore(sentinelDB({ sentinel: sentinel(s) }));

const BAD_ADDRESSES = ['s0:65536', 's0:0', 's0:', 's 0:26379', 'redis://s0:26379', 's0,s1', 'user@s0', '[::1', '', 'a'.repeat(261)];

const BAD: BadCase[] = [
  {
    what: 'host and sentinel both',
    obj: withStore({ type: 'redis', redis: { host: 'redis.infra.svc', sentinel: sentinel(), sharedStateKeySecretRef: KEY_REF } }),
    expect: ['spec.atlantis.lockingDB.redis', 'host and sentinel are both set', 'leave host out'],
  },
  {
    what: 'a port beside sentinel',
    obj: withStore(sentinelDB({ port: 6380 })),
    expect: ['spec.atlantis.lockingDB.redis', 'port is not used with sentinel'],
  },
  {
    what: 'no masterName',
    obj: withStore(sentinelDB({ sentinel: { addresses: ['s0:26379'] } })),
    expect: ['spec.atlantis.lockingDB.redis.sentinel.masterName', 'Required value'],
  },
  ...['', 'my master', 'tab\tname'].map((masterName) => ({
    what: `masterName ${JSON.stringify(masterName)}`,
    obj: withSentinel({ masterName }),
    expect: ['spec.atlantis.lockingDB.redis.sentinel.masterName', 'a non-empty name without whitespace'],
  })),
  {
    what: 'no addresses',
    obj: withStore(sentinelDB({ sentinel: { masterName: 'atlantis' } })),
    expect: ['spec.atlantis.lockingDB.redis.sentinel.addresses', 'Required value'],
  },
  {
    what: 'an empty address list',
    obj: withSentinel({ addresses: [] }),
    expect: ['spec.atlantis.lockingDB.redis.sentinel.addresses', 'at least 1 items'],
  },
  {
    what: '17 addresses',
    obj: withSentinel({ addresses: Array.from({ length: 17 }, (_, i) => `s${i}:26379`) }),
    expect: ['spec.atlantis.lockingDB.redis.sentinel.addresses', 'at most 16 items'],
  },
  ...BAD_ADDRESSES.map((a) => ({
    what: `address ${JSON.stringify(a.length > 20 ? `${a.slice(0, 5)}... (${a.length})` : a)}`,
    obj: withSentinel({ addresses: ['s0:26379', a] }),
    expect: ['spec.atlantis.lockingDB.redis.sentinel.addresses[1]', a.length > 260 ? 'Too long' : 'each must be host:port (port 1-65535)'],
  })),
  {
    what: 'passwordSecretRef key with a slash',
    obj: withSentinel({ passwordSecretRef: { name: 'sentinel', key: 'a/b' } }),
    expect: ['spec.atlantis.lockingDB.redis.sentinel.passwordSecretRef', 'may contain only letters'],
  },
  {
    what: 'usernameSecretRef without a name',
    obj: withSentinel({ usernameSecretRef: { key: 'user' } }),
    expect: ['spec.atlantis.lockingDB.redis.sentinel.usernameSecretRef.name', 'Required value'],
  },
  {
    what: 'usernameSecretRef empty key',
    obj: withSentinel({ usernameSecretRef: { name: 'sentinel', key: '' } }),
    expect: ['spec.atlantis.lockingDB.redis.sentinel.usernameSecretRef', 'needs a non-empty name and key'],
  },
  {
    what: 'the sentinel password in env instead',
    obj: (name) =>
      crObject(ns, name, (o) => {
        at(o.spec, 'atlantis').lockingDB = sentinelDB();
        at(o.spec, 'atlantis').env = [{ name: 'ATLANTIS_REDIS_SENTINEL_PASSWORD', value: 'x' }];
      }),
    expect: ['spec.atlantis.env[0]', 'must not set ATLANTIS_REDIS_SENTINEL_PASSWORD', 'set spec.atlantis.lockingDB instead'],
  },
];

describe('lockingDB.redis.sentinel: bad objects are refused with 422 and a readable message', () => {
  for (const [i, c] of BAD.entries()) it(c.what, () => assertRefused(cluster.kc, ns, `bad-sentinel-${i}`, c));
});

describe('lockingDB.redis.sentinel: good objects', () => {
  it('accepts the edges: every setting, IPv6 and bare hosts, 16 addresses, the default port written out, a surge', async () => {
    const rows: Array<[string, Obj, Obj | undefined]> = [
      [
        'edge-sentinel',
        sentinelDB({
          db: 2,
          tls: true,
          insecureSkipVerify: true,
          usernameSecretRef: { name: 'redis', key: 'user' },
          passwordSecretRef: { name: 'redis', key: 'password' },
          sentinel: sentinel({
            masterName: 'm'.repeat(253),
            addresses: ['10.0.0.1:26379', '[fd00::1]:65535', '[::1]', 'sentinel-2.redis.infra.svc.cluster.local', 's3:1'],
            usernameSecretRef: { name: 'sentinel', key: 'user' },
            passwordSecretRef: { name: 'sentinel', key: 'pass.word_1' },
          }),
        }),
        { maxSurge: 2 },
      ],
      ['edge-sentinel-16', sentinelDB({ sentinel: sentinel({ addresses: Array.from({ length: 16 }, (_, i) => `s${i}`) }) }), undefined],
      ['edge-sentinel-port-6379', sentinelDB({ port: 6379 }), undefined],
      ['edge-sentinel-long-address', sentinelDB({ sentinel: sentinel({ addresses: [`${'a'.repeat(254)}:26379`] }) }), undefined],
    ];
    for (const [name, db, updateStrategy] of rows) {
      const obj = crObject(ns, name, (o) => {
        at(o.spec, 'atlantis').lockingDB = db;
        if (updateStrategy) o.spec.updateStrategy = updateStrategy;
      });
      const r = await kubeRequest<AtlantisDeployment>(cluster.kc, 'POST', apiPath(API_VERSION, PLURAL, ns), obj);
      assert.equal(r.status, 201, `${name} accepted; got ${r.status}: ${statusOf(r.body).message}`);
    }
  });

  it('is stored as written, with the redis block defaults and no host', async () => {
    const obj = crObject(ns, 'stored', (o) => {
      at(o.spec, 'atlantis').lockingDB = sentinelDB();
    });
    const r = await kubeRequest<AtlantisDeployment>(cluster.kc, 'POST', apiPath(API_VERSION, PLURAL, ns), obj);
    assert.equal(r.status, 201, statusOf(r.body).message);
    assert.deepEqual(r.body.spec.atlantis?.lockingDB, {
      type: 'redis',
      redis: { sentinel: sentinel(), port: 6379, db: 0, tls: false, insecureSkipVerify: false, sharedStateKeySecretRef: KEY_REF },
    });
  });
});
