// A lock's id as Atlantis v0.47 forms it, and the lock page link it puts in plan comments
// ("To **delete** this plan and lock, click [here](<url>/lock?id=...)"): the one rule for
// both the link and the page that reads it (web-ui.ts). Pure functions.
import path from 'node:path';

/** Go's path.Clean for a repo-relative dir: `''` and `./` are `.`, no trailing slash. */
function cleanDir(dir: string): string {
  const n = path.posix.normalize(dir === '' ? '.' : dir);
  return n.length > 1 ? n.replace(/\/+$/, '') : n;
}

/** Atlantis v0.47's lock key: `<owner>/<repo>/<dir>/<workspace>/<project name or empty>`. */
export function lockId(repo: string, dir: string, workspace: string, projectName?: string): string {
  return `${repo}/${cleanDir(dir)}/${workspace}/${projectName ?? ''}`;
}

/** Go's url.QueryEscape: only letters, digits and `-_.~` stay; a space becomes `+`. */
export function queryEscape(s: string): string {
  return encodeURIComponent(s)
    .replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`)
    .replace(/%20/g, '+');
}

/**
 * The lock page link. Atlantis escapes the id and its router escapes the query value again,
 * so `/` shows as `%252F` in its comments; the same double escape keeps links identical.
 */
export function lockUrl(atlantisUrl: string, id: string): string {
  return `${atlantisUrl.replace(/\/+$/, '')}${lockPath(id)}`;
}

/** The lock page's path and query, without the server's URL. */
export function lockPath(id: string): string {
  return `/lock?id=${queryEscape(queryEscape(id))}`;
}

/** The lock id back from the `id` query value of a lock link (already decoded once by the URL parser). */
export function lockIdFromQuery(value: string): string {
  return decodeURIComponent(value.replace(/\+/g, ' '));
}

/**
 * A v0.47 lock id back into its parts, or undefined when it is not one. The repo is two
 * segments and the workspace and project name one each (neither may hold `/`), so the dir
 * is whatever is between them.
 */
export function parseLockId(id: string): { repo: string; dir: string; workspace: string; projectName?: string } | undefined {
  const parts = id.split('/');
  if (parts.length < 5) return undefined;
  const [owner, name] = parts;
  const projectName = parts[parts.length - 1] as string;
  const workspace = parts[parts.length - 2] as string;
  const dir = parts.slice(2, -2).join('/');
  if (!owner || !name || !workspace || dir === '') return undefined;
  return { repo: `${owner}/${name}`, dir, workspace, ...(projectName ? { projectName } : {}) };
}
