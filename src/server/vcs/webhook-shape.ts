// What every host's webhook parser shares: the HMAC-SHA256 check of a hex signature, and the
// structural checks of a JSON payload (a Malformed error names the field that is wrong).
import crypto from 'node:crypto';

/** Whether `hex` is HMAC-SHA256(secret, body); constant-time in the signature's bytes. */
export function hmacSha256Matches(secret: string, body: Buffer, hex: string): boolean {
  const given = Buffer.from(hex.toLowerCase(), 'hex');
  const expected = crypto.createHmac('sha256', secret).update(body).digest();
  return given.length === expected.length && crypto.timingSafeEqual(given, expected);
}

export class Malformed extends Error {}

export type Obj = Record<string, unknown>;

export function obj(v: unknown, where: string): Obj {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) throw new Malformed(`${where} must be an object`);
  return v as Obj;
}

export function str(o: Obj, k: string, where: string): string {
  const v = o[k];
  if (typeof v !== 'string') throw new Malformed(`${where}.${k} must be a string`);
  return v;
}
