// Finds or downloads the terraform binary of a version, as Atlantis v0.47 does
// (server/core/terraform/tfclient): the --tf-binary when it is that version, `terraform<v>`
// on PATH, `<data-dir>/bin/terraform<v>`, else a download from --tf-download-url (when
// --tf-download is on) whose SHA256SUMS must carry a valid signature of HashiCorp's key (or
// the --tf-download-key-file key; tf-signature.ts) and whose zip must match that SHA256SUMS
// before anything of it is written as a binary. One download per version at a time; later
// asks hit the cache.
import { createHash } from 'node:crypto';
import { accessSync, constants, existsSync, mkdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { inflateRawSync } from 'node:zlib';
import type { Logger } from '../../log.js';
import type { ProcessHost } from './process-host.js';
import { checksumFor, releaseFiles, versionFromJson, versionedBinaryName } from './tf-versions.js';
import { HASHICORP_KEY, type TrustedKey, shortKeyId, signatureUrls, verifySumsSignature } from './tf-signature.js';

/** Bounds on what a download may be (terraform's zip is ~30 MB, the binary ~90 MB). */
export const MAX_DOWNLOAD_BYTES = 512 * 1024 * 1024;
const MAX_SUMS_BYTES = 64 * 1024;
const MAX_SIGNATURE_BYTES = 64 * 1024;
const DOWNLOAD_TIMEOUT_MS = 10 * 60_000;
/** `terraform version` asks HashiCorp whether it is the newest; these probes need no answer. */
const NO_CHECKPOINT = { CHECKPOINT_DISABLE: '1' };

export interface TerraformBinariesOptions {
  /** --tf-binary: what runs when no version is asked for. */
  tfBinary: string;
  download: boolean;
  downloadUrl: string;
  /** Where downloaded versions are kept: <data-dir>/bin. */
  binDir: string;
  host: ProcessHost;
  logger: Logger;
  /** The key SHA256SUMS must be signed with; default HashiCorp's (--tf-download-key-file replaces it). */
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
    const name = versionedBinaryName(version);
    const onPath = findOnPath(name, this.o.pathEnv ?? process.env.PATH ?? '');
    if (onPath) return onPath;
    const dest = path.join(this.o.binDir, name);
    if (existsSync(dest)) return dest;
    if (!this.o.download)
      throw new Error(`could not find terraform version ${version} in PATH or ${this.o.binDir}, and downloads are disabled`);
    this.o.logger.info('Downloading terraform', { version, url: this.o.downloadUrl });
    try {
      await this.download(version, dest);
    } catch (e) {
      throw new Error(`error downloading terraform version ${version}: ${(e as Error).message}`);
    }
    const check = await this.o.host.spawn({ command: dest, args: ['version'], cwd: this.o.binDir, env: NO_CHECKPOINT, output: 'capture' });
    if (check.exitCode !== 0) {
      rmSync(dest, { force: true });
      throw new Error(
        `terraform binary at ${dest} failed to execute: ${(check.stderr || check.error || `exit code ${check.exitCode}`).trim()}`,
      );
    }
    this.o.logger.info('Downloaded terraform', { version, path: dest });
    return dest;
  }

  private async download(version: string, dest: string): Promise<void> {
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
    const binary = extractFile(zip, 'terraform');
    // Written aside and renamed: a crash never leaves a half-written terraform<v> to be found.
    const tmp = `${dest}.download-${process.pid}`;
    writeFileSync(tmp, binary, { mode: 0o700 });
    renameSync(tmp, dest);
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

class NotFound extends Error {}

async function get(url: string, maxBytes: number): Promise<Buffer> {
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
