// --web-basic-auth: HTTP Basic authentication of the web page, job pages, job logs and their
// live streams, with Atlantis v0.47's rules (server/middleware.go): a few exact paths stay open
// (webhooks, probes and the drain status the controller reads), everything else needs the
// configured username and password. Pure decisions here; app.ts applies them.
import { createHash, timingSafeEqual } from 'node:crypto';
import { LIVENESS_PATH, READINESS_PATH, STATUS_PATH } from '../../contract/drain-protocol.js';

export interface WebAuthConfig {
  username: string;
  password: string;
}

/**
 * Paths answered without credentials, compared exactly to the request's path (no query) as
 * Atlantis does. Anything else, including unknown paths and variants such as `/status/` or
 * `/STATUS`, needs credentials, except what starts with API_PATH_PREFIX.
 */
export const OPEN_PATHS: ReadonlySet<string> = new Set(['/events', LIVENESS_PATH, READINESS_PATH, STATUS_PATH]);
/** As Atlantis: the API has its own secret (--api-secret, http/api.ts), so `/api/...` is open here. */
export const API_PATH_PREFIX = '/api/';

/** Atlantis's challenge, byte for byte. */
export const WWW_AUTHENTICATE = 'Basic realm="restricted", charset="UTF-8"';
/** Atlantis's body (Go's http.Error adds the newline). */
export const UNAUTHORIZED_BODY = 'Unauthorized\n';

export type WebAuthDecision =
  | { kind: 'open' }
  | { kind: 'allowed' }
  /** No usable Basic credentials were sent (Atlantis logs nothing). */
  | { kind: 'missing' }
  /** Credentials were sent and are wrong (Atlantis logs an "[INVALID] log in attempt"). */
  | { kind: 'wrong' };

/** Username and password of an `Authorization: Basic ...` header, as Go's Request.BasicAuth reads it. */
export function parseBasicAuth(header: string | undefined): { username: string; password: string } | undefined {
  if (header === undefined || header.length < 6 || header.slice(0, 6).toLowerCase() !== 'basic ') return undefined;
  const encoded = header.slice(6);
  // Strict standard base64 with padding, as Go's StdEncoding: Node's decoder skips junk silently.
  if (encoded.length % 4 !== 0 || !/^[A-Za-z0-9+/]*={0,2}$/.test(encoded)) return undefined;
  const decoded = Buffer.from(encoded, 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  if (colon < 0) return undefined;
  return { username: decoded.slice(0, colon), password: decoded.slice(colon + 1) };
}

/** Equality whose time depends on neither the position of the first difference nor the lengths. */
function sameSecret(given: string, expected: string): boolean {
  const digest = (s: string) => createHash('sha256').update(s, 'utf8').digest();
  return timingSafeEqual(digest(given), digest(expected));
}

/** Whether a request for `path` may go on. `auth` undefined: basic auth is off, every path is open. */
export function decideWebAuth(path: string, authorization: string | undefined, auth: WebAuthConfig | undefined): WebAuthDecision {
  if (!auth || OPEN_PATHS.has(path) || path.startsWith(API_PATH_PREFIX)) return { kind: 'open' };
  const creds = parseBasicAuth(authorization);
  if (!creds) return { kind: 'missing' };
  // Both compared every time: which one was wrong must not show in the timing either.
  const userOk = sameSecret(creds.username, auth.username);
  const passOk = sameSecret(creds.password, auth.password);
  return userOk && passOk ? { kind: 'allowed' } : { kind: 'wrong' };
}
