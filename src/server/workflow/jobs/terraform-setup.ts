// The project runner the server's commands use, from the server's terraform settings: which
// terraform (--tf-binary, or a version downloaded and checked against its signature), OpenTofu,
// conftest and the plugin cache (terraform-tools.ts), the default version fetched at start, and
// --write-git-creds for init.
import path from 'node:path';
import type { Logger } from '../../../log.js';
import type { ServerConfig } from '../../config.js';
import { GitCredsForInit } from '../../terraform/git-creds.js';
import type { ProcessHost } from '../../terraform/process-host.js';
import type { ProcessRunner } from '../../terraform/runner.js';
import { TerraformBinaries } from '../../terraform/tf-install.js';
import type { VcsHost } from '../../vcs/host.js';
import type { ServerSideRepoConfig } from '../repo-config/server-side.js';
import { policyCheckStep } from './policy-check-step.js';
import { ProjectRunner } from './project-runner.js';
import { terraformTools } from './terraform-tools.js';

export function openProjectRunner(
  cfg: ServerConfig,
  d: {
    processHost: ProcessHost;
    runner: ProcessRunner;
    host: Pick<VcsHost, 'initCredentials'>;
    logger: Logger;
    serverRepoConfig: ServerSideRepoConfig | undefined;
  },
): ProjectRunner {
  const log = d.logger;
  const binaries = new TerraformBinaries({
    tfBinary: cfg.tfBinary,
    download: cfg.tfDownload,
    downloadUrl: cfg.tfDownloadUrl,
    binDir: path.join(cfg.dataDir, 'bin'),
    host: d.processHost,
    logger: log,
    ...(cfg.tfDownloadKey ? { signingKey: { armored: cfg.tfDownloadKey, owner: 'the key of --tf-download-key-file' } } : {}),
  });
  const tools = terraformTools(cfg, d.processHost, log, d.serverRepoConfig);
  if (cfg.tfDownload && cfg.tfDownloadUrl.startsWith('http://'))
    log.warn(
      'Terraform downloads use plain HTTP: what is fetched can be read and withheld on the way (a changed SHA256SUMS or zip is still refused by its signature)',
      {
        url: cfg.tfDownloadUrl,
      },
    );
  if (cfg.defaultTfVersion) {
    // As Atlantis: the default version is fetched at start, in the background; a failure is
    // logged here and told again on the PR of the first project that needs it.
    const v = cfg.defaultTfVersion;
    const defaultBinaries = cfg.terraform.defaultTfDistribution === 'opentofu' ? tools.tofu : binaries;
    void defaultBinaries
      .binaryFor(v)
      .catch((e: Error) => log.error(`Could not get ${defaultBinaries.name}`, { version: v, error: e.message }));
  }
  return new ProjectRunner(
    d.runner,
    {
      binaries,
      tofu: tools.tofu,
      defaultDistribution: cfg.terraform.defaultTfDistribution,
      defaultVersion: cfg.defaultTfVersion,
      // The code host's credentials, as Atlantis writes them for init's private modules.
      gitCreds: cfg.writeGitCreds
        ? new GitCredsForInit({ dir: path.join(cfg.dataDir, 'git-creds'), ...d.host.initCredentials })
        : undefined,
      ...(tools.pluginCache ? { pluginCache: tools.pluginCache } : {}),
    },
    policyCheckStep({ conftest: tools.conftest, runner: d.runner }),
  );
}
