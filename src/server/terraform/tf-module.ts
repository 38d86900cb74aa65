// Reads the `required_version` settings of a project's module (its own .tf files), for the
// version choice in tf-versions.ts. The files are the pull request's: only regular files
// directly in the project dir are read, a bounded number of a bounded size.
import { lstat, readFile, readdir } from 'node:fs/promises';
import path from 'node:path';
import { requiredVersionsIn } from './tf-versions.js';

const MAX_FILES = 200;
const MAX_FILE_BYTES = 1024 * 1024;

export async function readRequiredVersions(projectDir: string): Promise<string[]> {
  let names: string[];
  try {
    names = (await readdir(projectDir))
      .filter((n) => n.endsWith('.tf'))
      .sort()
      .slice(0, MAX_FILES);
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
