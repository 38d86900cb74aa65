// The launcher and its code cache (hack/bundle/launcher.cjs, hack/bundle/code-cache.mjs): the
// build leaves one cache, named for the bundle it was made from, that V8 takes under the
// image's node flags; the CLI runs the same without it.
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { cpSync, mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, it } from 'node:test';
import { NODE_ARGS } from '../src/node-args.js';
import { CLI, assertBuilt } from './support/cli.js';

const DIST = path.dirname(CLI);

/** Compiles dist/cli.cjs as the launcher does, with `cache`, in a node with `flags`; says whether V8 took the cache. */
function taken(cache: string, flags: readonly string[]): boolean {
  const probe = `const fs = require('node:fs'), vm = require('node:vm'), Module = require('node:module');
const file = ${JSON.stringify(path.join(DIST, 'cli.cjs'))};
const s = new vm.Script(Module.wrap(fs.readFileSync(file, 'latin1')), { filename: file, cachedData: fs.readFileSync(${JSON.stringify(cache)}) });
process.stdout.write(s.cachedDataRejected ? 'rejected' : 'taken');`;
  return execFileSync(process.execPath, [...flags, '-e', probe], { encoding: 'utf8' }) === 'taken';
}

describe('the code cache', () => {
  assertBuilt();
  const caches = readdirSync(DIST).filter((f) => f.endsWith('.code-cache'));

  it('is one file named for the bundle the launcher runs', () => {
    const hash = createHash('sha256')
      .update(readFileSync(path.join(DIST, 'cli.cjs')))
      .digest('hex')
      .slice(0, 16);
    assert.deepEqual(caches, [`cli-${hash}.code-cache`]);
    assert.match(readFileSync(CLI, 'utf8'), new RegExp(`const CLI_HASH = '${hash}';`));
  });

  it('is taken by V8 under the image node flags, and refused under others', () => {
    const cache = path.join(DIST, caches[0]!);
    assert.equal(taken(cache, NODE_ARGS), true);
    // V8 keys a cache to its flags: a start with other flags compiles as before.
    assert.equal(taken(cache, []), false);
  });

  it('is not needed: the CLI runs the same without it', () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'ato-code-cache-'));
    try {
      cpSync(CLI, path.join(dir, 'atlantis-operator.cjs'));
      cpSync(path.join(DIST, 'cli.cjs'), path.join(dir, 'cli.cjs'));
      const version = () =>
        spawnSync(process.execPath, [...NODE_ARGS, path.join(dir, 'atlantis-operator.cjs'), 'version'], { encoding: 'utf8' });
      const bare = version();
      assert.equal(bare.status, 0, bare.stderr);
      assert.match(bare.stdout, /^atlantis-operator \d+\.\d+\.\d+/);
      cpSync(path.join(DIST, caches[0]!), path.join(dir, caches[0]!));
      const cached = version();
      assert.equal(cached.status, 0, cached.stderr);
      assert.equal(cached.stdout, bare.stdout);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
