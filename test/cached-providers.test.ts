// Which inits only read the plugin cache (src/server/terraform/cached-providers.ts), so that
// they need not wait for each other: the lock file as terraform writes it, the `h1:` checksum
// as terraform computes it (checked against lock files written by a real terraform init with
// the test provider from a mirror on loopback), and the answers for a real cache dir.
import assert from 'node:assert/strict';
import { appendFileSync, cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { CachedProviders, packageHashV1, parseLockFile, terraformPlatform, upgrades } from '../src/server/terraform/cached-providers.js';
import {
  FIXTURE_SOURCE,
  type ProviderMirror,
  fixtureConfig,
  fixtureProviderVersion,
  startProviderMirror,
} from './support/provider-mirror.js';
import { TERRAFORM } from './support/terraform.js';
import { runTfOk } from './support/tf-cli.js';

const LOCK = `# This file is maintained automatically by "terraform init".
# Manual edits may be lost in future updates.

provider "registry.terraform.io/hashicorp/null" {
  version     = "3.2.1"
  constraints = ">= 3.0.0"
  hashes = [
    "h1:FbGfc+muBsC17Ohy5g806iuI1hQc4SIexpYCrQHQd8w=",
    "zh:58ed64389620cc7b82f01332e27723856422820cfd302e304b5f6c3436fb9840",
  ]
}

provider "example.com:8443/acme/thing" {
  version = "0.1.0-beta.2"
  hashes = [
    "h1:AAAA",
  ]
}
`;

describe('the lock file, as terraform writes it', () => {
  it('reads each provider selection', () => {
    assert.deepEqual(parseLockFile(LOCK), [
      {
        address: 'registry.terraform.io/hashicorp/null',
        version: '3.2.1',
        hashes: ['h1:FbGfc+muBsC17Ohy5g806iuI1hQc4SIexpYCrQHQd8w=', 'zh:58ed64389620cc7b82f01332e27723856422820cfd302e304b5f6c3436fb9840'],
      },
      { address: 'example.com:8443/acme/thing', version: '0.1.0-beta.2', hashes: ['h1:AAAA'] },
    ]);
    assert.deepEqual(parseLockFile('# nothing locked\n'), []);
  });

  it('anything else is not understood (its init waits)', () => {
    const table: Array<[string, string]> = [
      ['a path in the address', LOCK.replace('hashicorp/null', '../../etc')],
      ['a version that is a path', LOCK.replace('"3.2.1"', '"../3.2.1"')],
      ['no version', LOCK.replace(/ {2}version {5}= "3.2.1"\n/, '')],
      ['an unknown attribute', LOCK.replace('constraints', 'mirror')],
      ['a block not closed', LOCK.slice(0, LOCK.lastIndexOf('}'))],
      ['another kind of block', LOCK.replace('provider "example', 'module "example')],
      ['a hash line of another shape', LOCK.replace('"h1:AAAA",', 'h1:AAAA')],
    ];
    for (const [name, text] of table) assert.equal(parseLockFile(text), undefined, name);
  });

  it('init upgrades when its args or TF_CLI_ARGS say so', () => {
    const table: Array<[string[], NodeJS.ProcessEnv, boolean]> = [
      [['-input=false'], {}, false],
      [['-input=false', '-upgrade'], {}, true],
      [['--upgrade=true'], {}, true],
      [['-upgrade=1'], {}, true],
      [['-upgrade=false'], {}, false],
      [['-upgrade=F'], {}, false],
      [['-upgrade-all'], {}, false],
      [[], { TF_CLI_ARGS_init: '-upgrade' }, true],
      [[], { TF_CLI_ARGS: '-no-color -upgrade' }, true],
      [[], { TF_CLI_ARGS_plan: '-upgrade' }, false],
    ];
    for (const [args, env, want] of table) assert.equal(upgrades(args, env), want, JSON.stringify([args, env]));
  });

  it("terraform's platform names", () => {
    assert.equal(terraformPlatform('linux', 'x64'), 'linux_amd64');
    assert.equal(terraformPlatform('linux', 'arm64'), 'linux_arm64');
    assert.equal(terraformPlatform('darwin', 'arm64'), 'darwin_arm64');
  });
});

describe('a real plugin cache filled by terraform init', { timeout: 300_000 }, () => {
  let mirror: ProviderMirror;
  const root = mkdtempSync(path.join(tmpdir(), 'ato-cached-providers-'));
  const cache = path.join(root, 'cache');
  const project = path.join(root, 'project');
  let env: Record<string, string> = {};
  const pkg = path.join(cache, 'registry.terraform.io', FIXTURE_SOURCE, fixtureProviderVersion(), terraformPlatform());

  before(async () => {
    mirror = await startProviderMirror({ host: '127.0.236.4' });
    env = { ...mirror.env(mirror.writeCliConfig(path.join(root, 'cli.tfrc'))), TF_PLUGIN_CACHE_DIR: cache };
    mkdirSync(cache, { recursive: true });
    mkdirSync(project);
    writeFileSync(path.join(project, 'main.tf'), fixtureConfig());
    await runTfOk(TERRAFORM, ['init', '-input=false', '-no-color'], project, env);
  });

  after(async () => {
    await mirror?.close();
    rmSync(root, { recursive: true, force: true });
  });

  const lock = () => parseLockFile(readFileSync(path.join(project, '.terraform.lock.hcl'), 'utf8'));

  it('the h1: checksum of the cached package is the one terraform wrote in the lock file', async () => {
    const locked = lock();
    assert.ok(locked && locked.length === 1, JSON.stringify(locked));
    const hash = await packageHashV1(pkg);
    assert.ok(hash && locked[0]!.hashes.includes(hash), `${hash} not in ${JSON.stringify(locked[0]!.hashes)}`);
  });

  it('an init with the lock file only reads; with -upgrade, without a lock file or without the package it may write', async () => {
    const c = new CachedProviders(cache);
    assert.equal(await c.initOnlyReads(project, ['-input=false'], {}), true);
    assert.equal(await c.initOnlyReads(project, ['-input=false', '-upgrade'], {}), false);
    const bare = path.join(root, 'bare');
    mkdirSync(bare);
    writeFileSync(path.join(bare, 'main.tf'), fixtureConfig());
    assert.equal(await c.initOnlyReads(bare, ['-input=false'], {}), false, 'no lock file');
    const other = path.join(root, 'other');
    mkdirSync(other);
    writeFileSync(path.join(other, '.terraform.lock.hcl'), LOCK);
    assert.equal(await c.initOnlyReads(other, ['-input=false'], {}), false, 'providers not cached');
    // And terraform agrees: with the lock file and the cache, init downloads nothing.
    const from = mirror.requests.length;
    rmSync(path.join(project, '.terraform'), { recursive: true });
    await runTfOk(TERRAFORM, ['init', '-input=false', '-no-color'], project, env);
    assert.equal(mirror.counts(from).archives, 0);
  });

  it('a cached package that matches none of the lock file checksums is one terraform installs again: the init waits', async () => {
    const c = new CachedProviders(cache);
    assert.equal(await c.initOnlyReads(project, [], {}), true);
    const saved = path.join(root, 'saved');
    cpSync(pkg, saved, { recursive: true });
    try {
      appendFileSync(path.join(pkg, 'extra.txt'), 'not from the mirror\n');
      assert.equal(await c.initOnlyReads(project, [], {}), false, 'a file more');
      rmSync(path.join(pkg, 'extra.txt'));
      assert.equal(await c.initOnlyReads(project, [], {}), true, 'as it was');
    } finally {
      rmSync(pkg, { recursive: true, force: true });
      cpSync(saved, pkg, { recursive: true });
    }
    assert.equal(await c.initOnlyReads(project, [], {}), true);
  });
});
