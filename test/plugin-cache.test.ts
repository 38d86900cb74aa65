// The plugin cache's own rules (src/server/terraform/plugin-cache.ts): which inits may share
// the cache at once (OpenTofu from 1.10, which locks it per provider), and the queue the others
// wait in: one init at a time, in the order they asked, a failed init releasing its turn, and
// an init that only reads the cache (its lock file's providers all cached: cached-providers.ts)
// not waiting. The cache under real parallel inits of terraform and tofu is tested with the
// server (plugin-cache-e2e.test.ts).
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { packageHashV1, terraformPlatform } from '../src/server/terraform/cached-providers.js';
import { PluginCache, locksCacheItself } from '../src/server/terraform/plugin-cache.js';

const dir = mkdtempSync(path.join(tmpdir(), 'ato-plugin-cache-'));
after(() => rmSync(dir, { recursive: true, force: true }));

describe('plugin cache', () => {
  it('which inits lock the cache themselves', () => {
    const table: Array<[Parameters<typeof locksCacheItself>, boolean]> = [
      [['terraform', '1.11.4'], false],
      [['terraform', undefined], false],
      [['opentofu', '1.12.6'], true],
      [['opentofu', '1.10.0'], true],
      [['opentofu', 'v1.10'], true],
      [['opentofu', '2.0.0'], true],
      [['opentofu', '1.9.9'], false],
      [['opentofu', '1.10.0-beta1'], true],
      [['opentofu', '1.6.2'], false],
      [['opentofu', undefined], false],
      [['opentofu', 'garbage'], false],
    ];
    for (const [args, want] of table) assert.equal(locksCacheItself(...args), want, JSON.stringify(args));
  });

  it('the dir is made private; its env is TF_PLUGIN_CACHE_DIR', () => {
    const c = PluginCache.inDataDir(dir);
    assert.equal(c.dir, path.join(dir, 'plugin-cache'));
    assert.equal(statSync(c.dir).mode & 0o777, 0o700);
    assert.deepEqual(c.env(), { TF_PLUGIN_CACHE_DIR: c.dir });
  });

  it('terraform inits run one at a time in the order asked, a failed one releasing its turn; tofu 1.12 inits do not wait', async () => {
    const c = new PluginCache(path.join(dir, 'queue'));
    const events: string[] = [];
    let running = 0;
    let most = 0;
    const gates = new Map<string, () => void>();
    const init =
      (name: string, fail = false) =>
      async () => {
        running++;
        most = Math.max(most, running);
        events.push(`start ${name}`);
        await new Promise<void>((r) => gates.set(name, r));
        running--;
        events.push(`end ${name}`);
        if (fail) throw new Error(`${name} failed`);
        return name;
      };
    const a = c.init('terraform', '1.11.4', init('a'));
    const b = c.init('terraform', '1.11.4', init('b', true));
    const t = c.init('opentofu', '1.12.6', init('tofu'));
    const d = c.init('opentofu', '1.6.0', init('d'));
    const tick = () => new Promise((r) => setImmediate(r));
    await tick();
    // The tofu init starts at once, the first terraform init after a microtask.
    assert.deepEqual(events, ['start tofu', 'start a']);
    assert.equal(c.queued, 2);
    gates.get('tofu')!();
    assert.equal(await t, 'tofu');
    gates.get('a')!();
    assert.equal(await a, 'a');
    await tick();
    gates.get('b')!();
    await assert.rejects(b, /b failed/);
    await tick();
    gates.get('d')!();
    assert.equal(await d, 'd');
    assert.deepEqual(events, ['start tofu', 'start a', 'end tofu', 'end a', 'start b', 'end b', 'start d', 'end d']);
    assert.equal(most, 2, 'only the tofu 1.12 init ran beside another');
    assert.equal(c.queued, 0);
  });
  it('an init that only reads the cache does not wait; a queued one whose providers were cached meanwhile lets the next go', async () => {
    const c = new PluginCache(path.join(dir, 'readers'));
    // A package as the cache holds one, and a project whose lock file selects it.
    const put = (type: string): string => {
      const pkg = path.join(c.dir, 'registry.terraform.io', 'acme', type, '1.0.0', terraformPlatform());
      mkdirSync(pkg, { recursive: true });
      writeFileSync(path.join(pkg, `terraform-provider-${type}_v1.0.0`), `#!/bin/sh\n# ${type}\n`, { mode: 0o755 });
      return pkg;
    };
    const project = async (name: string, type: string, hash: string): Promise<string> => {
      const p = path.join(dir, 'projects', name);
      mkdirSync(p, { recursive: true });
      const lock = `provider "registry.terraform.io/acme/${type}" {\n  version = "1.0.0"\n  hashes = [\n    "${hash}",\n  ]\n}\n`;
      writeFileSync(path.join(p, '.terraform.lock.hcl'), lock);
      return p;
    };
    const cachedHash = (await packageHashV1(put('a')))!;
    const reader = await project('reader', 'a', cachedHash);
    // Package b is not cached yet; its hash is the one it will have once it is.
    const bDir = put('b');
    const bHash = (await packageHashV1(bDir))!;
    rmSync(bDir, { recursive: true });
    const later = await project('later', 'b', bHash);

    const events: string[] = [];
    const gates = new Map<string, () => void>();
    const init = (name: string) => async () => {
      events.push(`start ${name}`);
      await new Promise<void>((r) => gates.set(name, r));
      events.push(`end ${name}`);
      return name;
    };
    const tick = () => new Promise((r) => setImmediate(r));
    // Bounded by time, not by turns: an init that checks its lock file against the cache
    // waits for file reads on libuv's thread pool, which a loaded machine may hold back
    // past any fixed count of turns. Each state waited for holds until the test moves on.
    const until = async (what: () => boolean) => {
      const end = Date.now() + 10_000;
      while (!what() && Date.now() < end) await tick();
      assert.ok(what(), events.join(', '));
    };
    const w1 = c.init('terraform', '1.11.4', init('w1'));
    await until(() => events.includes('start w1'));
    const r = c.init('terraform', '1.11.4', init('reader'), { projectDir: reader, args: ['-input=false'] });
    await until(() => events.includes('start reader'));
    const q = c.init('terraform', '1.11.4', init('later'), { projectDir: later, args: ['-input=false'] });
    await until(() => c.queued === 1);
    const w2 = c.init('terraform', '1.11.4', init('w2'));
    await until(() => c.queued === 2);
    assert.deepEqual(events, ['start w1', 'start reader'], 'the reader ran beside the writer');
    put('b'); // w1 installed what `later` needs
    gates.get('w1')!();
    await until(() => events.includes('start w2'));
    assert.deepEqual(events.slice(2), ['end w1', 'start later', 'start w2'], '`later` only read, so w2 did not wait for it');
    for (const name of ['reader', 'later', 'w2']) gates.get(name)!();
    assert.deepEqual(await Promise.all([w1, r, q, w2]), ['w1', 'reader', 'later', 'w2']);
    assert.equal(c.queued, 0);
  });
});
