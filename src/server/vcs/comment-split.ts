// Splitting a comment over GitHub's size limit, as Atlantis v0.47 does (its common
// SplitComment): parts are cut from the end backwards, at a line break (else a space) near
// the cut, and each part closes and the next reopens whatever markdown is open at the cut (a
// code block, <details>, both, or inline code) with Atlantis's continuation texts. Over the
// maximum number of comments, the start is dropped and the first kept part says so.
//
// Sizes are counted in UTF-8 bytes, as Atlantis counts them (GitHub's limit is in
// characters, so this stays under it). One deliberate difference: a cut never falls inside a
// multi-byte character (Atlantis's can, leaving invalid UTF-8 on both sides).

export const MAX_COMMENT_LENGTH = 65536;
/** Atlantis's --max-comments-per-command default; 0 means no limit. */
export const MAX_COMMENTS_PER_COMMAND = 100;

export type Closure = 'none' | 'code' | 'details' | 'code-in-details' | 'inline-code';

export interface Separators {
  /** Ends every part but the last. */
  sepEnd: string;
  /** Starts every part but the first. */
  sepStart: string;
  /** Starts the first part when earlier output was dropped. */
  truncationHeader: string;
}

/** Atlantis's continuation texts, per markdown construct open at the cut. */
export function separators(command?: string): Record<Closure, Separators> {
  const end = '\n<br>\n\n**Warning**: Output length greater than max comment size. Continued in next comment.';
  const start = command ? `Continued ${command} output from previous comment.\n` : 'Continued from previous comment.\n';
  const trunc =
    '> [!WARNING]\n> **Warning**: Command output is larger than the maximum number of comments per command. Output truncated.\n';
  const details = '<details><summary>Show Output</summary>\n\n```diff\n';
  return {
    none: { sepEnd: end, sepStart: start, truncationHeader: trunc },
    code: { sepEnd: `\n\`\`\`\n${end}`, sepStart: `${start}\`\`\`diff\n`, truncationHeader: `${trunc}\`\`\`diff\n` },
    details: { sepEnd: `\n</details>\n${end}`, sepStart: start + details, truncationHeader: trunc + details },
    'code-in-details': { sepEnd: `\n\`\`\`\n</details>\n${end}`, sepStart: start + details, truncationHeader: trunc + details },
    'inline-code': { sepEnd: `\`\n${end}`, sepStart: `${start}\``, truncationHeader: `${trunc}\`` },
  };
}

// The tokens that open and close markdown: code fences (3+ backticks), inline code (one
// backtick), <details> with optional attributes, </details>. As the regular expression
// /(`{3,})|(`)|(<details(?:[\t\n\f\r ][^>]*)?>)|(<\/details>)/g would find them in
// text[from:to], with `\s` spelled out as Go's RE2 has it (the text is bytes as latin1
// characters); scanned by hand because a long plan has hundreds of thousands of them, and a
// match object each made the split grow faster than the output.
const BACKTICK = 96;
const LT = 60;
const GT = '>';
function isSpace(c: number): boolean {
  return c === 32 || c === 9 || c === 10 || c === 12 || c === 13;
}

/** Calls `token(end, text)` for each token of text[from:to], in order. */
function scanTokens(text: string, from: number, to: number, token: (end: number, kind: string) => void): void {
  let i = from;
  while (i < to) {
    const c = text.charCodeAt(i);
    if (c === BACKTICK) {
      let j = i;
      while (j < to && text.charCodeAt(j) === BACKTICK) j++;
      if (j - i >= 3) token(j, '```');
      else for (let k = i + 1; k <= j; k++) token(k, '`');
      i = j;
      continue;
    }
    if (c === LT) {
      if (i + 10 <= to && text.startsWith('</details>', i)) {
        token(i + 10, '</details>');
        i += 10;
        continue;
      }
      if (i + 8 < to && text.startsWith('<details', i)) {
        const next = text.charCodeAt(i + 8);
        const close = next === 62 ? i + 8 : isSpace(next) ? text.indexOf(GT, i + 9) : -1;
        if (close !== -1 && close < to) {
          token(close + 1, '<details');
          i = close + 1;
          continue;
        }
      }
    }
    i++;
  }
}

// What is open, packed in one small integer (bit 0: a code block, bit 1: inline code, the
// rest: <details> depth), so that a long output's hundreds of thousands of tokens keep one
// number each rather than an object.
type MarkdownState = number;
const CODE = 1;
const INLINE = 2;
const DETAILS = 4;

function step(s: MarkdownState, token: string): MarkdownState {
  if (token.startsWith('```')) return s & INLINE ? s : s ^ CODE;
  if (token === '`') return s & CODE ? s : s ^ INLINE;
  if (s & (CODE | INLINE)) return s;
  if (token.startsWith('<details')) return s + DETAILS;
  return s >= DETAILS ? s - DETAILS : s;
}

function closureOf(s: MarkdownState): Closure {
  const details = s >= DETAILS;
  if (details && s & CODE) return 'code-in-details';
  if (s & CODE) return 'code';
  if (details) return 'details';
  if (s & INLINE) return 'inline-code';
  return 'none';
}

/**
 * What is open at any position of `text`, as if only `text[0:pos]` were scanned. The
 * tokens of the whole text are scanned once; a token cut by `pos` (a fence whose last
 * backticks are past it) is rescanned from the last whole token.
 */
function closureFinder(text: string): (pos: number) => Closure {
  const ends: number[] = [];
  const states: MarkdownState[] = [0];
  let state: MarkdownState = 0;
  scanTokens(text, 0, text.length, (end, kind) => {
    ends.push(end);
    state = step(state, kind);
    states.push(state);
  });
  return (pos) => {
    let lo = 0;
    let hi = ends.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if ((ends[mid] as number) <= pos) lo = mid + 1;
      else hi = mid;
    }
    let s = states[lo] as MarkdownState;
    scanTokens(text, lo > 0 ? (ends[lo - 1] as number) : 0, pos, (_end, kind) => {
      s = step(s, kind);
    });
    return closureOf(s);
  };
}

/** A UTF-8 continuation byte (the text is bytes as latin1 characters). */
function continuation(bytes: string, i: number): boolean {
  return (bytes.charCodeAt(i) & 0xc0) === 0x80;
}

const ESTIMATE_BUFFER = 50;
const WHITESPACE_WINDOW = 500;

export interface SplitOptions {
  /** Bytes per comment; default GitHub's 65,536. */
  maxSize?: number;
  /** Names the output in the continuation text (`Continued plan output ...`). */
  command?: string;
  /** 0: no limit. Default 100. */
  maxComments?: number;
}

/** The comment as GitHub comments no longer than `maxSize` bytes each, in posting order. */
export function splitComment(comment: string, opts: SplitOptions = {}): string[] {
  const maxSize = opts.maxSize ?? MAX_COMMENT_LENGTH;
  const maxComments = opts.maxComments ?? MAX_COMMENTS_PER_COMMAND;
  // Byte offsets as string indexes: one latin1 character per UTF-8 byte.
  const bytes = Buffer.from(comment, 'utf8').toString('latin1');
  if (bytes.length <= maxSize) return [comment];
  const seps = separators(opts.command);
  const closureAt = closureFinder(bytes);
  const parts: string[] = [];
  let upTo = bytes.length;
  while (upTo > 0) {
    const lastAllowed = maxComments > 0 && parts.length === maxComments - 1;
    const endSep = seps[closureAt(upTo)];
    const endLen = parts.length > 0 ? endSep.sepEnd.length : 0;
    const estimate = Math.min(upTo, Math.max(0, upTo - (maxSize - endLen - ESTIMATE_BUFFER)));
    const estimated = seps[closureAt(estimate)];
    const maxContent = maxSize - endLen - (lastAllowed ? estimated.truncationHeader : estimated.sepStart).length;
    if (maxContent <= 0) return [comment];
    let downFrom = Math.max(0, upTo - maxContent);
    // Everything left fits in this first part without a continuation header.
    if (!lastAllowed && downFrom > 0 && upTo <= maxSize - endLen) downFrom = 0;
    if (downFrom > 0) {
      // Prefer a cut after a line break, else after a space, a little later in the text.
      const limit = Math.min(upTo - 1, downFrom + WHITESPACE_WINDOW);
      let space = -1;
      let newline = -1;
      for (let p = downFrom; p < limit; p++) {
        const c = bytes.charCodeAt(p);
        if (c === 10) {
          newline = p;
          break;
        }
        if (c === 32 && space === -1) space = p;
      }
      if (newline !== -1) downFrom = newline + 1;
      else if (space !== -1) downFrom = space + 1;
    }
    let head = '';
    for (;;) {
      const startSep = seps[closureAt(downFrom)];
      head = downFrom > 0 ? (lastAllowed ? startSep.truncationHeader : startSep.sepStart) : '';
      const total = upTo - downFrom + head.length + endLen;
      if (total <= maxSize || downFrom >= upTo) break;
      downFrom = Math.min(upTo, downFrom + total - maxSize);
    }
    while (downFrom > 0 && downFrom < upTo && continuation(bytes, downFrom)) downFrom++;
    // Separators larger than a part: give up splitting, as Atlantis does when they do not fit.
    if (downFrom >= upTo) return [comment];
    parts.unshift(head + bytes.slice(downFrom, upTo) + (parts.length > 0 ? endSep.sepEnd : ''));
    upTo = downFrom;
    if (lastAllowed && downFrom > 0) break;
  }
  return parts.map((p) => Buffer.from(p, 'latin1').toString('utf8'));
}
