// The plugin cache's own rules (src/server/terraform/plugin-cache.ts): which inits may share
// the cache at once (OpenTofu from 1.10, which locks it per provider), and the queue the others
// wait in: one init at a time, in the order they asked, a failed init releasing its turn. The
// cache under real parallel inits of terraform and tofu is tested with the server
// (plugin-cache-e2e.test.ts).
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
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
});
