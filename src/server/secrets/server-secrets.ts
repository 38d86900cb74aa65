// The server's secret values: what redact.ts scrubs from every text and child-env.ts keeps
// out of every child's environment. One list: a flag that takes a secret (a password, an API
// secret) adds its value here.
import { type ServerConfig, DEFAULT_WEB_PASSWORD } from '../config.js';
import { appKeySecretValues } from '../vcs/github-app.js';

type SecretSettings = Pick<ServerConfig, 'ghToken' | 'ghWebhookSecret'> &
  Partial<Pick<ServerConfig, 'webBasicAuth' | 'webPassword' | 'ghApp' | 'store' | 'apiSecret'>>;

export function serverSecretValues(cfg: SecretSettings): Array<string | undefined> {
  // A GitHub App's installation tokens are added as they are fetched (GitHubClient remembers them).
  const appKey = cfg.ghApp ? appKeySecretValues(cfg.ghApp.privateKeyPem) : [];
  const redis = cfg.store?.type === 'redis' ? cfg.store.redis : undefined;
  return [
    currentToken(cfg.ghToken),
    cfg.ghWebhookSecret,
    cfg.apiSecret,
    webPassword(cfg),
    redis?.password,
    redis?.sentinel?.password,
    redis?.sharedStateKey.secretText(),
    ...appKey,
  ];
}

/** The token now (--gh-token-file is read on each call); undefined while the file cannot be read. */
function currentToken(token: () => string): string | undefined {
  try {
    return token();
  } catch {
    return undefined;
  }
}

/** The default password is no secret, and scrubbing "atlantis" would blank most log lines. */
function webPassword(cfg: SecretSettings): string | undefined {
  return cfg.webBasicAuth && cfg.webPassword !== DEFAULT_WEB_PASSWORD ? cfg.webPassword : undefined;
}
