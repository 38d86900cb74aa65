import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import { formatDuration, parseDuration } from '../src/config/duration.js';
import { parseFlags, UsageError } from '../src/config/flags.js';
import { buildServerConfig, SERVER_FLAGS } from '../src/server/config.js';
import { githubOf, requiredFlags } from './support/server-config.js';

const { flags: required, dataDir } = requiredFlags('ato-flags-');

function config(argv: string[], env: NodeJS.ProcessEnv = {}) {
  return buildServerConfig(parseFlags(argv, SERVER_FLAGS, env).values);
}

function usageError(fn: () => unknown): string {
  try {
    fn();
  } catch (e) {
    assert.ok(e instanceof UsageError, `expected UsageError, got ${String(e)}`);
    assert.equal(e.exitCode, 2);
    assert.ok(!e.message.includes('\n'), 'usage errors are one line');
    return e.message;
  }
  assert.fail('expected a UsageError');
}

describe('durations', () => {
  for (const [text, ms] of [
    ['90s', 90_000],
    ['1h30m', 5_400_000],
    ['250ms', 250],
    ['3600', 3_600_000],
    ['0', 0],
    ['1.5s', 1500],
  ] as const) {
    it(`parses ${text}`, () => assert.equal(parseDuration(text), ms));
  }
  for (const bad of ['', 'soon', '10 s', '-5s', '1d']) it(`rejects "${bad}"`, () => assert.equal(parseDuration(bad), undefined));
  it('formats', () => {
    assert.equal(formatDuration(5_400_000), '1h30m');
    assert.equal(formatDuration(61_000), '1m1s');
    assert.equal(formatDuration(0), '0s');
  });
});

describe('server flags', () => {
  it('uses Atlantis defaults', () => {
    const c = config(required);
    assert.equal(c.port, 4141);
    assert.deepEqual(c.allowCommands, ['version', 'plan', 'apply', 'cancel', 'unlock', 'approve_policies']);
    assert.deepEqual(c.blockedExtraArgs, [
      '-chdir',
      '--chdir',
      '-plugin-dir',
      '--plugin-dir',
      '-out',
      '--out',
      '-input',
      '--input',
      '-state',
      '--state',
      '-state-out',
      '--state-out',
      '-backup',
      '--backup',
    ]);
    assert.equal(c.executableName, 'atlantis');
    assert.equal(c.parallelPoolSize, 15);
    assert.equal(c.parallelPlan, false, 'Atlantis plans one project after another by default');
    assert.equal(c.parallelApply, false);
    assert.equal(c.drainTimeoutMs, 0);
    assert.equal(c.terraformInterruptGraceMs, 60_000);
    assert.equal(githubOf(c).apiUrl, 'https://api.github.com');
    assert.equal(githubOf(c).token(), 'tok');
  });

  it('reads ATLANTIS_* env, and the command line wins', () => {
    const env = {
      ATLANTIS_PORT: '5000',
      ATLANTIS_DRAIN_TIMEOUT: '10m',
      ATLANTIS_QUEUE_DURING_DRAIN: 'true',
      ATLANTIS_GH_HOSTNAME: 'ghe.acme.test',
      ATLANTIS_PARALLEL_PLAN: 'true',
    };
    const c = config([...required, '--port', '6000', '--parallel-apply'], env);
    assert.equal(c.parallelPlan, true);
    assert.equal(c.parallelApply, true);
    assert.equal(c.port, 6000);
    assert.equal(c.drainTimeoutMs, 600_000);
    assert.equal(c.queueDuringDrain, true);
    assert.equal(githubOf(c).apiUrl, 'https://ghe.acme.test/api/v3');
  });

  it('accepts --flag=value and boolean forms', () => {
    const c = config([...required, '--port=7000', '--disable-autoplan', '--queue-during-drain=false', '--allow-commands=all']);
    assert.equal(c.port, 7000);
    assert.equal(c.disableAutoplan, true);
    assert.equal(c.queueDuringDrain, false);
    assert.ok(c.allowCommands.includes('import'));
  });

  it('reads the token from --gh-token-file on every use', () => {
    const f = path.join(dataDir, 'token');
    writeFileSync(f, 'first\n');
    const c = config([
      '--repo-allowlist',
      'x',
      '--gh-user',
      'bot',
      '--gh-token-file',
      f,
      '--insecure-no-webhook-secret',
      '--data-dir',
      dataDir,
    ]);
    assert.equal(githubOf(c).token(), 'first');
    writeFileSync(f, 'rotated');
    assert.equal(githubOf(c).token(), 'rotated');
  });

  const bad: Array<[string, string[], NodeJS.ProcessEnv, RegExp]> = [
    ['unknown flag', [...required, '--bogus'], {}, /unknown flag: --bogus/],
    ['missing flag argument', [...required, '--port'], {}, /--port/],
    ['non-integer port', [...required, '--port', 'abc'], {}, /--port/],
    ['port out of range', [...required, '--port', '70000'], {}, /--port/],
    [
      'bad env value names the env var and flag',
      required,
      { ATLANTIS_PARALLEL_POOL_SIZE: 'many' },
      /ATLANTIS_PARALLEL_POOL_SIZE \(--parallel-pool-size\)/,
    ],
    ['bad duration', [...required, '--drain-timeout', 'soon'], {}, /--drain-timeout/],
    ['bad boolean', [...required, '--disable-autoplan=maybe'], {}, /--disable-autoplan/],
    ['missing allowlist', required.slice(2), {}, /--repo-allowlist/],
    ['missing gh user', ['--repo-allowlist', 'x', '--gh-token', 't', '--gh-webhook-secret', 's', '--data-dir', dataDir], {}, /--gh-user/],
    ['missing token', ['--repo-allowlist', 'x', '--gh-user', 'u', '--gh-webhook-secret', 's', '--data-dir', dataDir], {}, /--gh-token/],
    ['token and token file', [...required, '--gh-token-file', '/etc/hostname'], {}, /mutually exclusive/],
    [
      'unreadable token file',
      ['--repo-allowlist', 'x', '--gh-user', 'u', '--gh-token-file', '/nonexistent/t', '--gh-webhook-secret', 's', '--data-dir', dataDir],
      {},
      /--gh-token-file/,
    ],
    [
      'missing webhook secret',
      ['--repo-allowlist', 'x', '--gh-user', 'u', '--gh-token', 't', '--data-dir', dataDir],
      {},
      /--gh-webhook-secret.*--insecure-no-webhook-secret/,
    ],
    ['bad log level', [...required, '--log-level', 'loud'], {}, /--log-level/],
    ['bad allowed command', [...required, '--allow-commands', 'plan,destroy'], {}, /--allow-commands/],
    ['pool size zero', [...required, '--parallel-pool-size', '0'], {}, /--parallel-pool-size/],
    ['unwritable data dir', [...required, '--data-dir', '/etc/hostname/sub'], {}, /--data-dir .* is not a writable directory/],
  ];
  for (const [name, argv, env, re] of bad) {
    it(`rejects ${name} with a one-line usage error`, () =>
      assert.match(
        usageError(() => config(argv, env)),
        re,
      ));
  }
});
