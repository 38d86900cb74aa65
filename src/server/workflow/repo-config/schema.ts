// The validation both YAML schemas share: problems collected with their place, key checks
// (unknown keys refused; what each known key means here is in keys.ts), and the workflows,
// steps and requirements that both files may declare. Pure.
import YAML from 'yaml';
import { type UnsupportedKey, WORKFLOW_KEYS, judgeKeys } from './keys.js';
import { type Obj, type Problems, isObj } from './problems.js';
import {
  APPLY_REQUIREMENTS,
  type ApplyRequirement,
  BUILTIN_STEPS,
  type BuiltinStepName,
  DEFAULT_WORKFLOW,
  type Step,
  type Workflow,
  RepoConfigError,
} from './types.js';

export { type Obj, Problems, isObj } from './problems.js';

/** The YAML document of `file` as plain data; duplicate keys and syntax errors are refused. */
export function readYaml(text: string, file: string): unknown {
  // merge: YAML merge keys (<<: *anchor), which Atlantis's YAML library reads too.
  const doc = YAML.parseDocument(text, { uniqueKeys: true, merge: true });
  if (doc.errors.length > 0)
    throw new RepoConfigError(
      file,
      doc.errors.map((e) => `YAML: ${e.message.split('\n')[0]}`),
    );
  return doc.toJS();
}

/** Checks a map's keys against a fixed list (nested maps with no unsupported keys of their own). */
export function checkKeys(o: Obj, known: readonly string[], where: string, p: Problems): void {
  for (const k of Object.keys(o)) if (!known.includes(k)) p.add(where, `unknown key ${JSON.stringify(k)}`);
}

export function strList(v: unknown, where: string, p: Problems): string[] | undefined {
  if (v === undefined || v === null) return undefined;
  if (!Array.isArray(v) || !v.every((x) => typeof x === 'string')) {
    p.add(where, 'must be a list of strings');
    return undefined;
  }
  return v as string[];
}

const STEP_NAMES = [...BUILTIN_STEPS, 'policy_check', 'run', 'env', 'multienv'];

/** A run step's `output`: one of Atlantis's words, or a list of them (filter_regex is refused). */
function parseOutput(v: unknown, where: string, p: Problems, found: UnsupportedKey[]): 'show' | 'hide' | 'strip_refreshing' | undefined {
  const words = ['show', 'hide', 'strip_refreshing'];
  const list = Array.isArray(v) ? v : [v];
  let out: 'show' | 'hide' | 'strip_refreshing' | undefined;
  for (const item of list) {
    if (typeof item === 'string' && words.includes(item)) out = item as typeof out;
    else if (isObj(item) && Object.keys(item).length === 1 && typeof item.filter_regex === 'string') {
      // Masks text in comments: going on without it would show what the repo hides.
      found.push({ key: `${where}.filter_regex`, kind: 'refused', why: 'filter_regex output filters are not implemented' });
    } else {
      p.add(where, 'run step "output" option must be one of "show", "hide", "strip_refreshing", or "filter_regex"');
      return undefined;
    }
  }
  if (Array.isArray(v) && v.filter((x) => typeof x === 'string').length > 1)
    found.push({ key: where, kind: 'refused', why: 'a list of several output options is not implemented; give one' });
  return out;
}

/** shell / shellArgs of a run or env step, as Atlantis checks them. */
function parseShell(body: Obj, name: string, where: string, p: Problems): { shell?: string; shellArgs?: string[] } {
  const out: { shell?: string; shellArgs?: string[] } = {};
  if (body.shell !== undefined && body.command === undefined)
    p.add(where, 'workflow steps only support "shell" key in combination with "command" key');
  if (body.shellArgs !== undefined && body.shell === undefined)
    p.add(where, 'workflow steps only support "shellArgs" key in combination with "shell" key');
  if (body.shell !== undefined) {
    if (typeof body.shell === 'string') out.shell = body.shell;
    else p.add(`${where}.shell`, 'must be a string');
  }
  if (body.shellArgs !== undefined) {
    if (typeof body.shellArgs === 'string') out.shellArgs = body.shellArgs.split(' ');
    else if (Array.isArray(body.shellArgs) && body.shellArgs.every((x) => typeof x === 'string'))
      out.shellArgs = body.shellArgs as string[];
    else p.add(`${where}.shellArgs`, `"${name}" step "shellArgs" option must be a string or a list of strings`);
  }
  return out;
}

function parseStep(v: unknown, where: string, p: Problems, found: UnsupportedKey[]): Step | undefined {
  if (typeof v === 'string') {
    if (BUILTIN_STEPS.includes(v)) return { kind: v as BuiltinStepName, extraArgs: [] };
    if (v === 'run' || v === 'env' || v === 'multienv') p.add(where, `step ${JSON.stringify(v)} needs a value`);
    else p.add(where, `${JSON.stringify(v)} is not a valid step type, maybe you omitted the 'run' key`);
    return undefined;
  }
  if (!isObj(v) || Object.keys(v).length !== 1) {
    p.add(where, 'a step is a step name, or a map with exactly one key');
    return undefined;
  }
  const [name, body] = Object.entries(v)[0] as [string, unknown];
  if (BUILTIN_STEPS.includes(name)) {
    if (body !== null && body !== undefined && !isObj(body)) {
      p.add(`${where}.${name}`, 'must be a map with extra_args');
      return undefined;
    }
    const b = (body ?? {}) as Obj;
    for (const k of Object.keys(b)) if (k !== 'extra_args') p.add(`${where}.${name}`, `unknown key ${JSON.stringify(k)}`);
    const extraArgs = strList(b.extra_args, `${where}.${name}.extra_args`, p) ?? [];
    return { kind: name as BuiltinStepName, extraArgs };
  }
  const wh = `${where}.${name}`;
  if (name === 'run') {
    if (typeof body === 'string') {
      if (body.trim() === '') p.add(wh, 'cannot be empty');
      return { kind: 'run', command: body };
    }
    if (isObj(body)) {
      const step: Step = { kind: 'run', command: '', ...parseShell(body, name, wh, p) };
      if (typeof body.command !== 'string' || body.command.trim() === '') p.add(`${wh}.command`, 'is required');
      else step.command = body.command;
      if (body.output !== undefined) {
        const o = parseOutput(body.output, `${wh}.output`, p, found);
        if (o) step.output = o;
      }
      checkKeys(body, ['command', 'shell', 'shellArgs', 'output'], wh, p);
      return step;
    }
    p.add(wh, 'must be a command string or a map with command');
    return undefined;
  }
  if (name === 'env') {
    if (!isObj(body) || typeof body.name !== 'string' || body.name === '') {
      p.add(wh, 'env steps must have a "name" key set');
      return undefined;
    }
    checkKeys(body, ['name', 'value', 'command', 'shell', 'shellArgs'], wh, p);
    const hasValue = typeof body.value === 'string';
    const hasCommand = typeof body.command === 'string';
    if (hasValue && hasCommand) p.add(wh, 'env steps only support one of the "value" or "command" keys, found both');
    else if (!hasValue && !hasCommand) p.add(wh, 'env steps need a "value" or a "command" key');
    const step: Step = { kind: 'env', name: body.name, ...parseShell(body, name, wh, p) };
    if (hasValue) step.value = body.value as string;
    if (hasCommand) step.command = body.command as string;
    return step;
  }
  if (name === 'multienv') {
    if (typeof body !== 'string' && (!isObj(body) || typeof body.command !== 'string'))
      p.add(wh, '"multienv" step must have a "command" key set');
    // Later steps would run without the variables it sets.
    else found.push({ key: wh, kind: 'refused', why: 'multienv steps are not implemented' });
    return undefined;
  }
  p.add(where, `${JSON.stringify(name)} is not a valid step type; valid steps: ${STEP_NAMES.join(', ')}`);
  return undefined;
}

function parseStage(v: unknown, where: string, p: Problems, fallback: Step[], found: UnsupportedKey[]): Step[] {
  if (v === undefined || v === null) return fallback;
  if (!isObj(v)) {
    p.add(where, 'must be a map with steps');
    return fallback;
  }
  for (const k of Object.keys(v)) if (k !== 'steps') p.add(where, `unknown key ${JSON.stringify(k)}`);
  if (v.steps === undefined || v.steps === null) return [];
  if (!Array.isArray(v.steps)) {
    p.add(`${where}.steps`, 'must be a list');
    return fallback;
  }
  const steps: Step[] = [];
  v.steps.forEach((s, i) => {
    const st = parseStep(s, `${where}.steps[${i}]`, p, found);
    if (st) steps.push(st);
  });
  return steps;
}

/** The workflows of either file. Unsupported keys and steps are added to `found`. */
export function parseWorkflows(v: unknown, where: string, p: Problems, found: UnsupportedKey[]): Record<string, Workflow> {
  const out: Record<string, Workflow> = {};
  if (v === undefined || v === null) return out;
  if (!isObj(v)) {
    p.add(where, 'must be a map of workflow name to workflow');
    return out;
  }
  for (const [name, w] of Object.entries(v)) {
    const wh = `${where}.${name}`;
    if (w === null || w === undefined) {
      out[name] = { ...DEFAULT_WORKFLOW, name };
      continue;
    }
    if (!isObj(w)) {
      p.add(wh, 'must be a map with plan and apply');
      continue;
    }
    found.push(...judgeKeys(w, WORKFLOW_KEYS, wh, p));
    const wf: Workflow = {
      name,
      plan: parseStage(w.plan, `${wh}.plan`, p, DEFAULT_WORKFLOW.plan, found),
      apply: parseStage(w.apply, `${wh}.apply`, p, DEFAULT_WORKFLOW.apply, found),
    };
    // An empty `import:` keeps Atlantis's default stage, as a null stage does there.
    if (w.import !== undefined && w.import !== null) wf.import = parseStage(w.import, `${wh}.import`, p, [], found);
    if (w.state_rm !== undefined && w.state_rm !== null) wf.stateRm = parseStage(w.state_rm, `${wh}.state_rm`, p, [], found);
    if (w.policy_check !== undefined && w.policy_check !== null)
      wf.policyCheck = parseStage(w.policy_check, `${wh}.policy_check`, p, [], found);
    out[name] = wf;
  }
  return out;
}

/** apply_requirements (and, with `kind`, plan_ and import_requirements), with Atlantis's text. */
export function parseApplyRequirements(v: unknown, where: string, p: Problems, kind = 'apply'): ApplyRequirement[] | undefined {
  const list = strList(v, where, p);
  if (!list) return undefined;
  for (const r of list) {
    if (!APPLY_REQUIREMENTS.includes(r))
      p.add(where, `${JSON.stringify(r)} is not a valid ${kind}_requirement, only "approved", "mergeable" and "undiverged" are supported`);
  }
  return list.filter((r) => APPLY_REQUIREMENTS.includes(r)) as ApplyRequirement[];
}

/** Shapes of the keys no parser here reads (not implemented, or no effect): accepted only when well-formed. */
const BOOL = (v: unknown) => typeof v === 'boolean';
const STR = (v: unknown) => typeof v === 'string';
const STR_LIST = (v: unknown) => Array.isArray(v) && v.every((x) => typeof x === 'string');
const MAP = (v: unknown) => isObj(v);
const SHAPES: Record<string, [check: (v: unknown) => boolean, what: string]> = {
  policy_check: [BOOL, 'must be true or false'],
  custom_policy_check: [BOOL, 'must be true or false'],
  emoji_reaction: [STR, 'must be a string'],
  allowed_regexp_prefixes: [STR_LIST, 'must be a list of strings'],
  silence_pr_comments: [STR_LIST, 'must be a list of strings'],
  policies: [MAP, 'must be a map'],
  autodiscover: [MAP, 'must be a map with mode and ignore_paths'],
};

export function checkShapes(o: Record<string, unknown>, where: string, p: Problems): void {
  for (const [k, v] of Object.entries(o)) {
    const shape = SHAPES[k];
    if (shape && v !== null && !shape[0](v)) p.add(where ? `${where}.${k}` : k, shape[1]);
  }
  if (isObj(o.autodiscover)) {
    const w = `${where ? `${where}.` : ''}autodiscover`;
    checkKeys(o.autodiscover, ['mode', 'ignore_paths'], w, p);
    const m = o.autodiscover.mode;
    if (m !== undefined && m !== null && !['auto', 'enabled', 'disabled'].includes(m as string))
      p.add(`${w}.mode`, 'must be a valid value');
    strList(o.autodiscover.ignore_paths, `${w}.ignore_paths`, p);
  }
  if (isObj(o.policies))
    checkKeys(
      o.policies,
      ['conftest_version', 'owners', 'policy_sets', 'sticky_policy_approvals', 'policy_item_regex', 'approve_count'],
      `${where ? `${where}.` : ''}policies`,
      p,
    );
}
