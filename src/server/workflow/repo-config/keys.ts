// Every key Atlantis v0.47 accepts in atlantis.yaml and in the server-side repos.yaml (from
// its raw config structs, server/core/config/raw/*.go), and what this server does with each,
// as data. Nothing is dropped silently:
// - here: implemented;
// - no-effect: Atlantis gives it no effect either (e.g. a repo's emoji_reaction), accepted;
// - notice: not implemented, nothing unsafe in going on without it: a repo's command runs
//   and the PR gets one comment naming the key; in repos.yaml the server does not start;
// - refused: not implemented, and going on without it would change what runs or show what it
//   hides: the command fails naming the key; in repos.yaml the server does not start.
// A key of kind notice/refused whose value is what this server does anyway (`policy_check:
// false`, `autodiscover: {mode: auto}`) counts as implemented. Keys not listed are unknown,
// which Atlantis refuses too (it decodes with KnownFields). Pure.
import type { Obj, Problems } from './problems.js';

export type KeySupport =
  | { kind: 'here' }
  | { kind: 'no-effect'; why: string }
  | { kind: 'notice'; why: string }
  | { kind: 'refused'; why: string };

export interface KeyRule {
  support: KeySupport;
  /** A value that asks for nothing beyond what this server does: then the key counts as here. */
  sameAsHere?: (v: unknown) => boolean;
}

const here: KeyRule = { support: { kind: 'here' } };
const noEffect = (why: string): KeyRule => ({ support: { kind: 'no-effect', why } });
const notice = (why: string, sameAsHere?: KeyRule['sameAsHere']): KeyRule => ({ support: { kind: 'notice', why }, sameAsHere });
const refused = (why: string, sameAsHere?: KeyRule['sameAsHere']): KeyRule => ({ support: { kind: 'refused', why }, sameAsHere });

const isEmptyList = (v: unknown) => v === null || (Array.isArray(v) && v.length === 0);
/** `autodiscover: {mode: auto}` with no ignore_paths is how projects are found here anyway. */
const autodiscoverAsHere = (v: unknown) =>
  v === null ||
  (typeof v === 'object' &&
    !Array.isArray(v) &&
    ((v as Obj).mode === undefined || (v as Obj).mode === null || (v as Obj).mode === 'auto') &&
    isEmptyListOrUnset((v as Obj).ignore_paths));
const isEmptyListOrUnset = (v: unknown) => v === undefined || isEmptyList(v);

/** atlantis.yaml, top level (raw.RepoCfg). */
export const REPO_TOP_KEYS: Readonly<Record<string, KeyRule>> = {
  version: here,
  projects: here,
  workflows: here,
  policies: noEffect("Atlantis reads policies only from the server-side config; a repo's are not used"),
  autodiscover: refused('autodiscover modes other than auto (and ignore_paths) are not implemented', autodiscoverAsHere),
  automerge: here,
  parallel_apply: here,
  parallel_plan: here,
  delete_source_branch_on_merge: here,
  emoji_reaction: noEffect("Atlantis reacts with --emoji-reaction's emoji; the repo's key is not used"),
  allowed_regexp_prefixes: here,
  abort_on_execution_order_fail: here,
  repo_locks: here,
  silence_pr_comments: notice('silencing plan/apply comments is not implemented; they are posted', isEmptyList),
};

/** atlantis.yaml, one project (raw.Project). */
export const REPO_PROJECT_KEYS: Readonly<Record<string, KeyRule>> = {
  name: here,
  branch: here,
  dir: here,
  workspace: here,
  workflow: here,
  terraform_distribution: here,
  terraform_version: here,
  autoplan: here,
  plan_requirements: here,
  apply_requirements: here,
  import_requirements: here,
  depends_on: here,
  delete_source_branch_on_merge: here,
  repo_locking: here,
  repo_locks: here,
  execution_order_group: here,
  policy_check: here,
  custom_policy_check: here,
  silence_pr_comments: notice('silencing plan/apply comments is not implemented; they are posted', isEmptyList),
};

/** A workflow, in either file (raw.Workflow). */
export const WORKFLOW_KEYS: Readonly<Record<string, KeyRule>> = {
  plan: here,
  apply: here,
  policy_check: here,
  import: here,
  state_rm: here,
};

/** repos.yaml, top level (raw.GlobalCfg). */
export const SERVER_TOP_KEYS: Readonly<Record<string, KeyRule>> = {
  repos: here,
  workflows: here,
  policies: here,
  metrics: refused('metrics go to /metrics only (statsd and other endpoints are not implemented)', (v) => metricsAsHere(v)),
  team_authz: refused('an external team authorization command is not implemented (use --gh-team-allowlist)'),
  external_stores: refused('plans are kept in --data-dir (external plan stores are not implemented)', (v) => planStoreAsHere(v)),
};

/** repos.yaml, one repo (raw.Repo). */
export const SERVER_REPO_KEYS: Readonly<Record<string, KeyRule>> = {
  id: here,
  branch: here,
  repo_config_file: here,
  plan_requirements: here,
  apply_requirements: here,
  import_requirements: here,
  pre_workflow_hooks: here,
  workflow: here,
  post_workflow_hooks: here,
  allowed_workflows: here,
  allowed_overrides: here,
  allow_custom_workflows: here,
  delete_source_branch_on_merge: here,
  repo_locking: here,
  repo_locks: here,
  policy_check: here,
  custom_policy_check: here,
  autodiscover: refused('autodiscover modes other than auto (and ignore_paths) are not implemented', autodiscoverAsHere),
  silence_pr_comments: refused('silencing plan/apply comments is not implemented', isEmptyList),
};

function metricsAsHere(v: unknown): boolean {
  if (v === null) return true;
  if (typeof v !== 'object' || Array.isArray(v)) return false;
  const m = v as Obj;
  if (m.statsd !== undefined && m.statsd !== null) return false;
  const p = m.prometheus;
  return p === undefined || p === null || (typeof p === 'object' && (p as Obj).endpoint === '/metrics');
}

function planStoreAsHere(v: unknown): boolean {
  if (v === null) return true;
  if (typeof v !== 'object' || Array.isArray(v)) return false;
  const ps = (v as Obj).plan_store;
  return ps === undefined || ps === null || (typeof ps === 'object' && ((ps as Obj).type === undefined || (ps as Obj).type === ''));
}

/** A key set to something this server does not do. */
export interface UnsupportedKey {
  /** Its place, e.g. `projects[0].silence_pr_comments`. */
  key: string;
  kind: 'notice' | 'refused';
  why: string;
}

/**
 * Checks the keys of one map against its table: unknown keys are problems (as in Atlantis);
 * keys set to what this server does not implement are returned.
 */
export function judgeKeys(o: Obj, table: Readonly<Record<string, KeyRule>>, where: string, p: Problems): UnsupportedKey[] {
  const out: UnsupportedKey[] = [];
  for (const [k, v] of Object.entries(o)) {
    const rule = Object.hasOwn(table, k) ? table[k] : undefined;
    if (!rule) {
      p.add(where, `unknown key ${JSON.stringify(k)}`);
      continue;
    }
    const s = rule.support;
    if ((s.kind === 'notice' || s.kind === 'refused') && !rule.sameAsHere?.(v))
      out.push({ key: where ? `${where}.${k}` : k, kind: s.kind, why: s.why });
  }
  return out;
}

/** The one PR comment about keys of atlantis.yaml this server goes on without (our wording: Atlantis has no such case). */
export function unsupportedKeysComment(file: string, keys: readonly UnsupportedKey[]): string {
  const lines = keys.map((k) => `- \`${k.key}\`: ${k.why}`);
  return `**Warning**: \`${file}\` sets keys this server does not implement; the command ran without them:\n\n${lines.join('\n')}`;
}

/** The error of a command refused because atlantis.yaml asks for what is not implemented. */
export function refusedKeysError(file: string, keys: readonly UnsupportedKey[]): string {
  return `${file}: ${keys.map((k) => `${k.key}: not supported by this server: ${k.why}`).join('; ')}`;
}

/** Remembers what was said, so the notice is posted once per PR commit (bounded memory). */
export class SaidOnce {
  private readonly said = new Set<string>();
  constructor(private readonly max = 1000) {}
  /** True the first time `key` is seen. */
  first(key: string): boolean {
    if (this.said.has(key)) return false;
    this.said.add(key);
    if (this.said.size > this.max) this.said.delete(this.said.values().next().value as string);
    return true;
  }
}
