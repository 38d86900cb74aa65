// The few Go string functions Atlantis's comment parser leans on, with Go's exact rules, so
// that our answers match its byte for byte: strings.Trim/Fields (unicode.IsSpace, which is
// not JavaScript's \s; TrimSpace is in go-paths.ts), strings.ToLower (per code point, no context), strconv.Quote (%q)
// and a Levenshtein distance over code points (agext/levenshtein). Pure.

import { isGoSpace } from './go-paths.js';

/** strings.Trim(s, cutset) for a one-character cutset. */
export function goTrimChar(s: string, ch: string): string {
  let a = 0;
  let b = s.length;
  while (a < b && s[a] === ch) a++;
  while (b > a && s[b - 1] === ch) b--;
  return s.slice(a, b);
}

/** strings.Fields. */
export function goFields(s: string): string[] {
  const out: string[] = [];
  let cur = '';
  for (const ch of s) {
    if (isGoSpace(ch.charCodeAt(0))) {
      if (cur !== '') out.push(cur);
      cur = '';
    } else cur += ch;
  }
  if (cur !== '') out.push(cur);
  return out;
}

/**
 * strings.ToLower: each code point on its own (JavaScript lowers a final sigma by context,
 * and İ to two code points; Go maps İ to i).
 */
export function goToLower(s: string): string {
  let out = '';
  for (const ch of s) {
    if (ch === '\u0130') out += 'i';
    else {
      const l = ch.toLowerCase();
      out += Array.from(l).length === 1 ? l : ch;
    }
  }
  return out;
}

const PRINTABLE = /^[\p{L}\p{M}\p{N}\p{P}\p{S} ]$/u;

/** strconv.IsPrint for one code point. */
function isGoPrint(ch: string): boolean {
  return PRINTABLE.test(ch);
}

function hex(n: number, width: number): string {
  return n.toString(16).padStart(width, '0');
}

function quoteWith(s: string, quote: '"' | "'"): string {
  let out = quote;
  for (let ch of s) {
    let cp = ch.codePointAt(0) as number;
    // A lone surrogate is not valid UTF-8; Go's JSON decoding has made it U+FFFD already.
    if (cp >= 0xd800 && cp <= 0xdfff) {
      ch = '\ufffd';
      cp = 0xfffd;
    }
    if (ch === quote || ch === '\\') out += '\\' + ch;
    else if (isGoPrint(ch)) out += ch;
    else if (ch === '\u0007') out += '\\a';
    else if (ch === '\b') out += '\\b';
    else if (ch === '\f') out += '\\f';
    else if (ch === '\n') out += '\\n';
    else if (ch === '\r') out += '\\r';
    else if (ch === '\t') out += '\\t';
    else if (ch === '\v') out += '\\v';
    else if (cp < 0x20 || cp === 0x7f) out += '\\x' + hex(cp, 2);
    else if (cp < 0x10000) out += '\\u' + hex(cp, 4);
    else out += '\\U' + hex(cp, 8);
  }
  return out + quote;
}

/** strconv.Quote, i.e. fmt's %q of a string. */
export function goQuote(s: string): string {
  return quoteWith(s, '"');
}

/** fmt's %q of a byte (pflag reports an unknown shorthand by its first byte). */
export function goQuoteByte(b: number): string {
  return quoteWith(String.fromCodePoint(b), "'");
}

/** Edit distance over code points, as agext/levenshtein computes it with unit costs. */
export function levenshtein(x: string, y: string): number {
  const a = Array.from(x);
  const b = Array.from(y);
  const prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    let diag = prev[0] as number;
    prev[0] = i;
    for (let j = 1; j <= b.length; j++) {
      const up = prev[j] as number;
      prev[j] = Math.min(up + 1, (prev[j - 1] as number) + 1, diag + (a[i - 1] === b[j - 1] ? 0 : 1));
      diag = up;
    }
  }
  return prev[b.length] as number;
}
