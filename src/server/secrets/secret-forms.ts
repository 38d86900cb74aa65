// The forms of one secret that the redactor (redact.ts) scrubs, as regular expressions. Pure;
// table-tested in test/secrets-redact.test.ts.
//
// - A strong secret is scrubbed wherever it appears: verbatim, encodeURIComponent form (hex
//   digits of either case), JSON-escaped form, and base64 (standard and URL-safe) at every
//   byte alignment, line breaks allowed between its characters (base64's 76-column wrapping):
//   the secret inside a longer base64 text (`env | base64`) leaves the characters that depend
//   only on its own bytes, which differ with its offset modulo 3. No base64 forms over
//   MAX_ENCODED_LENGTH (a GitHub App's PEM key): the line-wrappable forms of a 1.7 kB key made
//   one regex that took 1.5 s to build and 12 ms per 4 kB line to run.
// - A weak secret (secretWeakness: short, or a single word or number) would also match
//   ordinary text: `false` inside /status's JSON, `atlantis` in every `atlantis apply`. It is
//   scrubbed only where it stands as a whole value: after `=` or `:`, between quotes, alone
//   on a line (indented or not), before `@` in a URL, between escaped line breaks or NULs of
//   a printed string (`\n`, `\u0000`). The server warns about it at start (docs/server.md).
// - A multi-line secret (a PEM key) is also scrubbed line by line: terraform prints a
//   multi-line string as an indented heredoc, a diagnostic puts `│ ` before each line, a
//   Windows tool ends them with CRLF, JSON escapes the breaks. Each of its lines that would
//   be a strong secret on its own is a secret of its own, verbatim, URL-encoded and
//   JSON-escaped (no base64 forms: 27 lines of a key would make the regex slow again).

export const REDACTED = '[REDACTED]';
/** Shorter secrets are weak: their base64 fragments are a few characters, which ordinary text would match. */
export const MIN_ENCODED_LENGTH = 8;
export const MAX_ENCODED_LENGTH = 256;
/** A word or a number shorter than this is weak however long it is otherwise. */
export const MIN_WORD_LENGTH = 16;
/** Spaces a weak secret may have after it before its line ends: held back that far in a stream. */
const MAX_TRAILING_SPACE = 64;

export type Weakness = 'short' | 'word';

/**
 * Why a secret cannot be scrubbed wherever it appears without garbling other text; undefined
 * for a strong one. Short: under MIN_ENCODED_LENGTH characters (`0`, `false`). A word: only
 * letters (and `.`, `_`, `-`) or only digits, under MIN_WORD_LENGTH (`atlantis`, `terraform`,
 * `12345678`), as ordinary text and numbers are.
 */
export function secretWeakness(secret: string): Weakness | undefined {
  if (secret.length < MIN_ENCODED_LENGTH) return 'short';
  if (secret.length < MIN_WORD_LENGTH && /^(?:[A-Za-z._-]+|[0-9]+)$/.test(secret)) return 'word';
  return undefined;
}

export interface Form {
  /** Regular-expression source that matches this form in a whole text. */
  source: string;
  /** The same for a stream's chunk: never matches at its end, where the text goes on. */
  streamSource: string;
  /**
   * The same for a text without line breaks: a wrapped form's literal characters. Matches just
   * where `source` would in such a text, and V8 builds its regex far faster than the
   * line-breakable one, which would otherwise be built for a server's first log line.
   */
  lineSource: string;
  /** The form's text without line breaks: what a partial match at the end of a chunk starts like. */
  plain: string;
  /** Longest text it can match (line breaks, or trailing spaces, included). */
  maxLength: number;
  /** base64: may be broken over lines. */
  wrapped: boolean;
  /** A weak secret's form: matched only as a whole value (see the header). */
  wholeValue: boolean;
}

const escapeRe = (s: string): string => s.replace(/[.*+?^${}()|[\]\\/-]/g, '\\$&');

// What stands before and after a whole value. No `m` flag: ^ and $ are the text's own ends.
const BEFORE = '(?<=^|[\\n\\r\\0]|(?:^|[\\n\\r\\0])[ \\t]+|[=:"\'`]|[=:][ \\t]+|\\\\[nrt0]|\\\\u0000)';
const AFTER_IN_TEXT = '(?=[ \\t]*(?:$|[\\n\\r\\0])|["\'`@&,;\\\\])';
const AFTER_IN_STREAM = '(?=[ \\t]*[\\n\\r\\0]|["\'`@&,;\\\\])';

/** The base64 characters that depend on `bytes` alone, for each of the 3 offsets they may start at. */
export function base64Fragments(bytes: Buffer): string[] {
  const out: string[] = [];
  for (let k = 0; k < 3; k++) {
    const encoded = Buffer.concat([Buffer.alloc(k), bytes]).toString('base64');
    // Character i holds bits [6i, 6i+6); the secret's bits are [8k, 8k + 8n).
    const start = Math.ceil((8 * k) / 6);
    const end = Math.floor((8 * (k + bytes.length)) / 6);
    if (end > start) out.push(encoded.slice(start, end));
  }
  return out;
}

function hexClass(c: string): string {
  return /[A-F]/.test(c) ? `[${c}${c.toLowerCase()}]` : c;
}

/** The lines of a multi-line secret that are secrets of their own (strong ones), trimmed. */
export function secretLines(secret: string): string[] {
  if (!/[\r\n]/.test(secret)) return [];
  return [...new Set(secret.split(/\r?\n|\r/).map((l) => l.trim()))].filter((l) => l !== '' && secretWeakness(l) === undefined);
}

/** Every form of `secret` to scrub (see the header). */
export function secretForms(secret: string): Form[] {
  if (secret === '') return [];
  const forms = new Map<string, Form>();
  const weak = secretWeakness(secret) !== undefined;
  const add = (plain: string, source: string, maxLength: number, wrapped = false) => {
    if (forms.has(source)) return;
    if (weak) {
      forms.set(source, {
        source: `${BEFORE}${source}${AFTER_IN_TEXT}`,
        streamSource: `${BEFORE}${source}${AFTER_IN_STREAM}`,
        lineSource: `${BEFORE}${source}${AFTER_IN_TEXT}`,
        plain,
        maxLength: maxLength + MAX_TRAILING_SPACE,
        wrapped,
        wholeValue: true,
      });
    } else {
      const lineSource = wrapped ? escapeRe(plain) : source;
      forms.set(source, { source, streamSource: source, lineSource, plain, maxLength, wrapped, wholeValue: false });
    }
  };
  const literal = (s: string) => {
    add(s, escapeRe(s), s.length);
    const uri = encodeURIComponent(s);
    // %2f and %2F decode the same.
    add(
      uri,
      escapeRe(uri).replace(/%([0-9A-F])([0-9A-F])/g, (_m, a: string, b: string) => `%${hexClass(a)}${hexClass(b)}`),
      uri.length,
    );
    const json = JSON.stringify(s).slice(1, -1);
    add(json, escapeRe(json), json.length);
  };
  literal(secret);
  if (!weak && secret.length <= MAX_ENCODED_LENGTH) {
    for (const f of base64Fragments(Buffer.from(secret, 'utf8'))) {
      for (const alphabet of [f, f.replace(/\+/g, '-').replace(/\//g, '_')]) {
        add(alphabet, [...alphabet].map(escapeRe).join('(?:\\r?\\n)?'), alphabet.length * 3, true);
      }
    }
  }
  for (const line of secretLines(secret)) literal(line);
  return [...forms.values()];
}
