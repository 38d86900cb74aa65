// The server's secret values: what redact.ts scrubs from every text and child-env.ts keeps
// out of every child's environment. One list: a flag that takes a secret (a password, an API
// secret) adds its value here.
import type { ServerConfig } from '../config.js';

export function serverSecretValues(cfg: Pick<ServerConfig, 'ghToken' | 'ghWebhookSecret'>): Array<string | undefined> {
  return [currentToken(cfg.ghToken), cfg.ghWebhookSecret];
}

/** The token now (--gh-token-file is read on each call); undefined while the file cannot be read. */
function currentToken(token: () => string): string | undefined {
  try { return token(); } catch { return undefined; }
}
