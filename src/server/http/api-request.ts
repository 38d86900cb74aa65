// The body of POST /api/plan and /api/apply, read as Atlantis v0.47 reads its APIRequest
// (Go's encoding/json: keys matched case-insensitively, the last of equal keys wins, unknown
// keys and nulls ignored), then checked field by field: every refusal names the field.
// Pure; http/api.ts answers 400 with the text.
import { isDirGlob, isValidGlob } from '../workflow/go-compat/dir-glob.js';
import { goQuote } from '../workflow/go-compat/go-text.js';
import { cleanRepoDir, workspaceProblem } from '../workflow/go-compat/repo-dir.js';

/** One thing to run on: a configured project by name, or a dir (a glob as in a comment's -d) and workspace. */
export interface ApiTarget {
  project?: string;
  dir?: string;
  workspace?: string;
}

export interface ApiRequest {
  /** `owner/name` */
  repository: string;
  /** A branch name (`refs/heads/` dropped), or for a pull request its head branch or commit. */
  ref: string;
  /** 0: no pull request, the ref is run in a working copy of its own. */
  pull: number;
  /** Projects first, then Paths, each in the order given (as Atlantis builds its commands). */
  targets: ApiTarget[];
}

export type ApiParse = { ok: true; request: ApiRequest } | { ok: false; error: string };

type Kind = 'string' | 'integer' | 'strings' | 'paths';

/** APIRequest's fields as Go names them (struct names, or json tags where it has them). */
const FIELDS: ReadonlyArray<readonly [string, Kind]> = [
  ['Repository', 'string'],
  ['Ref', 'string'],
  ['Type', 'string'],
  ['PR', 'integer'],
  ['Projects', 'strings'],
  ['Paths', 'paths'],
  ['base_branch', 'string'],
];
const PATH_FIELDS = ['project_name', 'directory', 'workspace'] as const;

class BadRequest extends Error {}

/** Go's case folding of ASCII field names (it also folds the Kelvin sign and the long s). */
const fold = (s: string): string => s.toUpperCase().toLowerCase();

/** The object's values by field name, as Go's decoder assigns them: any case, the last key wins. */
function fieldsOf(o: Record<string, unknown>, names: readonly string[]): Map<string, unknown> {
  const byFold = new Map(names.map((n) => [fold(n), n] as const));
  const out = new Map<string, unknown>();
  for (const [k, v] of Object.entries(o)) {
    const name = byFold.get(fold(k));
    // null leaves a Go field as it was.
    if (name !== undefined && v !== null) out.set(name, v);
  }
  return out;
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

function typeError(field: string, want: string): BadRequest {
  return new BadRequest(`failed to parse request: ${field}: must be ${want}`);
}

function stringOf(v: unknown, field: string): string {
  if (v === undefined) return '';
  if (typeof v !== 'string') throw typeError(field, 'a string');
  return v;
}

// biome-ignore lint/suspicious/noControlCharactersInRegex: a name with a control character is refused
const CONTROL = /[\u0000-\u001f\u007f]/;
const OWNER = /^[A-Za-z0-9_][A-Za-z0-9_.-]{0,99}$/;
const NAME = /^[A-Za-z0-9_.-]{1,100}$/;

function repositoryProblem(repo: string): string | undefined {
  const [owner, name, ...rest] = repo.split('/');
  const ok = rest.length === 0 && OWNER.test(owner ?? '') && NAME.test(name ?? '') && name !== '.' && name !== '..';
  return ok ? undefined : `Repository: ${goQuote(repo)} must be owner/name`;
}

/** git's rules for a branch name (check-ref-format), the parts that matter on a command line and a path. */
function branchProblem(ref: string): string | undefined {
  const bad =
    ref === '' ||
    ref === '@' ||
    ref.length > 255 ||
    CONTROL.test(ref) ||
    /[\s~^:?*[\\]/.test(ref) ||
    ref.includes('..') ||
    ref.includes('//') ||
    ref.includes('@{') ||
    /^[-/]/.test(ref) ||
    /(\/|\.|\.lock)$/.test(ref) ||
    ref.split('/').some((part) => part.startsWith('.'));
  return bad ? `Ref: ${goQuote(ref)} is not a valid branch name` : undefined;
}

/** A comment's -d rule (globs included), worded for the field. */
function directoryOf(raw: string, field: string): string {
  if (isDirGlob(raw)) {
    if (raw.includes('..')) throw new BadRequest(`${field}: using '..' in glob pattern ${goQuote(raw)} is not allowed`);
    if (!isValidGlob(raw)) throw new BadRequest(`${field}: invalid glob pattern ${goQuote(raw)}`);
  }
  const cleaned = cleanRepoDir(raw, 'from-root');
  if ('refused' in cleaned)
    throw new BadRequest(
      cleaned.refused === 'control-characters'
        ? `${field}: invalid dir ${goQuote(raw)}: control characters are not allowed`
        : `${field}: using a relative path ${goQuote(raw)} is not allowed`,
    );
  if (!isDirGlob(raw)) {
    if (cleaned.dir.startsWith('..')) throw new BadRequest(`${field}: using a relative path ${goQuote(raw)} is not allowed`);
    return cleaned.dir;
  }
  const glob = raw.replace(/^\.\//, '').replace(/^\//, '');
  return glob === '' ? '.' : glob;
}

function pathTarget(v: unknown, i: number): ApiTarget {
  const at = `Paths[${i}]`;
  if (v === null) throw new BadRequest(`${at}.Directory: is required (or project_name)`);
  if (!isObject(v)) throw typeError(at, 'an object');
  const f = fieldsOf(v, PATH_FIELDS);
  const project = stringOf(f.get('project_name'), `${at}.project_name`);
  const directory = stringOf(f.get('directory'), `${at}.Directory`);
  const workspace = stringOf(f.get('workspace'), `${at}.Workspace`);
  const wsProblem = workspaceProblem(workspace);
  // Atlantis's words for a workspace (valid.ValidateWorkspaceName), after the field.
  if (wsProblem !== undefined) throw new BadRequest(`${at}.Workspace: invalid workspace ${goQuote(workspace)}: ${wsProblem}`);
  if (project !== '') {
    if (CONTROL.test(project)) throw new BadRequest(`${at}.project_name: control characters are not allowed`);
    // As a comment's -p: a project is named, or a dir and workspace, not both.
    if (directory !== '' || workspace !== '') throw new BadRequest(`${at}: project_name cannot be used with Directory or Workspace`);
    return { project };
  }
  if (directory === '') throw new BadRequest(`${at}.Directory: is required (or project_name)`);
  const t: ApiTarget = { dir: directoryOf(directory, `${at}.Directory`) };
  if (workspace !== '') t.workspace = workspace;
  return t;
}

function requestOf(body: unknown, hostType: string): ApiRequest {
  if (!isObject(body)) throw new BadRequest('failed to parse request: the body must be a JSON object');
  const f = fieldsOf(
    body,
    FIELDS.map(([n]) => n),
  );
  const repository = stringOf(f.get('Repository'), 'Repository');
  const ref = stringOf(f.get('Ref'), 'Ref');
  const type = stringOf(f.get('Type'), 'Type');
  const pr = f.get('PR') ?? 0;
  if (typeof pr !== 'number' || !Number.isSafeInteger(pr)) throw typeError('PR', 'an integer');
  const projects = f.get('Projects') ?? [];
  if (!Array.isArray(projects)) throw typeError('Projects', 'an array of strings');
  projects.forEach((p, i) => {
    if (p !== null && typeof p !== 'string') throw typeError(`Projects[${i}]`, 'a string');
  });
  const paths = f.get('Paths') ?? [];
  if (!Array.isArray(paths)) throw typeError('Paths', 'an array of objects');
  const baseBranch = stringOf(f.get('base_branch'), 'base_branch');

  // As Atlantis's validator (`required`): an empty string is missing too.
  const missing = (
    [
      ['Repository', repository],
      ['Ref', ref],
      ['Type', type],
    ] as const
  )
    .filter(([, v]) => v === '')
    .map(([n]) => n);
  if (missing.length > 0) throw new BadRequest(`request is missing fields: ${missing.join(', ')}`);
  // Atlantis's text (models.NewVCSHostType); only the server's own host is served.
  if (type !== hostType) throw new BadRequest(`Type: ${goQuote(type)} is not a valid type`);
  const repoProblem = repositoryProblem(repository);
  if (repoProblem) throw new BadRequest(repoProblem);
  const branch = ref.startsWith('refs/heads/') ? ref.slice('refs/heads/'.length) : ref;
  const refProblem = branchProblem(branch);
  if (refProblem) throw new BadRequest(refProblem);
  if (pr < 0) throw new BadRequest('PR: must be 0 (no pull request) or a pull request number');
  if (baseBranch !== '')
    throw new BadRequest("base_branch: is not supported by this server (the base branch is the pull request's, or the ref itself)");

  const targets: ApiTarget[] = projects.map((p: unknown, i) => {
    if (typeof p !== 'string' || p === '') throw new BadRequest(`Projects[${i}]: must be a project name`);
    if (CONTROL.test(p)) throw new BadRequest(`Projects[${i}]: control characters are not allowed`);
    return { project: p };
  });
  paths.forEach((p: unknown, i) => {
    targets.push(pathTarget(p, i));
  });
  return { repository, ref: branch, pull: pr, targets };
}

/**
 * Parses and checks a request body; the error text names the field. `hostType`: the server's
 * host as Atlantis names it in `Type` (`Github`, vcs/host.ts typeName).
 */
export function parseApiRequest(body: string, hostType: string): ApiParse {
  let json: unknown;
  try {
    json = JSON.parse(body);
  } catch (e) {
    return { ok: false, error: `failed to parse request: ${(e as Error).message}` };
  }
  try {
    return { ok: true, request: requestOf(json, hostType) };
  } catch (e) {
    if (e instanceof BadRequest) return { ok: false, error: e.message };
    throw e;
  }
}

/** How a target shows in /status and the logs: the project name, or `dir` / `dir/workspace`. */
export function targetLabel(t: ApiTarget): string {
  return t.project ?? `${t.dir ?? '.'}${t.workspace ? `/${t.workspace}` : ''}`;
}
