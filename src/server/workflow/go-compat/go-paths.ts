// Go's path and pattern helpers as Atlantis's when_modified code sees them: strings.TrimSpace,
// filepath.Clean/Join/Dir, and the syntax check of filepath.Match that patternmatcher.New
// makes. Written from Go's documented behaviour and checked against it; pure.

const SLASH = 0x2f;

// ---- Go's path helpers (strings.TrimSpace, filepath.Clean/Join/Dir) -----------------------

const GO_SPACE = new Set([
  0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x20, 0x85, 0xa0, 0x1680, 0x2000, 0x2001, 0x2002, 0x2003, 0x2004, 0x2005, 0x2006, 0x2007, 0x2008, 0x2009,
  0x200a, 0x2028, 0x2029, 0x202f, 0x205f, 0x3000,
]);

/** unicode.IsSpace for a UTF-16 unit (every Go space is in the BMP). */
export function isGoSpace(unit: number): boolean {
  return GO_SPACE.has(unit);
}

/** strings.TrimSpace: Go's Unicode white space (JavaScript's trim() differs on U+0085 and U+FEFF). */
export function goTrimSpace(s: string): string {
  let a = 0;
  let b = s.length;
  while (a < b && GO_SPACE.has(s.charCodeAt(a))) a++;
  while (b > a && GO_SPACE.has(s.charCodeAt(b - 1))) b--;
  return s.slice(a, b);
}

/** filepath.Clean on Linux. */
export function goClean(p: string): string {
  if (p === '') return '.';
  const rooted = p.startsWith('/');
  const out: string[] = [];
  for (const part of p.split('/')) {
    if (part === '' || part === '.') continue;
    if (part === '..') {
      if (out.length > 0 && out[out.length - 1] !== '..') out.pop();
      else if (!rooted) out.push('..');
      continue;
    }
    out.push(part);
  }
  const body = out.join('/');
  if (rooted) return '/' + body;
  return body === '' ? '.' : body;
}

/** filepath.Join: empty elements dropped, the rest joined and cleaned. */
export function goJoin(...elems: string[]): string {
  const kept = elems.filter((e) => e !== '');
  return kept.length === 0 ? '' : goClean(kept.join('/'));
}

/** filepath.Dir. */
export function goDir(p: string): string {
  return goClean(p.slice(0, p.lastIndexOf('/') + 1));
}

// ---- pattern syntax ----------------------------------------------------------------------

/**
 * The check patternmatcher.New makes: Go's filepath.Match(pattern, ".") must not fail. That
 * function parses the pattern lazily, chunk by chunk (a chunk ends at a `*` outside [...]),
 * and stops at the first chunk that cannot match, so a bad bracket after it goes unnoticed
 * (`[a]*\` passes, `a\` does not). Replayed here on code points with the name ".".
 * Returns the problem, or undefined.
 */
export function filepathSyntaxProblem(pat: number[]): string | undefined {
  const name = [0x2e];
  let p = 0;
  let n = 0;
  for (;;) {
    if (p >= pat.length) return undefined;
    let star = false;
    while (pat[p] === 0x2a) {
      p++;
      star = true;
    }
    const chunkStart = p;
    let inRange = false;
    for (; p < pat.length; p++) {
      const c = pat[p];
      if (c === 0x5c) {
        if (p + 1 < pat.length) p++;
      } else if (c === 0x5b) inRange = true;
      else if (c === 0x5d) inRange = false;
      else if (c === 0x2a && !inRange) break;
    }
    const chunk = pat.slice(chunkStart, p);
    if (star && chunk.length === 0) return undefined;
    const first = matchChunk(chunk, name.slice(n));
    if (typeof first === 'string') return first;
    if (first !== undefined && (n + first === name.length || p < pat.length)) {
      n += first;
      continue;
    }
    if (!star) return undefined;
    let moved = false;
    for (let k = n; k < name.length && name[k] !== SLASH; k++) {
      const r = matchChunk(chunk, name.slice(k + 1));
      if (typeof r === 'string') return r;
      if (r === undefined || (p >= pat.length && k + 1 + r < name.length)) continue;
      n = k + 1 + r;
      moved = true;
      break;
    }
    if (!moved) return undefined;
  }
}

/**
 * Go's matchChunk: how much of `s` one chunk consumes (undefined: no match), or a syntax
 * problem. After a mismatch it keeps reading the chunk only to check its syntax.
 */
function matchChunk(chunk: number[], s: number[]): number | undefined | string {
  let failed = false;
  let i = 0;
  let j = 0;
  const rangeEnd = (): number | string => {
    const c: number | undefined = chunk[i];
    if (c === undefined || c === 0x2d || c === 0x5d)
      return c === 0x2d
        ? 'a "-" in [...] must sit between two characters or be escaped'
        : c === 0x5d
          ? 'empty [] or a range without its end'
          : 'unclosed [';
    if (c === 0x5c) i++;
    const r = chunk[i++];
    if (r === undefined || i >= chunk.length) return 'unclosed [';
    return r;
  };
  while (i < chunk.length) {
    failed = failed || j >= s.length;
    const c = chunk[i] as number;
    if (c === 0x5b) {
      const r: number = failed ? -1 : (s[j++] as number);
      i++;
      const negated = chunk[i] === 0x5e;
      if (negated) i++;
      let hit = false;
      for (let ranges = 0; ; ranges++) {
        if (chunk[i] === 0x5d && ranges > 0) {
          i++;
          break;
        }
        const lo = rangeEnd();
        if (typeof lo === 'string') return lo;
        let hi = lo;
        if (chunk[i] === 0x2d) {
          i++;
          const h = rangeEnd();
          if (typeof h === 'string') return h;
          hi = h;
        }
        hit = hit || (lo <= r && r <= hi);
      }
      failed = failed || hit === negated;
    } else if (c === 0x3f) {
      if (!failed) failed = s[j++] === SLASH;
      i++;
    } else {
      if (c === 0x5c) {
        i++;
        if (i >= chunk.length) return 'a trailing \\ escapes nothing';
      }
      if (!failed) failed = chunk[i] !== s[j++];
      i++;
    }
  }
  return failed ? undefined : j;
}
