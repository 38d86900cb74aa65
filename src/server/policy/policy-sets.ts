// The server-side `policies:` block of repos.yaml, as Atlantis v0.47 reads it
// (server/core/config/raw/policies.go): the conftest version, owners (users and teams) of every
// set, the sets with their paths, owners, approve_count, sticky approvals, item regex and
// prevent_self_approve. Pure, and stricter than Atlantis where running without a check would be
// unsafe: a set's path must be inside the server's config dir (the directory of --repo-config;
// Atlantis hands a relative path to conftest in the pull request's project dir, where the PR
// could bring its own policies), and `source: github` (which Atlantis accepts but never runs,
// skipping the set) is refused.
import path from 'node:path';
import { normaliseTfVersion } from '../terraform/tf-versions.js';
import { compileItemRegex } from './policy-results.js';

export interface PolicyOwners {
  users: string[];
  teams: string[];
}

export interface PolicySet {
  name: string;
  /** Absolute, inside the config dir. */
  path: string;
  source: 'local';
  approveCount: number;
  stickyApprovals: boolean;
  policyItemRegex: string;
  owners: PolicyOwners;
  preventSelfApprove: boolean;
}

export interface PolicySets {
  /** `conftest_version`, normalised; undefined: the default (DEFAULT_CONFTEST_VERSION or PATH). */
  version?: string;
  owners: PolicyOwners;
  approveCount: number;
  stickyApprovals: boolean;
  policyItemRegex: string;
  policySets: PolicySet[];
}

/** Atlantis's default: the whole output is one item, so any change invalidates an approval. */
export const DEFAULT_POLICY_ITEM_REGEX = '(?s).+';

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);

const TOP_KEYS = ['conftest_version', 'owners', 'policy_sets', 'sticky_policy_approvals', 'policy_item_regex', 'approve_count'];
const SET_KEYS = [
  'path',
  'source',
  'name',
  'owners',
  'approve_count',
  'sticky_policy_approvals',
  'policy_item_regex',
  'prevent_self_approve',
];

export interface PolicyProblem {
  where: string;
  problem: string;
}

function keysOf(o: Obj, allowed: string[], where: string, out: PolicyProblem[]): void {
  for (const k of Object.keys(o)) if (!allowed.includes(k)) out.push({ where: `${where}.${k}`, problem: 'unknown key' });
}

function owners(v: unknown, where: string, out: PolicyProblem[]): PolicyOwners {
  const o: PolicyOwners = { users: [], teams: [] };
  if (v === undefined || v === null) return o;
  if (!isObj(v)) {
    out.push({ where, problem: 'must be a map with users and teams' });
    return o;
  }
  keysOf(v, ['users', 'teams'], where, out);
  for (const k of ['users', 'teams'] as const) {
    const list = v[k];
    if (list === undefined || list === null) continue;
    if (!Array.isArray(list) || !list.every((x) => typeof x === 'string' && x !== ''))
      out.push({ where: `${where}.${k}`, problem: 'must be a list of names' });
    else o[k] = list as string[];
  }
  return o;
}

function int(v: unknown, where: string, out: PolicyProblem[]): number {
  if (v === undefined || v === null) return 0;
  if (typeof v !== 'number' || !Number.isInteger(v)) {
    out.push({ where, problem: 'must be a whole number' });
    return 0;
  }
  return v;
}

function bool(v: unknown, where: string, out: PolicyProblem[]): boolean | undefined {
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'boolean') {
    out.push({ where, problem: 'must be true or false' });
    return undefined;
  }
  return v;
}

function itemRegex(v: unknown, where: string, out: PolicyProblem[]): string | undefined {
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'string') {
    out.push({ where, problem: 'must be a string' });
    return undefined;
  }
  try {
    compileItemRegex(v);
  } catch (e) {
    out.push({ where, problem: `invalid regex: ${(e as Error).message}` });
    return undefined;
  }
  return v;
}

/**
 * Whether `target` is `dir` or inside it, by path (symlinks are the caller's, which resolves
 * them first); `..` never escapes.
 */
export function insideDir(dir: string, target: string): boolean {
  const rel = path.relative(dir, target);
  return rel === '' || (!rel.startsWith('..') && !path.isAbsolute(rel));
}

/**
 * Parses the `policies:` map. `configDir`: where relative paths start and what every path
 * must stay inside (the --repo-config file's directory). Problems are returned, not thrown.
 */
export function parsePolicySets(raw: unknown, configDir: string, where = 'policies'): { sets?: PolicySets; problems: PolicyProblem[] } {
  const out: PolicyProblem[] = [];
  if (raw === undefined || raw === null) return { problems: out };
  if (!isObj(raw)) return { problems: [{ where, problem: 'must be a map' }] };
  keysOf(raw, TOP_KEYS, where, out);
  let version: string | undefined;
  if (raw.conftest_version !== undefined && raw.conftest_version !== null) {
    const v =
      typeof raw.conftest_version === 'string' || typeof raw.conftest_version === 'number'
        ? normaliseTfVersion(String(raw.conftest_version))
        : null;
    if (v === null)
      out.push({ where: `${where}.conftest_version`, problem: `version "${String(raw.conftest_version)}" could not be parsed` });
    else version = v;
  }
  const topCount = int(raw.approve_count, `${where}.approve_count`, out);
  // As Atlantis: 0 or less means 1.
  const approveCount = topCount <= 0 ? 1 : topCount;
  const stickyApprovals = bool(raw.sticky_policy_approvals, `${where}.sticky_policy_approvals`, out) ?? false;
  const policyItemRegex = itemRegex(raw.policy_item_regex, `${where}.policy_item_regex`, out) ?? DEFAULT_POLICY_ITEM_REGEX;
  const top: PolicySets = {
    owners: owners(raw.owners, `${where}.owners`, out),
    approveCount,
    stickyApprovals,
    policyItemRegex,
    policySets: [],
    ...(version ? { version } : {}),
  };
  const list = raw.policy_sets;
  if (!Array.isArray(list) || list.length === 0) {
    out.push({ where: `${where}.policy_sets`, problem: 'cannot be empty; Declare policies that you would like to enforce' });
    return { problems: out };
  }
  const names = new Set<string>();
  list.forEach((s, i) => {
    const at = `${where}.policy_sets[${i}]`;
    if (!isObj(s)) {
      out.push({ where: at, problem: 'must be a map' });
      return;
    }
    keysOf(s, SET_KEYS, at, out);
    const name = typeof s.name === 'string' ? s.name : '';
    if (name === '') out.push({ where: `${at}.name`, problem: 'is required' });
    else if (names.has(name)) out.push({ where: `${at}.name`, problem: `another policy set is named ${JSON.stringify(name)}` });
    names.add(name);
    const source = s.source ?? 'local';
    if (source === 'github')
      out.push({
        where: `${at}.source`,
        problem: 'github policy sets are not supported (Atlantis accepts them but never runs them); use source: local',
      });
    else if (source !== 'local') out.push({ where: `${at}.source`, problem: "only 'local' and 'github' source types are supported" });
    let p = '';
    if (typeof s.path !== 'string' || s.path === '') out.push({ where: `${at}.path`, problem: 'is required' });
    else {
      p = path.resolve(configDir, s.path);
      if (!insideDir(configDir, p))
        out.push({
          where: `${at}.path`,
          problem: `${JSON.stringify(s.path)} is outside the server's config dir ${configDir} (the directory of --repo-config)`,
        });
    }
    const count = int(s.approve_count, `${at}.approve_count`, out);
    const sticky = bool(s.sticky_policy_approvals, `${at}.sticky_policy_approvals`, out);
    top.policySets.push({
      name,
      path: p,
      source: 'local',
      approveCount: count <= 0 ? approveCount : count,
      stickyApprovals: sticky ?? stickyApprovals,
      policyItemRegex: itemRegex(s.policy_item_regex, `${at}.policy_item_regex`, out) ?? policyItemRegex,
      owners: owners(s.owners, `${at}.owners`, out),
      preventSelfApprove: bool(s.prevent_self_approve, `${at}.prevent_self_approve`, out) ?? false,
    });
  });
  return out.length > 0 ? { problems: out } : { sets: top, problems: out };
}

/** Atlantis's IsOwner: a user named (any case), or in a team named (any case). */
export function isOwner(o: PolicyOwners, user: string, userTeams: readonly string[]): boolean {
  const u = user.toLowerCase();
  if (o.users.some((x) => x.toLowerCase() === u)) return true;
  return o.teams.some((t) => userTeams.some((ut) => ut.toLowerCase() === t.toLowerCase()));
}

/** Every team named as an owner, the top level's first, each once (Atlantis's AllTeams). */
export function ownerTeams(s: PolicySets): string[] {
  const teams = [...s.owners.teams];
  for (const set of s.policySets) for (const t of set.owners.teams) if (!teams.includes(t)) teams.push(t);
  return teams;
}

/** Whether any level names a team (only then are the commenter's teams asked for). */
export function hasTeamOwners(s: PolicySets): boolean {
  return s.owners.teams.length > 0 || s.policySets.some((p) => p.owners.teams.length > 0);
}
