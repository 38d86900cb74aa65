// `when_modified` matching with Atlantis v0.47's semantics, in time linear in path x pattern.
//
// Atlantis joins each pattern to the project dir (Go filepath.Join, which cleans it) and hands
// the list to moby/patternmatcher v0.6.1 (MatchesOrParentMatches). That library turns a
// pattern into a Go (RE2) regexp, or a plain string compare for some shapes, and the last
// pattern that matches the file or one of its parent dirs decides; `!` patterns exclude.
// RE2 is linear; JavaScript's RegExp backtracks (`*a*a*a…*c` on a long path ran for minutes),
// so the regexp shapes here run on a small NFA simulation with a step budget instead.
//
// Pure: no I/O. Go's path helpers and pattern syntax check are in go-paths.ts. The few
// pattern shapes whose RE2 meaning is an accident of that translation (`*`/`?`/`[:` inside
// `[...]`, `\` before a letter, digit or non-ASCII char, a range like `[z-a]`) are refused
// when the config is read (see docs/server.md).
import { filepathSyntaxProblem, goClean, goDir, goJoin, goTrimSpace } from '../go-compat/go-paths.js';

/** Most patterns one project's when_modified may list. */
export const MAX_WHEN_MODIFIED_PATTERNS = 100;
/** Longest pattern, in UTF-16 code units. */
export const MAX_WHEN_MODIFIED_PATTERN_LENGTH = 1024;
/**
 * Default work for one PR's project selection: NFA steps, compared characters and one per
 * pattern tried. Enough for a PR of thousands of files against hundreds of projects, and
 * small enough that running out costs only a fraction of a second of one core.
 */
export const DEFAULT_MATCH_BUDGET = 20_000_000;

export class MatchBudgetExceeded extends Error {
  constructor(readonly budget: number) {
    super(
      `when_modified matching needed more than ${budget} steps for this pull request's changed files; plan projects with -d/-p instead`,
    );
    this.name = 'MatchBudgetExceeded';
  }
}

/** Work left for one decision; matching throws MatchBudgetExceeded when it runs out. */
export class MatchBudget {
  private used = 0;
  constructor(readonly limit: number = DEFAULT_MATCH_BUDGET) {}
  spend(n: number): void {
    this.used += n;
    if (this.used > this.limit) throw new MatchBudgetExceeded(this.limit);
  }
  get spent(): number {
    return this.used;
  }
}

const SLASH = 0x2f;

// ---- compiled patterns -------------------------------------------------------------------

const NL = 0x0a;

type Tok =
  | { t: 'lit'; c: number }
  | { t: 'bol' } // a bare `^` in a regexp-shaped pattern is RE2's start-of-text assertion
  | { t: 'class'; neg: boolean; ranges: number[] } // [lo, hi, lo, hi, ...]
  | { t: 'notSlash' } // ?
  | { t: 'notSlashStar' } // *
  | { t: 'anyStar' } // trailing ** after other wildcards: RE2 `.*` (no newline)
  | { t: 'optDirs' }; // ** before more pattern: RE2 `(.*/)?`

/** patternmatcher's four shapes: string compares for the simple ones, else a regexp. */
export type CompiledPattern =
  | { shape: 'exact'; text: string }
  | { shape: 'prefix'; text: string }
  | { shape: 'suffix'; text: string }
  | { shape: 'regexp'; prog: Prog };

/**
 * Compiles one cleaned pattern (no leading `!`) the way patternmatcher reads it. Returns a
 * problem text for a pattern Atlantis refuses or that this server refuses.
 */
export function compilePattern(pattern: string): CompiledPattern | { problem: string } {
  const cps = Array.from(pattern, (ch) => ch.codePointAt(0) as number);
  const bad = filepathSyntaxProblem(cps);
  if (bad) return { problem: bad };
  let shape: 'exact' | 'prefix' | 'suffix' | 'regexp' = 'exact';
  const toks: Tok[] = [];
  let i = 0;
  for (let step = 0; i < cps.length; step++) {
    const c = cps[i++] as number;
    if (c === 0x2a) {
      if (cps[i] !== 0x2a) {
        toks.push({ t: 'notSlashStar' });
        shape = 'regexp';
        continue;
      }
      i++;
      if (cps[i] === SLASH) i++;
      if (i >= cps.length) {
        if (shape === 'exact') shape = 'prefix';
        else {
          toks.push({ t: 'anyStar' });
          shape = 'regexp';
        }
      } else {
        toks.push({ t: 'optDirs' });
        shape = 'regexp';
      }
      if (step === 0) shape = 'suffix';
    } else if (c === 0x3f) {
      toks.push({ t: 'notSlash' });
      shape = 'regexp';
    } else if (c === 0x5c) {
      const e = escaped(cps[i++]);
      if (typeof e === 'string') return { problem: e };
      toks.push({ t: 'lit', c: e });
      shape = 'regexp';
    } else if (c === 0x5b) {
      const cls = parseClass(cps, i);
      if ('problem' in cls) return cls;
      toks.push(cls.tok);
      i = cls.next;
      shape = 'regexp';
    } else if (c === 0x5d) {
      toks.push({ t: 'lit', c });
      shape = 'regexp';
    } else if (c === 0x5e) toks.push({ t: 'bol' });
    else toks.push({ t: 'lit', c });
  }
  if (shape === 'exact') return { shape, text: pattern };
  if (shape === 'prefix') return { shape, text: pattern.slice(0, -2) };
  if (shape === 'suffix') return { shape, text: pattern.slice(2) };
  return { shape, prog: buildProg(toks) };
}

/** RE2 reads `\x` as x for ASCII that is not a letter or digit; anything else means more. */
function escaped(c: number | undefined): number | string {
  if (c === undefined) return 'a trailing \\ escapes nothing';
  const alnum = (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5a) || (c >= 0x61 && c <= 0x7a);
  if (c < 0x80 && !alnum) return c;
  return `\\${String.fromCodePoint(c)} is not supported: escape only punctuation`;
}

/**
 * A `[...]` starting after the `[`, read as RE2 reads it (the check above may not have looked
 * at it): `]` right after `[` or `[^` is a literal, a `-` before `]` is a literal.
 */
function parseClass(cps: number[], start: number): { tok: Tok; next: number } | { problem: string } {
  let i = start;
  const neg = cps[i] === 0x5e;
  if (neg) i++;
  const ranges: number[] = [];
  const end = (): number | string => {
    const c = cps[i++];
    if (c === undefined) return 'unclosed [';
    // patternmatcher rewrites * and ? even inside [...], which breaks the class apart in RE2;
    // `[:` starts a POSIX class in RE2 but not in filepath.Match.
    if (c === 0x2a || c === 0x3f) return `${String.fromCodePoint(c)} inside [...] is not supported`;
    if (c === 0x5b && cps[i] === 0x3a) return '[: inside [...] is not supported';
    if (c === 0x5c) return escaped(cps[i++]);
    return c;
  };
  for (let first = true; first || cps[i] !== 0x5d; first = false) {
    const lo = end();
    if (typeof lo === 'string') return { problem: lo };
    let hi = lo;
    if (cps[i] === 0x2d && cps[i + 1] !== undefined && cps[i + 1] !== 0x5d) {
      i++;
      const h = end();
      if (typeof h === 'string') return { problem: h };
      hi = h;
    }
    if (hi < lo) return { problem: `range ${String.fromCodePoint(lo)}-${String.fromCodePoint(hi)} is out of order` };
    ranges.push(lo, hi);
  }
  return { tok: { t: 'class', neg, ranges }, next: i + 1 };
}

// ---- the NFA -----------------------------------------------------------------------------

/** One instruction: consume a char that passes `test` and go to `next`, or fork, or assert, or accept. */
type Inst =
  | { op: 'char'; test: (c: number) => boolean; cost: number; next: number }
  | { op: 'split'; a: number; b: number }
  | { op: 'bol'; next: number }
  | { op: 'match' };

export interface Prog {
  insts: Inst[];
  /** Literal text every match starts with. */
  lead: string;
  /** Literal runs every match holds, in this order: a cheap test before the NFA. */
  runs: string[];
}

const notSlash = (c: number): boolean => c !== SLASH;
const notNewline = (c: number): boolean => c !== NL;

function buildProg(toks: Tok[]): Prog {
  const insts: Inst[] = [];
  for (const tk of toks) {
    const at = insts.length;
    switch (tk.t) {
      case 'lit': {
        const want = tk.c;
        insts.push({ op: 'char', test: (c) => c === want, cost: 1, next: at + 1 });
        break;
      }
      case 'bol':
        insts.push({ op: 'bol', next: at + 1 });
        break;
      case 'class': {
        const { neg, ranges } = tk;
        const test = (c: number): boolean => {
          for (let k = 0; k < ranges.length; k += 2) if (c >= (ranges[k] as number) && c <= (ranges[k + 1] as number)) return !neg;
          return neg;
        };
        insts.push({ op: 'char', test, cost: 1 + ranges.length / 2, next: at + 1 });
        break;
      }
      case 'notSlash':
        insts.push({ op: 'char', test: notSlash, cost: 1, next: at + 1 });
        break;
      case 'notSlashStar':
      case 'anyStar':
        insts.push({ op: 'split', a: at + 1, b: at + 2 });
        insts.push({ op: 'char', test: tk.t === 'anyStar' ? notNewline : notSlash, cost: 1, next: at });
        break;
      case 'optDirs':
        // (.*/)? : skip, or any chars but newline then a slash.
        insts.push({ op: 'split', a: at + 1, b: at + 4 });
        insts.push({ op: 'split', a: at + 2, b: at + 3 });
        insts.push({ op: 'char', test: notNewline, cost: 1, next: at + 1 });
        insts.push({ op: 'char', test: (c) => c === SLASH, cost: 1, next: at + 4 });
        break;
    }
  }
  insts.push({ op: 'match' });
  const runs: string[] = [];
  let run = '';
  let lead: string | undefined;
  for (const tk of toks) {
    if (tk.t === 'lit') {
      run += String.fromCodePoint(tk.c);
      continue;
    }
    lead ??= run;
    if (run) runs.push(run);
    run = '';
  }
  if (run) runs.push(run);
  return { insts, lead: lead ?? run, runs };
}

/**
 * Runs the NFA over `s` (anchored at both ends). True when it accepts all of `s`, or, with
 * `atSlashes`, the part before any `/` of `s` (each such part is a parent dir candidate).
 * Each char costs at most the number of instructions: linear in |s| x |pattern|.
 */
function runProg(prog: Prog, s: string, atSlashes: boolean, budget: MatchBudget): boolean {
  const { insts } = prog;
  const m = insts.length;
  const seen = new Int32Array(m).fill(-1);
  let cur = new Int32Array(m);
  let nxt = new Int32Array(m);
  const stack = new Int32Array(m);
  let nCur = 0;
  let gen = 0;
  let work = 0;
  // Adds pc0 and what it reaches without consuming a char to `list`; returns the new length.
  const add = (list: Int32Array, len: number, pc0: number, pos: number): number => {
    let sp = 0;
    stack[sp++] = pc0;
    while (sp > 0) {
      const pc = stack[--sp] as number;
      if (seen[pc] === gen) continue;
      seen[pc] = gen;
      work++;
      const ins = insts[pc] as Inst;
      if (ins.op === 'split') {
        stack[sp++] = ins.b;
        stack[sp++] = ins.a;
      } else if (ins.op === 'bol') {
        if (pos === 0) stack[sp++] = ins.next;
      } else list[len++] = pc;
    }
    return len;
  };
  const accepts = (list: Int32Array, len: number): boolean => {
    for (let k = 0; k < len; k++) if ((insts[list[k] as number] as Inst).op === 'match') return true;
    return false;
  };
  nCur = add(cur, 0, 0, 0);
  let pos = 0;
  for (const ch of s) {
    if (nCur === 0) break;
    const c = ch.codePointAt(0) as number;
    if (atSlashes && c === SLASH && accepts(cur, nCur)) return true;
    gen++;
    const after = pos + ch.length;
    let nNxt = 0;
    for (let k = 0; k < nCur; k++) {
      const ins = insts[cur[k] as number] as Inst;
      if (ins.op !== 'char') continue;
      work += ins.cost;
      if (ins.test(c)) nNxt = add(nxt, nNxt, ins.next, after);
    }
    [cur, nxt] = [nxt, cur];
    nCur = nNxt;
    pos = after;
    // Charged per char, not per step: the budget check stays off the hot path.
    budget.spend(work);
    work = 0;
  }
  budget.spend(work);
  return accepts(cur, nCur);
}

/** False when `s` (or a prefix of it) cannot match: it lacks the lead or a literal run. */
function mayMatch(prog: Prog, s: string, budget: MatchBudget): boolean {
  budget.spend(1 + (s.length >> 4));
  if (!s.startsWith(prog.lead)) return false;
  let at = 0;
  for (const r of prog.runs) {
    const k = s.indexOf(r, at);
    if (k < 0) return false;
    at = k + r.length;
  }
  return true;
}

function startsWithAt(s: string, part: string, at: number, budget: MatchBudget): boolean {
  if (at < 0) return false;
  budget.spend(1 + part.length);
  return s.startsWith(part, at);
}

/** A changed file with what every pattern needs of it, computed once per file. */
export interface ChangedPath {
  file: string;
  /** filepath.Dir(file); its prefixes up to each `/`, and itself, are the parent candidates. */
  parent: string;
  hasParents: boolean;
  /** Clean and relative: then the parents are exactly the parts of `file` before each `/`. */
  clean: boolean;
}

export function changedPath(file: string): ChangedPath {
  const parent = goDir(file);
  return { file, parent, hasParents: parent !== '.', clean: file === goClean(file) && !file.startsWith('/') };
}

/**
 * patternmatcher's match of one pattern against `file` or any of its parent dirs (the
 * prefixes of filepath.Dir(file) up to each `/`, when that dir is not `.`).
 */
function matchesFileOrParent(p: CompiledPattern, cp: ChangedPath, budget: MatchBudget): boolean {
  const { file, parent, hasParents } = cp;
  switch (p.shape) {
    case 'exact':
      budget.spend(1 + p.text.length);
      if (file === p.text) return true;
      return hasParents && parent.startsWith(p.text) && (parent.length === p.text.length || parent.charCodeAt(p.text.length) === SLASH);
    case 'prefix':
      budget.spend(1 + p.text.length);
      return file.startsWith(p.text) || (hasParents && parent.startsWith(p.text));
    case 'suffix': {
      const sfx = p.text;
      // Go: strings.HasSuffix(path, sfx), or path == sfx without its leading slash.
      const bare = sfx.startsWith('/') ? sfx.slice(1) : undefined;
      const endsHere = (s: string, end: number): boolean =>
        startsWithAt(s, sfx, end - sfx.length, budget) || (bare !== undefined && end === bare.length && startsWithAt(s, bare, 0, budget));
      if (endsHere(file, file.length)) return true;
      if (!hasParents) return false;
      for (let k = parent.indexOf('/'); k >= 0; k = parent.indexOf('/', k + 1)) if (endsHere(parent, k)) return true;
      return endsHere(parent, parent.length);
    }
    case 'regexp':
      // For a clean path the parents are exactly the parts of `file` before each slash, and
      // each of them and `file` can only match if `file` holds the pattern's literals.
      if (hasParents && cp.clean) return mayMatch(p.prog, file, budget) && runProg(p.prog, file, true, budget);
      return runProg(p.prog, file, false, budget) || (hasParents && runProg(p.prog, parent, true, budget));
  }
}

// ---- pattern lists -----------------------------------------------------------------------

export interface CompiledPatternList {
  items: { exclusion: boolean; pattern: CompiledPattern }[];
}

/**
 * Compiles a project's when_modified as Atlantis does: trim, strip one leading `!`, join to
 * the project dir (which cleans: `../modules/**` from `infra` becomes `modules/**`), put the
 * `!` back, then patternmatcher.New: trim, clean, empty ones skipped, a leading `!` excludes.
 * `dir` is `.` for patterns already relative to the repo root (--autoplan-file-list).
 * Returns the problems (with the pattern's index) when any pattern is refused.
 */
export function compilePatternList(
  dir: string,
  patterns: readonly string[],
): CompiledPatternList | { problems: { index: number; message: string }[] } {
  const items: CompiledPatternList['items'] = [];
  const problems: { index: number; message: string }[] = [];
  patterns.forEach((raw, index) => {
    let wm = goTrimSpace(raw);
    let exclusion = wm.startsWith('!');
    if (exclusion) wm = wm.slice(1);
    let p = goTrimSpace((exclusion ? '!' : '') + goJoin(dir, wm));
    if (p === '') return;
    p = goClean(p);
    exclusion = p.startsWith('!');
    if (exclusion) {
      if (p === '!') {
        problems.push({ index, message: 'illegal exclusion pattern "!"' });
        return;
      }
      p = p.slice(1);
    }
    const compiled = compilePattern(p);
    if ('problem' in compiled) problems.push({ index, message: `${JSON.stringify(raw)} is not a valid pattern: ${compiled.problem}` });
    else items.push({ exclusion, pattern: compiled });
  });
  return problems.length > 0 ? { problems } : { items };
}

/**
 * patternmatcher's MatchesOrParentMatches: patterns in order, an include only looked at while
 * nothing matched yet, an exclusion only once something did; the last one that applies wins.
 */
export function listMatches(list: CompiledPatternList, file: string | ChangedPath, budget: MatchBudget): boolean {
  const cp = typeof file === 'string' ? changedPath(file) : file;
  let matched = false;
  for (const { exclusion, pattern } of list.items) {
    if (exclusion !== matched) continue;
    // Each pattern tried costs a step even when a string compare settles it: many files x
    // many projects x many patterns must be bounded too.
    budget.spend(1);
    if (matchesFileOrParent(pattern, cp, budget)) matched = !exclusion;
  }
  return matched;
}

/** Convenience for callers and tests: compile (throwing on a refused pattern) and match. */
export function matchesWhenModified(
  dir: string,
  patterns: readonly string[],
  file: string,
  budget: MatchBudget = new MatchBudget(),
): boolean {
  const list = compilePatternList(dir, patterns);
  if ('problems' in list) throw new Error(list.problems.map((p) => p.message).join('; '));
  return listMatches(list, file, budget);
}
