// A provider release zip as HashiCorp's release tooling makes it (one executable at the top,
// `terraform-provider-<type>_v<version>`), written byte for byte the same every time (fixed
// date, one deflated entry) so its zh: hash is stable, and the h1: hash terraform records in
// .terraform.lock.hcl for the unpacked package.
import crypto from 'node:crypto';
import zlib from 'node:zlib';

export interface PackedRelease {
  zip: Buffer;
  /** "zh:" + hex SHA-256 of the zip, the hash registries and mirrors publish. */
  zh: string;
  /** "h1:" hash of the unpacked package (Go's dirhash Hash1), what terraform computes locally. */
  h1: string;
}

const u16 = (n: number): Buffer => {
  const b = Buffer.alloc(2);
  b.writeUInt16LE(n);
  return b;
};
const u32 = (n: number): Buffer => {
  const b = Buffer.alloc(4);
  b.writeUInt32LE(n >>> 0);
  return b;
};

// MS-DOS date of 1980-01-01 00:00, the earliest a zip can say: no build time leaks in.
const DOS_DATE = (0 << 9) | (1 << 5) | 1;
const DOS_TIME = 0;

/** A zip holding one executable file `name` (mode 0755) with `content`. */
export function zipOneExecutable(name: string, content: Buffer): Buffer {
  const nameBuf = Buffer.from(name, 'utf8');
  const data = zlib.deflateRawSync(content, { level: 6 });
  const crc = zlib.crc32(content);
  const common = Buffer.concat([
    u16(20), // version needed: 2.0 (deflate)
    u16(0), // flags
    u16(8), // deflate
    u16(DOS_TIME),
    u16(DOS_DATE),
    u32(crc),
    u32(data.length),
    u32(content.length),
    u16(nameBuf.length),
  ]);
  const local = Buffer.concat([u32(0x04034b50), common, u16(0), nameBuf]);
  const central = Buffer.concat([
    u32(0x02014b50),
    u16((3 << 8) | 20), // made by: Unix, so unzip keeps the mode below
    common,
    u16(0), // extra
    u16(0), // comment
    u16(0), // disk
    u16(0), // internal attributes
    u32((0o100755 << 16) >>> 0), // external attributes: a regular file, rwxr-xr-x
    u32(0), // offset of the local header
    nameBuf,
  ]);
  const cdOffset = local.length + data.length;
  const end = Buffer.concat([u32(0x06054b50), u16(0), u16(0), u16(1), u16(1), u32(central.length), u32(cdOffset), u16(0)]);
  return Buffer.concat([local, data, central, end]);
}

const sha256 = (b: Buffer | string): Buffer => crypto.createHash('sha256').update(b).digest();

/** Packs a provider binary as the release of `version` (e.g. "1.0.0") of provider `type`. */
export function packProviderRelease(type: string, version: string, binary: Buffer): PackedRelease {
  const name = `terraform-provider-${type}_v${version}`;
  const zip = zipOneExecutable(name, binary);
  // dirhash Hash1: SHA-256 over "<hex sha256>  <path>\n" lines of every file, sorted by path.
  const summary = `${sha256(binary).toString('hex')}  ${name}\n`;
  return { zip, zh: `zh:${sha256(zip).toString('hex')}`, h1: `h1:${sha256(summary).toString('base64')}` };
}
