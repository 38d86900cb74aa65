// Scrubs the server's secret values (GitHub token, webhook secret, and whatever else a flag
// configures) from every text that leaves the server: PR comments, commit statuses, job logs
// (on disk and streamed), web pages, log lines. Defence in depth: children never get the
// secrets in their environment (see child-env.ts) and cannot read the server's own (see
// non-dumpable.ts); this catches what gets out anyway, e.g. terraform echoing a file it read.
// Which forms of a secret are scrubbed, and how a weak or multi-line one is: secret-forms.ts.
// Structured output stays valid: JSON is scrubbed inside its string values (redactValue),
// never as text.
import { type Form, REDACTED, secretForms } from './secret-forms.js';

export { MAX_ENCODED_LENGTH, MIN_ENCODED_LENGTH, REDACTED, base64Fragments, secretForms, secretWeakness } from './secret-forms.js';

/** Source of secret values, called again at most every refresh interval (a token file may rotate). */
export type SecretSource = () => Iterable<string | undefined>;

interface Compiled {
  key: string;
  forms: Form[];
  maxLength: number;
  /** First characters of the forms: only where one is can a held-back tail start. */
  starts: Set<string>;
  /** The forms' regexes, built on first use (see regexFor). */
  regexes: Map<string, RegExp>;
}

/**
 * The regex of every form, for a whole text or a stream's chunk (weak secrets' forms do not
 * match at its end). A text without line breaks gets the wrapped forms as plain literals: the
 * same matches, and no server pays for the line-breakable regex until a text has a break
 * (most log lines never do).
 */
function regexFor(c: Compiled, text: string, stream: boolean): RegExp | undefined {
  if (c.forms.length === 0) return undefined;
  const broken = /[\r\n]/.test(text);
  const key = `${stream ? 'stream' : 'text'}${broken ? '' : ', one line'}`;
  let re = c.regexes.get(key);
  if (!re) {
    const source = (f: Form): string => (!broken && f.wrapped ? f.lineSource : stream ? f.streamSource : f.source);
    re = new RegExp(c.forms.map(source).join('|'), 'g');
    c.regexes.set(key, re);
  }
  return re;
}

/** Remembered secret values at most: a rotated token's old values stay scrubbed. */
const MAX_REMEMBERED = 64;

export class Redactor {
  private readonly sources: SecretSource[] = [];
  /** Every value the sources have given, oldest first. */
  private remembered: string[] = [];
  private readAt = -Infinity;
  /** What the sources gave at the last refresh: never pushed out by remembered values. */
  private fromSources = new Set<string>();
  private compiled: Compiled = { key: '', forms: [], maxLength: 0, starts: new Set(), regexes: new Map() };

  /** `refreshMs`: how long values read from the sources are used before asking them again. */
  constructor(
    sources: SecretSource[] = [],
    private readonly refreshMs = 1000,
  ) {
    for (const s of sources) this.addSource(s);
  }

  addSource(source: SecretSource): void {
    this.sources.push(source);
    this.readAt = -Infinity;
  }

  /** The secret values: current ones and those seen before (a rotated token). */
  values(): string[] {
    this.refresh();
    return [...this.remembered];
  }

  redact(text: string): string {
    const re = regexFor(this.current(), text, false);
    return re ? text.replace(re, REDACTED) : text;
  }

  /**
   * A copy of a value bound for JSON with every string value in it scrubbed (an Error becomes
   * its name and message, as the log shows it): the JSON text stays valid whatever a secret
   * is, where scrubbing the text would turn `false` into `[REDACTED]`. Keys are the code's
   * own names, left as they are.
   */
  redactValue<T>(v: T): T {
    if (typeof v === 'string') return this.redact(v) as T;
    if (typeof v !== 'object' || v === null) return v;
    if (v instanceof Error) return { message: this.redact(v.message), name: v.name } as T;
    const json = (v as { toJSON?: () => unknown }).toJSON;
    if (typeof json === 'function') return this.redactValue(json.call(v)) as T;
    if (Array.isArray(v)) return v.map((x) => this.redactValue(x)) as T;
    return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, this.redactValue(x)])) as T;
  }

  /** A redactor for one stream of chunks: a secret split across chunks is still scrubbed. */
  stream(): StreamRedactor {
    return new StreamRedactor(this);
  }

  /** @internal for StreamRedactor */
  current(): Compiled {
    this.refresh();
    const key = this.remembered.join('\u0000');
    if (key !== this.compiled.key) {
      const forms = this.remembered.flatMap(secretForms).sort((a, b) => b.plain.length - a.plain.length);
      this.compiled = {
        key,
        forms,
        maxLength: Math.max(0, ...forms.map((f) => f.maxLength)),
        starts: new Set(forms.map((f) => f.plain[0]!)),
        regexes: new Map(),
      };
    }
    return this.compiled;
  }

  private refresh(): void {
    const now = performance.now();
    if (now - this.readAt < this.refreshMs) return;
    this.readAt = now;
    const current = new Set<string>();
    for (const source of this.sources) {
      let values: Iterable<string | undefined>;
      try {
        values = source();
      } catch {
        continue;
      } // e.g. a token file being replaced: keep what we had
      for (const v of values) {
        if (v) current.add(v);
        this.remember(v);
      }
    }
    this.fromSources = current;
  }

  /** Adds one value (e.g. a token a client was just given); kept until MAX_REMEMBERED newer ones push it out. */
  remember(value: string | undefined): void {
    if (!value || this.remembered.includes(value)) return;
    this.remembered.push(value);
    if (this.remembered.length <= MAX_REMEMBERED) return;
    // The oldest value no source gives any more (an old token), never the webhook secret: a
    // GitHub App's hourly tokens would otherwise push it out until the next refresh.
    const old = this.remembered.findIndex((v) => !this.fromSources.has(v));
    this.remembered.splice(Math.max(old, 0), 1);
  }
}

/**
 * Scrubs a stream (a process's output) chunk by chunk. The end of a chunk that could be the
 * start of a secret's form is held back until the next chunk or flush(): text is delayed only
 * when it looks like the beginning of a secret (or a weak secret waiting for its line to end).
 * The end of what was passed on is kept as context: whether a weak secret stands as a whole
 * value depends on what stands before it.
 */
export class StreamRedactor {
  private carry = '';
  /** The last characters passed on (from the last line break, at most CONTEXT). */
  private before = '';

  constructor(private readonly redactor: Redactor) {}

  push(chunk: string): string {
    const text = this.carry + chunk;
    const compiled = this.redactor.current();
    const streamRe = regexFor(compiled, this.before + text, true);
    if (!streamRe) {
      this.carry = '';
      this.passedOn(text);
      return text;
    }
    const found = matches(this.before, text, streamRe);
    let cut = heldFrom(text, compiled, Math.max(0, text.length - compiled.maxLength));
    // A match across the cut is emitted whole; what follows it may be held again.
    for (let i = 0; i < 8; i++) {
      const across = found.find(([start, end]) => start < cut && end > cut);
      if (!across) break;
      cut = heldFrom(text, compiled, across[1]);
    }
    this.carry = text.slice(cut);
    const out = text.slice(0, cut);
    this.passedOn(out);
    return replaced(
      out,
      found.filter(([, end]) => end <= cut),
    );
  }

  /** The rest, scrubbed: the stream has ended. */
  flush(): string {
    const rest = this.carry;
    this.carry = '';
    const re = regexFor(this.redactor.current(), this.before + rest, false);
    const out = re ? replaced(rest, matches(this.before, rest, re)) : rest;
    this.passedOn(rest);
    return out;
  }

  private passedOn(text: string): void {
    const joined = this.before + text;
    const line = Math.max(joined.lastIndexOf('\n'), joined.lastIndexOf('\r'), joined.lastIndexOf('\0'));
    this.before = joined.slice(Math.max(line, joined.length - CONTEXT));
  }
}

/** Context kept before a stream's next chunk: a weak secret's indentation, at most. */
const CONTEXT = 256;

/** [start, end) of each match of `re` in `text`, read with `before` in front of it. */
function matches(before: string, text: string, re: RegExp): Array<[number, number]> {
  const out: Array<[number, number]> = [];
  for (const m of (before + text).matchAll(re)) {
    const start = m.index - before.length;
    if (start >= 0) out.push([start, start + m[0].length]);
  }
  return out;
}

function replaced(text: string, ranges: ReadonlyArray<[number, number]>): string {
  let out = '';
  let at = 0;
  for (const [start, end] of ranges) {
    if (start < at) continue;
    out += text.slice(at, start) + REDACTED;
    at = end;
  }
  return out + text.slice(at);
}

/**
 * Where, from `from` on, the text's end starts to look like the beginning of a form;
 * text.length if nowhere. A tail with a line break can only be the start of a wrapped base64
 * form, and only when its first line is base64 text. A weak secret's whole form is held too,
 * with spaces after it, until what follows shows whether it ends a value.
 */
function heldFrom(text: string, { forms, starts }: Compiled, from: number): number {
  for (let i = from; i < text.length; i++) {
    if (!starts.has(text[i]!)) continue;
    const tail = text.slice(i);
    const broken = /[\r\n]/.test(tail);
    if (broken) {
      const lineStart = Math.max(text.lastIndexOf('\n', i - 1), text.lastIndexOf('\r', i - 1)) + 1;
      const firstLine = text.slice(lineStart, i + tail.search(/[\r\n]/));
      if (!/^[A-Za-z0-9+/_-]+$/.test(firstLine)) continue;
      const plain = tail.replace(/[\r\n]/g, '');
      if (plain !== '' && forms.some((f) => f.wrapped && f.plain.startsWith(plain))) return i;
    } else if (
      forms.some(
        (f) => f.plain.startsWith(tail) || (f.wholeValue && tail.startsWith(f.plain) && /^[ \t]*$/.test(tail.slice(f.plain.length))),
      )
    ) {
      return i;
    }
  }
  return text.length;
}

/** The process's redactor: log lines, and every server in this process, add their secrets here. */
export const processRedactor = new Redactor();
