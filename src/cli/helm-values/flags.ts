// What the server does with an Atlantis flag that a chart's values set (a value such as
// logLevel, an `environment` entry ATLANTIS_*, a key of `config`, an `extraArgs` item): the
// server's own flag table (config/atlantis-flags.ts, server/server-flags.ts) decides, so a flag
// this server learns to honour is converted without a change here. Pure.
import { ATLANTIS_FLAGS } from '../../config/atlantis-flags.js';
import { envNameFor, type FlagType } from '../../config/flags.js';
import { OPERATOR_ENV, STORE_ENV } from '../../controller/resources/reserved.js';
import { SERVER_FLAGS } from '../../server/server-flags.js';

/** Flags whose value is a secret: never copied; the AtlantisDeployment reads them from a Secret. */
export const SECRET_FLAGS: ReadonlySet<string> = new Set([
  'gh-token',
  'gh-webhook-secret',
  'gh-app-key',
  'api-secret',
  'web-password',
  'redis-password',
  'redis-sentinel-password',
  'gitlab-token',
  'gitlab-webhook-secret',
  'gitea-token',
  'gitea-webhook-secret',
  'bitbucket-token',
  'bitbucket-webhook-secret',
  'azuredevops-token',
  'azuredevops-webhook-password',
  'slack-token',
  'tfe-token',
]);

/**
 * Whether a variable holds a secret by its name (GITHUB_TOKEN, TF_VAR_db_password): such a
 * value is moved into a Secret, never copied. A name that says it holds where a secret is
 * (AWS_WEB_IDENTITY_TOKEN_FILE, VAULT_TOKEN_PATH) or which one (AWS_ACCESS_KEY_ID) does not.
 */
export function secretByName(name: string): boolean {
  return (
    /TOKEN|SECRET|PASSWORD|PASSWD|PASSPHRASE|PRIVATE_?KEY|ACCESS_?KEY|API_?KEY|CREDENTIAL/i.test(name) &&
    !/_(FILE|PATH|DIR|URL|ARN|ID|NAME)$/i.test(name) &&
    // Google's variable for the path of a key file.
    name !== 'GOOGLE_APPLICATION_CREDENTIALS'
  );
}

const BY_NAME = new Map(SERVER_FLAGS.filter((f) => !f.hidden).map((f) => [f.name, f]));
const OPERATOR_FLAG_NAMES = new Set(OPERATOR_ENV.filter((e) => e.startsWith('ATLANTIS_')).map(flagOfEnvName));
const STORE_FLAG_NAMES = new Set(STORE_ENV.map(flagOfEnvName));

function flagOfEnvName(env: string): string {
  return env.slice('ATLANTIS_'.length).toLowerCase().replace(/_/g, '-');
}

/** The Atlantis (or server) flag an ATLANTIS_* variable sets, if it names one. */
export function flagOfEnv(env: string): string | undefined {
  if (!env.startsWith('ATLANTIS_')) return undefined;
  const flag = flagOfEnvName(env);
  return BY_NAME.has(flag) || ATLANTIS_FLAGS[flag] ? flag : undefined;
}

export const envOfFlag = (flag: string): string => envNameFor(flag);

/** The flag's type (bool, int, string, ...), for reading `--flag` without a value and comparing values. */
export function flagType(flag: string): FlagType | undefined {
  return BY_NAME.get(flag)?.type ?? ATLANTIS_FLAGS[flag]?.type;
}

export type FlagVerdict =
  /** The server honours it: set it. */
  | { kind: 'set' }
  /** Not supported, but the value is what the server does anyway: nothing to set. */
  | { kind: 'same' }
  /** Not carried over, and why. */
  | { kind: 'unmapped'; reason: string };

function asFlagValue(flag: string, v: string | number | boolean): string | number | boolean {
  const t = flagType(flag);
  if (typeof v !== 'string') return v;
  if (t === 'bool' && /^(true|false)$/i.test(v.trim())) return v.trim().toLowerCase() === 'true';
  if (t === 'int' && /^-?\d+$/.test(v.trim())) return Number(v);
  return v;
}

/** What to do with `--flag` set to `value` (a flag without a value: true). */
export function judgeFlag(flag: string, value: string | number | boolean): FlagVerdict {
  if (OPERATOR_FLAG_NAMES.has(flag) || flag === 'shared-state-key-file')
    return { kind: 'unmapped', reason: `the operator sets --${flag} itself` };
  if (STORE_FLAG_NAMES.has(flag))
    return {
      kind: 'unmapped',
      reason: `--${flag} is the store's, which spec.atlantis.lockingDB sets (chart: lockingDbType, redis)`,
    };
  const atlantis = ATLANTIS_FLAGS[flag];
  if (atlantis && atlantis.support !== 'honoured') {
    const v = asFlagValue(flag, value);
    if ((atlantis.accepts ?? []).some((a) => a === v)) return { kind: 'same' };
    const what = atlantis.support === 'refused' ? 'does not support' : 'ignores';
    return { kind: 'unmapped', reason: `this server ${what} --${flag}: ${atlantis.why ?? ''}` };
  }
  const spec = BY_NAME.get(flag);
  // An Atlantis flag the server honours, set to the server's default: nothing to set either.
  if (spec && atlantis && spec.default !== undefined && !Array.isArray(spec.default) && asFlagValue(flag, value) === spec.default)
    return { kind: 'same' };
  if (spec) return { kind: 'set' };
  return { kind: 'unmapped', reason: `--${flag} is not a flag of Atlantis v0.47 or of this server` };
}
