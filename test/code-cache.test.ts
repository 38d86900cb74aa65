// The launcher and its code cache (hack/bundle/launcher.cjs, hack/bundle/code-cache.mjs): the
// build leaves one cache and one list of built-in modules, named for the bundle they were made
// from; V8 takes the cache under the image's node flags; the CLI runs the same without them.
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { cpSync, mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { isBuiltin } from 'node:module';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, it } from 'node:test';
import { NODE_ARGS } from '../src/node-args.js';
import { CLI, assertBuilt } from './support/cli.js';

const DIST = path.dirname(CLI);

/** What the launcher at `launcher` says of its code cache when started with `flags`: taken, rejected or none. */
function cacheState(launcher: string, flags: readonly string[]): string {
  return execFileSync(process.execPath, [...flags, launcher], {
    encoding: 'utf8',
    env: { PATH: process.env.PATH, ATLANTIS_OPERATOR_CODE_CACHE: 'check' },
  }).trim();
}

describe('the code cache', () => {
  assertBuilt();
  const hash = createHash('sha256')
    .update(readFileSync(path.join(DIST, 'cli.cjs')))
    .digest('hex')
    .slice(0, 16);
  const made = readdirSync(DIST).filter((f) => f.startsWith('cli-'));

  it('is one cache and one list of built-in modules, named for the bundle the launcher runs', () => {
    assert.deepEqual(made.sort(), [`cli-${hash}.builtins.json`, `cli-${hash}.code-cache`]);
    assert.match(readFileSync(CLI, 'utf8'), new RegExp(`const CLI_HASH = '${hash}';`));
    const builtins = JSON.parse(readFileSync(path.join(DIST, `cli-${hash}.builtins.json`), 'utf8')) as string[];
    // A server start needs at least these; every name is one Node.js has.
    for (const m of ['http', 'crypto', 'child_process']) assert.ok(builtins.includes(m), `${m} in ${builtins.join(' ')}`);
    assert.deepEqual(
      builtins.filter((m) => !isBuiltin(m)),
      [],
    );
  });

  it("is taken by V8 under the image's node flags, and refused under a V8 flag", () => {
    assert.equal(cacheState(CLI, NODE_ARGS), 'taken');
    // V8 keys a cache to its flags: a start with another V8 flag compiles as if there were none.
    assert.equal(cacheState(CLI, ['--stack-size=1000']), 'rejected');
  });

  it('is not needed: the CLI runs the same without it', () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'ato-code-cache-'));
    try {
      cpSync(CLI, path.join(dir, 'atlantis-operator.cjs'));
      cpSync(path.join(DIST, 'cli.cjs'), path.join(dir, 'cli.cjs'));
      const launcher = path.join(dir, 'atlantis-operator.cjs');
      assert.equal(cacheState(launcher, NODE_ARGS), 'none');
      const version = () => spawnSync(process.execPath, [...NODE_ARGS, launcher, 'version'], { encoding: 'utf8' });
      const bare = version();
      assert.equal(bare.status, 0, bare.stderr);
      assert.match(bare.stdout, /^atlantis-operator \d+\.\d+\.\d+/);
      for (const f of made) cpSync(path.join(DIST, f), path.join(dir, f));
      assert.equal(cacheState(launcher, NODE_ARGS), 'taken');
      const cached = version();
      assert.equal(cached.status, 0, cached.stderr);
      assert.equal(cached.stdout, bare.stdout);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
