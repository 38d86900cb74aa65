// The tools built from Go modules for tests (docs/test-tools.md): each hack/<tool>/build.sh
// builds its tool into ~/.cache/atlantis-operator/<tool>/ when missing and prints the cached
// path on its last line. `make test` builds them all first (make tofu-bin conftest-bin
// gitea-bin provider-bin), so here a run only finds the path; a test file run on its own
// builds what is missing (minutes, once).
import path from 'node:path';
import { execa } from 'execa';
import { repoRoot } from '../../dev/binaries.js';

export type GoTool = 'tofu' | 'conftest' | 'gitea' | 'provider';

const found = new Map<GoTool, Promise<string>>();

/** Absolute path of the tool's binary (the provider's is terraform-provider-fixture). */
export function goTool(tool: GoTool): Promise<string> {
  let p = found.get(tool);
  if (!p) {
    p = (async () => {
      const script = path.join(repoRoot, 'hack', tool, 'build.sh');
      // A cold build of tofu or Gitea takes ~8 minutes of two busy cores; allow it three times that.
      const r = await execa('bash', [script], { reject: false, timeout: 1_800_000 });
      if (r.exitCode !== 0) throw new Error(`hack/${tool}/build.sh failed (${r.exitCode}):\n${String(r.stderr).slice(-4000)}`);
      const last = String(r.stdout).trim().split('\n').pop() ?? '';
      if (!path.isAbsolute(last)) throw new Error(`hack/${tool}/build.sh printed no path: ${String(r.stdout)}`);
      return last;
    })();
    found.set(tool, p);
    p.catch(() => found.delete(tool));
  }
  return p;
}
