// OpenTofu built from its Go module (hack/tofu) installs the test provider through the same
// network mirror as terraform, under tofu's own default registry host (registry.opentofu.org),
// then plans and applies; and runs a terraform_data config with no provider at all.
import assert from 'node:assert/strict';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { goTool } from './support/go-tools.js';
import {
  FIXTURE_SOURCE,
  type ProviderMirror,
  fixtureConfig,
  fixtureProviderVersion,
  startProviderMirror,
} from './support/provider-mirror.js';
import { runTf, runTfOk } from './support/tf-cli.js';

describe('OpenTofu built from Go modules', { timeout: 1_800_000 }, () => {
  let tofu: string;
  let mirror: ProviderMirror;
  let root: string;
  const version = fixtureProviderVersion();

  before(async () => {
    tofu = await goTool('tofu');
    root = mkdtempSync(path.join(tmpdir(), 'ato-tofu-'));
    mirror = await startProviderMirror({ host: '127.0.236.2' });
  });
  after(async () => {
    await mirror?.close();
    if (root) rmSync(root, { recursive: true, force: true });
  });

  const project = (name: string, tf: string): string => {
    const dir = path.join(root, name);
    mkdirSync(dir, { recursive: true });
    writeFileSync(path.join(dir, 'main.tf'), tf);
    return dir;
  };

  it('reports the pinned release version (no -dev suffix)', async () => {
    const cli = mirror.writeCliConfig(path.join(root, 'version.tfrc'));
    const r = await runTfOk(tofu, ['version', '-json'], root, mirror.env(cli));
    assert.equal((JSON.parse(r.stdout) as { terraform_version: string }).terraform_version, '1.12.6');
  });

  it('installs the provider from the mirror under registry.opentofu.org, then plans and applies', async () => {
    const cli = mirror.writeCliConfig(path.join(root, 'plain.tfrc'));
    const out = path.join(root, 'tofu-out.txt');
    const dir = project('plain', fixtureConfig({ values: 1, planSleepMs: 200, filePath: out }));
    const mark = mirror.requests.length;
    const init = await runTfOk(tofu, ['init', '-input=false', '-no-color'], dir, mirror.env(cli));
    assert.match(init.stdout, /OpenTofu has been successfully initialized/);
    const got = mirror.requests.slice(mark);
    assert.deepEqual(
      got.map((r) => [r.kind, r.registryHost, r.status]),
      [
        ['index', 'registry.opentofu.org', 200],
        ['version', 'registry.opentofu.org', 200],
        ['archive', 'registry.opentofu.org', 200],
      ],
    );
    assert.match(got[0]!.userAgent, /OpenTofu\/1\.12\.6/);
    const lock = readFileSync(path.join(dir, '.terraform.lock.hcl'), 'utf8');
    assert.match(lock, new RegExp(`provider "registry\\.opentofu\\.org/${FIXTURE_SOURCE}"`));
    assert.ok(lock.includes(mirror.releases.get(version)!.zh));

    const plan = await runTfOk(tofu, ['plan', '-input=false', '-no-color', '-out=tfplan'], dir, mirror.env(cli));
    assert.match(plan.stdout, /Plan: 2 to add, 0 to change, 0 to destroy/);
    const show = await runTfOk(tofu, ['show', '-json', 'tfplan'], dir, mirror.env(cli));
    const j = JSON.parse(show.stdout) as {
      format_version: string;
      resource_changes: Array<{ address: string; change: { actions: string[] } }>;
    };
    assert.deepEqual(j.resource_changes.map((c) => [c.address, c.change.actions.join()]).sort(), [
      ['fixture_file.f', 'create'],
      ['fixture_value.v[0]', 'create'],
    ]);
    const apply = await runTfOk(tofu, ['apply', '-input=false', '-no-color', 'tfplan'], dir, mirror.env(cli));
    assert.match(apply.stdout, /Apply complete! Resources: 2 added/);
    assert.equal(readFileSync(out, 'utf8'), 'written by fixture_file\n');
  });

  it('with a plugin cache, a project with a lock file downloads nothing, one without downloads again', async () => {
    const cache = path.join(root, 'plugin-cache');
    mkdirSync(cache);
    const env = mirror.env(mirror.writeCliConfig(path.join(root, 'cache.tfrc'), { pluginCacheDir: cache }));
    const first = project('cache-a', fixtureConfig());
    let mark = mirror.requests.length;
    await runTfOk(tofu, ['init', '-input=false', '-no-color'], first, env);
    assert.equal(mirror.counts(mark).archives, 1);
    assert.ok(existsSync(path.join(cache, 'registry.opentofu.org', FIXTURE_SOURCE, version, 'linux_amd64')));

    const second = project('cache-b', fixtureConfig({ value: 'other' }));
    cpSync(path.join(first, '.terraform.lock.hcl'), path.join(second, '.terraform.lock.hcl'));
    mark = mirror.requests.length;
    await runTfOk(tofu, ['init', '-input=false', '-no-color'], second, env);
    assert.equal(mirror.counts(mark).archives, 0, 'with the lock file: from the cache');

    mark = mirror.requests.length;
    await runTfOk(tofu, ['init', '-input=false', '-no-color'], project('cache-c', fixtureConfig()), env);
    // As terraform ≥ 1.4: a cached package is used only when a lock file vouches for it.
    assert.equal(mirror.counts(mark).archives, 1, 'without a lock file: downloaded again');
  });

  it('also takes the hashicorp-style address when a config names registry.terraform.io', async () => {
    const cli = mirror.writeCliConfig(path.join(root, 'tfhost.tfrc'));
    const tf = fixtureConfig().replace(`"${FIXTURE_SOURCE}"`, `"registry.terraform.io/${FIXTURE_SOURCE}"`);
    const dir = project('tfhost', tf);
    const mark = mirror.requests.length;
    await runTfOk(tofu, ['init', '-input=false', '-no-color'], dir, mirror.env(cli));
    assert.deepEqual([...new Set(mirror.requests.slice(mark).map((r) => r.registryHost))], ['registry.terraform.io']);
  });

  it('runs a config without providers (terraform_data) with plan and apply', async () => {
    const cli = mirror.writeCliConfig(path.join(root, 'none.tfrc'));
    const dir = project(
      'builtin',
      'resource "terraform_data" "x" {\n  input = "hello"\n}\noutput "x" {\n  value = terraform_data.x.output\n}\n',
    );
    const mark = mirror.requests.length;
    await runTfOk(tofu, ['init', '-input=false', '-no-color'], dir, mirror.env(cli));
    const apply = await runTfOk(tofu, ['apply', '-input=false', '-no-color', '-auto-approve'], dir, mirror.env(cli));
    assert.match(apply.stdout, /x = "hello"/);
    assert.equal(mirror.counts(mark).requests, 0, 'no provider, no mirror request');
  });

  it('fails init clearly when the mirror does not have the provider', async () => {
    const cli = mirror.writeCliConfig(path.join(root, 'missing.tfrc'));
    const dir = project('missing', fixtureConfig().replace(`"${FIXTURE_SOURCE}"`, '"atlantis-operator/nothing"'));
    const r = await runTf(tofu, ['init', '-input=false', '-no-color'], dir, mirror.env(cli));
    assert.notEqual(r.exitCode, 0);
    assert.match(r.stderr, /atlantis-operator\/nothing/);
  });
});
