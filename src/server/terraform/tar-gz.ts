// One regular file out of a .tar.gz release archive (OpenTofu's and conftest's releases are
// tarballs), read from memory with bounds: the archive is gunzipped with a size limit, ustar
// and GNU long-name headers are understood, links and other entries are skipped, and only an
// exact path match (with or without a leading ./) is returned.
import { gunzipSync } from 'node:zlib';

const BLOCK = 512;

function field(h: Buffer, start: number, len: number): string {
  const raw = h.subarray(start, start + len);
  const end = raw.indexOf(0);
  return raw.toString('utf8', 0, end < 0 ? len : end);
}

function octal(h: Buffer, start: number, len: number): number {
  const s = field(h, start, len).trim();
  if (!/^[0-7]*$/.test(s)) throw new Error('corrupt tar header (size)');
  return s === '' ? 0 : Number.parseInt(s, 8);
}

/** The contents of `name` in the gzipped tarball; throws when it is missing or the archive is bad. */
export function extractTarGzFile(archive: Buffer, name: string, maxBytes: number): Buffer {
  let tar: Buffer;
  try {
    tar = gunzipSync(archive, { maxOutputLength: maxBytes + 1024 * 1024 });
  } catch (e) {
    throw new Error(`not a gzip archive, or larger than ${maxBytes} bytes: ${(e as Error).message}`);
  }
  const want = name.replace(/^\.\//, '');
  let at = 0;
  let longName: string | undefined;
  while (at + BLOCK <= tar.length) {
    const h = tar.subarray(at, at + BLOCK);
    if (h.every((b) => b === 0)) break;
    const size = octal(h, 124, 12);
    const type = String.fromCharCode(h[156] ?? 0);
    const dataStart = at + BLOCK;
    const next = dataStart + Math.ceil(size / BLOCK) * BLOCK;
    if (dataStart + size > tar.length) throw new Error('truncated tar archive');
    const data = tar.subarray(dataStart, dataStart + size);
    if (type === 'L') {
      longName = data.toString('utf8').replace(/\0.*$/s, '');
      at = next;
      continue;
    }
    const prefix = field(h, 345, 155);
    const entry = (longName ?? (prefix ? `${prefix}/${field(h, 0, 100)}` : field(h, 0, 100))).replace(/^\.\//, '');
    longName = undefined;
    if ((type === '0' || type === '\0') && entry === want) {
      if (size > maxBytes) throw new Error(`${name} in the archive is larger than ${maxBytes} bytes`);
      return Buffer.from(data);
    }
    at = next;
  }
  throw new Error(`no ${name} in the archive`);
}
