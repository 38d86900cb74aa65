// The table of Atlantis's server flags (src/config/atlantis-flags.ts): complete, consistent with
// SERVER_FLAGS, and what each kind of setting does at start; --disable-apply, --gh-team-allowlist
// parsing and matching; duration bounds.
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { inspect } from 'node:util';
import { describe, it } from 'node:test';
import { ATLANTIS_FLAGS, judgeAtlantisFlags } from '../src/config/atlantis-flags.js';
import { parseFlags, UsageError } from '../src/config/flags.js';
import { SERVER_FLAGS } from '../src/server/config.js';
import { ACCEPTED_COMMAND_NAMES, RUNNABLE_COMMANDS } from '../src/server/workflow/comment-parser/commands.js';
import { TeamAllowlistError, noPermissionComment, parseTeamAllowlist, teamAllows } from '../src/server/workflow/commands/team-allowlist.js';
import { SharedStateKey } from '../src/server/locks/shared-state-key.js';
import { type RedisSettings, redisStartWarnings } from '../src/server/locks/store-config.js';
import { sharedStateKeyFile } from './support/redis-server.js';
import { configWithRequiredFlags } from './support/server-config.js';

/** A key file one byte too short. */
function shortKeyFile(): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'ato-short-key-'));
  writeFileSync(path.join(dir, 'key'), `${'k'.repeat(31)}\n`);
  return path.join(dir, 'key');
}

const config = configWithRequiredFlags('ato-atlflags-');

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

describe('the Atlantis flag table', () => {
  const fixture = readFileSync(new URL('./fixtures/atlantis-v0.47-server-flags.txt', import.meta.url), 'utf8')
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '' && !l.startsWith('#'));

  it('names every flag of Atlantis v0.47, and only those', () => {
    assert.equal(fixture.length, 125);
    assert.deepEqual(Object.keys(ATLANTIS_FLAGS).sort(), [...fixture].sort());
  });

  it('says honoured exactly for the Atlantis flags the server implements', () => {
    const own = new Set(SERVER_FLAGS.filter((s) => !s.hidden).map((s) => s.name));
    for (const [name, f] of Object.entries(ATLANTIS_FLAGS)) {
      if (f.support === 'honoured') assert.ok(own.has(name), `${name} is honoured but not implemented`);
      else assert.ok(!own.has(name), `${name} is implemented but the table says ${f.support}`);
    }
    const names = SERVER_FLAGS.map((s) => s.name);
    assert.equal(new Set(names).size, names.length, 'one spec per flag name');
  });

  it('gives every refused or ignored flag a type, the values that change nothing, and a reason', () => {
    for (const [name, f] of Object.entries(ATLANTIS_FLAGS)) {
      if (f.support === 'honoured') continue;
      assert.ok(f.type && f.accepts && f.accepts.length > 0 && f.why, name);
      for (const a of f.accepts) assert.equal(typeof a, f.type === 'int' ? 'number' : f.type === 'bool' ? 'boolean' : 'string', name);
    }
  });

  // [what, argv, env, expected]: 'ok' starts quietly; {refused|warn: RegExp} otherwise.
  const rows: Array<[string, string[], NodeJS.ProcessEnv, 'ok' | { refused: RegExp } | { warn: RegExp }]> = [
    [
      'approval discarded on plan',
      [],
      { ATLANTIS_DISCARD_APPROVAL_ON_PLAN: 'true' },
      {
        refused: /^--discard-approval-on-plan \(ATLANTIS_DISCARD_APPROVAL_ON_PLAN\) is set, but this server does not support it on GitHub/,
      },
    ],
    ['repo locking off by env (honoured)', [], { ATLANTIS_DISABLE_REPO_LOCKING: 'true' }, 'ok'],
    ['repo locking at its default', [], { ATLANTIS_DISABLE_REPO_LOCKING: 'false' }, 'ok'],
    ['global apply lock off (honoured)', ['--disable-global-apply-lock'], {}, 'ok'],
    ['unlock label', [], { ATLANTIS_DISABLE_UNLOCK_LABEL: 'no-unlock' }, { refused: /--disable-unlock-label/ }],
    [
      'redis locking (honoured), with the shared state key (ours)',
      [],
      { ATLANTIS_LOCKING_DB_TYPE: 'redis', ATLANTIS_REDIS_HOST: 'redis.infra', ATLANTIS_SHARED_STATE_KEY_FILE: sharedStateKeyFile() },
      'ok',
    ],
    [
      'redis locking without the shared state key (a deliberate difference)',
      [],
      { ATLANTIS_LOCKING_DB_TYPE: 'redis', ATLANTIS_REDIS_HOST: 'redis.infra' },
      { refused: /^--shared-state-key-file is required with --locking-db-type redis: / },
    ],
    ['Redis Cluster', [], { ATLANTIS_REDIS_CLUSTER_ADDRESSES: 'a:6379,b:6379' }, { refused: /--redis-cluster-addresses.*Redis Cluster/ }],
    ['boltdb locking (the default)', [], { ATLANTIS_LOCKING_DB_TYPE: 'boltdb' }, 'ok'],
    ['policy checks on the command line (honoured)', ['--enable-policy-checks'], {}, 'ok'],
    ['merge checkout (honoured)', ['--checkout-strategy=merge'], { ATLANTIS_CHECKOUT_DEPTH: '5' }, 'ok'],
    [
      'GitLab beside GitHub (one code host per server; test/gitlab-config.test.ts has GitLab alone)',
      [],
      { ATLANTIS_GITLAB_TOKEN: 'glpat-x' },
      { refused: /^--gitlab-user\/--gitlab-token and --gh-user are both set: this server talks to one code host/ },
    ],
    ['Bitbucket', [], { ATLANTIS_BITBUCKET_USER: 'bot' }, { refused: /--bitbucket-user.*only GitHub, GitLab and Gitea/ }],
    ['sequential plans (the default)', [], { ATLANTIS_PARALLEL_PLAN: 'false' }, 'ok'],
    ['parallel plans and applies', [], { ATLANTIS_PARALLEL_PLAN: 'true', ATLANTIS_PARALLEL_APPLY: 'true' }, 'ok'],
    ['an emoji (honoured)', [], { ATLANTIS_EMOJI_REACTION: 'rocket' }, 'ok'],
    [
      'the profiling API',
      [],
      { ATLANTIS_ENABLE_PROFILING_API: 'true' },
      { warn: /^--enable-profiling-api \(ATLANTIS_ENABLE_PROFILING_API\) is set, but this server ignores it/ },
    ],
    ['terraform downloads (honoured)', [], { ATLANTIS_TF_DOWNLOAD: 'true', ATLANTIS_DEFAULT_TF_VERSION: 'v1.9.0' }, 'ok'],
    ['no terraform downloads', [], { ATLANTIS_TF_DOWNLOAD: 'false' }, 'ok'],
    [
      'Service links and other non-flags',
      [],
      {
        ATLANTIS_SERVICE_HOST: '10.96.0.10',
        ATLANTIS_SERVICE_PORT: '4141',
        ATLANTIS_PORT_4141_TCP: 'tcp://10.96.0.10:4141',
        ATLANTIS_SOMETHING_ELSE: 'x',
      },
      'ok',
    ],
    ['empty env values', [], { ATLANTIS_DISABLE_REPO_LOCKING: '', ATLANTIS_REDIS_HOST: '' }, 'ok'],
  ];
  for (const [what, argv, env, expected] of rows) {
    it(`${what}: ${typeof expected === 'string' ? 'starts' : 'refused' in expected ? 'refused' : 'warns'}`, () => {
      if (expected === 'ok') {
        assert.deepEqual(config(argv, env).flagWarnings, []);
      } else if ('refused' in expected) {
        assert.match(
          usageError(() => config(argv, env)),
          expected.refused,
        );
      } else {
        const w = config(argv, env).flagWarnings;
        assert.equal(w.length, 1, w.join('\n'));
        assert.match(w[0]!, expected.warn);
      }
    });
  }

  it('never repeats a value it refuses or ignores (they are often secrets)', () => {
    const secret = 'hunter2-slack-token';
    const msg = usageError(() => config([], { ATLANTIS_SLACK_TOKEN: secret }));
    assert.match(msg, /--slack-token \(ATLANTIS_SLACK_TOKEN\)/);
    assert.ok(!msg.includes(secret));
    const j = judgeAtlantisFlags({ 'slack-token': 'xoxb-secret', language: 'fr-secret' });
    assert.ok(![...j.refusals, ...j.warnings].some((l) => l.includes('secret')));
  });

  it('keeps the unhonoured flags out of --help', () => {
    for (const s of SERVER_FLAGS)
      if (ATLANTIS_FLAGS[s.name] && ATLANTIS_FLAGS[s.name]!.support !== 'honoured') assert.equal(s.hidden, true, s.name);
  });
});

describe('checkout and terraform version flags', () => {
  it('reads --checkout-strategy, --checkout-depth and the terraform download flags as Atlantis does', () => {
    const d = config([]);
    assert.deepEqual(
      [d.checkoutStrategy, d.checkoutDepth, d.defaultTfVersion, d.tfDownload, d.tfDownloadUrl],
      ['branch', 0, undefined, true, 'https://releases.hashicorp.com'],
    );
    const c = config(['--checkout-strategy', 'merge', '--default-tf-version', 'v1.9'], {
      ATLANTIS_CHECKOUT_DEPTH: '-3',
      ATLANTIS_TF_DOWNLOAD: 'false',
      ATLANTIS_TF_DOWNLOAD_URL: 'http://127.0.0.1:8080/mirror/',
    });
    assert.deepEqual(
      [c.checkoutStrategy, c.checkoutDepth, c.defaultTfVersion, c.tfDownload, c.tfDownloadUrl],
      ['merge', 0, '1.9.0', false, 'http://127.0.0.1:8080/mirror'],
    );
    assert.match(
      usageError(() => config(['--checkout-strategy', 'rebase'])),
      /invalid checkout strategy: not one of branch or merge/,
    );
    assert.match(
      usageError(() => config(['--default-tf-version', '1.9/../x'])),
      /--default-tf-version: Malformed version/,
    );
    assert.match(
      usageError(() => config(['--tf-download-url', 'file:///etc'])),
      /--tf-download-url: must be an http\(s\) URL/,
    );
    const withCreds = usageError(() => config(['--tf-download-url', 'https://user:s3cret@mirror.example/tf']));
    assert.match(withCreds, /without credentials/);
    assert.ok(!withCreds.includes('s3cret'), 'the value is not repeated');
  });
});

describe('--disable-apply and --disable-autoplan', () => {
  it('ATLANTIS_DISABLE_APPLY takes apply out of the allowed commands, whatever --allow-commands says', () => {
    assert.ok(!config([], { ATLANTIS_DISABLE_APPLY: 'true' }).allowCommands.includes('apply'));
    assert.deepEqual(
      config(['--allow-commands', 'all', '--disable-apply']).allowCommands,
      RUNNABLE_COMMANDS.filter((c) => c !== 'apply'),
    );
    assert.ok(config([], { ATLANTIS_DISABLE_APPLY: 'false' }).allowCommands.includes('apply'));
  });
  it('ATLANTIS_DISABLE_AUTOPLAN is read from env', () => {
    assert.equal(config([], { ATLANTIS_DISABLE_AUTOPLAN: 'true' }).disableAutoplan, true);
    assert.equal(config([]).disableAutoplan, false);
  });
});

describe('--gh-team-allowlist', () => {
  it("parses Atlantis's team:command format from env", () => {
    assert.deepEqual(config([], { ATLANTIS_GH_TEAM_ALLOWLIST: 'dev:plan, ops:apply,devops:*' }).teamAllowlist, [
      { team: 'dev', command: 'plan' },
      { team: 'ops', command: 'apply' },
      { team: 'devops', command: '*' },
    ]);
    assert.deepEqual(config([]).teamAllowlist, []);
  });
  for (const bad of ['dev', 'dev:plan:x', ':plan', 'dev:', 'dev:destroy']) {
    it(`refuses "${bad}" at start`, () => {
      assert.match(
        usageError(() => config(['--gh-team-allowlist', bad])),
        /--gh-team-allowlist/,
      );
      assert.throws(() => parseTeamAllowlist(bad, ACCEPTED_COMMAND_NAMES), TeamAllowlistError);
    });
  }
  const rules = parseTeamAllowlist('dev:plan,ops:apply,devops:*,*:version', ACCEPTED_COMMAND_NAMES);
  const cases: Array<[string[], string, boolean]> = [
    [['dev'], 'plan', true],
    [['dev'], 'apply', false],
    [['DEV'], 'Plan', true],
    [['ops'], 'apply', true],
    [['ops'], 'plan', false],
    [['devops'], 'unlock', true],
    [[], 'plan', false],
    [[], 'version', true],
    [['other'], 'version', true],
    [['other', 'ops'], 'apply', true],
    [['dev-team'], 'plan', false],
  ];
  for (const [teams, cmd, ok] of cases) {
    it(`teams [${teams.join(',')}] ${ok ? 'may' : 'may not'} run ${cmd}`, () => assert.equal(teamAllows(rules, teams, cmd), ok));
  }
  it('a *:* rule lets anyone run anything', () =>
    assert.equal(teamAllows(parseTeamAllowlist('*:*', ACCEPTED_COMMAND_NAMES), [], 'apply'), true));
  it('words the refusal as Atlantis does', () => {
    assert.equal(
      noPermissionComment('mallory', 'apply'),
      "```\nError: User @mallory does not have permissions to execute 'apply' command.\n```",
    );
  });
});

describe('duration bounds', () => {
  it("--drain-timeout and --terraform-interrupt-grace may exceed Node's timer limit (their timers chain)", () => {
    const c = config(['--drain-timeout', '720h', '--terraform-interrupt-grace', '600h']);
    assert.equal(c.drainTimeoutMs, 720 * 3_600_000);
    assert.equal(c.terraformInterruptGraceMs, 600 * 3_600_000);
    assert.match(
      usageError(() => config(['--drain-timeout', '87601h'])),
      /invalid value "87601h" for --drain-timeout: must be at most 87600h/,
    );
    assert.match(
      usageError(() => config([], { ATLANTIS_DRAIN_TIMEOUT: '99999999999999999999h' })),
      /ATLANTIS_DRAIN_TIMEOUT/,
    );
  });
  it("any other duration flag stops at Node's timer limit", () => {
    const spec = [{ name: 'retry', type: 'duration' as const, description: '', envPrefix: null }];
    assert.equal(parseFlags(['--retry', '596h'], spec, {}).values.retry, 596 * 3_600_000);
    assert.throws(() => parseFlags(['--retry', '597h'], spec, {}), /invalid value "597h" for --retry: must be at most 596h31m23s/);
  });
});

describe('comment layout flags', () => {
  it("are read from Atlantis's env names, quietly, with Atlantis's defaults", () => {
    const c = config([], {
      ATLANTIS_HIDE_PREV_PLAN_COMMENTS: 'true',
      ATLANTIS_HIDE_UNCHANGED_PLAN_COMMENTS: 'true',
      ATLANTIS_DISABLE_MARKDOWN_FOLDING: 'true',
      ATLANTIS_ENABLE_DIFF_MARKDOWN_FORMAT: 'true',
      ATLANTIS_MAX_COMMENTS_PER_COMMAND: '0',
    });
    assert.deepEqual(c.flagWarnings, []);
    assert.deepEqual(
      [c.hidePrevPlanComments, c.hideUnchangedPlanComments, c.disableMarkdownFolding, c.enableDiffMarkdownFormat, c.maxCommentsPerCommand],
      [true, true, true, true, 0],
    );
    const d = config([]);
    assert.deepEqual(
      [d.hidePrevPlanComments, d.hideUnchangedPlanComments, d.disableMarkdownFolding, d.enableDiffMarkdownFormat, d.maxCommentsPerCommand],
      [false, false, false, false, 100],
    );
  });
  it('refuses a negative --max-comments-per-command', () => {
    assert.match(
      usageError(() => config(['--max-comments-per-command', '-1'])),
      /--max-comments-per-command: must be 0 \(no limit\) or more/,
    );
  });
});

describe('the store flags (--locking-db-type, --redis-*, --replica-id, --shared-state-key-file)', () => {
  const KEY = { ATLANTIS_SHARED_STATE_KEY_FILE: sharedStateKeyFile() };
  /** The Redis settings without the key (a class compared on its own below). */
  const settings = (c: ReturnType<typeof config>) => {
    assert.equal(c.store.type, 'redis');
    const { sharedStateKey, ...rest } = (c.store as { redis: RedisSettings }).redis;
    assert.ok(sharedStateKey instanceof SharedStateKey);
    return rest;
  };
  it("default to the embedded store (Atlantis's boltdb) and the host name", () => {
    const c = config([]);
    assert.deepEqual(c.store, { type: 'boltdb' });
    assert.match(c.replicaId, /^[A-Za-z0-9]/);
  });
  it("read Atlantis's env names into the Redis settings", () => {
    const c = config(['--replica-id', 'atlantis-2'], {
      ATLANTIS_LOCKING_DB_TYPE: 'redis',
      ATLANTIS_REDIS_HOST: 'redis.infra.svc',
      ATLANTIS_REDIS_PORT: '6380',
      ATLANTIS_REDIS_DB: '3',
      ATLANTIS_REDIS_USERNAME: 'atlantis',
      ATLANTIS_REDIS_PASSWORD: 'pw-1',
      ATLANTIS_REDIS_TLS_ENABLED: 'true',
      ATLANTIS_REDIS_INSECURE_SKIP_VERIFY: 'true',
      ...KEY,
    });
    assert.deepEqual(c.flagWarnings, []);
    assert.deepEqual(settings(c), {
      host: 'redis.infra.svc',
      port: 6380,
      db: 3,
      username: 'atlantis',
      password: 'pw-1',
      tls: true,
      insecureSkipVerify: true,
    });
    assert.equal(c.replicaId, 'atlantis-2');
  });
  it('connect to the local Redis on 6379 when no host is given, as Atlantis', () => {
    assert.deepEqual(settings(config(['--locking-db-type', 'redis'], KEY)), {
      host: 'localhost',
      port: 6379,
      db: 0,
      tls: false,
      insecureSkipVerify: false,
    });
  });
  it('keep the default port when Kubernetes puts a Service link in ATLANTIS_REDIS_PORT, as Atlantis', () => {
    const c = config(['--locking-db-type=redis'], {
      ATLANTIS_REDIS_PORT: 'tcp://10.96.3.4:6379',
      ATLANTIS_PORT: 'tcp://10.96.0.10:4141',
      ...KEY,
    });
    assert.equal(c.store.type === 'redis' && c.store.redis.port, 6379);
    assert.equal(c.port, 4141);
  });
  // [argv, the error]
  const bad: Array<[string[], RegExp]> = [
    [['--locking-db-type', 'etcd'], /^invalid value "etcd" for --locking-db-type: must be one of boltdb, redis$/],
    [['--locking-db-type', 'redis', '--redis-port', '0'], /^invalid value 0 for --redis-port: must be between 1 and 65535$/],
    [['--locking-db-type', 'redis', '--redis-db', '-1'], /^invalid value -1 for --redis-db: must be 0 or more$/],
    [['--replica-id', 'a b'], /^invalid value "a b" for --replica-id: letters, digits/],
    [['--replica-id', 'x:y'], /for --replica-id/],
    [
      ['--replica-url', 'http://10.0.0.7:4141/stolen?x=/events'],
      /^invalid value ".*" for --replica-url: must be http\(s\):\/\/host:port, without a path/,
    ],
    [['--replica-url', 'http://u:p@10.0.0.7:4141'], /for --replica-url: must be http\(s\):\/\/host:port/],
    [['--replica-url', 'http://10.0.0.7'], /for --replica-url: must be http\(s\):\/\/host:port/],
    [['--replica-url', 'http://10.0.0.7:4141#f'], /for --replica-url/],
    [['--replica-url', 'http://10.0.0.7:70000'], /for --replica-url: its port must be between 1 and 65535/],
    [['--locking-db-type', 'redis', '--shared-state-key-file', ''], /^--shared-state-key-file is required with --locking-db-type redis: /],
    [
      ['--locking-db-type', 'redis', '--shared-state-key-file', '/nonexistent/key'],
      /^--shared-state-key-file \/nonexistent\/key cannot be read: ENOENT$/,
    ],
    [
      ['--locking-db-type', 'redis', '--shared-state-key-file', shortKeyFile()],
      /is not a usable key: it holds 31 bytes, at least 32 are needed/,
    ],
  ];
  for (const [argv, err] of bad)
    it(`refuses ${argv.join(' ')}`, () =>
      assert.match(
        usageError(() => config(argv, argv.includes('--shared-state-key-file') ? {} : KEY)),
        err,
      ));
  it('reads the key file once, trailing newline removed, and never shows the key', () => {
    const c = config(['--locking-db-type=redis'], KEY);
    const key = (c.store as { redis: RedisSettings }).redis.sharedStateKey;
    const text = readFileSync(KEY.ATLANTIS_SHARED_STATE_KEY_FILE, 'utf8').trim();
    assert.equal(key.secretText(), text);
    assert.ok(!JSON.stringify(c).includes(text), 'not in JSON');
    assert.ok(!inspect(c, { depth: 10 }).includes(text), 'not in util.inspect');
  });
  it('accepts a replica URL of scheme://host:port (a trailing / dropped), IPv6 too', () => {
    assert.equal(config(['--replica-url', 'https://atlantis-0.atlantis:4141/']).replicaUrl, 'https://atlantis-0.atlantis:4141');
    assert.equal(config(['--replica-url', 'http://[fd00::7]:4141']).replicaUrl, 'http://[fd00::7]:4141');
  });
  it('warns at start, one line each, about a Redis without a password and without TLS', () => {
    const warn = (env: NodeJS.ProcessEnv) =>
      redisStartWarnings((config(['--locking-db-type=redis'], { ...KEY, ...env }).store as { redis: RedisSettings }).redis);
    const both = warn({});
    assert.equal(both.length, 2);
    assert.match(both[0] as string, /^Redis is used without a password \(--redis-password\): /);
    assert.match(both[1] as string, /^Redis is used without TLS \(--redis-tls-enabled\): /);
    for (const w of both) assert.ok(!w.includes('\n'));
    assert.deepEqual(warn({ ATLANTIS_REDIS_PASSWORD: 'pw', ATLANTIS_REDIS_TLS_ENABLED: 'true' }), []);
  });
  it('scrubs the Redis password from what the server writes', async () => {
    const { serverSecretValues } = await import('../src/server/secrets/server-secrets.js');
    const c = config(['--locking-db-type=redis'], { ATLANTIS_REDIS_PASSWORD: 'redis-pw-secret', ...KEY });
    assert.ok(serverSecretValues(c).includes('redis-pw-secret'));
    // The shared state key is a secret too.
    assert.ok(serverSecretValues(c).includes(readFileSync(KEY.ATLANTIS_SHARED_STATE_KEY_FILE, 'utf8').trim()));
  });
});
