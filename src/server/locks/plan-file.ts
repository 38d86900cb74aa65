// Plan files: their names under the data dir, their hashes, and whether a saved plan may be
// applied. Pure apart from hashing a file.
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import type { LockKey, PlanRecord } from './state-store.js';

// Escapes every byte but [A-Za-z0-9_-], so `.` can separate the parts: the name is
// injective in (project, dir, workspace) and never contains `/` or `..`.
const escapePart = (s: string): string =>
  Array.from(Buffer.from(s, 'utf8'), (b) =>
    /[A-Za-z0-9_-]/.test(String.fromCharCode(b)) ? String.fromCharCode(b) : `%${b.toString(16).toUpperCase().padStart(2, '0')}`,
  ).join('');

/**
 * A project's plan file name, unique per (dir, workspace, project name):
 * `<dir>.<workspace>[.<name>].tfplan`, each part escaped (so it has no `.`, and the number
 * of parts tells a named project from an unnamed one). A name longer than a file system
 * allows becomes `h-<sha256 of the parts>.tfplan`.
 */
export function planFileName(dir: string, workspace: string, project?: string): string {
  const parts = [dir, workspace, ...(project === undefined ? [] : [project])];
  const escaped = `${parts.map(escapePart).join('.')}.tfplan`;
  if (escaped.length <= 200) return escaped;
  return `h-${createHash('sha256').update(JSON.stringify(parts)).digest('hex')}.tfplan`;
}

/**
 * Where a project's plan file goes in a data dir, whatever the store:
 * `<dataDir>/plans/<owner>/<name>/<pull>/<planFileName>` (owner and name URI-encoded).
 */
export function planPathIn(dataDir: string, key: LockKey, pull: number, project?: string): string {
  const safe = key.repo
    .split('/')
    .map((s) => encodeURIComponent(s))
    .join(path.sep);
  return path.join(dataDir, 'plans', safe, String(pull), planFileName(key.dir, key.workspace, project));
}

/** sha256 (hex) of a file, read without blocking the event loop. */
export async function fileSha256(file: string): Promise<string> {
  const h = createHash('sha256');
  for await (const chunk of fs.createReadStream(file)) h.update(chunk as Buffer);
  return h.digest('hex');
}

/**
 * Why a saved plan may not be applied, or undefined when it may: `actualSha256` is the hash
 * of the file now (undefined when it is gone). Pure; the texts go to the PR.
 */
export function planFileProblem(
  plan: Pick<PlanRecord, 'dir' | 'workspace' | 'project' | 'planSha256'>,
  actualSha256: string | undefined,
  executableName: string,
): string | undefined {
  const again = `comment \`${executableName} plan${plan.project ? ` -p ${plan.project}` : ` -d ${plan.dir} -w ${plan.workspace}`}\` to plan again`;
  if (plan.planSha256 === undefined) {
    // No hash: only a workflow that wrote no plan file (nothing to tamper with), or a plan
    // recorded before hashes were kept (cannot be verified).
    if (actualSha256 === undefined) return undefined;
    return `this plan was saved without a hash of its plan file, so it cannot be verified; nothing was applied: ${again}`;
  }
  if (actualSha256 === undefined) return `the plan file of this project is missing; nothing was applied: ${again}`;
  if (actualSha256 !== plan.planSha256) {
    return `the plan file of this project changed after it was planned (its sha256 no longer matches the one recorded at plan time); nothing was applied: ${again}`;
  }
  return undefined;
}
