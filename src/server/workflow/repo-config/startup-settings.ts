// Settings the workflow reads once at start, refused with a one-line UsageError naming the
// flag: the repo allowlist and the server-side repo config (--repo-config or --repo-config-json).
import { readFileSync } from 'node:fs';
import { UsageError } from '../../../config/flags.js';
import type { ServerConfig } from '../../config.js';
import { AllowlistError, type RepoAllowlist, parseRepoAllowlist } from '../../vcs/repo-allowlist.js';
import { type ServerSideRepoConfig, parseServerSideRepoConfig } from './server-side.js';
import { RepoConfigError } from './types.js';

export function repoAllowlistOf(cfg: Pick<ServerConfig, 'repoAllowlist'>): RepoAllowlist {
  try {
    return parseRepoAllowlist(cfg.repoAllowlist);
  } catch (e) {
    if (e instanceof AllowlistError) throw new UsageError(`invalid value for --repo-allowlist: ${e.message}`);
    throw e;
  }
}

export function serverRepoConfigOf(cfg: Pick<ServerConfig, 'repoConfigJson' | 'repoConfigPath'>): ServerSideRepoConfig | undefined {
  if (cfg.repoConfigJson) {
    // JSON is YAML, so the same parser and checks apply.
    try {
      // Policy set paths of a JSON config start from (and stay in) the working dir.
      return parseServerSideRepoConfig(cfg.repoConfigJson, '--repo-config-json', process.cwd());
    } catch (e) {
      throw new UsageError(`invalid --repo-config-json: ${e instanceof RepoConfigError ? e.message : (e as Error).message}`);
    }
  }
  if (!cfg.repoConfigPath) return undefined;
  try {
    return parseServerSideRepoConfig(readFileSync(cfg.repoConfigPath, 'utf8'), cfg.repoConfigPath);
  } catch (e) {
    const msg =
      e instanceof RepoConfigError ? e.message : `${cfg.repoConfigPath}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`;
    throw new UsageError(`invalid --repo-config: ${msg}`);
  }
}
