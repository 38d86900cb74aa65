// The environment every child of the server (terraform, git, workflow `run` and `env` steps)
// starts from: the server's own environment minus its settings and secrets. Atlantis passes
// its whole environment on, so `file("/proc/self/environ")` in a PR's .tf, or
// `-var-file=/proc/self/environ` in a comment, printed ATLANTIS_GH_TOKEN and the webhook
// secret into the PR. What is left is what terraform and its providers need: cloud
// credentials (AWS_*, GOOGLE_*, ARM_*, ...), TF_VAR_*, PATH, HOME, proxies, and whatever a
// user put in the pod's env for them.

/** Names GitHub tooling reads a token from; withheld when they hold a secret (rule 2 below), listed for the docs and tests. */
export const GITHUB_TOKEN_VARS = ['GITHUB_TOKEN', 'GH_TOKEN', 'GITHUB_PAT', 'GH_ENTERPRISE_TOKEN', 'GITHUB_ENTERPRISE_TOKEN'];

export type WithheldReason = 'server-setting' | 'holds-secret';

export interface ChildEnv {
  env: Record<string, string>;
  /** Names left out and why (never values), for a log line at start. */
  withheld: Array<{ name: string; reason: WithheldReason }>;
}

/**
 * Decides the children's environment. Left out:
 * 1. every `ATLANTIS_*` variable: the server's own settings (the token, the webhook secret,
 *    the token file's path, ...), whatever the case of the name;
 * 2. every variable whose value contains a secret value (e.g. GITHUB_TOKEN set to the token,
 *    or a URL with the token in it), however short the secret.
 * Everything else is passed on unchanged.
 */
export function childEnv(serverEnv: Readonly<Record<string, string | undefined>>, secrets: readonly string[]): ChildEnv {
  const env: Record<string, string> = {};
  const withheld: ChildEnv['withheld'] = [];
  const nonEmpty = secrets.filter((s) => s.length > 0);
  for (const [name, value] of Object.entries(serverEnv)) {
    if (value === undefined) continue;
    if (name.toUpperCase().startsWith('ATLANTIS_')) withheld.push({ name, reason: 'server-setting' });
    else if (nonEmpty.some((s) => value.includes(s))) withheld.push({ name, reason: 'holds-secret' });
    else env[name] = value;
  }
  return { env, withheld };
}
