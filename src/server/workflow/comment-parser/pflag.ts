// Flag parsing as Go's pflag does it (Atlantis parses comment flags with pflag): `-d x`,
// `-dx`, `-d=x`, `--dir x`, `--dir=x`, combined bool shorthands, interspersed positional
// args, `--` ends flag parsing; error texts are pflag's (and its quirks: a shorthand group
// starting `test.` is skipped, an unknown shorthand is named by its first byte). Pure.
import type { FlagDef } from './commands.js';
import { goQuote, goQuoteByte } from '../go-compat/go-text.js';

export interface FlagParse {
  values: Map<string, string | boolean>;
  positional: string[];
  /** Number of positional args before `--`, or -1 when there was no `--`. */
  argsLenAtDash: number;
}

export type FlagOutcome = { ok: FlagParse } | { help: true } | { error: string };

/** pflag's error for a value its flag's type refuses (only bools can refuse here). */
function invalidBool(def: FlagDef, v: string): string {
  const name = def.short ? `-${def.short}, --${def.long}` : `--${def.long}`;
  return `invalid argument ${goQuote(v)} for ${goQuote(name)} flag: strconv.ParseBool: parsing ${goQuote(v)}: invalid syntax`;
}

/** The first byte of a shorthand group, as pflag indexes the string. */
function firstByte(s: string): number {
  return Buffer.from(s, 'utf8')[0] as number;
}

function parseBool(v: string): boolean | undefined {
  if (['1', 't', 'T', 'TRUE', 'true', 'True'].includes(v)) return true;
  if (['0', 'f', 'F', 'FALSE', 'false', 'False'].includes(v)) return false;
  return undefined;
}

export function parseFlags(defs: readonly FlagDef[], args: string[]): FlagOutcome {
  const byLong = new Map(defs.map((d) => [d.long, d]));
  const byShort = new Map(defs.filter((d) => d.short).map((d) => [d.short as string, d]));
  const values = new Map<string, string | boolean>();
  const positional: string[] = [];
  let argsLenAtDash = -1;
  let rest = [...args];
  while (rest.length > 0) {
    const s = rest.shift() as string;
    if (s.length === 0 || s[0] !== '-' || s.length === 1) {
      positional.push(s);
      continue;
    }
    if (s[1] === '-') {
      if (s.length === 2) {
        argsLenAtDash = positional.length;
        positional.push(...rest);
        rest = [];
        break;
      }
      const body = s.slice(2);
      if (body[0] === '-' || body[0] === '=') return { error: `bad flag syntax: ${s}` };
      const eq = body.indexOf('=');
      const name = eq >= 0 ? body.slice(0, eq) : body;
      const def = byLong.get(name);
      if (!def) {
        if (name === 'help') return { help: true };
        return { error: `unknown flag: --${name}` };
      }
      if (eq >= 0) {
        const v = body.slice(eq + 1);
        if (def.kind === 'bool') {
          const b = parseBool(v);
          if (b === undefined) return { error: invalidBool(def, v) };
          values.set(def.long, b);
        } else values.set(def.long, v);
      } else if (def.kind === 'bool') {
        values.set(def.long, true);
      } else if (rest.length > 0) {
        values.set(def.long, rest.shift() as string);
      } else {
        return { error: `flag needs an argument: --${name}` };
      }
      continue;
    }
    // Short flags, possibly combined (`-dfoo`, `-d=foo`).
    let shorthands = s.slice(1);
    while (shorthands.length > 0) {
      // pflag skips the rest of a group starting with `test.` (Go test flags), silently.
      if (shorthands.startsWith('test.')) break;
      const c = shorthands[0] as string;
      const def = byShort.get(c);
      if (!def) {
        if (c === 'h') return { help: true };
        return { error: `unknown shorthand flag: ${goQuoteByte(firstByte(shorthands))} in -${shorthands}` };
      }
      if (shorthands.length > 2 && shorthands[1] === '=') {
        const v = shorthands.slice(2);
        if (def.kind === 'bool') {
          const b = parseBool(v);
          if (b === undefined) return { error: invalidBool(def, v) };
          values.set(def.long, b);
        } else values.set(def.long, v);
        shorthands = '';
      } else if (def.kind === 'bool') {
        values.set(def.long, true);
        shorthands = shorthands.slice(1);
      } else if (shorthands.length > 1) {
        values.set(def.long, shorthands.slice(1));
        shorthands = '';
      } else if (rest.length > 0) {
        values.set(def.long, rest.shift() as string);
        shorthands = '';
      } else {
        return { error: `flag needs an argument: ${goQuoteByte(firstByte(shorthands))} in -${shorthands}` };
      }
    }
  }
  return { ok: { values, positional, argsLenAtDash } };
}
