// The tools a server sets up at start besides --tf-binary's terraform (issue 35): OpenTofu's
// binaries (a project's terraform_distribution, --default-tf-distribution), conftest's (policy
// checks), the plugin cache (--use-tf-plugin-cache), and the checks of the policy sets that
// stop a start: policy checks without policies, a set's path that is missing or leaves the
// config dir through a symlink, a set whose policies conftest cannot load.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { UsageError } from '../../../config/flags.js';
import type { Logger } from '../../../log.js';
import type { ServerConfig } from '../../config.js';
import { ConftestBinaries } from '../../policy/conftest-install.js';
import { isConftestReport } from '../../policy/policy-results.js';
import { type PolicySets, insideDir } from '../../policy/policy-sets.js';
import { PluginCache } from '../../terraform/plugin-cache.js';
import type { ProcessHost } from '../../terraform/process-host.js';
import { TerraformBinaries, findOnPath } from '../../terraform/tf-install.js';
import type { ServerSideRepoConfig } from '../repo-config/server-side.js';

export interface TerraformTools {
  tofu: TerraformBinaries;
  conftest: ConftestBinaries;
  pluginCache?: PluginCache;
}

export function terraformTools(
  cfg: ServerConfig,
  host: ProcessHost,
  log: Logger,
  server: ServerSideRepoConfig | undefined,
): TerraformTools {
  const binDir = path.join(cfg.dataDir, 'bin');
  if (cfg.policy.enablePolicyChecks) checkPolicySets(server?.policies, cfg, log);
  const t = cfg.terraform;
  if (cfg.tfDownload && t.tofuDownloadUrl.startsWith('http://'))
    log.warn(
      'OpenTofu downloads use plain HTTP: what is fetched can be read and withheld on the way (a changed SHA256SUMS or archive is still refused by its signature)',
      {
        url: t.tofuDownloadUrl,
      },
    );
  const tools: TerraformTools = {
    tofu: new TerraformBinaries({
      distribution: 'opentofu',
      tfBinary: 'tofu',
      download: cfg.tfDownload,
      downloadUrl: t.tofuDownloadUrl,
      binDir,
      host,
      logger: log,
      ...(t.tofuDownloadKey ? { signingKey: { armored: t.tofuDownloadKey, owner: 'the key of --tofu-download-key-file' } } : {}),
    }),
    conftest: new ConftestBinaries({
      binDir,
      downloadUrl: cfg.policy.conftestDownloadUrl,
      host,
      logger: log,
      ...(cfg.policy.defaultConftestVersion ? { defaultVersion: cfg.policy.defaultConftestVersion } : {}),
    }),
  };
  if (t.useTfPluginCache) tools.pluginCache = PluginCache.inDataDir(cfg.dataDir, log);
  return tools;
}

/** The config dir policy set paths must stay in: --repo-config's directory, or the working dir for --repo-config-json. */
export function policyConfigDir(cfg: Pick<ServerConfig, 'repoConfigPath'>): string {
  return cfg.repoConfigPath ? path.dirname(path.resolve(cfg.repoConfigPath)) : process.cwd();
}

function checkPolicySets(sets: PolicySets | undefined, cfg: ServerConfig, log: Logger): void {
  if (!sets)
    throw new UsageError(
      '--enable-policy-checks is set, but --repo-config has no policies: block (policy_sets with their paths); every policy check would fail',
    );
  let configDir: string;
  try {
    configDir = realpathSync(policyConfigDir(cfg));
  } catch (e) {
    throw new UsageError(`the config dir of the policy sets cannot be read: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
  }
  for (const s of sets.policySets) {
    let real: string;
    try {
      real = realpathSync(s.path);
    } catch (e) {
      throw new UsageError(
        `policy set ${JSON.stringify(s.name)}: its path ${s.path} cannot be read: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`,
      );
    }
    if (!insideDir(configDir, real))
      throw new UsageError(
        `policy set ${JSON.stringify(s.name)}: its path ${s.path} leads outside the server's config dir ${configDir} (through a symlink)`,
      );
  }
  checkPoliciesLoad(sets, cfg, log);
}

/**
 * Loads each set's policies with a conftest already at hand (the policies' version or the
 * default on PATH or in the data dir; none is downloaded at start): a policy that does not
 * compile stops the start with conftest's words, before any pull request meets it.
 */
function checkPoliciesLoad(sets: PolicySets, cfg: ServerConfig, log: Logger): void {
  const version = sets.version ?? cfg.policy.defaultConftestVersion;
  const pathEnv = process.env.PATH ?? '';
  const conftest = version
    ? (findOnPath(`conftest${version}`, pathEnv) ?? findOnPath(`conftest${version}`, path.join(cfg.dataDir, 'bin')))
    : findOnPath('conftest', pathEnv);
  if (!conftest) {
    log.info('Policy sets not checked at start: no conftest at hand yet (it is downloaded for the first policy check)', {
      ...(version ? { version } : {}),
    });
    return;
  }
  const dir = mkdtempSync(path.join(tmpdir(), 'atlantis-policy-load-'));
  try {
    const input = path.join(dir, 'empty.json');
    writeFileSync(input, '{}');
    for (const s of sets.policySets) {
      const r = spawnSync(conftest, ['test', '-p', s.path, input, '--no-color'], {
        encoding: 'utf8',
        timeout: 60_000,
        // Nothing of the server's environment: a path and a home of its own (conftest needs one).
        env: { PATH: pathEnv, HOME: dir },
      });
      const out = `${r.stdout ?? ''}${r.stderr ?? ''}`.trim();
      if (r.error) throw new UsageError(`policy set ${JSON.stringify(s.name)}: conftest could not run: ${r.error.message}`);
      if (r.status !== 0 && !isConftestReport(out))
        throw new UsageError(`policy set ${JSON.stringify(s.name)}: its policies do not load: ${out.split('\n').join(' ')}`);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
