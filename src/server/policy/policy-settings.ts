// The policy flags of the server, as Atlantis v0.47 reads them: --enable-policy-checks,
// --quiet-policy-checks and the DEFAULT_CONFTEST_VERSION env, and ours: --conftest-download-url
// (Atlantis always downloads from GitHub's releases).
import { type FlagValues, UsageError } from '../../config/flags.js';
import { normaliseTfVersion } from '../terraform/tf-versions.js';
import { DEFAULT_CONFTEST_DOWNLOAD_URL, DEFAULT_CONFTEST_VERSION_ENV } from './conftest-install.js';

export interface PolicySettings {
  enablePolicyChecks: boolean;
  quietPolicyChecks: boolean;
  conftestDownloadUrl: string;
  /** DEFAULT_CONFTEST_VERSION, normalised. */
  defaultConftestVersion?: string;
}

export function policySettings(values: FlagValues, env: NodeJS.ProcessEnv = process.env): PolicySettings {
  const url = (
    typeof values['conftest-download-url'] === 'string' && values['conftest-download-url'] !== ''
      ? (values['conftest-download-url'] as string)
      : DEFAULT_CONFTEST_DOWNLOAD_URL
  ).replace(/\/+$/, '');
  if (!/^https?:\/\/[^/@]+(\/|$)/.test(url))
    throw new UsageError('invalid value for --conftest-download-url: must be an http(s) URL without credentials');
  const raw = env[DEFAULT_CONFTEST_VERSION_ENV];
  let version: string | undefined;
  if (raw !== undefined && raw !== '') {
    const v = normaliseTfVersion(raw);
    if (v === null) throw new UsageError(`invalid value "${raw}" for ${DEFAULT_CONFTEST_VERSION_ENV}: not a version`);
    version = v;
  }
  return {
    enablePolicyChecks: values['enable-policy-checks'] === true,
    quietPolicyChecks: values['quiet-policy-checks'] === true,
    conftestDownloadUrl: url,
    ...(version ? { defaultConftestVersion: version } : {}),
  };
}
