// The server flags of the terraform room that issue 35 added, validated as Atlantis v0.47
// validates them: --default-tf-distribution (and the deprecated --tf-distribution it replaces),
// --use-tf-plugin-cache, and ours: --tofu-download-url and --tofu-download-key-file, where
// OpenTofu versions come from (Atlantis always asks OpenTofu's own servers).
import { readFileSync } from 'node:fs';
import { type FlagValues, UsageError } from '../../config/flags.js';
import { type Distribution, isDistribution } from './distribution.js';

export const DEFAULT_TOFU_DOWNLOAD_URL = 'https://github.com/opentofu/opentofu/releases/download';

export interface TerraformSettings {
  defaultTfDistribution: Distribution;
  useTfPluginCache: boolean;
  tofuDownloadUrl: string;
  /** --tofu-download-key-file's key (armored); undefined: OpenTofu's. */
  tofuDownloadKey?: string;
  warnings: string[];
}

const str = (values: FlagValues, name: string): string | undefined => {
  const v = values[name];
  return typeof v === 'string' && v !== '' ? v : undefined;
};

/** Reads an armored OpenPGP public key file named by a flag; a file that is not one stops the start. */
export function readArmoredKeyFile(flag: string, file: string | undefined): string | undefined {
  if (file === undefined) return undefined;
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (e) {
    throw new UsageError(`cannot read --${flag} ${file}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
  }
  if (!text.includes('-----BEGIN PGP PUBLIC KEY BLOCK-----'))
    throw new UsageError(`--${flag} ${file} holds no ASCII-armored OpenPGP public key (-----BEGIN PGP PUBLIC KEY BLOCK-----)`);
  return text;
}

export function terraformSettings(values: FlagValues): TerraformSettings {
  const warnings: string[] = [];
  const deprecated = str(values, 'tf-distribution');
  // As Atlantis: the old flag counts only when the new one is not given, and is warned about.
  if (deprecated !== undefined) warnings.push('Flag --tf-distribution has been deprecated (use --default-tf-distribution).');
  const distribution = str(values, 'default-tf-distribution') ?? deprecated ?? 'terraform';
  if (!isDistribution(distribution))
    throw new UsageError(
      `invalid value "${distribution}" for --default-tf-distribution: invalid tf distribution: expected one of terraform or opentofu`,
    );
  const tofuDownloadUrl = (str(values, 'tofu-download-url') ?? DEFAULT_TOFU_DOWNLOAD_URL).replace(/\/+$/, '');
  if (!/^https?:\/\/[^/@]+(\/|$)/.test(tofuDownloadUrl))
    throw new UsageError('invalid value for --tofu-download-url: must be an http(s) URL without credentials');
  const key = readArmoredKeyFile('tofu-download-key-file', str(values, 'tofu-download-key-file'));
  return {
    defaultTfDistribution: distribution,
    useTfPluginCache: values['use-tf-plugin-cache'] !== false,
    tofuDownloadUrl,
    ...(key ? { tofuDownloadKey: key } : {}),
    warnings,
  };
}
