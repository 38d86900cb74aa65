// A plan file's bytes for a shared store: read with a bound, written back atomically.
import { randomBytes } from 'node:crypto';
import { mkdir, open, rename, rm } from 'node:fs/promises';
import path from 'node:path';
import { fileSha256 } from './plan-file.js';

/** Redis keeps at most 512 MiB in one value; a bigger plan cannot be shared. */
export const MAX_PLAN_FILE_BYTES = 512 * 1024 * 1024;

/** The plan file's bytes, or undefined when there is none (a workflow that writes no plan file). */
export async function readPlanBytes(file: string): Promise<Buffer | undefined> {
  let fh: Awaited<ReturnType<typeof open>>;
  try {
    fh = await open(file, 'r');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
  try {
    const tooBig = (n: number) =>
      new Error(`plan file ${file} is ${n} bytes, over the ${MAX_PLAN_FILE_BYTES} (512 MiB) a Redis store can keep`);
    const { size } = await fh.stat();
    if (size > MAX_PLAN_FILE_BYTES) throw tooBig(size);
    const bytes = await fh.readFile();
    if (bytes.length > MAX_PLAN_FILE_BYTES) throw tooBig(bytes.length);
    return bytes;
  } finally {
    await fh.close();
  }
}

export async function localSha256(file: string): Promise<string | undefined> {
  try {
    return await fileSha256(file);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
}

/** A temp file beside the target, fsynced, then renamed over it: a reader sees the old file or the whole new one. */
export async function writeFileAtomic(file: string, bytes: Buffer): Promise<void> {
  await mkdir(path.dirname(file), { recursive: true, mode: 0o700 });
  const tmp = path.join(path.dirname(file), `.${path.basename(file)}.${randomBytes(6).toString('hex')}.tmp`);
  try {
    const fh = await open(tmp, 'wx', 0o600);
    try {
      await fh.writeFile(bytes);
      await fh.sync();
    } finally {
      await fh.close();
    }
    await rename(tmp, file);
  } catch (err) {
    await rm(tmp, { force: true });
    throw err;
  }
}
