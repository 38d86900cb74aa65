// Reads the `required_version` settings of a project's module (its own files), for the version
// choice in tf-versions.ts. terraform reads `.tf` files; OpenTofu also `.tofu` ones, and a
// `.tofu` file replaces the `.tf` file of the same name (as Atlantis v0.47 reads them for tofu).
// The files are the pull request's: only regular files directly in the project dir are read, a
// bounded number of a bounded size; hidden and editor backup files are skipped.
import { lstat, readFile, readdir } from 'node:fs/promises';
import path from 'node:path';
import type { Distribution } from './distribution.js';
import { requiredVersionsIn } from './tf-versions.js';

const MAX_FILES = 200;
const MAX_FILE_BYTES = 1024 * 1024;

const ignored = (n: string): boolean => n.startsWith('.') || n.endsWith('~') || (n.startsWith('#') && n.endsWith('#'));

/** The module files a distribution reads, in name order. Pure. */
export function moduleFiles(names: readonly string[], distribution: Distribution = 'terraform'): string[] {
  const visible = names.filter((n) => !ignored(n));
  if (distribution !== 'opentofu') return visible.filter((n) => n.endsWith('.tf')).sort();
  const tofu = new Set(visible.filter((n) => n.endsWith('.tofu')).map((n) => n.slice(0, -'.tofu'.length)));
  return visible.filter((n) => n.endsWith('.tofu') || (n.endsWith('.tf') && !tofu.has(n.slice(0, -'.tf'.length)))).sort();
}

export async function readRequiredVersions(projectDir: string, distribution: Distribution = 'terraform'): Promise<string[]> {
  let names: string[];
  try {
    names = moduleFiles(await readdir(projectDir), distribution).slice(0, MAX_FILES);
  } catch {
    return [];
  }
  const sources: string[] = [];
  for (const n of names) {
    const f = path.join(projectDir, n);
    const st = await lstat(f).catch(() => undefined);
    if (!st?.isFile() || st.size > MAX_FILE_BYTES) continue;
    sources.push(await readFile(f, 'utf8').catch(() => ''));
  }
  return requiredVersionsIn(sources);
}
