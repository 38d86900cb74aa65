// Which terraform a project runs, as Atlantis v0.47 decides it (server/core/terraform): the
// project's `terraform_version`, else an exact `required_version` of its module, else
// --default-tf-version, else the binary on PATH. Pure decisions; tf-install.ts does the I/O.
//
// Versions come from pull requests (atlantis.yaml, .tf files) and end up in file names and
// URLs: only a strict version syntax is accepted, so no `/`, `..` or query ever gets there.

const VERSION = /^v?(\d{1,9})(?:\.(\d{1,9}))?(?:\.(\d{1,9}))?(?:-([0-9A-Za-z]+(?:[.-][0-9A-Za-z]+)*))?$/;

/**
 * The canonical form of a version, as Atlantis's version library prints it: no `v`, three
 * numbers (`1.9` is `1.9.0`), a pre-release kept (`1.10.0-beta1`). Null when it is not one.
 */
export function normaliseTfVersion(raw: string): string | null {
  const m = VERSION.exec(raw.trim());
  if (!m) return null;
  const nums = [m[1], m[2] ?? '0', m[3] ?? '0'].map((n) => String(Number(n)));
  return nums.join('.') + (m[4] ? `-${m[4]}` : '');
}

/** Atlantis's name of a version's binary, on PATH or in the data dir's bin/. */
export const versionedBinaryName = (version: string): string => `terraform${version}`;

/** HashiCorp's names for node's platform and architecture. */
const GO_OS: Record<string, string> = { linux: 'linux', darwin: 'darwin', freebsd: 'freebsd', openbsd: 'openbsd', win32: 'windows' };
const GO_ARCH: Record<string, string> = { x64: 'amd64', arm64: 'arm64', ia32: '386', arm: 'arm' };

export interface ReleaseFiles {
  zipName: string;
  zipUrl: string;
  sumsUrl: string;
}

/** Where a release lives under --tf-download-url (HashiCorp's releases layout). */
export function releaseFiles(baseUrl: string, version: string, platform: string, arch: string): ReleaseFiles {
  const os = GO_OS[platform] ?? platform;
  const goArch = GO_ARCH[arch] ?? arch;
  const dir = `${baseUrl.replace(/\/+$/, '')}/terraform/${version}`;
  const zipName = `terraform_${version}_${os}_${goArch}.zip`;
  return { zipName, zipUrl: `${dir}/${zipName}`, sumsUrl: `${dir}/terraform_${version}_SHA256SUMS` };
}

/** The sha256 (lower-case hex) a SHA256SUMS file gives for `fileName`, if any. */
export function checksumFor(sums: string, fileName: string): string | undefined {
  for (const line of sums.split('\n')) {
    const m = /^([0-9a-fA-F]{64})\s+\*?(\S+)\s*$/.exec(line);
    if (m && m[2] === fileName) return m[1]!.toLowerCase();
  }
  return undefined;
}

/**
 * Atlantis's rule for a `required_version` when versions are not listed from the releases
 * site: only an exact version (`1.9.0`, `=1.9.0`, `= 1.9.0`) names one.
 */
export function exactRequiredVersion(constraint: string): string | undefined {
  const m = /^=?\s*([0-9.]+)\s*$/.exec(constraint);
  return m ? (normaliseTfVersion(m[1]!) ?? undefined) : undefined;
}

/**
 * The `required_version` settings in a module's .tf files (one string each), as terraform
 * reads them from `terraform {}` blocks. A line comment never counts. Bounded by the caller.
 */
export function requiredVersionsIn(tfSources: readonly string[]): string[] {
  const out: string[] = [];
  for (const src of tfSources) {
    for (const m of src.matchAll(/^[ \t]*required_version[ \t]*=[ \t]*"([^"\n]{0,200})"/gm)) out.push(m[1]!);
  }
  return out;
}

export interface VersionChoiceInput {
  /** `terraform_version` of the project in atlantis.yaml (raw). */
  projectVersion?: string;
  /** `required_version` settings found in the project's module. */
  requiredVersions: readonly string[];
  /** --default-tf-version, normalised. */
  defaultVersion?: string;
}

export type VersionChoice =
  | { kind: 'version'; version: string; from: 'project' | 'required_version' | 'default' }
  /** Nothing asks for a version: the binary of --tf-binary, whatever its version. */
  | { kind: 'binary' }
  | { kind: 'invalid'; message: string };

/**
 * The version a project runs, as Atlantis: `terraform_version` wins; without it, one exact
 * `required_version` (several, or a range, decide nothing); then --default-tf-version.
 */
export function chooseTfVersion(i: VersionChoiceInput): VersionChoice {
  if (i.projectVersion !== undefined) {
    const v = normaliseTfVersion(i.projectVersion);
    if (v === null)
      return {
        kind: 'invalid',
        message: `version ${JSON.stringify(i.projectVersion)} could not be parsed: Malformed version: ${i.projectVersion}`,
      };
    return { kind: 'version', version: v, from: 'project' };
  }
  if (i.requiredVersions.length === 1) {
    const v = exactRequiredVersion(i.requiredVersions[0]!);
    if (v !== undefined) return { kind: 'version', version: v, from: 'required_version' };
  }
  if (i.defaultVersion !== undefined) return { kind: 'version', version: i.defaultVersion, from: 'default' };
  return { kind: 'binary' };
}

/** The version `terraform version -json` reports, normalised; undefined when it is not that. */
export function versionFromJson(output: string): string | undefined {
  try {
    const v = (JSON.parse(output) as { terraform_version?: unknown }).terraform_version;
    return typeof v === 'string' ? (normaliseTfVersion(v) ?? undefined) : undefined;
  } catch {
    return undefined;
  }
}
