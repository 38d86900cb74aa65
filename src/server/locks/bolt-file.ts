// A read-only reader of bbolt (go.etcd.io/bbolt) files, the format of Atlantis's `atlantis.db`.
// No library in the Node ecosystem reads this format, so here is a small one. It is strictly
// bounded: the file's size is capped, every page is read at most once (a page reached twice is
// damage, so no cycle can make it loop), every offset and length is checked against the page it
// lives in before it is used, and memory grows only with the pages the tree reaches. A damaged or
// truncated file is a BoltFormatError that says what is wrong; it never hangs or over-allocates.
//
// The format (bbolt v1.3 and v1.4; integers in the writer's byte order, little-endian on amd64
// and arm64, the only one accepted here):
// - The file is an array of pages of `pageSize` bytes. A page starts with a 16-byte header:
//   id u64, flags u16 (0x01 branch, 0x02 leaf, 0x04 meta, 0x10 freelist), count u16, overflow
//   u32 (the page goes on over `overflow` more pages: a large value, or a long freelist).
// - Pages 0 and 1 are the metas, written in turn (txid % 2). After the header: magic u32
//   0xED0CDAED, version u32 (2), pageSize u32, flags u32, the root bucket {root pgid u64,
//   sequence u64}, freelist pgid u64 (all ones: not kept), high-water mark pgid u64 (pages
//   beyond it are unused), txid u64, checksum u64 = FNV-1a 64 of the 56 bytes before it. A
//   commit writes its pages first and its meta last, so the last committed state is the valid
//   meta with the higher txid; a torn meta write leaves the other one to fall back on.
// - The freelist page lists free page ids: `count` u64 ids after the header, or, when count is
//   0xFFFF, a u64 count first. A page reached from the tree must not be on it.
// - A branch page has `count` elements {pos u32, ksize u32, pgid u64}; a leaf page `count`
//   elements {flags u32, pos u32, ksize u32, vsize u32}. `pos` counts from the element's own
//   start to its key; a leaf's value follows its key. Keys ascend across a bucket.
// - A leaf element with flag 0x01 is a nested bucket: its value is {root pgid u64, sequence u64}
//   and, when root is 0 (an "inline" bucket, small and without buckets of its own), the bucket's
//   one leaf page follows in the value itself. The meta's root bucket holds the top-level ones.
import { open } from 'node:fs/promises';

export class BoltFormatError extends Error {
  override name = 'BoltFormatError';
}

export interface BoltLimits {
  /** The largest file read at all (default 1 GiB; an atlantis.db is usually well under 1 MiB). */
  maxFileBytes: number;
  /** Branch levels plus bucket nesting (default 64; a 1 GiB B+tree of 4 KiB pages is ~6 deep). */
  maxDepth: number;
}

const DEFAULT_LIMITS: BoltLimits = { maxFileBytes: 1024 ** 3, maxDepth: 64 };

export interface BoltEntry {
  key: Buffer;
  value: Buffer;
}

export interface BoltBucket {
  sequence: bigint;
  /** The key/value pairs, in key order (nested buckets are in `buckets` instead). */
  entries: BoltEntry[];
  buckets: Array<{ name: Buffer; bucket: BoltBucket }>;
  /** Its own pages (not its nested buckets'): what a test of the layout looks at. */
  pages: { branch: number; leaf: number; overflow: number; inline: boolean };
}

export interface BoltDatabase {
  pageSize: number;
  /** The meta page the state was read from (0 or 1) and its transaction id. */
  meta: 0 | 1;
  txid: bigint;
  highWaterMark: number;
  /** How many pages the freelist names (undefined: the file keeps no freelist). */
  freePages: number | undefined;
  root: BoltBucket;
}

/** A nested bucket by name path (`'runLocks'`), or undefined. */
export function bucketAt(db: BoltDatabase, ...names: string[]): BoltBucket | undefined {
  let b: BoltBucket | undefined = db.root;
  for (const name of names) b = b?.buckets.find((x) => x.name.equals(Buffer.from(name, 'utf8')))?.bucket;
  return b;
}

const MAGIC = 0xed0cdaed;
const VERSION = 2;
const HEADER = 16;
const ELEMENT = 16;
const META_SIZE = 64;
const BRANCH = 0x01;
const LEAF = 0x02;
const META = 0x04;
const FREELIST = 0x10;
const BUCKET_LEAF = 0x01;
const NO_FREELIST = 0xffffffffffffffffn;
const FNV_OFFSET = 0xcbf29ce484222325n;
const FNV_PRIME = 0x100000001b3n;
const U64 = 0xffffffffffffffffn;

/** FNV-1a, 64 bits: bbolt's meta checksum. */
export function fnv1a64(bytes: Uint8Array): bigint {
  let h = FNV_OFFSET;
  for (const b of bytes) h = ((h ^ BigInt(b)) * FNV_PRIME) & U64;
  return h;
}

interface Meta {
  pageSize: number;
  root: bigint;
  sequence: bigint;
  freelist: bigint;
  hwm: bigint;
  txid: bigint;
}

/** The meta in `buf` (a meta page's first bytes), or why it is not a valid one. */
export function parseMeta(buf: Buffer): Meta | string {
  if (buf.length < HEADER + META_SIZE) return 'shorter than a meta page';
  const m = buf.subarray(HEADER, HEADER + META_SIZE);
  const magic = m.readUInt32LE(0);
  if (magic !== MAGIC) {
    if (m.readUInt32BE(0) === MAGIC) return 'written on a big-endian machine, which this reader does not read';
    return 'no bbolt magic number';
  }
  if ((buf.readUInt16LE(8) & META) === 0) return 'not marked as a meta page';
  const version = m.readUInt32LE(4);
  if (version !== VERSION) return `bbolt format version ${version}, not ${VERSION}`;
  if (fnv1a64(m.subarray(0, 56)) !== m.readBigUInt64LE(56)) return 'checksum mismatch';
  return {
    pageSize: m.readUInt32LE(8),
    root: m.readBigUInt64LE(16),
    sequence: m.readBigUInt64LE(24),
    freelist: m.readBigUInt64LE(32),
    hwm: m.readBigUInt64LE(40),
    txid: m.readBigUInt64LE(48),
  };
}

/** Reads the whole tree of the bbolt file at `file`; throws BoltFormatError when it is not a sound one. */
export async function readBoltFile(file: string, limits: Partial<BoltLimits> = {}): Promise<BoltDatabase> {
  const lim = { ...DEFAULT_LIMITS, ...limits };
  const fh = await open(file, 'r');
  try {
    const size = (await fh.stat()).size;
    if (size > lim.maxFileBytes)
      throw new BoltFormatError(`the file is ${size} bytes, more than the ${lim.maxFileBytes} this reader accepts`);
    const readAt = async (pos: number, len: number): Promise<Buffer> => {
      if (pos + len > size) throw new BoltFormatError(`truncated: ${len} bytes needed at offset ${pos}, the file ends at ${size}`);
      const buf = Buffer.alloc(len);
      let done = 0;
      while (done < len) {
        const { bytesRead } = await fh.read(buf, done, len - done, pos + done);
        if (bytesRead === 0) throw new BoltFormatError(`truncated: the file ended while reading offset ${pos + done}`);
        done += bytesRead;
      }
      return buf;
    };
    return await new Reader(readAt, size, lim).read();
  } finally {
    await fh.close();
  }
}

class Reader {
  private pageSize = 0;
  private hwm = 0;
  private readonly seen = new Set<number>();
  private free = new Set<number>();

  constructor(
    private readonly readAt: (pos: number, len: number) => Promise<Buffer>,
    private readonly size: number,
    private readonly lim: BoltLimits,
  ) {}

  async read(): Promise<BoltDatabase> {
    if (this.size < HEADER + META_SIZE) throw new BoltFormatError(`truncated: the file is ${this.size} bytes, not even one meta page`);
    const { meta, which } = await this.chooseMeta();
    this.pageSize = meta.pageSize;
    this.hwm = Number(meta.hwm);
    if (this.hwm * this.pageSize > this.size)
      throw new BoltFormatError(
        `truncated: the meta page says ${this.hwm} pages of ${this.pageSize} bytes (${this.hwm * this.pageSize}), the file has ${this.size}`,
      );
    let freePages: number | undefined;
    if (meta.freelist !== NO_FREELIST) {
      this.free = await this.readFreelist(this.pgid(meta.freelist, 'freelist'));
      freePages = this.free.size;
    }
    this.seen.add(0).add(1);
    const root = await this.bucket(meta.root, meta.sequence, 0);
    return { pageSize: this.pageSize, meta: which, txid: meta.txid, highWaterMark: this.hwm, freePages, root };
  }

  /** The valid meta with the higher txid; page 1 is at `pageSize` as meta 0 says, else at the usual sizes. */
  private async chooseMeta(): Promise<{ meta: Meta; which: 0 | 1 }> {
    const m0 = parseMeta(await this.readAt(0, HEADER + META_SIZE));
    const sizes = typeof m0 === 'string' ? [4096, 1024, 2048, 8192, 16384, 32768, 65536] : [m0.pageSize];
    let m1: Meta | string = 'beyond the end of the file';
    // Without meta 0's page size, the first place that holds a meta at all tells best why it is not valid.
    let why: string | undefined;
    for (const ps of sizes) {
      if (!validPageSize(ps)) {
        m1 = `page size ${ps} in meta 0 is not a power of two from 1024 to 65536`;
        continue;
      }
      if (ps + HEADER + META_SIZE > this.size) continue;
      m1 = parseMeta(await this.readAt(ps, HEADER + META_SIZE));
      if (typeof m1 !== 'string' && m1.pageSize !== ps) m1 = `its page size ${m1.pageSize} does not match its place at offset ${ps}`;
      if (typeof m1 !== 'string') break;
      if (why === undefined && m1 !== 'no bbolt magic number') why = m1;
    }
    if (typeof m1 === 'string' && why !== undefined) m1 = why;
    const ok0 = typeof m0 !== 'string' && validPageSize(m0.pageSize);
    const ok1 = typeof m1 !== 'string';
    if (ok0 && ok1 && (m0 as Meta).pageSize !== (m1 as Meta).pageSize)
      throw new BoltFormatError(`the two meta pages disagree on the page size (${(m0 as Meta).pageSize}, ${(m1 as Meta).pageSize})`);
    if (ok0 && (!ok1 || (m0 as Meta).txid >= (m1 as Meta).txid)) return { meta: m0 as Meta, which: 0 };
    if (ok1) return { meta: m1 as Meta, which: 1 };
    throw new BoltFormatError(`not a bbolt database, or both meta pages are damaged (meta 0: ${m0Reason(m0)}; meta 1: ${m1})`);
  }

  /** A page id from the file as a number, checked against the high-water mark. */
  private pgid(id: bigint, what: string): number {
    if (id < 2n || id >= BigInt(this.hwm))
      throw new BoltFormatError(`${what} page id ${id} is outside the pages in use (2 to ${this.hwm - 1})`);
    return Number(id);
  }

  /** Page `id` with its overflow pages, checked: its own id, the flags wanted, within the file. */
  private async page(id: number, want: number, what: string): Promise<{ buf: Buffer; flags: number; count: number; overflow: number }> {
    if (this.seen.has(id)) throw new BoltFormatError(`${what} page ${id} is reached twice: the tree is damaged`);
    if (this.free.has(id)) throw new BoltFormatError(`${what} page ${id} is in use but also on the freelist: the file is damaged`);
    this.seen.add(id);
    const head = await this.readAt(id * this.pageSize, HEADER);
    const self = head.readBigUInt64LE(0);
    const flags = head.readUInt16LE(8);
    const count = head.readUInt16LE(10);
    const overflow = head.readUInt32LE(12);
    if (self !== BigInt(id)) throw new BoltFormatError(`page ${id} calls itself page ${self}: the file is damaged`);
    if ((flags & want) === 0) throw new BoltFormatError(`${what} page ${id} has flags 0x${flags.toString(16)}, not a ${kind(want)} page`);
    if (id + overflow >= this.hwm)
      throw new BoltFormatError(`page ${id} goes on over ${overflow} more pages, past the pages in use (${this.hwm})`);
    for (let i = 1; i <= overflow; i++) {
      if (this.seen.has(id + i)) throw new BoltFormatError(`page ${id + i} (overflow of page ${id}) is reached twice: the tree is damaged`);
      this.seen.add(id + i);
    }
    const buf = await this.readAt(id * this.pageSize, (overflow + 1) * this.pageSize);
    return { buf, flags, count, overflow };
  }

  private async readFreelist(id: number): Promise<Set<number>> {
    const { buf, count } = await this.page(id, FREELIST, 'freelist');
    let n = count;
    let at = HEADER;
    if (count === 0xffff) {
      const big = need(buf, at, 8, 'freelist count').readBigUInt64LE(at);
      if (big > BigInt((buf.length - HEADER - 8) / 8))
        throw new BoltFormatError(`freelist page ${id} names ${big} pages, more than it can hold`);
      n = Number(big);
      at += 8;
    }
    need(buf, at, n * 8, 'freelist ids');
    const free = new Set<number>();
    for (let i = 0; i < n; i++) {
      const pg = buf.readBigUInt64LE(at + i * 8);
      if (pg < 2n || pg >= BigInt(this.hwm)) throw new BoltFormatError(`freelist page ${id} names page ${pg}, outside the pages in use`);
      free.add(Number(pg));
    }
    return free;
  }

  /** A bucket from its {root, sequence} (and its inline page when root is 0). */
  private async bucket(root: bigint, sequence: bigint, depth: number, inline?: Buffer): Promise<BoltBucket> {
    if (depth > this.lim.maxDepth)
      throw new BoltFormatError(`buckets and branches nest deeper than ${this.lim.maxDepth}: the file is damaged`);
    const b: BoltBucket = { sequence, entries: [], buckets: [], pages: { branch: 0, leaf: 0, overflow: 0, inline: inline !== undefined } };
    const ctx = { last: undefined as Buffer | undefined };
    if (inline) {
      if (inline.length < HEADER) throw new BoltFormatError('an inline bucket is shorter than its page header');
      const flags = inline.readUInt16LE(8);
      if (flags !== LEAF) throw new BoltFormatError(`an inline bucket's page has flags 0x${flags.toString(16)}, not a leaf`);
      b.pages.leaf = 1;
      await this.leaf(inline, inline.readUInt16LE(10), b, depth, ctx);
    } else await this.node(this.pgid(root, 'bucket root'), b, depth, ctx);
    return b;
  }

  /** Walks a branch or leaf page of `b` in key order. */
  private async node(id: number, b: BoltBucket, depth: number, ctx: { last: Buffer | undefined }): Promise<void> {
    if (depth > this.lim.maxDepth)
      throw new BoltFormatError(`buckets and branches nest deeper than ${this.lim.maxDepth}: the file is damaged`);
    const p = await this.page(id, BRANCH | LEAF, 'bucket');
    b.pages.overflow += p.overflow;
    if (p.flags === LEAF) {
      b.pages.leaf++;
      return this.leaf(p.buf, p.count, b, depth, ctx);
    }
    if (p.flags !== BRANCH) throw new BoltFormatError(`page ${id} has flags 0x${p.flags.toString(16)}, neither branch nor leaf`);
    b.pages.branch++;
    if (p.count === 0) throw new BoltFormatError(`branch page ${id} is empty`);
    need(p.buf, HEADER, p.count * ELEMENT, `branch page ${id}'s elements`);
    const children: number[] = [];
    let prev: Buffer | undefined;
    for (let i = 0; i < p.count; i++) {
      const e = HEADER + i * ELEMENT;
      const key = slice(p.buf, e + p.buf.readUInt32LE(e), p.buf.readUInt32LE(e + 4), `branch page ${id}'s key ${i}`);
      if (prev && Buffer.compare(prev, key) >= 0) throw new BoltFormatError(`branch page ${id}'s keys are out of order`);
      prev = key;
      children.push(this.pgid(p.buf.readBigUInt64LE(e + 8), `branch page ${id}'s child`));
    }
    for (const c of children) await this.node(c, b, depth + 1, ctx);
  }

  private async leaf(page: Buffer, count: number, b: BoltBucket, depth: number, ctx: { last: Buffer | undefined }): Promise<void> {
    need(page, HEADER, count * ELEMENT, 'leaf elements');
    for (let i = 0; i < count; i++) {
      const e = HEADER + i * ELEMENT;
      const flags = page.readUInt32LE(e);
      const ksize = page.readUInt32LE(e + 8);
      const vsize = page.readUInt32LE(e + 12);
      const keyAt = e + page.readUInt32LE(e + 4);
      const key = slice(page, keyAt, ksize, `leaf key ${i}`);
      const value = slice(page, keyAt + ksize, vsize, `leaf value ${i}`);
      if (ctx.last && Buffer.compare(ctx.last, key) >= 0)
        throw new BoltFormatError('the keys of a bucket are out of order: the file is damaged');
      ctx.last = key;
      if ((flags & BUCKET_LEAF) === 0) {
        b.entries.push({ key: Buffer.from(key), value: Buffer.from(value) });
        continue;
      }
      if (value.length < 16)
        throw new BoltFormatError(`bucket ${JSON.stringify(key.toString('utf8'))}: its header is ${value.length} bytes, not 16`);
      const root = value.readBigUInt64LE(0);
      const seq = value.readBigUInt64LE(8);
      const nested = await this.bucket(root, seq, depth + 1, root === 0n ? value.subarray(16) : undefined);
      b.buckets.push({ name: Buffer.from(key), bucket: nested });
    }
  }
}

const validPageSize = (n: number): boolean => n >= 1024 && n <= 65536 && (n & (n - 1)) === 0;
const m0Reason = (m: Meta | string): string =>
  typeof m === 'string' ? m : `page size ${m.pageSize} is not a power of two from 1024 to 65536`;
const kind = (flags: number): string =>
  [flags & BRANCH ? 'branch' : '', flags & LEAF ? 'leaf' : '', flags & FREELIST ? 'freelist' : ''].filter(Boolean).join(' or ');

/** `buf[at, at+len)` exists, or a BoltFormatError naming `what`. */
function need(buf: Buffer, at: number, len: number, what: string): Buffer {
  if (at < 0 || len < 0 || at + len > buf.length)
    throw new BoltFormatError(`${what} run past the end of the page (${at}+${len} > ${buf.length})`);
  return buf;
}

function slice(buf: Buffer, at: number, len: number, what: string): Buffer {
  need(buf, at, len, what);
  return buf.subarray(at, at + len);
}
