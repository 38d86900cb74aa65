// `terraform init`'s arguments as Atlantis v0.47's init step builds them
// (runtime/init_step_runner.go): a `.terraform.lock.hcl` that git does not track was left by an
// earlier init in this working copy and is deleted, so a PR that changes provider constraints
// is not held to the old selections; with no lock file, init runs with -upgrade. A lock file the
// repo commits stays, and with it the plugin cache (plugin-cache.ts) serves its providers
// without a download. The extra_args win over ours (-upgrade=false), as Atlantis dedupes them.
import { existsSync, rmSync } from 'node:fs';
import path from 'node:path';

export const LOCK_FILE = '.terraform.lock.hcl';

/** Atlantis's DeDuplicateExtraArgs: an extra arg naming the same flag replaces ours. */
export function dedupeInitArgs(ours: readonly string[], extra: readonly string[]): string[] {
  const flag = (a: string): string => a.replace(/^-+/, '').split('=')[0] ?? a;
  const extraFlags = new Set(extra.filter((a) => a.startsWith('-')).map(flag));
  return [...ours.filter((a) => !extraFlags.has(flag(a))), ...extra];
}

/**
 * The init arguments for the project dir; deletes an untracked lock file first. `tracked`:
 * whether git tracks a file there (undefined when git cannot tell: the file is kept, as Atlantis
 * keeps it when its check fails).
 */
export async function initArgs(
  projectDir: string,
  extraArgs: readonly string[],
  tracked: (file: string) => Promise<boolean | undefined>,
): Promise<string[]> {
  const lock = path.join(projectDir, LOCK_FILE);
  if (existsSync(lock) && (await tracked(LOCK_FILE)) === false) rmSync(lock, { force: true });
  return dedupeInitArgs(['-input=false', ...(existsSync(lock) ? [] : ['-upgrade'])], extraArgs);
}
