// The Redis Sentinel settings (`--redis-sentinel-*`, ours) as storeConfigFromFlags reads them
// from the command line and ATLANTIS_* env, what is refused, and how they map to one ioredis
// connection (redisConnection -> redisClientOptions), as tables. Pure: nothing connects.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { UsageError } from '../src/config/flags.js';
import { reconnectOnErrorReply, redisClientOptions, redisConnection } from '../src/server/locks/redis-connection.js';
import { type RedisSettings, parseSentinelAddress, redisTarget } from '../src/server/locks/store-config.js';
import { serverSecretValues } from '../src/server/secrets/server-secrets.js';
import { sharedStateKeyFile, testSharedStateKey } from './support/redis-server.js';
import { configWithRequiredFlags } from './support/server-config.js';

const config = configWithRequiredFlags('ato-storecfg-');
const KEY = ['--shared-state-key-file', sharedStateKeyFile()];
const redisOf = (argv: string[], env: NodeJS.ProcessEnv = {}): RedisSettings => {
  const s = config(['--locking-db-type', 'redis', ...KEY, ...argv], env).store;
  assert.equal(s.type, 'redis');
  return (s as { redis: RedisSettings }).redis;
};
function usageError(fn: () => unknown): string {
  try {
    fn();
  } catch (e) {
    assert.ok(e instanceof UsageError, `expected UsageError, got ${String(e)}`);
    assert.ok(!e.message.includes('\n'), 'one line');
    return e.message;
  }
  assert.fail('expected a UsageError');
}

describe('--redis-sentinel-* flags', () => {
  // [what, argv, env, the sentinel settings]
  const rows: Array<[string, string[], NodeJS.ProcessEnv, RedisSettings['sentinel']]> = [
    ['none given: a single Redis', [], {}, undefined],
    [
      'flags, ports given and defaulted',
      ['--redis-sentinel-addresses', 'sentinel-0.redis:26380, sentinel-1.redis,10.0.0.3:5000', '--redis-sentinel-master-name', 'atlantis'],
      {},
      {
        addresses: [
          { host: 'sentinel-0.redis', port: 26380 },
          { host: 'sentinel-1.redis', port: 26379 },
          { host: '10.0.0.3', port: 5000 },
        ],
        masterName: 'atlantis',
      },
    ],
    [
      'env, with the sentinels’ own login',
      [],
      {
        ATLANTIS_REDIS_SENTINEL_ADDRESSES: '[fd00::7]:26379,[::1]',
        ATLANTIS_REDIS_SENTINEL_MASTER_NAME: 'mymaster',
        ATLANTIS_REDIS_SENTINEL_USERNAME: 'sentinel-user',
        ATLANTIS_REDIS_SENTINEL_PASSWORD: 'sentinel-pw',
      },
      {
        addresses: [
          { host: 'fd00::7', port: 26379 },
          { host: '::1', port: 26379 },
        ],
        masterName: 'mymaster',
        username: 'sentinel-user',
        password: 'sentinel-pw',
      },
    ],
    [
      'a command-line flag beats its env',
      ['--redis-sentinel-master-name', 'from-flag'],
      { ATLANTIS_REDIS_SENTINEL_ADDRESSES: 's:1', ATLANTIS_REDIS_SENTINEL_MASTER_NAME: 'from-env' },
      { addresses: [{ host: 's', port: 1 }], masterName: 'from-flag' },
    ],
    [
      'a Kubernetes Service link in ATLANTIS_REDIS_PORT is not a --redis-port',
      ['--redis-sentinel-addresses', 's:26379', '--redis-sentinel-master-name', 'm'],
      { ATLANTIS_REDIS_PORT: 'tcp://10.96.3.4:6379' },
      { addresses: [{ host: 's', port: 26379 }], masterName: 'm' },
    ],
  ];
  for (const [what, argv, env, want] of rows)
    it(`reads ${what}`, () => {
      const r = redisOf(argv, env);
      assert.deepEqual(r.sentinel, want);
      if (want === undefined) assert.ok(!('sentinel' in r), 'no sentinel key at all');
    });

  it('keeps the data connection settings (db, login, TLS) for the master', () => {
    const r = redisOf([
      '--redis-sentinel-addresses=s:26379',
      '--redis-sentinel-master-name=m',
      '--redis-db=2',
      '--redis-username=app',
      '--redis-password=data-pw',
      '--redis-tls-enabled',
    ]);
    assert.deepEqual(
      { db: r.db, username: r.username, password: r.password, tls: r.tls, insecureSkipVerify: r.insecureSkipVerify },
      { db: 2, username: 'app', password: 'data-pw', tls: true, insecureSkipVerify: false },
    );
  });

  it('ignores them with the embedded store, as every --redis-* flag', () => {
    assert.deepEqual(config(['--redis-sentinel-addresses', 's:1']).store, { type: 'boltdb' });
  });

  // [argv, env, the error]
  const bad: Array<[string[], NodeJS.ProcessEnv, RegExp]> = [
    [['--redis-sentinel-addresses', 's:26379'], {}, /^--redis-sentinel-master-name is required with --redis-sentinel-addresses$/],
    [['--redis-sentinel-master-name', 'm'], {}, /^--redis-sentinel-master-name is set without --redis-sentinel-addresses$/],
    [[], { ATLANTIS_REDIS_SENTINEL_PASSWORD: 'pw-not-echoed' }, /^--redis-sentinel-password is set without --redis-sentinel-addresses$/],
    [['--redis-sentinel-username', 'u'], {}, /^--redis-sentinel-username is set without --redis-sentinel-addresses$/],
    [
      ['--redis-sentinel-addresses', 's:26379', '--redis-sentinel-master-name', 'm', '--redis-host', 'redis.infra'],
      {},
      /^--redis-host and --redis-sentinel-addresses are both set: with Sentinel the sentinels name the master; unset --redis-host$/,
    ],
    [
      ['--redis-sentinel-addresses', 's:26379', '--redis-sentinel-master-name', 'm'],
      { ATLANTIS_REDIS_PORT: '6380' },
      /^--redis-port and --redis-sentinel-addresses are both set/,
    ],
    [['--redis-sentinel-addresses', 's:26379', '--redis-sentinel-master-name', 'my master'], {}, /must not contain spaces$/],
    [['--redis-sentinel-addresses', 's:0', '--redis-sentinel-master-name', 'm'], {}, /^invalid value "s:0" for --redis-sentinel-addresses/],
  ];
  for (const [argv, env, err] of bad)
    it(`refuses ${[...argv, ...Object.entries(env).map(([k]) => `${k}=...`)].join(' ')}`, () => {
      const msg = usageError(() => redisOf(argv, env));
      assert.match(msg, err);
      assert.ok(!msg.includes('pw-not-echoed'), 'a value of a secret flag is never echoed');
    });

  // [address, host and port | the error]
  const addresses: Array<[string, { host: string; port: number } | RegExp]> = [
    ['10.1.2.3:26379', { host: '10.1.2.3', port: 26379 }],
    ['sentinel.svc.cluster.local', { host: 'sentinel.svc.cluster.local', port: 26379 }],
    ['[2001:db8::1]:1', { host: '2001:db8::1', port: 1 }],
    ['h:65535', { host: 'h', port: 65535 }],
    ['h:65536', /must be host:port/],
    ['h:', /must be host:port/],
    [':26379', /must be host:port/],
    ['2001:db8::1', /must be host:port/],
    ['user@h:1', /must be host:port/],
    ['tcp://h:1', /must be host:port/],
    ['h:1:2', /must be host:port/],
    ['[h]:1', /must be host:port/],
  ];
  for (const [a, want] of addresses)
    it(`parses the address ${JSON.stringify(a)}`, () => {
      if (want instanceof RegExp)
        assert.match(
          usageError(() => parseSentinelAddress(a)),
          want,
        );
      else assert.deepEqual(parseSentinelAddress(a), want);
    });

  it('scrubs the sentinel password, as the Redis password', () => {
    const c = config(['--locking-db-type=redis', ...KEY, '--redis-sentinel-addresses=s:1', '--redis-sentinel-master-name=m'], {
      ATLANTIS_REDIS_PASSWORD: 'data-pw-secret',
      ATLANTIS_REDIS_SENTINEL_PASSWORD: 'sentinel-pw-secret',
    });
    const secrets = serverSecretValues(c);
    assert.ok(secrets.includes('data-pw-secret'));
    assert.ok(secrets.includes('sentinel-pw-secret'));
  });
});

describe('the ioredis options of a connection through Sentinel', () => {
  const base = {
    host: 'localhost',
    port: 6379,
    db: 0,
    tls: false,
    insecureSkipVerify: false,
    sharedStateKey: testSharedStateKey(),
  } satisfies RedisSettings;
  const sentinel = {
    addresses: [
      { host: '10.0.0.1', port: 26379 },
      { host: 'fd00::2', port: 26380 },
    ],
    masterName: 'atlantis',
  };

  it('asks the sentinels for the master instead of connecting to --redis-host', () => {
    const o = redisClientOptions(redisConnection({ ...base, sentinel }));
    assert.equal(o.host, undefined);
    assert.equal(o.port, undefined);
    assert.deepEqual(o.sentinels, sentinel.addresses);
    assert.equal(o.name, 'atlantis');
    assert.equal(o.role, 'master');
    assert.equal(o.failoverDetector, true);
    assert.equal(o.sentinelCommandTimeout, 2000);
    assert.equal(o.sentinelUsername, undefined);
    assert.equal(o.sentinelPassword, undefined);
    assert.equal(o.enableTLSForSentinelMode, undefined);
    // Never a value that makes ioredis give up: it would end the client for good.
    for (const times of [1, 2, 10, 1000]) {
      assert.equal(typeof o.sentinelRetryStrategy?.(times), 'number');
      assert.ok((o.sentinelRetryStrategy?.(times) as number) <= 1000);
      assert.ok((o.sentinelReconnectStrategy?.(times) as number) <= 1000);
    }
  });

  // [settings, the options' login and TLS fields]
  const rows: Array<[string, RedisSettings, Record<string, unknown>]> = [
    [
      'logins: the sentinels’ own and the master’s',
      { ...base, username: 'app', password: 'pw', sentinel: { ...sentinel, username: 'su', password: 'spw' } },
      { username: 'app', password: 'pw', sentinelUsername: 'su', sentinelPassword: 'spw' },
    ],
    [
      'TLS: to the master and to the sentinels, verified',
      { ...base, tls: true, sentinel },
      { tls: { rejectUnauthorized: true }, enableTLSForSentinelMode: true, sentinelTLS: { rejectUnauthorized: true } },
    ],
    [
      'TLS with --redis-insecure-skip-verify: not verified on either',
      { ...base, tls: true, insecureSkipVerify: true, sentinel },
      { tls: { rejectUnauthorized: false }, enableTLSForSentinelMode: true, sentinelTLS: { rejectUnauthorized: false } },
    ],
  ];
  for (const [what, settings, want] of rows)
    it(what, () => {
      const o = redisClientOptions(redisConnection(settings)) as Record<string, unknown>;
      for (const [k, v] of Object.entries(want)) assert.deepEqual(o[k], v, k);
    });

  it('without Sentinel: the host and port, and none of the Sentinel options', () => {
    const o = redisClientOptions(redisConnection({ ...base, host: 'redis.infra', port: 6380 }));
    assert.equal(o.host, 'redis.infra');
    assert.equal(o.port, 6380);
    for (const k of ['sentinels', 'name', 'failoverDetector', 'enableTLSForSentinelMode'] as const) assert.equal(o[k], undefined, k);
  });

  it('names the target in messages: host:port, or the master and its sentinels', () => {
    assert.equal(redisTarget({ host: 'redis.infra', port: 6380 }), 'redis.infra:6380');
    assert.equal(redisTarget({ ...base, sentinel }), 'master atlantis through sentinels 10.0.0.1:26379,[fd00::2]:26380');
  });

  // [error reply, reconnect?]
  const replies: Array<[string, boolean]> = [
    ["READONLY You can't write against a read only replica.", true],
    // Redis 7's text for a script that writes on a replica.
    ["READONLY You can't write against a read only replica. script: c572d30ad6641c3edb8d1d4feb73be806644b33c, on @user_script:3.", true],
    ['NOREPLICAS Not enough good replicas to write.', false],
    ['NOSCRIPT No matching script. Please use EVAL.', false],
    ['LOADING Redis is loading the dataset in memory', false],
    ['WRONGTYPE Operation against a key holding the wrong kind of value', false],
    ['ERR value is not an integer: READONLYISH', false],
    ['Command timed out', false],
  ];
  for (const [reply, want] of replies)
    it(`${want ? 'reconnects' : 'does not reconnect'} on ${reply.slice(0, 40)}`, () => {
      assert.equal(reconnectOnErrorReply(new Error(reply)), want);
      const o = redisClientOptions(redisConnection(base));
      assert.equal(Boolean(o.reconnectOnError?.(new Error(reply))), want);
    });
});
