// Which distribution runs a project: HashiCorp's terraform or OpenTofu's tofu, as Atlantis
// v0.47 names them (--default-tf-distribution, `terraform_distribution` of a project).
// Pure: names and the release layouts of both; tf-install.ts does the I/O.

export type Distribution = 'terraform' | 'opentofu';

export const DISTRIBUTIONS: readonly Distribution[] = ['terraform', 'opentofu'];

export function isDistribution(s: unknown): s is Distribution {
  return s === 'terraform' || s === 'opentofu';
}

/** The executable's name: `terraform` or `tofu` (a version's is this and the version). */
export const binName = (d: Distribution): string => (d === 'opentofu' ? 'tofu' : 'terraform');

/** HashiCorp's and OpenTofu's names for node's platform and architecture. */
const GO_OS: Record<string, string> = { linux: 'linux', darwin: 'darwin', freebsd: 'freebsd', openbsd: 'openbsd', win32: 'windows' };
const GO_ARCH: Record<string, string> = { x64: 'amd64', arm64: 'arm64', ia32: '386', arm: 'arm' };
export const goOs = (platform: string): string => GO_OS[platform] ?? platform;
export const goArch = (arch: string): string => GO_ARCH[arch] ?? arch;

export interface TofuReleaseFiles {
  archiveName: string;
  archiveUrl: string;
  sumsName: string;
  sumsUrl: string;
  signatureUrl: string;
}

/**
 * Where an OpenTofu release lives under --tofu-download-url, as OpenTofu's downloader (tofudl)
 * finds it on GitHub's releases: `<url>/v<v>/tofu_<v>_<os>_<arch>.tar.gz`, with
 * `tofu_<v>_SHA256SUMS` and its detached signature `tofu_<v>_SHA256SUMS.gpgsig` beside it.
 */
export function tofuReleaseFiles(baseUrl: string, version: string, platform: string, arch: string): TofuReleaseFiles {
  const dir = `${baseUrl.replace(/\/+$/, '')}/v${version}`;
  const archiveName = `tofu_${version}_${goOs(platform)}_${goArch(arch)}.tar.gz`;
  const sumsName = `tofu_${version}_SHA256SUMS`;
  return {
    archiveName,
    archiveUrl: `${dir}/${archiveName}`,
    sumsName,
    sumsUrl: `${dir}/${sumsName}`,
    signatureUrl: `${dir}/${sumsName}.gpgsig`,
  };
}
