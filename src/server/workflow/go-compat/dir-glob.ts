// Glob `-d` patterns (`plan -d modules/*`), with the syntax of the library Atlantis uses
// (bmatcuk/doublestar v4): `*` and `?` never cross `/`, a `**` path component matches zero or
// more directories, `[...]` classes (`!`/`^` negate), `{a,b}` alternatives, `\` escapes.
// Atlantis runs a glob over the projects of atlantis.yaml. Pure.

/** Atlantis's test for a glob -d: any of `*`, `?`, `[`. */
export function isDirGlob(dir: string): boolean {
  return /[*?[]/.test(dir);
}

/** doublestar.ValidatePattern: classes closed and non-empty, braces balanced, no trailing `\`. */
export function isValidGlob(s: string): boolean {
  let alt = 0;
  const l = s.length;
  outer: for (let i = 0; i < l; i++) {
    const c = s[i];
    if (c === '\\') {
      i++;
      if (i >= l) return false;
    } else if (c === '[') {
      i++;
      if (i >= l) return false;
      if (s[i] === '^' || s[i] === '!') i++;
      if (i >= l || s[i] === ']') return false;
      for (; i < l; i++) {
        if (s[i] === '\\') i++;
        else if (s[i] === ']') continue outer;
      }
      return false;
    } else if (c === '{') alt++;
    else if (c === '}') {
      if (alt === 0) return false;
      alt--;
    }
  }
  return alt === 0;
}

// Matching is done without regular expressions: a pattern comes from a PR comment, and
// backtracking over many stars would let one comment stall the server. Braces are expanded
// first (at most MAX_ALTERNATIVES patterns), then components are matched with the linear
// star-backtracking walk and `**` by a memoised walk over components.
const MAX_ALTERNATIVES = 256;

/** The patterns a `{a,b}` pattern stands for; undefined when there would be too many. */
function expandBraces(p: string, budget = { left: MAX_ALTERNATIVES }): string[] | undefined {
  let open = -1;
  for (let i = 0; i < p.length; i++) {
    if (p[i] === '\\') i++;
    else if (p[i] === '{') {
      open = i;
      break;
    }
  }
  if (open < 0) {
    if (--budget.left < 0) return undefined;
    return [p];
  }
  const alts: string[] = [];
  let depth = 0;
  let cur = '';
  let close = -1;
  for (let j = open + 1; j < p.length; j++) {
    const d = p[j] as string;
    if (d === '\\') {
      cur += d + (p[j + 1] ?? '');
      j++;
      continue;
    }
    if (d === '}' && depth === 0) {
      close = j;
      break;
    }
    if (d === '{') depth++;
    if (d === '}') depth--;
    if (d === ',' && depth === 0) {
      alts.push(cur);
      cur = '';
    } else cur += d;
  }
  if (close < 0) return undefined;
  alts.push(cur);
  const out: string[] = [];
  for (const alt of alts) {
    const more = expandBraces(p.slice(0, open) + alt + p.slice(close + 1), budget);
    if (more === undefined) return undefined;
    out.push(...more);
  }
  return out;
}

type Token = { k: 'star' } | { k: 'one' } | { k: 'lit'; c: string } | { k: 'class'; neg: boolean; items: Array<[string, string]> };

function tokens(component: string): Token[] {
  const cps = Array.from(component);
  const out: Token[] = [];
  for (let i = 0; i < cps.length; i++) {
    const c = cps[i] as string;
    if (c === '\\') out.push({ k: 'lit', c: cps[++i] ?? '' });
    else if (c === '*') {
      if (out[out.length - 1]?.k !== 'star') out.push({ k: 'star' });
    } else if (c === '?') out.push({ k: 'one' });
    else if (c === '[') {
      let j = i + 1;
      let neg = false;
      if (cps[j] === '!' || cps[j] === '^') {
        neg = true;
        j++;
      }
      const items: Array<[string, string]> = [];
      for (; j < cps.length && cps[j] !== ']'; j++) {
        let lo = cps[j] as string;
        if (lo === '\\') lo = cps[++j] ?? '';
        let hi = lo;
        if (cps[j + 1] === '-' && cps[j + 2] !== undefined && cps[j + 2] !== ']') {
          hi = cps[j + 2] as string;
          j += 2;
          if (hi === '\\') hi = cps[++j] ?? '';
        }
        items.push([lo, hi]);
      }
      out.push({ k: 'class', neg, items });
      i = j;
    } else out.push({ k: 'lit', c });
  }
  return out;
}

function tokenMatches(t: Token, c: string): boolean {
  if (t.k === 'one') return true;
  if (t.k === 'lit') return t.c === c;
  if (t.k === 'class') {
    const cp = c.codePointAt(0) as number;
    const hit = t.items.some(([lo, hi]) => cp >= (lo.codePointAt(0) as number) && cp <= (hi.codePointAt(0) as number));
    return hit !== t.neg;
  }
  return false;
}

/** One path component against one name component: the linear star-backtracking walk. */
function componentMatches(toks: Token[], name: string): boolean {
  const cs = Array.from(name);
  let t = 0;
  let n = 0;
  let starT = -1;
  let starN = 0;
  while (n < cs.length) {
    const tok = toks[t];
    if (tok !== undefined && tok.k === 'star') {
      starT = t++;
      starN = n;
    } else if (tok !== undefined && tokenMatches(tok, cs[n] as string)) {
      t++;
      n++;
    } else if (starT >= 0) {
      t = starT + 1;
      n = ++starN;
    } else return false;
  }
  while (toks[t]?.k === 'star') t++;
  return t === toks.length;
}

function pathMatches(pattern: string, name: string): boolean {
  const parts: Array<'**' | Token[]> = [];
  for (const part of pattern.split('/')) {
    if (part === '**') {
      if (parts[parts.length - 1] !== '**') parts.push('**');
    } else parts.push(tokens(part));
  }
  const names = name.split('/');
  const memo = new Map<number, boolean>();
  const walk = (i: number, j: number): boolean => {
    const key = i * (names.length + 1) + j;
    const seen = memo.get(key);
    if (seen !== undefined) return seen;
    let r: boolean;
    const part = parts[i];
    if (part === undefined) r = j === names.length;
    else if (part === '**') {
      r = false;
      for (let k = j; k <= names.length && !r; k++) r = walk(i + 1, k);
    } else r = j < names.length && componentMatches(part, names[j] as string) && walk(i + 1, j + 1);
    memo.set(key, r);
    return r;
  };
  return walk(0, 0);
}

/** doublestar.Match(pattern, name) for a valid pattern; false for an invalid one. */
export function globMatch(pattern: string, name: string): boolean {
  if (!isValidGlob(pattern)) return false;
  const all = expandBraces(pattern);
  return all?.some((p) => pathMatches(p, name)) ?? false;
}

/** Whether a comment's -d (a dir or a glob) names the project dir `dir`. */
export function dirTargets(target: string, dir: string): boolean {
  return isDirGlob(target) ? globMatch(target, dir) : target === dir;
}
