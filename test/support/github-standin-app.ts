// The GitHub App side of the GitHub stand-in: JWT authentication as the App (checked with the
// App's public key, refused with GitHub's 401 answers), installations, and installation tokens
// that expire (lifetime settable, so a test sees expiry and refresh within seconds). Tokens
// past their expiry get GitHub's 401 "Bad credentials" on every route.
import crypto, { type KeyObject } from 'node:crypto';
import type http from 'node:http';
import { DOCS_URL } from './github-standin-model.js';

export interface IssuedToken {
  token: string;
  installationId: number;
  issuedAtMs: number;
  expiresAtMs: number;
}

type Answer = [number, unknown, Record<string, string>?];

const unauthorized = (message: string): Answer => [401, { message, documentation_url: DOCS_URL }];
/** GitHub's answers to a JWT it will not take (401 each). */
export const JWT_UNDECODABLE = 'A JSON web token could not be decoded';
export const JWT_EXPIRED =
  "'Expiration time' claim ('exp') must be a numeric value representing the future time at which the assertion expires";
export const JWT_TOO_LONG = "'Expiration time' claim ('exp') is too far in the future";
export const JWT_IAT_FUTURE = "'Issued at' claim ('iat') must be an Integer representing the time that the assertion was issued";

export interface StandinAppOptions {
  appId: number;
  slug: string;
  publicKey: KeyObject;
  installations: Array<{ id: number; account: string }>;
  /** Lifetime of installation tokens; GitHub's is an hour. */
  tokenTtlMs?: number;
}

export class StandinApp {
  readonly issued: IssuedToken[] = [];
  /** JWTs the stand-in refused, with GitHub's message (for tests of the refusals). */
  readonly refusedJwts: string[] = [];
  tokenTtlMs: number;

  constructor(readonly opts: StandinAppOptions) {
    this.tokenTtlMs = opts.tokenTtlMs ?? 3600_000;
  }

  /** A new RSA key pair for an App, PEM private key as GitHub hands it out (PKCS#1). */
  static keyPair(): { privateKeyPem: string; publicKey: KeyObject } {
    const { privateKey, publicKey } = crypto.generateKeyPairSync('rsa', { modulusLength: 2048 });
    return { privateKeyPem: privateKey.export({ type: 'pkcs1', format: 'pem' }).toString(), publicKey };
  }

  /** Whether `authorization` carries an installation token that is still valid. */
  tokenState(authorization: string | undefined): 'valid' | 'expired' | 'unknown' {
    const m = /^(?:token|Bearer) (\S+)$/.exec(authorization ?? '');
    const t = m ? this.issued.find((i) => i.token === m[1]) : undefined;
    if (!t) return 'unknown';
    return Date.now() < t.expiresAtMs ? 'valid' : 'expired';
  }

  /** The App's own routes; undefined for every other path (the repo routes). */
  route(method: string, path: string, headers: http.IncomingHttpHeaders): Answer | undefined {
    const slugOf = /^\/apps\/([^/]+)$/.exec(path)?.[1];
    if (slugOf !== undefined && method === 'GET') {
      if (this.tokenState(headers.authorization) !== 'valid' && this.checkJwt(headers.authorization) !== undefined)
        return unauthorized('Bad credentials');
      if (slugOf.toLowerCase() !== this.opts.slug.toLowerCase()) return [404, { message: 'Not Found', documentation_url: DOCS_URL }];
      return [200, { id: this.opts.appId, slug: this.opts.slug, name: this.opts.slug, owner: { login: 'acme' } }];
    }
    if (!path.startsWith('/app/') && path !== '/app') return undefined;
    const refused = this.checkJwt(headers.authorization);
    if (refused !== undefined) {
      this.refusedJwts.push(refused);
      return unauthorized(refused);
    }
    if (path === '/app' && method === 'GET') return [200, { id: this.opts.appId, slug: this.opts.slug }];
    if (path === '/app/installations' && method === 'GET') {
      return [
        200,
        this.opts.installations.map((i) => ({
          id: i.id,
          app_id: this.opts.appId,
          app_slug: this.opts.slug,
          account: { login: i.account },
        })),
      ];
    }
    const tokenFor = /^\/app\/installations\/(\d+)\/access_tokens$/.exec(path)?.[1];
    if (tokenFor !== undefined && method === 'POST') {
      const id = Number(tokenFor);
      if (!this.opts.installations.some((i) => i.id === id)) return [404, { message: 'Not Found', documentation_url: DOCS_URL }];
      const issuedAtMs = Date.now();
      const t: IssuedToken = {
        token: `ghs_${crypto.randomBytes(18).toString('hex')}`,
        installationId: id,
        issuedAtMs,
        expiresAtMs: issuedAtMs + this.tokenTtlMs,
      };
      this.issued.push(t);
      // GitHub gives whole seconds; round down so the token never outlives what it says.
      const expiresAt = new Date(Math.floor(t.expiresAtMs / 1000) * 1000).toISOString().replace(/\.\d{3}Z$/, 'Z');
      t.expiresAtMs = Date.parse(expiresAt);
      return [201, { token: t.token, expires_at: expiresAt, permissions: { pull_requests: 'write' }, repository_selection: 'all' }];
    }
    return [404, { message: 'Not Found', documentation_url: DOCS_URL }];
  }

  /** GitHub's refusal message for a JWT, or undefined when it is good (signed by the App, current, at most 10 minutes). */
  checkJwt(authorization: string | undefined): string | undefined {
    const m = /^Bearer ([\w-]+)\.([\w-]+)\.([\w-]+)$/.exec(authorization ?? '');
    if (!m) return JWT_UNDECODABLE;
    const [, h, p, sig] = m as unknown as [string, string, string, string];
    let header: { alg?: unknown };
    let claims: { iat?: unknown; exp?: unknown; iss?: unknown };
    try {
      header = JSON.parse(Buffer.from(h, 'base64url').toString('utf8')) as typeof header;
      claims = JSON.parse(Buffer.from(p, 'base64url').toString('utf8')) as typeof claims;
    } catch {
      return JWT_UNDECODABLE;
    }
    if (header.alg !== 'RS256') return JWT_UNDECODABLE;
    const good = crypto.verify('RSA-SHA256', Buffer.from(`${h}.${p}`), this.opts.publicKey, Buffer.from(sig, 'base64url'));
    if (!good || String(claims.iss) !== String(this.opts.appId)) return JWT_UNDECODABLE;
    const now = Math.floor(Date.now() / 1000);
    if (typeof claims.exp !== 'number' || claims.exp <= now) return JWT_EXPIRED;
    if (typeof claims.iat !== 'number' || claims.iat > now + 60) return JWT_IAT_FUTURE;
    if (claims.exp - claims.iat > 600 || claims.exp > now + 600) return JWT_TOO_LONG;
    return undefined;
  }
}
