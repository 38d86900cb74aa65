// Reading a chart's values as Helm does: YAML 1.1 (Helm reads `yes` and `on` as true), later
// files merged over earlier ones and all over the chart's defaults (maps merged key by key,
// anything else replaced, a null removing the default), then read through `Values`, which
// checks each value's type as the chart's values.schema.json does and remembers which values
// were read, so that a value no mapping looks at is reported rather than dropped.
//
// No message here ever holds a value: values files hold tokens and passwords.
import { LineCounter, parseDocument } from 'yaml';

export type Json = null | boolean | number | string | Json[] | { [k: string]: Json };
export type Obj = { [k: string]: Json };

/** A values file that cannot be converted: not YAML, not a mapping, a value of the wrong type. Exit code 1. */
export class ValuesError extends Error {}

export const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Go templates' truth: false, 0, "", null and an empty map or list are false. */
export function truthy(v: Json | undefined): boolean {
  if (v === undefined || v === null || v === false || v === 0 || v === '') return false;
  if (Array.isArray(v)) return v.length > 0;
  if (isObj(v)) return Object.keys(v).length > 0;
  return true;
}

/** What a value is, for a message that must not show it. */
export function kindOf(v: Json | undefined): string {
  if (v === undefined || v === null) return 'nothing';
  if (Array.isArray(v)) return 'a list';
  if (isObj(v)) return 'a mapping';
  if (typeof v === 'string') return 'a string';
  if (typeof v === 'boolean') return 'a boolean';
  return Number.isInteger(v) ? 'an integer' : 'a number';
}

/** Parses one values file: a YAML mapping (an empty file is no values). Errors name the line, never its text. */
export function parseValues(text: string, file: string): Obj {
  const lines = new LineCounter();
  const doc = parseDocument(text, { version: '1.1', prettyErrors: false, uniqueKeys: false, lineCounter: lines });
  const err = doc.errors[0];
  if (err) {
    const at = lines.linePos(err.pos[0]);
    throw new ValuesError(`${file}:${at.line}:${at.col}: not valid YAML (${err.code})`);
  }
  let v: unknown;
  try {
    v = doc.toJS({ maxAliasCount: 100 });
  } catch (e) {
    throw new ValuesError(`${file}: not valid YAML (${(e as Error).message.split('\n')[0]})`);
  }
  if (v === null || v === undefined) return {};
  if (!isObj(v)) throw new ValuesError(`${file}: the values must be a YAML mapping (key: value), not ${kindOf(v as Json)}`);
  return v;
}

/** Helm's merge of values: `over` wins; maps are merged key by key; a null in `over` removes the key. */
export function coalesce(base: Obj, over: Obj): Obj {
  const out: Obj = { ...base };
  for (const [k, v] of Object.entries(over)) {
    if (v === null) delete out[k];
    else if (isObj(v) && isObj(out[k])) out[k] = coalesce(out[k] as Obj, v);
    else out[k] = v;
  }
  return out;
}

function deepEqual(a: Json | undefined, b: Json | undefined): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}

export type Path = readonly string[];
/** A path as the docs and the report write it: `service.type`, `environment.FOO`, `extraArgs[2]`. */
export const show = (p: Path): string => p.map((k, i) => (/^\[\d+\]$/.test(k) ? k : i === 0 ? k : `.${k}`)).join('');

/** The effective values (the chart's defaults under the given ones), read with type checks. */
export class Values {
  private readonly read = new Set<string>();
  /** Every path a read went through (an empty mapping read into counts as read). */
  private readonly touched = new Set<string>();

  constructor(
    readonly effective: Obj,
    readonly defaults: Obj,
  ) {}

  private lookup(root: Obj, p: Path): Json | undefined {
    let cur: Json | undefined = root;
    for (const k of p) {
      if (!isObj(cur)) return undefined;
      cur = cur[k];
    }
    return cur === null ? undefined : cur;
  }

  /** The value at `p` (undefined when unset or null), marked as read with everything under it. */
  get(...p: string[]): Json | undefined {
    this.read.add(JSON.stringify(p));
    let cur: Json | undefined = this.effective;
    for (let i = 0; i < p.length; i++) {
      this.touched.add(JSON.stringify(p.slice(0, i)));
      if (cur === undefined || cur === null) return undefined;
      if (!isObj(cur)) this.wrong(p.slice(0, i), 'a mapping', cur);
      cur = cur[p[i] as string];
    }
    return cur === null ? undefined : cur;
  }

  /** Whether the value at `p` is the chart's default (both unset counts). Does not mark it read. */
  isDefault(...p: string[]): boolean {
    return deepEqual(this.lookup(this.effective, p), this.lookup(this.defaults, p));
  }

  private wrong(p: Path, want: string, v: Json): never {
    throw new ValuesError(`${show(p)} must be ${want}, not ${kindOf(v)}`);
  }

  str(...p: string[]): string | undefined {
    const v = this.get(...p);
    if (v === undefined || typeof v === 'string') return v;
    return this.wrong(p, 'a string', v);
  }

  bool(...p: string[]): boolean | undefined {
    const v = this.get(...p);
    if (v === undefined || typeof v === 'boolean') return v;
    return this.wrong(p, 'true or false', v);
  }

  /** An integer, or a string of digits where the chart's schema allows a string too. */
  int(p: Path, opts: { orString?: boolean } = {}): number | undefined {
    const v = this.get(...p);
    if (v === undefined) return undefined;
    if (typeof v === 'number' && Number.isInteger(v)) return v;
    if (opts.orString && typeof v === 'string' && /^\s*-?\d+\s*$/.test(v)) return Number(v);
    if (opts.orString && typeof v === 'string' && v === '') return undefined;
    return this.wrong(p, opts.orString ? 'an integer (or a string of digits)' : 'an integer', v);
  }

  /** A mapping (its content not checked here); {} when unset. */
  obj(...p: string[]): Obj {
    const v = this.get(...p);
    if (v === undefined) return {};
    if (isObj(v)) return v;
    return this.wrong(p, 'a mapping', v);
  }

  /**
   * A mapping of the chart's own (github, redis, ...), type-checked but not marked read: its
   * values are read one by one, so that one the chart does not have is reported.
   */
  section(...p: string[]): Obj {
    const v = this.lookup(this.effective, p);
    this.touched.add(JSON.stringify(p));
    if (v === undefined) return {};
    if (isObj(v)) return v;
    return this.wrong(p, 'a mapping', v);
  }

  /** A mapping of strings (labels, annotations, a node selector). */
  strMap(...p: string[]): Record<string, string> {
    const o = this.obj(...p);
    for (const [k, v] of Object.entries(o)) if (typeof v !== 'string') this.wrong([...p, k], 'a string', v);
    return o as Record<string, string>;
  }

  /** A list; [] when unset. Items that must be mappings are checked. */
  list(p: Path, items?: 'mapping' | 'string'): Json[] {
    const v = this.get(...p);
    if (v === undefined) return [];
    if (!Array.isArray(v)) return this.wrong(p, 'a list', v);
    v.forEach((item, i) => {
      if (items === 'mapping' && !isObj(item)) this.wrong([...p, `[${i}]`], 'a mapping', item);
      if (items === 'string' && typeof item !== 'string') this.wrong([...p, `[${i}]`], 'a string', item);
    });
    return v;
  }

  /** Leaf paths of the effective values that no mapping read (a value the chart does not have). */
  unread(): Path[] {
    const out: Path[] = [];
    const walk = (v: Json | undefined, p: string[]) => {
      if (p.length > 0 && this.read.has(JSON.stringify(p))) return;
      // A mapping the chart does not have is reported as a whole, not leaf by leaf.
      const known = p.length === 0 || this.touched.has(JSON.stringify(p)) || this.lookup(this.defaults, p) !== undefined;
      if (isObj(v) && known && (p.length === 0 || Object.keys(v).length > 0)) {
        for (const [k, sub] of Object.entries(v)) walk(sub, [...p, k]);
        return;
      }
      if (v !== null && v !== undefined && !(isObj(v) && this.touched.has(JSON.stringify(p)))) out.push(p);
    };
    walk(this.effective, []);
    return out;
  }
}
