// Which conftest a policy check runs, found or downloaded as Atlantis v0.47 does
// (runtime/policy/conftest_client.go): the `policies:` block's `conftest_version`, else the
// DEFAULT_CONFTEST_VERSION env (the official image sets it), else `conftest` on PATH; a version
// is `conftest<v>` on PATH, `<data-dir>/bin/conftest<v>`, else the release tarball downloaded
// from --conftest-download-url (`<url>/v<v>/conftest_<v>_<OS>_<arch>.tar.gz`), checked against
// the release's checksums.txt before anything of it is written as a binary (Atlantis checks the
// same file through go-getter's checksum option; conftest releases carry no signature).
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { Logger } from '../../log.js';
import type { ProcessHost } from '../terraform/process-host.js';
import { extractTarGzFile } from '../terraform/tar-gz.js';
import { MAX_DOWNLOAD_BYTES, findOnPath, get } from '../terraform/tf-install.js';
import { checksumFor, normaliseTfVersion } from '../terraform/tf-versions.js';

export const DEFAULT_CONFTEST_DOWNLOAD_URL = 'https://github.com/open-policy-agent/conftest/releases/download';
/** The env var Atlantis reads for the default conftest version. */
export const DEFAULT_CONFTEST_VERSION_ENV = 'DEFAULT_CONFTEST_VERSION';
const MAX_SUMS_BYTES = 256 * 1024;

/** conftest's release names for node's platform and architecture (as Atlantis maps Go's). */
export function conftestPlatform(platform: string, arch: string): string | undefined {
  const os = platform === 'linux' ? 'Linux' : platform === 'darwin' ? 'Darwin' : undefined;
  const a = arch === 'x64' ? 'x86_64' : arch === 'arm64' ? 'arm64' : undefined;
  return os && a ? `${os}_${a}` : undefined;
}

export interface ConftestRelease {
  archiveName: string;
  archiveUrl: string;
  sumsUrl: string;
}

export function conftestRelease(baseUrl: string, version: string, platform: string): ConftestRelease {
  const dir = `${baseUrl.replace(/\/+$/, '')}/v${version}`;
  const archiveName = `conftest_${version}_${platform}.tar.gz`;
  return { archiveName, archiveUrl: `${dir}/${archiveName}`, sumsUrl: `${dir}/checksums.txt` };
}

export interface ConftestBinariesOptions {
  binDir: string;
  downloadUrl: string;
  /** DEFAULT_CONFTEST_VERSION, normalised; undefined: `conftest` on PATH when no version is asked for. */
  defaultVersion?: string;
  host: ProcessHost;
  logger: Logger;
  pathEnv?: string;
  platform?: string;
  arch?: string;
}

export class ConftestBinaries {
  private readonly known = new Map<string, Promise<string>>();

  constructor(private readonly o: ConftestBinariesOptions) {}

  /** The conftest to run for a `conftest_version` (raw, as written; undefined: the default). */
  binaryFor(requested: string | undefined): Promise<string> {
    const raw = requested ?? this.o.defaultVersion;
    if (raw === undefined) {
      const onPath = findOnPath('conftest', this.o.pathEnv ?? process.env.PATH ?? '');
      return onPath
        ? Promise.resolve(onPath)
        : Promise.reject(
            new Error('ensuring policy executor version: no conftest version configured/specified or not found conftest command'),
          );
    }
    const version = normaliseTfVersion(raw);
    if (version === null)
      return Promise.reject(new Error(`ensuring policy executor version: invalid conftest version ${JSON.stringify(raw)}`));
    let p = this.known.get(version);
    if (!p) {
      p = this.find(version).catch((e: Error) => {
        throw new Error(`ensuring policy executor version: ${e.message}`);
      });
      this.known.set(version, p);
      p.catch(() => this.known.delete(version));
    }
    return p;
  }

  private async find(version: string): Promise<string> {
    const name = `conftest${version}`;
    const onPath = findOnPath(name, this.o.pathEnv ?? process.env.PATH ?? '');
    if (onPath) return onPath;
    mkdirSync(this.o.binDir, { recursive: true, mode: 0o700 });
    const dest = path.join(this.o.binDir, name);
    if (existsSync(dest)) return dest;
    const platform = conftestPlatform(this.o.platform ?? process.platform, this.o.arch ?? process.arch);
    if (!platform) throw new Error(`don't know where to find conftest for ${process.platform} on ${process.arch}`);
    const r = conftestRelease(this.o.downloadUrl, version, platform);
    this.o.logger.info('Downloading conftest', { version, url: this.o.downloadUrl });
    try {
      const sums = (await get(r.sumsUrl, MAX_SUMS_BYTES)).toString('utf8');
      const want = checksumFor(sums, r.archiveName);
      if (!want) throw new Error(`${r.archiveName} is not listed in checksums.txt`);
      const archive = await get(r.archiveUrl, MAX_DOWNLOAD_BYTES);
      const got = createHash('sha256').update(archive).digest('hex');
      if (got !== want) throw new Error(`checksum mismatch for ${r.archiveName}: expected ${want}, got ${got}`);
      const tmp = `${dest}.download-${process.pid}`;
      writeFileSync(tmp, extractTarGzFile(archive, 'conftest', MAX_DOWNLOAD_BYTES), { mode: 0o700 });
      renameSync(tmp, dest);
    } catch (e) {
      throw new Error(`downloading conftest version ${version} at ${JSON.stringify(r.archiveUrl)}: ${(e as Error).message}`);
    }
    const check = await this.o.host.spawn({ command: dest, args: ['--version'], cwd: this.o.binDir, output: 'capture' });
    if (check.exitCode !== 0) {
      rmSync(dest, { force: true });
      throw new Error(
        `conftest binary at ${dest} failed to execute: ${(check.stderr || check.error || `exit code ${check.exitCode}`).trim()}`,
      );
    }
    this.o.logger.info('Downloaded conftest', { version, path: dest });
    return dest;
  }
}
