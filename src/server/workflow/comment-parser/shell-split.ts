// Shell-style splitting of a comment, the role shlex plays in Atlantis: quotes and backslash
// escapes as a POSIX shell reads them, with no expansion of any kind. Pure.

export class ShlexError extends Error {}

/** Splits like a POSIX shell without expansion: quotes and backslash escapes. */
export function shellSplit(input: string): string[] {
  const out: string[] = [];
  let cur = '';
  let inWord = false;
  let i = 0;
  const n = input.length;
  while (i < n) {
    const c = input[i] as string;
    if (/\s/.test(c)) {
      if (inWord) {
        out.push(cur);
        cur = '';
        inWord = false;
      }
      i++;
      continue;
    }
    inWord = true;
    if (c === '\\') {
      if (i + 1 >= n) throw new ShlexError('EOF found after escape character');
      cur += input[i + 1];
      i += 2;
    } else if (c === "'") {
      const end = input.indexOf("'", i + 1);
      if (end < 0) throw new ShlexError('EOF found when expecting closing quote');
      cur += input.slice(i + 1, end);
      i = end + 1;
    } else if (c === '"') {
      i++;
      let closed = false;
      while (i < n) {
        const d = input[i] as string;
        if (d === '"') {
          closed = true;
          i++;
          break;
        }
        if (d === '\\' && i + 1 < n && '"\\$`\n'.includes(input[i + 1] as string)) {
          cur += input[i + 1];
          i += 2;
          continue;
        }
        cur += d;
        i++;
      }
      if (!closed) throw new ShlexError('EOF found when expecting closing quote');
    } else {
      cur += c;
      i++;
    }
  }
  if (inWord) out.push(cur);
  return out;
}
