// The validation both YAML schemas share: problems collected with their place, key checks
// (unknown keys refused, keys Atlantis knows but this server ignores warned about), and the
// workflows, steps and apply requirements that both files may declare. Pure.
import YAML from 'yaml';
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

export type Obj = Record<string, unknown>;

/** The YAML document of `file` as plain data; duplicate keys and syntax errors are refused. */
export function readYaml(text: string, file: string): unknown {
  const doc = YAML.parseDocument(text, { uniqueKeys: true });
  if (doc.errors.length > 0)
    throw new RepoConfigError(
      file,
      doc.errors.map((e) => `YAML: ${e.message.split('\n')[0]}`),
    );
  return doc.toJS();
}

export class Problems {
  readonly list: string[] = [];
  add(where: string, msg: string): void {
    this.list.push(where ? `${where}: ${msg}` : msg);
  }
}

export function isObj(v: unknown): v is Obj {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

export function checkKeys(
  o: Obj,
  known: readonly string[],
  ignored: readonly string[],
  where: string,
  p: Problems,
  warnings: string[],
): void {
  for (const k of Object.keys(o)) {
    if (known.includes(k)) continue;
    if (ignored.includes(k)) {
      warnings.push(`${where ? where + '.' : ''}${k} is not supported by this server and is ignored`);
      continue;
    }
    p.add(where, `unknown key ${JSON.stringify(k)}`);
  }
}

export function strList(v: unknown, where: string, p: Problems): string[] | undefined {
  if (v === undefined || v === null) return undefined;
  if (!Array.isArray(v) || !v.every((x) => typeof x === 'string')) {
    p.add(where, 'must be a list of strings');
    return undefined;
  }
  return v as string[];
}

function parseStep(v: unknown, where: string, p: Problems): Step | undefined {
  if (typeof v === 'string') {
    if (BUILTIN_STEPS.includes(v)) return { kind: v as BuiltinStepName, extraArgs: [] };
    if (v === 'run' || v === 'env') p.add(where, `step ${JSON.stringify(v)} needs a value`);
    else p.add(where, `unknown step ${JSON.stringify(v)}; valid steps: ${[...BUILTIN_STEPS, 'run', 'env'].join(', ')}`);
    return undefined;
  }
  if (!isObj(v) || Object.keys(v).length !== 1) {
    p.add(where, 'a step is a step name, or a map with exactly one key');
    return undefined;
  }
  const [name, body] = Object.entries(v)[0] as [string, unknown];
  if (BUILTIN_STEPS.includes(name)) {
    if (body === null || body === undefined) return { kind: name as BuiltinStepName, extraArgs: [] };
    if (!isObj(body)) {
      p.add(`${where}.${name}`, 'must be a map with extra_args');
      return undefined;
    }
    for (const k of Object.keys(body)) if (k !== 'extra_args') p.add(`${where}.${name}`, `unknown key ${JSON.stringify(k)}`);
    return { kind: name as BuiltinStepName, extraArgs: strList(body.extra_args, `${where}.${name}.extra_args`, p) ?? [] };
  }
  if (name === 'run') {
    if (typeof body === 'string') {
      if (body.trim() === '') p.add(`${where}.run`, 'cannot be empty');
      return { kind: 'run', command: body };
    }
    if (isObj(body)) {
      const step: Step = { kind: 'run', command: '' };
      if (typeof body.command !== 'string' || body.command.trim() === '') p.add(`${where}.run.command`, 'is required');
      else step.command = body.command;
      if (body.shell !== undefined) {
        if (typeof body.shell === 'string') step.shell = body.shell;
        else p.add(`${where}.run.shell`, 'must be a string');
      }
      if (body.shellArgs !== undefined) {
        const sa = typeof body.shellArgs === 'string' ? [body.shellArgs] : strList(body.shellArgs, `${where}.run.shellArgs`, p);
        if (sa) step.shellArgs = sa;
      }
      if (body.output !== undefined) {
        if (body.output === 'show' || body.output === 'hide' || body.output === 'strip_refreshing') step.output = body.output;
        else p.add(`${where}.run.output`, 'must be show, hide or strip_refreshing');
      }
      for (const k of Object.keys(body))
        if (!['command', 'shell', 'shellArgs', 'output'].includes(k)) p.add(`${where}.run`, `unknown key ${JSON.stringify(k)}`);
      return step;
    }
    p.add(`${where}.run`, 'must be a command string or a map with command');
    return undefined;
  }
  if (name === 'env') {
    if (!isObj(body) || typeof body.name !== 'string' || body.name === '') {
      p.add(`${where}.env`, 'needs a name');
      return undefined;
    }
    const hasValue = typeof body.value === 'string';
    const hasCommand = typeof body.command === 'string';
    if (hasValue === hasCommand) p.add(`${where}.env`, 'needs exactly one of value or command');
    const step: Step = { kind: 'env', name: body.name };
    if (hasValue) step.value = body.value as string;
    if (hasCommand) step.command = body.command as string;
    return step;
  }
  p.add(where, `unknown step ${JSON.stringify(name)}; valid steps: ${[...BUILTIN_STEPS, 'run', 'env'].join(', ')}`);
  return undefined;
}

function parseStage(v: unknown, where: string, p: Problems, fallback: Step[]): Step[] {
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
    const st = parseStep(s, `${where}.steps[${i}]`, p);
    if (st) steps.push(st);
  });
  return steps;
}

export function parseWorkflows(v: unknown, where: string, p: Problems, warnings: string[]): Record<string, Workflow> {
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
    checkKeys(w, ['plan', 'apply'], ['policy_check', 'import', 'state_rm'], wh, p, warnings);
    out[name] = {
      name,
      plan: parseStage(w.plan, `${wh}.plan`, p, DEFAULT_WORKFLOW.plan),
      apply: parseStage(w.apply, `${wh}.apply`, p, DEFAULT_WORKFLOW.apply),
    };
  }
  return out;
}

/** apply_requirements, plan_requirements or import_requirements (`kind` names it in the error, as Atlantis). */
export function parseApplyRequirements(
  v: unknown,
  where: string,
  p: Problems,
  kind: 'apply_requirement' | 'plan_requirement' | 'import_requirement' = 'apply_requirement',
): ApplyRequirement[] | undefined {
  const list = strList(v, where, p);
  if (!list) return undefined;
  for (const r of list) {
    if (!APPLY_REQUIREMENTS.includes(r))
      p.add(where, `${JSON.stringify(r)} is not a valid ${kind}, only "approved", "mergeable" and "undiverged" are supported`);
  }
  return list.filter((r) => APPLY_REQUIREMENTS.includes(r)) as ApplyRequirement[];
}
