// The README's main job (`make run`) must keep working: run the demo to the end of its
// rollout (shorter apply) and check its verdict.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'node:test';
import { assertBuilt } from './support/cli.js';

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

describe('make run (the local demo)', () => {
  it('rolls out a busy AtlantisDeployment without killing terraform', { timeout: 420_000 }, () => {
    assertBuilt();
    const r = spawnSync(process.execPath, ['--import', 'tsx', path.join(repoRoot, 'dev/demo.ts'), '--exit'], {
      cwd: repoRoot,
      encoding: 'utf8',
      timeout: 400_000,
      env: { ...process.env, DEMO_APPLY_SECONDS: '6' },
    });
    const out = `${r.stdout}\n${r.stderr}`;
    assert.equal(r.status, 0, out);
    assert.match(out, /atlantis-1: \/status shutting_down=true, in_progress_operations=1/);
    assert.match(out, /PR #1: apply finished on the draining pod/);
    assert.match(out, /Rollout complete: 2\/2 pods/);
    assert.match(out, /No terraform run killed: 0 SIGKILL sent by the node, no interrupted run on the PR/);
    const lines = out.split('\n');
    const idx = (re: RegExp) => lines.findIndex((l) => re.test(l));
    assert.ok(
      idx(/PR #1: apply finished/) < idx(/atlantis-1: drained .* deleted by the controller/),
      `the busy pod is deleted only after its apply finished:\n${out}`,
    );
  });
});
