// The server's secret values: what redact.ts scrubs from every text and child-env.ts keeps
// out of every child's environment. One list: a flag that takes a secret (a password, an API
// secret) adds its value here.
import { type ServerConfig, DEFAULT_WEB_PASSWORD } from '../config.js';
import { vcsSecrets } from '../vcs/host-config.js';
import { type Weakness, secretWeakness } from './secret-forms.js';

type SecretSettings = Pick<ServerConfig, 'vcs'> &
  Partial<Pick<ServerConfig, 'webBasicAuth' | 'webPassword' | 'store' | 'apiSecret' | 'webhooks'>>;

export function serverSecretValues(cfg: SecretSettings): Array<string | undefined> {
  // The code host's: its token and webhook secret, a GitHub App's key (its installation tokens are added as they are fetched).
  const host = vcsSecrets(cfg.vcs);
  const redis = cfg.store?.type === 'redis' ? cfg.store.redis : undefined;
  return [
    ...host.byFlag.map(([, value]) => value),
    cfg.apiSecret,
    webPassword(cfg),
    redis?.password,
    redis?.sentinel?.password,
    redis?.sharedStateKey.secretText(),
    ...host.more,
    // --webhook-http-headers carry a notification endpoint's credentials (an Authorization header).
    ...Object.values(cfg.webhooks?.headers ?? {}).flat(),
  ];
}

/**
 * The settings whose secret is weak (secret-forms.ts: short, or one word or number), by flag,
 * never with the value: the server warns at start that each is scrubbed only where it stands
 * as a whole value. (A GitHub token or App key is never weak.)
 */
export function weakSecretSettings(cfg: SecretSettings): Array<{ flag: string; weakness: Weakness }> {
  const redis = cfg.store?.type === 'redis' ? cfg.store.redis : undefined;
  const settings: Array<[string, string | undefined]> = [
    ...vcsSecrets(cfg.vcs).byFlag,
    ['--api-secret', cfg.apiSecret],
    ['--web-password', webPassword(cfg)],
    ['--redis-password', redis?.password],
    ['--redis-sentinel-password', redis?.sentinel?.password],
  ];
  const out: Array<{ flag: string; weakness: Weakness }> = [];
  for (const [flag, value] of settings) {
    const weakness = value ? secretWeakness(value) : undefined;
    if (weakness) out.push({ flag, weakness });
  }
  return out;
}

/** The default password is no secret, and scrubbing "atlantis" would blank most log lines. */
function webPassword(cfg: SecretSettings): string | undefined {
  return cfg.webBasicAuth && cfg.webPassword !== DEFAULT_WEB_PASSWORD ? cfg.webPassword : undefined;
}
