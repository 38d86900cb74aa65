// Shell-style splitting of a comment with the rules of the lexer Atlantis uses
// (github.com/google/shlex), which are not POSIX's: only space, tab, CR and LF separate
// words; `#` at the start of a word starts a comment to the end of the line; inside double
// quotes a backslash escapes any character (it is dropped, the next one kept); nothing is
// expanded. Pure.

export class ShlexError extends Error {}

const SPACE = new Set([' ', '\t', '\r', '\n']);

type State = 'start' | 'word' | 'escape' | 'quotedEscape' | 'double' | 'single' | 'comment';

/** Splits as shlex.Split does; throws ShlexError with shlex's message on bad input. */
export function shellSplit(input: string): string[] {
  const out: string[] = [];
  let state: State = 'start';
  let cur = '';
  // Code points, as Go's ReadRune reads them.
  for (const c of input) {
    switch (state) {
      case 'start':
        if (SPACE.has(c)) break;
        if (c === '"') state = 'double';
        else if (c === "'") state = 'single';
        else if (c === '\\') state = 'escape';
        else if (c === '#') state = 'comment';
        else {
          cur = c;
          state = 'word';
        }
        break;
      case 'word':
        if (SPACE.has(c)) {
          out.push(cur);
          cur = '';
          state = 'start';
        } else if (c === '"') state = 'double';
        else if (c === "'") state = 'single';
        else if (c === '\\') state = 'escape';
        else cur += c;
        break;
      case 'escape':
        cur += c;
        state = 'word';
        break;
      case 'quotedEscape':
        cur += c;
        state = 'double';
        break;
      case 'double':
        if (c === '"') state = 'word';
        else if (c === '\\') state = 'quotedEscape';
        else cur += c;
        break;
      case 'single':
        if (c === "'") state = 'word';
        else cur += c;
        break;
      case 'comment':
        // A comment is a token of its own that shlex drops; a newline ends it.
        if (c === '\n') state = 'start';
        break;
    }
  }
  switch (state) {
    case 'word':
      out.push(cur);
      break;
    case 'escape':
    case 'quotedEscape':
      throw new ShlexError('EOF found after escape character');
    case 'double':
    case 'single':
      throw new ShlexError('EOF found when expecting closing quote');
  }
  return out;
}
