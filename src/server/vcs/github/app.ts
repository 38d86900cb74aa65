// GitHub App authentication (--gh-app-id with --gh-app-key or --gh-app-key-file), as Atlantis
// v0.47 does it: a short-lived JWT signed with the App's private key (RS256, node:crypto)
// authenticates as the App; with it the server finds its installation (GET /app/installations,
// exactly one, unless --gh-app-installation-id names it) and asks for installation tokens
// (POST /app/installations/<id>/access_tokens). Everything else (comments, statuses, git
// clones) uses the installation token, fetched again shortly before it expires (GitHub gives
// them an hour). With --gh-app-slug the bot's login is `<slug>[bot]`, read from GET
// /apps/<slug> at start as Atlantis does; its own comments are recognised by it.
//
// The key, the JWTs and the tokens are secrets: the redactor learns each one before it is used
// (server-secrets.ts for the key, GitHubClient.authHeader for JWTs and tokens).
import { type KeyObject, createPrivateKey, createSign } from 'node:crypto';
import { UsageError } from '../../../config/flags.js';
import type { Logger } from '../../../log.js';
import { nullLogger } from '../../../log.js';
import { type Redactor, processRedactor } from '../../secrets/redact.js';
import { GitHubApiError, GitHubClient, type GitHubClientOptions, type RetryOptions } from './client.js';
import { githubErrorText } from './error-text.js';

export interface GitHubAppSettings {
  appId: number;
  /** The App's private key, PEM (PKCS#1 as GitHub hands it out, or PKCS#8). */
  privateKeyPem: string;
  /** --gh-app-installation-id; undefined: the App's only installation. */
  installationId?: number;
  /** --gh-app-slug; undefined: the bot's login is not known (Atlantis then knows none either). */
  slug?: string;
}

export interface InstallationToken {
  token: string;
  expiresAtMs: number;
  /** When we received it (our clock), to size the refresh margin to the token's lifetime. */
  fetchedAtMs: number;
}

/** GitHub refuses JWTs valid for more than 10 minutes; iat is set back for clock drift, as GitHub advises. */
const JWT_BACKDATE_S = 60;
const JWT_LIFETIME_S = 9 * 60;
/** Atlantis (ghinstallation) takes a new token one minute before the old one expires. */
const MAX_REFRESH_MARGIN_MS = 60_000;

const b64url = (b: Buffer | string): string => Buffer.from(b).toString('base64url');

/** Reads the App's key; the message never contains the key (it is a secret). */
export function parseAppPrivateKey(pem: string): KeyObject {
  let key: KeyObject;
  try {
    key = createPrivateKey({ key: pem, format: 'pem' });
  } catch {
    throw new Error('not a private key in PEM form');
  }
  if (key.asymmetricKeyType !== 'rsa')
    throw new Error(`not an RSA key (got ${key.asymmetricKeyType ?? 'unknown'}); GitHub Apps sign with RS256`);
  return key;
}

/**
 * The JWT that authenticates as the App at `nowMs`. Deterministic (RS256 is PKCS#1 v1.5), so
 * it is table-testable.
 */
export function appJwt(appId: number, key: KeyObject, nowMs: number): string {
  const now = Math.floor(nowMs / 1000);
  const header = b64url(JSON.stringify({ alg: 'RS256', typ: 'JWT' }));
  const payload = b64url(JSON.stringify({ iat: now - JWT_BACKDATE_S, exp: now + JWT_LIFETIME_S, iss: String(appId) }));
  const signature = createSign('RSA-SHA256').update(`${header}.${payload}`).sign(key);
  return `${header}.${payload}.${b64url(signature)}`;
}

/**
 * Whether a new installation token must be fetched before the next call (pure). A token is
 * replaced one minute before it expires (Atlantis's margin), or a quarter of its lifetime
 * before when it lives less than four minutes (short-lived tokens in tests), so no call goes
 * out with a token about to expire on the way.
 */
export function tokenNeedsRefresh(t: InstallationToken | undefined, nowMs: number): boolean {
  if (t === undefined) return true;
  const margin = Math.min(MAX_REFRESH_MARGIN_MS, Math.max(0, t.expiresAtMs - t.fetchedAtMs) / 4);
  return nowMs >= t.expiresAtMs - margin;
}

/**
 * Texts that must never leave the server once the key is known: the PEM, and its base64 body
 * on one line (as a JSON or YAML dump of the key may show it). Both are longer than the
 * redactor's MAX_ENCODED_LENGTH, so they are matched as they are, cheaply.
 */
export function appKeySecretValues(pem: string): string[] {
  const body = pem
    .split(/\r?\n/)
    .map((l) => l.trim())
    .filter((l) => l !== '' && !l.startsWith('-----'))
    .join('');
  return [pem.trim(), body];
}

/** The REST client with the App's own endpoints (as the App with a JWT, or /apps/<slug> with any token). */
export class GitHubAppApi extends GitHubClient {
  /** IDs of the App's installations (GET /app/installations, every page). */
  async listAppInstallations(): Promise<number[]> {
    const list = await this.paginate<{ id?: unknown }>('/app/installations?per_page=100');
    return list.map((i) => i.id).filter((id): id is number => typeof id === 'number');
  }

  /** A new installation token (POST /app/installations/<id>/access_tokens). */
  async createInstallationToken(installationId: number): Promise<{ token: string; expiresAt: string }> {
    const r = await this.request('POST', `/app/installations/${encodeURIComponent(String(installationId))}/access_tokens`, {
      body: {},
      // A repeat only makes another token; the first is simply never used.
      idempotent: true,
    });
    const j = (r.json ?? {}) as { token?: unknown; expires_at?: unknown };
    if (typeof j.token !== 'string' || j.token === '')
      throw new GitHubApiError('POST', '/app/installations/:id/access_tokens', r.status, 'no token in the answer');
    return { token: j.token, expiresAt: typeof j.expires_at === 'string' ? j.expires_at : '' };
  }

  /** GET /apps/<slug>: the App as GitHub spells it. */
  async getApp(slug: string): Promise<{ slug: string; id?: number }> {
    const r = await this.request('GET', `/apps/${encodeURIComponent(slug)}`, { idempotent: true });
    const j = (r.json ?? {}) as { slug?: unknown; id?: unknown };
    if (typeof j.slug !== 'string') throw new GitHubApiError('GET', `/apps/${slug}`, r.status, 'no slug in the answer');
    return typeof j.id === 'number' ? { slug: j.slug, id: j.id } : { slug: j.slug };
  }
}

export interface GitHubAppTokensOptions {
  settings: GitHubAppSettings;
  /** REST base URL (https://api.github.com, GitHub Enterprise's /api/v3, or the stand-in). */
  baseUrl: string;
  logger?: Logger;
  redactor?: Redactor;
  retry?: RetryOptions;
  now?: () => number;
}

/** Installation tokens of one App installation, fetched when needed and shared by every caller. */
export class GitHubAppTokens {
  private readonly key: KeyObject;
  private readonly appClient: GitHubAppApi;
  private readonly log: Logger;
  private readonly now: () => number;
  private readonly redactor: Redactor;
  private installationId: number | undefined;
  private current: InstallationToken | undefined;
  /** One refresh at a time: concurrent callers wait for the same answer. */
  private inFlight: Promise<InstallationToken> | undefined;

  constructor(private readonly opts: GitHubAppTokensOptions) {
    this.key = parseAppPrivateKey(opts.settings.privateKeyPem);
    this.log = opts.logger ?? nullLogger();
    this.now = opts.now ?? Date.now;
    this.redactor = opts.redactor ?? processRedactor;
    this.installationId = opts.settings.installationId;
    // Calls as the App authenticate with a JWT (GitHub wants `Bearer`), reused while it has
    // over a minute left: each new one is another secret for the redactor to hold.
    let jwt: { value: string; until: number } | undefined;
    const currentJwt = (): string => {
      const now = this.now();
      if (!jwt || now >= jwt.until) jwt = { value: appJwt(opts.settings.appId, this.key, now), until: now + (JWT_LIFETIME_S - 60) * 1000 };
      return jwt.value;
    };
    this.appClient = new GitHubAppApi({
      baseUrl: opts.baseUrl,
      token: currentJwt,
      authScheme: 'Bearer',
      logger: this.log,
      redactor: this.redactor,
      ...(opts.retry ? { retry: opts.retry } : {}),
    });
  }

  /** A valid installation token, fetched first when there is none or it is about to expire. */
  async token(): Promise<string> {
    if (!tokenNeedsRefresh(this.current, this.now())) return this.current!.token;
    this.inFlight ??= this.fetch().finally(() => {
      this.inFlight = undefined;
    });
    return (await this.inFlight).token;
  }

  /** The token in use, without fetching (for the redactor, which is synchronous). */
  currentToken(): string | undefined {
    return this.current?.token;
  }

  /** GitHub refused `token` (revoked, or expired early): the next call fetches a new one. */
  invalidate(token: string): void {
    if (this.current?.token === token) this.current = undefined;
  }

  /**
   * `<slug>[bot]`, the login of the App's comments, with the slug as GitHub spells it (GET
   * /apps/<slug> with the installation token, as Atlantis does at start); undefined without a slug.
   */
  async botLogin(client: GitHubAppApi): Promise<string | undefined> {
    const slug = this.opts.settings.slug;
    if (!slug) return undefined;
    const app = await client.getApp(slug);
    return `${app.slug}[bot]`;
  }

  private async fetch(): Promise<InstallationToken> {
    const id = await this.installation();
    const fetchedAtMs = this.now();
    const t = await this.appClient.createInstallationToken(id);
    this.redactor.remember(t.token);
    const expiresAtMs = Date.parse(t.expiresAt);
    // A missing or odd expiry: assume GitHub's hour, and refresh early by the margin.
    this.current = { token: t.token, fetchedAtMs, expiresAtMs: Number.isNaN(expiresAtMs) ? fetchedAtMs + 3600_000 : expiresAtMs };
    this.log.info('GitHub App installation token fetched', { installationId: id, expiresAt: t.expiresAt });
    return this.current;
  }

  private async installation(): Promise<number> {
    if (this.installationId !== undefined) return this.installationId;
    const ids = await this.appClient.listAppInstallations();
    // Atlantis's rule and words: without --gh-app-installation-id the App must have exactly one.
    if (ids.length !== 1) throw new Error(`wrong number of installations, expected 1, found ${ids.length}`);
    this.installationId = ids[0]!;
    this.log.info('GitHub App installation found', { installationId: this.installationId });
    return this.installationId;
  }
}

/**
 * How the server authenticates to GitHub (host.ts): the token (a --gh-token / file, or the
 * App's installation tokens) for the REST client and for git, and the bot's login at start.
 */
export function githubAuth(
  s: { app: GitHubAppSettings | undefined; token: () => string; apiUrl: string },
  logger: Logger,
): {
  clientOptions: Pick<GitHubClientOptions, 'tokenRejected'> & { token: () => string | Promise<string> };
  botLogin: () => Promise<string | undefined>;
} {
  if (!s.app) return { clientOptions: { token: s.token }, botLogin: async () => undefined };
  const tokens = new GitHubAppTokens({ settings: s.app, baseUrl: s.apiUrl, logger });
  const clientOptions = { token: () => tokens.token(), tokenRejected: (t: string) => tokens.invalidate(t) };
  return {
    clientOptions,
    // Atlantis stops at start the same way, in its words: the client (installation, token)
    // first, then the App's details.
    botLogin: async () => {
      if (!s.app?.slug) return undefined;
      try {
        await tokens.token();
      } catch (e) {
        throw new UsageError(`getting user: initializing client: ${githubErrorText(e, s.apiUrl)}`);
      }
      try {
        return await tokens.botLogin(new GitHubAppApi({ baseUrl: s.apiUrl, logger, ...clientOptions }));
      } catch (e) {
        throw new UsageError(`getting user: getting app details: ${githubErrorText(e, s.apiUrl)}`);
      }
    },
  };
}
