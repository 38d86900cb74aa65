// The test provider (hack/provider) reaches real terraform through the provider network mirror
// (test/support/provider-mirror.ts): init installs it over HTTPS, plan and apply run its
// resources and data source, and with a plugin cache a later init downloads nothing, as the
// mirror's own request log shows.
import assert from 'node:assert/strict';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { execa } from 'execa';
import { sleep } from '../src/async.js';
import {
  FIXTURE_SOURCE,
  type ProviderMirror,
  fixtureConfig,
  fixtureProviderVersion,
  startProviderMirror,
} from './support/provider-mirror.js';
import { TERRAFORM, assertTerraform } from './support/terraform.js';
import { runTf, runTfOk } from './support/tf-cli.js';

describe('provider network mirror with terraform', { timeout: 900_000 }, () => {
  let mirror: ProviderMirror;
  let root: string;
  const version = fixtureProviderVersion();

  before(async () => {
    assertTerraform();
    root = mkdtempSync(path.join(tmpdir(), 'ato-mirror-'));
    mirror = await startProviderMirror({ host: '127.0.236.1', versions: ['0.9.0', version] });
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

  it('installs the provider from the mirror and runs its resources and data source', async () => {
    const cli = mirror.writeCliConfig(path.join(root, 'plain.tfrc'));
    const out = path.join(root, 'written', 'out.txt');
    const dir = project('plain', fixtureConfig({ values: 2, planSleepMs: 400, filePath: out, value: 'a' }));
    const mark = mirror.requests.length;
    const init = await runTfOk(TERRAFORM, ['init', '-input=false', '-no-color'], dir, mirror.env(cli));
    assert.match(init.stdout, new RegExp(`Installing ${FIXTURE_SOURCE} v${version.replaceAll('.', '\\.')}`));

    const got = mirror.requests.slice(mark);
    assert.deepEqual(
      got.map((r) => [r.method, r.kind, r.status, r.path]),
      [
        ['GET', 'index', 200, `/registry.terraform.io/${FIXTURE_SOURCE}/index.json`],
        ['GET', 'version', 200, `/registry.terraform.io/${FIXTURE_SOURCE}/${version}.json`],
        ['HEAD', 'archive', 200, `/registry.terraform.io/${FIXTURE_SOURCE}/terraform-provider-fixture_${version}_linux_amd64.zip`],
        ['GET', 'archive', 200, `/registry.terraform.io/${FIXTURE_SOURCE}/terraform-provider-fixture_${version}_linux_amd64.zip`],
      ],
    );
    assert.match(got[0]!.userAgent, /Terraform\/1\./);
    const counts = mirror.counts(mark);
    assert.equal(counts.archives, 1);
    assert.equal(counts.archiveBytes, got[3]!.bytes);
    assert.ok(counts.archiveBytes > 1_000_000, `a whole provider was served (${counts.archiveBytes} bytes)`);

    // terraform records only the h1: it computed from the unpacked package (a mirror's hashes
    // are not signed, so they do not go into the lock file); it equals the one published.
    const lock = readFileSync(path.join(dir, '.terraform.lock.hcl'), 'utf8');
    const rel = mirror.releases.get(version)!;
    assert.ok(lock.includes(rel.h1), 'lock file holds the package hash the mirror published');
    assert.ok(!lock.includes(rel.zh));
    assert.match(init.stdout, /calculate lock file checksums locally/);
    assert.match(lock, new RegExp(`version\\s+=\\s+"${version.replaceAll('.', '\\.')}"`), 'the newest version was chosen');

    const plan = await runTfOk(TERRAFORM, ['plan', '-input=false', '-no-color', '-out=tfplan'], dir, mirror.env(cli));
    assert.match(plan.stdout, /Plan: 3 to add, 0 to change, 0 to destroy/);
    const apply = await runTfOk(TERRAFORM, ['apply', '-input=false', '-no-color', 'tfplan'], dir, mirror.env(cli));
    assert.match(apply.stdout, /Apply complete! Resources: 3 added/);
    assert.equal(readFileSync(out, 'utf8'), 'written by fixture_file\n');
    const state = JSON.parse(readFileSync(path.join(dir, 'terraform.tfstate'), 'utf8')) as {
      outputs: { values: { value: string[] } };
      resources: Array<{ type: string; mode: string; instances: Array<{ attributes: Record<string, unknown> }> }>;
    };
    assert.deepEqual(state.outputs.values.value, ['slept-a', 'slept-a']);
    const sleep = state.resources.find((r) => r.mode === 'data' && r.type === 'fixture_sleep');
    assert.ok(Number(sleep?.instances[0]?.attributes.slept_ms) >= 400, 'the data source slept as long as asked');

    // An in-place update, then a destroy that removes the file.
    writeFileSync(path.join(dir, 'main.tf'), fixtureConfig({ values: 2, planSleepMs: 400, filePath: out, value: 'b' }));
    const upd = await runTfOk(TERRAFORM, ['apply', '-input=false', '-no-color', '-auto-approve'], dir, mirror.env(cli));
    assert.match(upd.stdout, /Resources: 0 added, 2 changed, 0 destroyed/);
    await runTfOk(TERRAFORM, ['destroy', '-input=false', '-no-color', '-auto-approve'], dir, mirror.env(cli));
    assert.equal(existsSync(out), false);
    assert.equal(mirror.counts(mark).archives, 1, 'plan and apply downloaded nothing more');
  });

  it('cuts a long create short when terraform is interrupted (the provider is told to stop)', async () => {
    const cli = mirror.writeCliConfig(path.join(root, 'interrupt.tfrc'));
    const dir = project('interrupt', fixtureConfig({ applySleepMs: 120_000 }));
    await runTfOk(TERRAFORM, ['init', '-input=false', '-no-color'], dir, mirror.env(cli));
    // "Creating..." comes before terraform calls the provider, and a stop that reaches the
    // provider before the create does cancels nothing: the provider's own mark says the create
    // is sleeping.
    const mark = path.join(root, 'interrupt.sleeping');
    const child = execa(TERRAFORM, ['apply', '-input=false', '-no-color', '-auto-approve'], {
      cwd: dir,
      env: { ...mirror.env(cli), TF_IN_AUTOMATION: '1', FIXTURE_SLEEP_STARTED_FILE: mark },
      reject: false,
      timeout: 100_000,
    });
    let out = '';
    let interruptedAt = 0;
    child.stdout!.on('data', (b: Buffer) => {
      out += b.toString();
    });
    const exited = child.then(() => true);
    for (let ended = false; !existsSync(mark) && !ended; ) {
      ended = await Promise.race([exited, sleep(50).then(() => false)]);
    }
    if (existsSync(mark)) {
      interruptedAt = Date.now();
      child.kill('SIGINT');
    }
    const r = await child;
    assert.ok(interruptedAt > 0, `the create started:\n${out}`);
    assert.notEqual(r.exitCode, 0);
    assert.match(String(r.stderr), /fixture_value: create interrupted/);
    assert.match(String(r.stderr), /stopped after less than 120000 ms: context canceled/);
    assert.ok(Date.now() - interruptedAt < 60_000, 'terraform ended long before the sleep would have');
  });

  it('serves an older version when the config pins it, and refuses an unknown one', async () => {
    const cli = mirror.writeCliConfig(path.join(root, 'pinned.tfrc'));
    const dir = project('pinned', fixtureConfig({ version: '< 1.0.0' }));
    await runTfOk(TERRAFORM, ['init', '-input=false', '-no-color'], dir, mirror.env(cli));
    assert.match(readFileSync(path.join(dir, '.terraform.lock.hcl'), 'utf8'), /version\s+=\s+"0\.9\.0"/);

    const bad = project('unknown', fixtureConfig({ version: '7.0.0' }));
    const r = await runTf(TERRAFORM, ['init', '-input=false', '-no-color'], bad, mirror.env(cli));
    assert.notEqual(r.exitCode, 0);
    assert.match(r.stderr, /no available releases match/i);
  });

  it('refuses a package whose hash does not match what the mirror published', async () => {
    const bad = await startProviderMirror({ host: '127.0.236.1', wrongHashes: true });
    try {
      const cli = bad.writeCliConfig(path.join(root, 'bad.tfrc'));
      const dir = project('bad-hash', fixtureConfig());
      const r = await runTf(TERRAFORM, ['init', '-input=false', '-no-color'], dir, bad.env(cli));
      assert.notEqual(r.exitCode, 0);
      assert.match(r.stderr.replace(/\s+/g, ' '), /provider package doesn't match the expected checksum "zh:0{64}"/);
      assert.equal(bad.counts().archives, 1, 'it was downloaded, then refused');
      assert.equal(existsSync(path.join(dir, '.terraform.lock.hcl')), false);
    } finally {
      await bad.close();
    }
  });

  it('with a plugin cache, an init after the first downloads nothing', async () => {
    const cache = path.join(root, 'plugin-cache');
    mkdirSync(cache);
    const cli = mirror.writeCliConfig(path.join(root, 'cache.tfrc'), { pluginCacheDir: cache });
    const env = mirror.env(cli);
    const init = (dir: string) => runTfOk(TERRAFORM, ['init', '-input=false', '-no-color'], dir, env);

    const first = project('cache-a', fixtureConfig());
    let mark = mirror.requests.length;
    await init(first);
    assert.equal(mirror.counts(mark).archives, 1, 'the first init downloads the provider');
    assert.ok(existsSync(path.join(cache, 'registry.terraform.io', FIXTURE_SOURCE, version, 'linux_amd64')), 'and puts it in the cache');

    // The same project again from a fresh clone that carries its lock file: served from the cache.
    rmSync(path.join(first, '.terraform'), { recursive: true });
    mark = mirror.requests.length;
    await init(first);
    assert.equal(mirror.counts(mark).archives, 0, 're-init of the same project downloads nothing');

    // Another project with the same lock file: from the cache too.
    const second = project('cache-b', fixtureConfig({ value: 'other' }));
    cpSync(path.join(first, '.terraform.lock.hcl'), path.join(second, '.terraform.lock.hcl'));
    mark = mirror.requests.length;
    await init(second);
    assert.equal(mirror.counts(mark).archives, 0, 'a second project with a lock file downloads nothing');
    const plan = await runTfOk(TERRAFORM, ['plan', '-input=false', '-no-color'], second, env);
    assert.match(plan.stdout, /Plan: 1 to add/);
  });

  it('tells parallel inits apart by the tag of their CLI config', async () => {
    const mark = mirror.requests.length;
    const tags = ['p1', 'p2', 'p3'];
    await Promise.all(
      tags.map((tag) => {
        const cli = mirror.writeCliConfig(path.join(root, `${tag}.tfrc`), { tag });
        return runTfOk(TERRAFORM, ['init', '-input=false', '-no-color'], project(`tagged-${tag}`, fixtureConfig()), mirror.env(cli));
      }),
    );
    for (const tag of tags) {
      const c = mirror.counts(mark, tag);
      assert.equal(c.archives, 1, `${tag} downloaded the provider once`);
      assert.equal(c.archiveBytes, mirror.counts(mark).archiveBytes / tags.length);
    }
    assert.equal(mirror.counts(mark).archives, tags.length);
  });

  it('without a lock file terraform downloads again unless told the cache may fill the lock file', async () => {
    const cache = path.join(root, 'plugin-cache-2');
    mkdirSync(cache);
    const strict = mirror.writeCliConfig(path.join(root, 'strict.tfrc'), { pluginCacheDir: cache });
    const loose = mirror.writeCliConfig(path.join(root, 'loose.tfrc'), { pluginCacheDir: cache, pluginCacheMayBreakLockFile: true });
    await runTfOk(TERRAFORM, ['init', '-input=false', '-no-color'], project('nolock-a', fixtureConfig()), mirror.env(strict));

    // terraform ≥ 1.4 uses a cached package only when a lock file already vouches for it.
    let mark = mirror.requests.length;
    await runTfOk(TERRAFORM, ['init', '-input=false', '-no-color'], project('nolock-b', fixtureConfig()), mirror.env(strict));
    assert.equal(mirror.counts(mark).archives, 1, 'no lock file: downloaded again to check the hash');

    mark = mirror.requests.length;
    const dir = project('nolock-c', fixtureConfig());
    await runTfOk(TERRAFORM, ['init', '-input=false', '-no-color'], dir, mirror.env(loose));
    assert.equal(mirror.counts(mark).archives, 0, 'plugin_cache_may_break_dependency_lock_file: taken from the cache');
    assert.ok(readFileSync(path.join(dir, '.terraform.lock.hcl'), 'utf8').includes(mirror.releases.get(version)!.h1));
  });
});
