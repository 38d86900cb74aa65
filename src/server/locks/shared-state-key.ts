// The key the replicas sharing one Redis (`--shared-state-key-file`) sign what they keep there
// with, and check what they read back against. Redis never sees it. Why: anyone who can write
// to Redis could otherwise hand a replica a plan to apply, a command to run, or a URL to send
// webhooks to; with the key, a record that was not written by a replica holding it (or was
// moved to another PR, project or replica) fails its check and is refused.
//
// A code is HMAC-SHA256 over the JSON array [kind, ...parts]: JSON makes the encoding
// injective (no two lists of strings, numbers, booleans and nulls give the same text), and the
// kind ("plan/v1", "replica/v1", ...) keeps a code made for one sort of record from passing as
// another's. The key itself never leaves this object: not in JSON, not in util.inspect.
import { createHmac, timingSafeEqual } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { inspect } from 'node:util';

/** The shortest key accepted, in bytes: HMAC-SHA256's own block of security. */
export const MIN_SHARED_STATE_KEY_BYTES = 32;

export type MacPart = string | number | boolean | null;

export class SharedStateKey {
  readonly #key: Buffer;

  private constructor(key: Buffer) {
    this.#key = Buffer.from(key);
  }

  /** A key of these bytes; throws (without the bytes in the message) when it is too short. */
  static fromBytes(bytes: Buffer): SharedStateKey {
    if (bytes.length < MIN_SHARED_STATE_KEY_BYTES)
      throw new Error(`it holds ${bytes.length} bytes, at least ${MIN_SHARED_STATE_KEY_BYTES} are needed (e.g. openssl rand -hex 32)`);
    return new SharedStateKey(bytes);
  }

  /**
   * The key in `file`: its bytes with trailing whitespace removed (a Secret written from a shell
   * often ends with a newline; every replica reads the same file, so they agree either way).
   */
  static readFile(file: string): SharedStateKey {
    const raw = readFileSync(file);
    let end = raw.length;
    while (end > 0 && [0x20, 0x09, 0x0a, 0x0d].includes(raw[end - 1] as number)) end--;
    return SharedStateKey.fromBytes(raw.subarray(0, end));
  }

  /** The authentication code (hex) of one record of sort `kind`. */
  mac(kind: string, parts: readonly MacPart[]): string {
    return createHmac('sha256', this.#key)
      .update(JSON.stringify([kind, ...parts]), 'utf8')
      .digest('hex');
  }

  /** Whether `code` is the code of these parts; anything but a string of the right length is false. */
  verify(kind: string, parts: readonly MacPart[], code: unknown): boolean {
    if (typeof code !== 'string' || code.length !== 64) return false;
    const want = Buffer.from(this.mac(kind, parts), 'hex');
    const got = Buffer.from(code, 'hex');
    return got.length === want.length && timingSafeEqual(got, want);
  }

  /** The key as text, for the redactor: a key that is text (hex, base64) is scrubbed like any secret. */
  secretText(): string {
    return this.#key.toString('utf8');
  }

  toJSON(): string {
    return '[shared state key]';
  }

  [inspect.custom](): string {
    return 'SharedStateKey [redacted]';
  }
}
