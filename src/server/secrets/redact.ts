// Scrubs the server's secret values (GitHub token, webhook secret, and whatever else a flag
// configures) from every text that leaves the server: PR comments, commit statuses, job logs
// (on disk and streamed), web pages, log lines. Defence in depth: children never get the
// secrets in their environment (see child-env.ts); this catches what gets out anyway, e.g.
// terraform echoing a file it read.
//
// Forms scrubbed, each replaced by REDACTED:
// - verbatim, encodeURIComponent form (hex digits of either case), JSON-escaped form;
// - base64, standard and URL-safe, at every byte alignment: the secret inside a longer
//   base64 text (`env | base64`) leaves the characters that depend only on its own bytes,
//   which differ with the secret's offset modulo 3; line breaks between them (base64's
//   76-column wrapping) are allowed.
// Secrets shorter than MIN_ENCODED_LENGTH are scrubbed in the first three forms only: their
// base64 fragments are a few characters, which ordinary text would match. So are secrets
// longer than MAX_ENCODED_LENGTH (a GitHub App's PEM key): the line-wrappable base64 forms of
// a 1.7 kB key made one regex that took 1.5 s to build and 12 ms per 4 kB line to run.
export const REDACTED = '[REDACTED]';
export const MIN_ENCODED_LENGTH = 8;
export const MAX_ENCODED_LENGTH = 256;

/** Source of secret values, called again at most every refresh interval (a token file may rotate). */
export type SecretSource = () => Iterable<string | undefined>;

interface Form {
  /** Regular-expression source that matches this form. */
  source: string;
  /** The form's text without line breaks: what a partial match at the end of a chunk starts like. */
  plain: string;
  /** Longest text it can match (line breaks included). */
  maxLength: number;
  /** base64: may be broken over lines. */
  wrapped: boolean;
}

const escapeRe = (s: string): string => s.replace(/[.*+?^${}()|[\]\\/-]/g, '\\$&');

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

/** Every form of `secret` to scrub (see the header). Pure; exported for its table test. */
export function secretForms(secret: string): Form[] {
  if (secret === '') return [];
  const forms = new Map<string, Form>();
  const add = (plain: string, source: string, maxLength: number, wrapped = false) => {
    if (!forms.has(source)) forms.set(source, { source, plain, maxLength, wrapped });
  };
  add(secret, escapeRe(secret), secret.length);
  const uri = encodeURIComponent(secret);
  // %2f and %2F decode the same.
  add(
    uri,
    escapeRe(uri).replace(/%([0-9A-F])([0-9A-F])/g, (_m, a: string, b: string) => `%${hexClass(a)}${hexClass(b)}`),
    uri.length,
  );
  const json = JSON.stringify(secret).slice(1, -1);
  add(json, escapeRe(json), json.length);
  if (secret.length >= MIN_ENCODED_LENGTH && secret.length <= MAX_ENCODED_LENGTH) {
    for (const f of base64Fragments(Buffer.from(secret, 'utf8'))) {
      for (const alphabet of [f, f.replace(/\+/g, '-').replace(/\//g, '_')]) {
        add(alphabet, [...alphabet].map(escapeRe).join('(?:\\r?\\n)?'), alphabet.length * 3, true);
      }
    }
  }
  return [...forms.values()];
}

function hexClass(c: string): string {
  return /[A-F]/.test(c) ? `[${c}${c.toLowerCase()}]` : c;
}

interface Compiled {
  key: string;
  re: RegExp | undefined;
  forms: Form[];
  maxLength: number;
  /** First characters of the forms: only where one is can a held-back tail start. */
  starts: Set<string>;
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
  private compiled: Compiled = { key: '', re: undefined, forms: [], maxLength: 0, starts: new Set() };

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
    const { re } = this.current();
    return re ? text.replace(re, REDACTED) : text;
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
        re: forms.length ? new RegExp(forms.map((f) => f.source).join('|'), 'g') : undefined,
        maxLength: Math.max(0, ...forms.map((f) => f.maxLength)),
        starts: new Set(forms.map((f) => f.plain[0]!)),
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
 * when it looks like the beginning of a secret.
 */
export class StreamRedactor {
  private carry = '';

  constructor(private readonly redactor: Redactor) {}

  push(chunk: string): string {
    const text = this.carry + chunk;
    const compiled = this.redactor.current();
    const { re, maxLength } = compiled;
    if (!re) {
      this.carry = '';
      return text;
    }
    let cut = heldFrom(text, compiled, Math.max(0, text.length - maxLength));
    // A match across the cut is emitted whole; what follows it may be held again.
    for (let i = 0; i < 8; i++) {
      const across = [...text.matchAll(re)].find((m) => m.index < cut && m.index + m[0].length > cut);
      if (!across) break;
      const end = across.index + across[0].length;
      cut = heldFrom(text, compiled, end);
    }
    this.carry = text.slice(cut);
    return text.slice(0, cut).replace(re, REDACTED);
  }

  /** The rest, scrubbed: the stream has ended. */
  flush(): string {
    const rest = this.carry;
    this.carry = '';
    return this.redactor.redact(rest);
  }
}

/**
 * Where, from `from` on, the text's end starts to look like the beginning of a form;
 * text.length if nowhere. A tail with a line break can only be the start of a wrapped base64
 * form, and only when its first line is base64 text.
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
    } else if (forms.some((f) => f.plain.startsWith(tail))) {
      return i;
    }
  }
  return text.length;
}

/** The process's redactor: log lines, and every server in this process, add their secrets here. */
export const processRedactor = new Redactor();
