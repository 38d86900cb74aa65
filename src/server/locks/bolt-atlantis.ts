// What Atlantis v0.47 keeps in its atlantis.db (server/core/boltdb), turned into this server's
// records. Pure: takes the tree bolt-file.ts read, returns the records or throws.
//
// Atlantis's buckets, each value the JSON of a Go struct (field names as in Go):
//   runLocks     `<owner>/<repo>/<path>/<workspace>/<project name>` -> ProjectLock
//                {Project: {ProjectName, RepoFullName, Path}, Pull: {Num, HeadCommit, ...},
//                 User: {Username, Teams}, Workspace, Time (RFC 3339)}
//   pulls        `<vcs host>::<owner>/<repo>::<pull>` -> PullStatus
//                {Projects: [{Workspace, RepoRelDir, ProjectName, PolicyStatus, Status (int)}],
//                 Pull: {Num, HeadCommit, BaseRepo: {FullName, ...}, ...}}
//   globalLocks  `apply/lock` -> {LockMetadata: {UnixTime}, CommandName} ("Disable Apply Commands")
// Atlantis's records also hold the PR's clone URL, which may carry a token: only the fields
// named here are read, and no error quotes a value, only the key it was found under.
//
// Every record must make sense (a lock on a dir outside the repo, a pull number that is not
// one, JSON that does not parse): a file with one such record is refused whole, so an import
// is all or nothing. Where Atlantis and this server model things differently the records are
// merged, and each merge said in `notes`:
// - Atlantis locks `dir + workspace + project name`; this server locks `dir + workspace`. Two
//   Atlantis locks on one dir and workspace: the same PR's become one lock; another PR's are
//   left to the earlier lock (that PR meets the lock when it plans again).
// - A project's policy statuses (each set's result and approvals) are carried over as they are.
import { cleanRepoDir, workspaceProblem } from '../workflow/go-compat/repo-dir.js';
import { type BoltBucket, type BoltDatabase, bucketAt } from './bolt-file.js';
import type { PolicySetStatus } from '../policy/policy-results.js';
import type { ProjectPlanStatus, ProjectStatusRecord, PullStatus } from './pull-status.js';
import type { ApplyLock, LockRecord } from './state-store.js';

export class AtlantisDbError extends Error {
  override name = 'AtlantisDbError';
}

export interface ImportedPull {
  repo: string;
  pull: number;
  status: PullStatus;
}

export interface AtlantisState {
  locks: LockRecord[];
  pulls: ImportedPull[];
  applyLock: ApplyLock | undefined;
  /** Records merged or left out because this server models them differently (see the header). */
  notes: string[];
}

/** Who the imported apply lock says turned it on (Atlantis does not record who). */
export const IMPORTED_APPLY_LOCK_BY = 'Atlantis (imported)';

/** Atlantis's ProjectPlanStatus numbers, in its order (models.go), as this server names them. */
const STATUSES: ProjectPlanStatus[] = [
  'plan_errored',
  'planned',
  'planned_no_changes',
  'apply_errored',
  'applied',
  'plan_discarded',
  'policy_check_errored',
  'policy_check_passed',
];

const isStrList = (v: unknown): v is string[] => Array.isArray(v) && v.every((x) => typeof x === 'string' && x.length <= 1024);

/** A project's PolicyStatus list ([{PolicySetName, Passed, Approvals: [{Approver, Hashes}], Hashes, PolicyItemRegex}]). */
function policyStatusOf(v: unknown, at: string): PolicySetStatus[] | undefined {
  if (v === null || v === undefined) return undefined;
  if (!Array.isArray(v)) throw new AtlantisDbError(`${at}: PolicyStatus is not a list`);
  return v.map((s, i) => {
    const w = `${at} PolicyStatus[${i}]`;
    const approvals = field(s, 'Approvals');
    const hashes = field(s, 'Hashes') ?? [];
    if (typeof field(s, 'Passed') !== 'boolean' || !isStrList(hashes)) throw new AtlantisDbError(`${w}: not a policy set status`);
    if (approvals !== null && approvals !== undefined && !Array.isArray(approvals))
      throw new AtlantisDbError(`${w}: Approvals is not a list`);
    return {
      policySetName: str(s, ['PolicySetName'], w),
      passed: field(s, 'Passed') as boolean,
      hashes,
      policyItemRegex: str(s, ['PolicyItemRegex'], w, { empty: true }),
      approvals: (Array.isArray(approvals) ? approvals : []).map((a, j) => {
        const ah = field(a, 'Hashes') ?? [];
        if (!isStrList(ah)) throw new AtlantisDbError(`${w} Approvals[${j}]: Hashes is not a list of strings`);
        return { approver: str(a, ['Approver'], `${w} Approvals[${j}]`), hashes: ah };
      }),
    };
  });
}

type Obj = Record<string, unknown>;

function parseJson(value: Buffer, where: string): Obj {
  let v: unknown;
  try {
    v = JSON.parse(value.toString('utf8'));
  } catch {
    throw new AtlantisDbError(`${where}: the record is not JSON`);
  }
  if (typeof v !== 'object' || v === null || Array.isArray(v)) throw new AtlantisDbError(`${where}: the record is not a JSON object`);
  return v as Obj;
}

const field = (o: unknown, k: string): unknown => (typeof o === 'object' && o !== null ? (o as Obj)[k] : undefined);

function str(o: unknown, path: string[], where: string, opts: { empty?: boolean } = {}): string {
  const v = path.reduce<unknown>(field, o);
  if (typeof v !== 'string' || (!opts.empty && v === ''))
    throw new AtlantisDbError(`${where}: ${path.join('.')} is missing or not a string`);
  if (v.length > 1024) throw new AtlantisDbError(`${where}: ${path.join('.')} is longer than 1024 characters`);
  return v;
}

function pullNumber(o: unknown, path: string[], where: string): number {
  const v = path.reduce<unknown>(field, o);
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 0)
    throw new AtlantisDbError(`${where}: ${path.join('.')} is not a pull number`);
  return v;
}

// biome-ignore lint/suspicious/noControlCharactersInRegex: a control character in a repo name is the point (refused)
const NOT_IN_NAME = /[\s\u0000-\u001f\u007f]/;

function repoName(v: string, where: string): string {
  const segs = v.split('/');
  if (segs.length < 2 || segs.some((s) => s === '' || s === '.' || s === '..' || NOT_IN_NAME.test(s)))
    throw new AtlantisDbError(`${where}: the repo name is not owner/name`);
  return v;
}

function repoDir(v: string, where: string): string {
  const c = cleanRepoDir(v, 'refused');
  if ('refused' in c) throw new AtlantisDbError(`${where}: the project dir is refused (${c.refused})`);
  return c.dir;
}

function workspace(v: string, where: string): string {
  const why = workspaceProblem(v);
  if (why !== undefined || v === '') throw new AtlantisDbError(`${where}: the workspace name ${why ?? 'is empty'}`);
  return v;
}

function rfc3339(v: string, where: string): string {
  const t = Date.parse(v);
  if (!Number.isFinite(t) || !/^\d{4}-\d{2}-\d{2}T/.test(v)) throw new AtlantisDbError(`${where}: Time is not an RFC 3339 time`);
  return new Date(t).toISOString();
}

const keyName = (k: Buffer): string => JSON.stringify(k.toString('utf8'));

function lockOf(key: Buffer, value: Buffer): LockRecord {
  const where = `runLocks ${keyName(key)}`;
  const o = parseJson(value, where);
  const lock: LockRecord = {
    repo: repoName(str(o, ['Project', 'RepoFullName'], where), where),
    dir: repoDir(str(o, ['Project', 'Path'], where), where),
    workspace: workspace(str(o, ['Workspace'], where), where),
    pull: pullNumber(o, ['Pull', 'Num'], where),
    user: str(o, ['User', 'Username'], where, { empty: true }),
    time: rfc3339(str(o, ['Time'], where), where),
  };
  const project = field(field(o, 'Project'), 'ProjectName');
  if (project !== undefined && project !== null && typeof project !== 'string')
    throw new AtlantisDbError(`${where}: Project.ProjectName is not a string`);
  if (typeof project === 'string' && project !== '') lock.project = project;
  return lock;
}

function pullOf(key: Buffer, value: Buffer): ImportedPull {
  const where = `pulls ${keyName(key)}`;
  const o = parseJson(value, where);
  const repo = repoName(str(o, ['Pull', 'BaseRepo', 'FullName'], where), where);
  const pull = pullNumber(o, ['Pull', 'Num'], where);
  const headSha = str(o, ['Pull', 'HeadCommit'], where, { empty: true });
  const raw = field(o, 'Projects');
  if (raw !== null && raw !== undefined && !Array.isArray(raw)) throw new AtlantisDbError(`${where}: Projects is not a list`);
  const projects: ProjectStatusRecord[] = [];
  for (const [i, p] of (Array.isArray(raw) ? raw : []).entries()) {
    const at = `${where} Projects[${i}]`;
    const n = field(p, 'Status');
    const status = typeof n === 'number' && Number.isInteger(n) ? STATUSES[n] : undefined;
    if (status === undefined) throw new AtlantisDbError(`${at}: Status is not one of Atlantis's plan statuses`);
    const policyStatus = policyStatusOf(field(p, 'PolicyStatus'), at);
    projects.push({
      dir: repoDir(str(p, ['RepoRelDir'], at), at),
      workspace: workspace(str(p, ['Workspace'], at), at),
      project: str(p, ['ProjectName'], at, { empty: true }),
      status,
      ...(policyStatus && policyStatus.length > 0 ? { policyStatus } : {}),
    });
  }
  return { repo, pull, status: { headSha, projects } };
}

function applyLockOf(b: BoltBucket | undefined): ApplyLock | undefined {
  const e = b?.entries.find((x) => x.key.toString('utf8') === 'apply/lock');
  if (!e) return undefined;
  const where = 'globalLocks "apply/lock"';
  const o = parseJson(e.value, where);
  const t = field(field(o, 'LockMetadata'), 'UnixTime');
  if (typeof t !== 'number' || !Number.isSafeInteger(t)) throw new AtlantisDbError(`${where}: LockMetadata.UnixTime is not a time`);
  // Atlantis reads 0 as "not locked" (Lock.IsLocked).
  if (t === 0) return undefined;
  return { time: new Date(t * 1000).toISOString(), by: IMPORTED_APPLY_LOCK_BY };
}

const sameKey = (a: LockRecord, b: LockRecord): boolean => a.repo === b.repo && a.dir === b.dir && a.workspace === b.workspace;

/** Atlantis's state in `db`, checked record by record; throws AtlantisDbError at the first record that makes no sense. */
export function atlantisState(db: BoltDatabase): AtlantisState {
  const runLocks = bucketAt(db, 'runLocks');
  const pullsBucket = bucketAt(db, 'pulls');
  if (!runLocks && !pullsBucket) throw new AtlantisDbError('not an Atlantis database: it has neither a runLocks nor a pulls bucket');
  const notes: string[] = [];
  const locks: LockRecord[] = [];
  // The earliest lock first, so a merge keeps the one taken first.
  const all = (runLocks?.entries ?? []).map((e) => lockOf(e.key, e.value)).sort((a, b) => a.time.localeCompare(b.time));
  for (const l of all) {
    const kept = locks.find((k) => sameKey(k, l));
    if (!kept) locks.push(l);
    else if (kept.pull === l.pull)
      notes.push(
        `${l.repo} ${l.dir}/${l.workspace}: pull #${l.pull} held it for projects ${JSON.stringify(kept.project ?? '')} and ${JSON.stringify(l.project ?? '')}; one lock kept`,
      );
    else
      notes.push(
        `${l.repo} ${l.dir}/${l.workspace}: pull #${l.pull}'s lock (project ${JSON.stringify(l.project ?? '')}) left to pull #${kept.pull}'s earlier one`,
      );
  }
  locks.sort((a, b) => cmp(a.repo, b.repo) || cmp(a.dir, b.dir) || cmp(a.workspace, b.workspace));
  const pulls: ImportedPull[] = [];
  for (const e of pullsBucket?.entries ?? []) {
    const p = pullOf(e.key, e.value);
    // One pull number under two VCS hosts: only one can be this server's.
    if (pulls.some((q) => q.repo === p.repo && q.pull === p.pull)) notes.push(`${p.repo}#${p.pull}: recorded twice; the first kept`);
    else pulls.push(p);
  }
  return { locks, pulls, applyLock: applyLockOf(bucketAt(db, 'globalLocks')), notes };
}

const cmp = (a: string, b: string): number => Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8'));
