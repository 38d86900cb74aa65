// The bbolt reader (src/server/locks/bolt-file.ts) on atlantis.db files written by a real
// Atlantis v0.47 (test/fixtures/atlantis-db/, see its README), and on damaged and truncated
// copies of them: every damage is a BoltFormatError that says what is wrong, never another
// exception, a hang or a huge allocation.
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import fc from 'fast-check';
import { BoltFormatError, bucketAt, fnv1a64, parseMeta, readBoltFile } from '../src/server/locks/bolt-file.js';

const FIXTURES = fileURLToPath(new URL('./fixtures/atlantis-db/', import.meta.url));
const SMALL = path.join(FIXTURES, 'atlantis-locks.db');
const MANY = path.join(FIXTURES, 'atlantis-many-locks.db');
const tmp = mkdtempSync(path.join(tmpdir(), 'bolt-file-'));
after(() => rmSync(tmp, { recursive: true, force: true }));

let n = 0;
/** A copy of `src` changed by `edit`, in a file of its own. */
function variant(src: string, edit: (b: Buffer) => Buffer | undefined): string {
  const b = Buffer.from(readFileSync(src));
  const out = edit(b) ?? b;
  const file = path.join(tmp, `v${n++}.db`);
  writeFileSync(file, out);
  return file;
}

const pageSize = (file: string): number => readFileSync(file).readUInt32LE(16 + 8);

/** Writes a valid checksum into the meta of page `which` after an edit. */
function resum(b: Buffer, which: 0 | 1): void {
  const at = which * b.readUInt32LE(16 + 8) + 16;
  b.writeBigUInt64LE(fnv1a64(b.subarray(at, at + 56)), at + 56);
}

async function rejects(file: string, re: RegExp): Promise<void> {
  await assert.rejects(readBoltFile(file), (e: unknown) => {
    assert.ok(e instanceof BoltFormatError, `not a BoltFormatError: ${(e as Error).stack}`);
    assert.match(e.message, re);
    return true;
  });
}

describe('bbolt reader on files written by Atlantis v0.47', () => {
  it('reads the three buckets of the small file, and their records are Atlantis JSON', async () => {
    const db = await readBoltFile(SMALL);
    assert.equal(db.pageSize, 4096);
    assert.deepEqual(db.root.buckets.map((b) => b.name.toString()).sort(), ['globalLocks', 'pulls', 'runLocks']);
    const locks = bucketAt(db, 'runLocks')!;
    assert.ok(locks.entries.length >= 4, `${locks.entries.length} locks`);
    for (const e of locks.entries) {
      const rec = JSON.parse(e.value.toString()) as { Project: { RepoFullName: string; Path: string }; Workspace: string };
      assert.ok(e.key.toString().startsWith(`${rec.Project.RepoFullName}/${rec.Project.Path}/${rec.Workspace}/`));
    }
    assert.ok(bucketAt(db, 'pulls')!.entries.length >= 3);
    // Small buckets live inside their parent's page.
    assert.equal(bucketAt(db, 'globalLocks')!.pages.inline, true);
    assert.equal(db.freePages !== undefined, true);
  });

  it('reads the many-locks file: one bucket over a branch page and many leaf pages, values over overflow pages', async () => {
    const db = await readBoltFile(MANY);
    const locks = bucketAt(db, 'runLocks')!;
    assert.equal(locks.entries.length, 320);
    assert.equal(locks.pages.inline, false);
    assert.ok(locks.pages.branch >= 1, `branch pages: ${locks.pages.branch}`);
    assert.ok(locks.pages.leaf >= 10, `leaf pages: ${locks.pages.leaf}`);
    const keys = locks.entries.map((e) => e.key.toString());
    assert.deepEqual(keys, [...keys].sort());
    // Each pull's status lists its 40 projects: more than a page, so on overflow pages.
    assert.ok(bucketAt(db, 'pulls')!.pages.overflow >= 1);
    assert.ok(bucketAt(db, 'globalLocks')!.entries.some((e) => e.key.toString() === 'apply/lock'));
  });

  it('takes the valid meta with the higher txid; with that one damaged, the other (the previous commit)', async () => {
    const db = await readBoltFile(SMALL);
    const ps = pageSize(SMALL);
    const newer = db.meta;
    const file = variant(SMALL, (b) => {
      b[newer * ps + 16 + 40] ^= 0xff;
      return b;
    });
    const older = await readBoltFile(file);
    assert.equal(older.meta, newer === 0 ? 1 : 0);
    assert.equal(older.txid, db.txid - 1n);
  });

  it('parses a meta and refuses a bad checksum, magic or version', () => {
    const b = readFileSync(SMALL);
    const m = parseMeta(b.subarray(0, 100));
    assert.equal(typeof m, 'object');
    const bad = Buffer.from(b.subarray(0, 100));
    bad[16 + 20] ^= 1;
    assert.equal(parseMeta(bad), 'checksum mismatch');
    const magic = Buffer.from(b.subarray(0, 100));
    magic.writeUInt32LE(0x12345678, 16);
    assert.equal(parseMeta(magic), 'no bbolt magic number');
    const version = Buffer.from(b.subarray(0, 100));
    version.writeUInt32LE(3, 20);
    assert.match(parseMeta(version) as string, /version 3/);
  });
});

describe('bbolt reader on damaged and truncated files', () => {
  it('refuses an empty file, a file shorter than a meta, and a file cut in half', async () => {
    await rejects(
      variant(SMALL, () => Buffer.alloc(0)),
      /truncated/,
    );
    await rejects(
      variant(SMALL, (b) => b.subarray(0, 50)),
      /truncated/,
    );
    await rejects(
      variant(MANY, (b) => b.subarray(0, Math.floor(b.length / 2))),
      /truncated/,
    );
    await rejects(
      variant(SMALL, (b) => b.subarray(0, pageSize(SMALL) * 3)),
      /truncated/,
    );
  });

  it('refuses a file that is not bbolt, or whose two metas are both damaged', async () => {
    await rejects(
      variant(SMALL, (b) => Buffer.alloc(b.length, 0x41)),
      /not a bbolt database.*meta 0: no bbolt magic number/,
    );
    const ps = pageSize(SMALL);
    await rejects(
      variant(SMALL, (b) => {
        b[16 + 48] ^= 1;
        b[ps + 16 + 48] ^= 1;
        return b;
      }),
      /both meta pages are damaged.*checksum mismatch.*checksum mismatch/,
    );
  });

  it('refuses a root that points past the pages in use, and a page that calls itself by another id', async () => {
    const db = await readBoltFile(SMALL);
    const ps = pageSize(SMALL);
    const at = db.meta * ps + 16;
    await rejects(
      variant(SMALL, (b) => {
        b.writeBigUInt64LE(10_000_000n, at + 16);
        resum(b, db.meta);
        return b;
      }),
      /outside the pages in use/,
    );
    const root = Number(readFileSync(SMALL).readBigUInt64LE(at + 16));
    await rejects(
      variant(SMALL, (b) => {
        b.writeBigUInt64LE(BigInt(root + 1), root * ps);
        return b;
      }),
      new RegExp(`page ${root} calls itself page ${root + 1}`),
    );
  });

  it('refuses a branch whose child is itself (a cycle), and element counts past the page', async () => {
    const db = await readBoltFile(MANY);
    const ps = pageSize(MANY);
    const buf = readFileSync(MANY);
    // The runLocks bucket's root (a branch page): find it from the root bucket's leaf.
    const rootPg = Number(buf.readBigUInt64LE(db.meta * ps + 16 + 16));
    const leaf = buf.subarray(rootPg * ps, (rootPg + 1) * ps);
    let branch = -1;
    for (let i = 0; i < leaf.readUInt16LE(10); i++) {
      const e = 16 + i * 16;
      const key = leaf.subarray(e + leaf.readUInt32LE(e + 4), e + leaf.readUInt32LE(e + 4) + leaf.readUInt32LE(e + 8));
      if (key.toString() === 'runLocks') branch = Number(leaf.readBigUInt64LE(e + leaf.readUInt32LE(e + 4) + key.length));
    }
    assert.ok(branch > 1);
    assert.equal(buf.readUInt16LE(branch * ps + 8), 0x01, 'runLocks starts at a branch page');
    await rejects(
      variant(MANY, (b) => {
        b.writeBigUInt64LE(BigInt(branch), branch * ps + 16 + 8);
        return b;
      }),
      /reached twice/,
    );
    await rejects(
      variant(MANY, (b) => {
        b.writeUInt16LE(0xfff0, branch * ps + 10);
        return b;
      }),
      /past the end of the page/,
    );
    await rejects(
      variant(MANY, (b) => {
        b.writeUInt32LE(0x7fffffff, branch * ps + 12);
        return b;
      }),
      /past the pages in use/,
    );
  });

  it('refuses keys out of order, and a bucket page also on the freelist', async () => {
    const db = await readBoltFile(MANY);
    const ps = pageSize(MANY);
    const buf = readFileSync(MANY);
    // A leaf page of runLocks with two keys: swap the first bytes of its first two keys.
    let leafPg = -1;
    for (let pg = 2; pg < db.highWaterMark && leafPg < 0; pg++) {
      const p = buf.subarray(pg * ps);
      if (p.readUInt16LE(8) === 0x02 && p.readUInt16LE(10) >= 2 && p.includes(Buffer.from('"RepoFullName":"acme/mono"'))) leafPg = pg;
    }
    assert.ok(leafPg > 1);
    await rejects(
      variant(MANY, (b) => {
        const e = leafPg * ps + 16;
        const k0 = e + b.readUInt32LE(e + 4);
        const k1 = e + 16 + b.readUInt32LE(e + 16 + 4);
        // Make the second key sort before the first ("acme/mono/stacks/s0.." -> "acme/mono/stacks/r0..").
        b[k1 + 'acme/mono/stacks/'.length] = 'r'.charCodeAt(0);
        assert.equal(b.subarray(k0, k0 + 4).toString(), 'acme');
        return b;
      }),
      /out of order/,
    );
    if (db.freePages === undefined || db.freePages === 0) return;
    // Put the leaf on the freelist in place of the first free page named.
    const m = db.meta * ps + 16;
    const flPg = Number(buf.readBigUInt64LE(m + 32));
    await rejects(
      variant(MANY, (b) => {
        const count = b.readUInt16LE(flPg * ps + 10);
        b.writeBigUInt64LE(BigInt(leafPg), flPg * ps + 16 + (count === 0xffff ? 8 : 0));
        return b;
      }),
      /also on the freelist/,
    );
  });

  it('refuses a file larger than the limit without reading it', async () => {
    await assert.rejects(readBoltFile(MANY, { maxFileBytes: 4096 }), /more than the 4096 this reader accepts/);
  });

  for (const [name, file, runs] of [
    ['small', SMALL, 120],
    ['many-locks', MANY, 30],
  ] as const)
    it(`any damage to any byte of the ${name} file: a result or a BoltFormatError, never another error (seeded, bounded)`, async () => {
      const original = readFileSync(file);
      let refused = 0;
      await fc.assert(
        fc.asyncProperty(
          fc.array(fc.record({ at: fc.nat({ max: original.length - 1 }), byte: fc.nat({ max: 255 }) }), { minLength: 1, maxLength: 8 }),
          async (edits) => {
            const b = Buffer.from(original);
            for (const e of edits) b[e.at] = e.byte;
            const file = path.join(tmp, 'fuzz.db');
            writeFileSync(file, b);
            try {
              await readBoltFile(file);
            } catch (e) {
              if (!(e instanceof BoltFormatError)) throw e;
              refused++;
            }
          },
        ),
        { seed: 33, numRuns: runs },
      );
      assert.ok(refused > 0, 'some damage was noticed');
    });
});
