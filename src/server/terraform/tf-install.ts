// Finds or downloads the terraform (or tofu) binary of a version, as Atlantis v0.47 does
// (server/core/terraform/tfclient): the local binary when it is that version (--tf-binary,
// or `tofu` on PATH), `terraform<v>` / `tofu<v>` on PATH, `<data-dir>/bin/terraform<v>` /
// `tofu<v>`, else a download (when --tf-download is on) whose SHA256SUMS must carry a valid
// signature and whose archive must match that SHA256SUMS before anything of it is written as a
// binary: terraform from --tf-download-url signed by HashiCorp's key (or --tf-download-key-file's),
// OpenTofu from --tofu-download-url signed by OpenTofu's (or --tofu-download-key-file's), as
// hc-install and tofudl check them. One download per version at a time; later asks hit the cache.
import { createHash } from 'node:crypto';
import { accessSync, constants, existsSync, mkdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { inflateRawSync } from 'node:zlib';
import type { Logger } from '../../log.js';
import { type Distribution, binName, tofuReleaseFiles } from './distribution.js';
import { OPENTOFU_PUBLIC_KEY } from './opentofu-key.js';
import type { ProcessHost } from './process-host.js';
import { extractTarGzFile } from './tar-gz.js';
import { checksumFor, releaseFiles, versionFromJson } from './tf-versions.js';
import { HASHICORP_KEY, type TrustedKey, shortKeyId, signatureUrls, verifySumsSignature } from './tf-signature.js';

export const OPENTOFU_KEY: TrustedKey = { armored: OPENTOFU_PUBLIC_KEY, owner: "OpenTofu's key" };

/** Bounds on what a download may be (terraform's zip is ~30 MB, the binary ~90 MB). */
export const MAX_DOWNLOAD_BYTES = 512 * 1024 * 1024;
const MAX_SUMS_BYTES = 64 * 1024;
const MAX_SIGNATURE_BYTES = 64 * 1024;
const DOWNLOAD_TIMEOUT_MS = 10 * 60_000;
/** `terraform version` asks HashiCorp whether it is the newest; these probes need no answer. */
const NO_CHECKPOINT = { CHECKPOINT_DISABLE: '1' };

export interface TerraformBinariesOptions {
  /** terraform (default) or opentofu: the names, the download and the key. */
  distribution?: Distribution;
  /** What runs when no version is asked for: --tf-binary, or `tofu` for OpenTofu. */
  tfBinary: string;
  download: boolean;
  downloadUrl: string;
  /** Where downloaded versions are kept: <data-dir>/bin. */
  binDir: string;
  host: ProcessHost;
  logger: Logger;
  /** The key SHA256SUMS must be signed with; default HashiCorp's or OpenTofu's (a key file replaces it). */
  signingKey?: TrustedKey;
  /** Searched for terraform<v>; default this process's PATH (the children's too). */
  pathEnv?: string;
  platform?: string;
  arch?: string;
}

export class TerraformBinaries {
  private readonly known = new Map<string, Promise<string>>();
  private local?: Promise<string | undefined>;

  constructor(private readonly o: TerraformBinariesOptions) {}

  get binDir(): string {
    return this.o.binDir;
  }

  get distribution(): Distribution {
    return this.o.distribution ?? 'terraform';
  }

  /** What runs when no version is asked for. */
  get localBinary(): string {
    return this.o.tfBinary;
  }

  /** `terraform` or `tofu`. */
  get name(): string {
    return binName(this.distribution);
  }

  /** The version of --tf-binary (asked once); undefined when it cannot tell. */
  localVersion(): Promise<string | undefined> {
    mkdirSync(this.o.binDir, { recursive: true, mode: 0o700 });
    this.local ??= this.o.host
      .spawn({ command: this.o.tfBinary, args: ['version', '-json'], cwd: this.o.binDir, env: NO_CHECKPOINT, output: 'capture' })
      .then((r) => (r.exitCode === 0 ? versionFromJson(r.stdout ?? '') : undefined));
    return this.local;
  }

  /** The binary of `version` (normalised); rejects with Atlantis's message when there is none. */
  binaryFor(version: string): Promise<string> {
    let p = this.known.get(version);
    if (!p) {
      p = this.find(version);
      this.known.set(version, p);
      // A failure is not remembered: the next command tries again (the mirror may be back).
      p.catch(() => this.known.delete(version));
    }
    return p;
  }

  private async find(version: string): Promise<string> {
    mkdirSync(this.o.binDir, { recursive: true, mode: 0o700 });
    if ((await this.localVersion()) === version) return this.o.tfBinary;
    const name = `${this.name}${version}`;
    const onPath = findOnPath(name, this.o.pathEnv ?? process.env.PATH ?? '');
    if (onPath) return onPath;
    const dest = path.join(this.o.binDir, name);
    if (existsSync(dest)) return dest;
    if (!this.o.download)
      throw new Error(`could not find ${this.name} version ${version} in PATH or ${this.o.binDir}, and downloads are disabled`);
    this.o.logger.info(`Downloading ${this.name}`, { version, url: this.o.downloadUrl });
    try {
      const binary = this.distribution === 'opentofu' ? await this.downloadTofu(version) : await this.downloadTerraform(version);
      // Written aside and renamed: a crash never leaves a half-written binary to be found.
      const tmp = `${dest}.download-${process.pid}`;
      writeFileSync(tmp, binary, { mode: 0o700 });
      renameSync(tmp, dest);
    } catch (e) {
      throw new Error(`error downloading ${this.name} version ${version}: ${(e as Error).message}`);
    }
    const check = await this.o.host.spawn({ command: dest, args: ['version'], cwd: this.o.binDir, env: NO_CHECKPOINT, output: 'capture' });
    if (check.exitCode !== 0) {
      rmSync(dest, { force: true });
      throw new Error(
        `${this.name} binary at ${dest} failed to execute: ${(check.stderr || check.error || `exit code ${check.exitCode}`).trim()}`,
      );
    }
    this.o.logger.info(`Downloaded ${this.name}`, { version, path: dest });
    return dest;
  }

  private async downloadTerraform(version: string): Promise<Buffer> {
    const files = releaseFiles(this.o.downloadUrl, version, this.o.platform ?? process.platform, this.o.arch ?? process.arch);
    const sumsFile = await get(files.sumsUrl, MAX_SUMS_BYTES);
    const sumsName = `terraform_${version}_SHA256SUMS`;
    const key = this.o.signingKey ?? HASHICORP_KEY;
    await verifySumsSignature(sumsFile, await getSignature(files.sumsUrl, sumsName, key), key, sumsName);
    const sums = sumsFile.toString('utf8');
    const want = checksumFor(sums, files.zipName);
    if (!want) throw new Error(`${files.zipName} is not listed in terraform_${version}_SHA256SUMS`);
    const zip = await get(files.zipUrl, MAX_DOWNLOAD_BYTES);
    const got = createHash('sha256').update(zip).digest('hex');
    if (got !== want) throw new Error(`checksum mismatch for ${files.zipName}: expected ${want}, got ${got}`);
    return extractFile(zip, 'terraform');
  }

  /** As tofudl: SHA256SUMS, its .gpgsig signature by OpenTofu's key, then the tarball's checksum. */
  private async downloadTofu(version: string): Promise<Buffer> {
    const f = tofuReleaseFiles(this.o.downloadUrl, version, this.o.platform ?? process.platform, this.o.arch ?? process.arch);
    const sums = await get(f.sumsUrl, MAX_SUMS_BYTES);
    const signature = await get(f.signatureUrl, MAX_SIGNATURE_BYTES).catch((e: Error) => {
      throw e instanceof NotFound ? new Error(`no signature of ${f.sumsName} on the mirror (${f.sumsName}.gpgsig: 404)`) : e;
    });
    await verifySumsSignature(sums, signature, this.o.signingKey ?? OPENTOFU_KEY, f.sumsName);
    const want = checksumFor(sums.toString('utf8'), f.archiveName);
    if (!want) throw new Error(`${f.archiveName} is not listed in ${f.sumsName}`);
    const archive = await get(f.archiveUrl, MAX_DOWNLOAD_BYTES);
    const got = createHash('sha256').update(archive).digest('hex');
    if (got !== want) throw new Error(`checksum mismatch for ${f.archiveName}: expected ${want}, got ${got}`);
    return extractTarGzFile(archive, 'tofu', MAX_DOWNLOAD_BYTES);
  }
}

/** The first executable `name` in a PATH list, like exec.LookPath. */
export function findOnPath(name: string, pathEnv: string): string | undefined {
  for (const dir of pathEnv.split(path.delimiter)) {
    if (!dir) continue;
    const f = path.join(dir, name);
    try {
      accessSync(f, constants.X_OK);
      return f;
    } catch {
      // not here
    }
  }
  return undefined;
}

/** The first signature file of SHA256SUMS the mirror has (signatureUrls' order). */
async function getSignature(sumsUrl: string, sumsName: string, key: TrustedKey): Promise<Buffer> {
  const urls = signatureUrls(sumsUrl, [await shortKeyId(key)]);
  for (const url of urls) {
    try {
      return await get(url, MAX_SIGNATURE_BYTES);
    } catch (e) {
      if (!(e instanceof NotFound)) throw e;
    }
  }
  throw new Error(`no signature of ${sumsName} on the mirror (${urls.map((u) => u.slice(u.lastIndexOf('/') + 1)).join(', ')}: 404)`);
}

export class NotFound extends Error {}

export async function get(url: string, maxBytes: number): Promise<Buffer> {
  const res = await fetch(url, { signal: AbortSignal.timeout(DOWNLOAD_TIMEOUT_MS), redirect: 'follow' });
  if (!res.ok) {
    await res.body?.cancel();
    const message = `GET ${url} answered ${res.status} ${res.statusText}`.trim();
    throw res.status === 404 ? new NotFound(message) : new Error(message);
  }
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of res.body ?? []) {
    size += (chunk as Uint8Array).length;
    if (size > maxBytes) throw new Error(`GET ${url}: more than ${maxBytes} bytes`);
    chunks.push(Buffer.from(chunk as Uint8Array));
  }
  return Buffer.concat(chunks);
}

/**
 * One file of a zip archive, found through its central directory (stored or deflated, with
 * its CRC checked). Enough for HashiCorp's release zips; no zip64, no encryption.
 */
export function extractFile(zip: Buffer, name: string): Buffer {
  const eocd = zip.lastIndexOf(Buffer.from([0x50, 0x4b, 0x05, 0x06]));
  if (eocd < 0 || eocd + 22 > zip.length) throw new Error('not a zip archive');
  const entries = zip.readUInt16LE(eocd + 10);
  let at = zip.readUInt32LE(eocd + 16);
  for (let i = 0; i < entries; i++) {
    if (at + 46 > zip.length || zip.readUInt32LE(at) !== 0x02014b50) throw new Error('corrupt zip central directory');
    const method = zip.readUInt16LE(at + 10);
    const crc = zip.readUInt32LE(at + 16);
    const packed = zip.readUInt32LE(at + 20);
    const size = zip.readUInt32LE(at + 24);
    const nameLen = zip.readUInt16LE(at + 28);
    const skip = nameLen + zip.readUInt16LE(at + 30) + zip.readUInt16LE(at + 32);
    const local = zip.readUInt32LE(at + 42);
    const entryName = zip.toString('utf8', at + 46, at + 46 + nameLen);
    at += 46 + skip;
    if (entryName !== name) continue;
    if (packed === 0xffffffff || size === 0xffffffff || size > MAX_DOWNLOAD_BYTES) throw new Error(`${name} in the zip is too large`);
    if (local + 30 > zip.length || zip.readUInt32LE(local) !== 0x04034b50) throw new Error('corrupt zip entry');
    const start = local + 30 + zip.readUInt16LE(local + 26) + zip.readUInt16LE(local + 28);
    const data = zip.subarray(start, start + packed);
    if (data.length !== packed) throw new Error('truncated zip entry');
    let out: Buffer;
    if (method === 0) out = Buffer.from(data);
    else if (method === 8) out = inflateRawSync(data, { maxOutputLength: Math.max(size, 1) });
    else throw new Error(`unsupported zip compression method ${method}`);
    if (out.length !== size || crc32(out) !== crc) throw new Error(`${name} in the zip fails its CRC check`);
    return out;
  }
  throw new Error(`no ${name} in the zip`);
}

/** CRC-32 (zip's), computed here: node's zlib.crc32 is newer than the oldest node supported. */
const CRC_TABLE = Array.from({ length: 256 }, (_, n) => {
  let c = n;
  for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
  return c >>> 0;
});
function crc32(buf: Buffer): number {
  let c = 0xffffffff;
  for (let i = 0; i < buf.length; i++) c = CRC_TABLE[(c ^ buf[i]!) & 0xff]! ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}
