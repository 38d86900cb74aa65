// Whether a `terraform init` will only read the shared plugin cache (plugin-cache.ts): then it
// need not wait for the other inits. An init writes the cache only when it installs a provider
// package the cache lacks, or one whose cached copy matches none of the lock file's checksums
// (terraform then installs it again, over the cached copy). So an init only reads when the
// project commits a lock file, init does not upgrade, and every provider the lock file selects
// is in the cache for this platform with a checksum (`h1:`) the lock file lists. Anything we
// cannot read or do not understand counts as a write: the init waits, as every init did before.
// Left open: a configuration that needs a provider its lock file does not list (terraform adds
// it to the lock file and installs it) is not seen here.
import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { lstat, readFile, readdir } from 'node:fs/promises';
import path from 'node:path';
import { LOCK_FILE } from './init-lock-file.js';

export interface LockedProvider {
  /** e.g. registry.terraform.io/hashicorp/null */
  address: string;
  version: string;
  hashes: string[];
}

/** Lock files are small; a larger one is not read (its init waits). */
const MAX_LOCK_FILE_BYTES = 1 << 20;
const ADDRESS = /^[a-z0-9.-]+(?::[0-9]+)?\/[A-Za-z0-9_-]+\/[A-Za-z0-9_-]+$/;
const VERSION = /^[0-9]+\.[0-9]+\.[0-9]+(?:-[0-9A-Za-z.-]+)?$/;

/**
 * The provider selections of a `.terraform.lock.hcl` as terraform writes it; undefined for
 * anything else (a line of another shape, a block without a version), so that its init waits.
 */
export function parseLockFile(text: string): LockedProvider[] | undefined {
  const out: LockedProvider[] = [];
  let block: { address: string; version?: string; hashes: string[]; inHashes: boolean } | undefined;
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) continue;
    if (!block) {
      const m = /^provider "([^"]+)" \{$/.exec(line);
      if (!m || !ADDRESS.test(m[1]!)) return undefined;
      block = { address: m[1]!, hashes: [], inHashes: false };
      continue;
    }
    if (block.inHashes) {
      if (line === ']') block.inHashes = false;
      else {
        const h = /^"([a-z0-9]+:[A-Za-z0-9+/=]+)",?$/.exec(line);
        if (!h) return undefined;
        block.hashes.push(h[1]!);
      }
      continue;
    }
    if (line === '}') {
      if (block.version === undefined) return undefined;
      out.push({ address: block.address, version: block.version, hashes: block.hashes });
      block = undefined;
      continue;
    }
    const v = /^version\s*=\s*"([^"]+)"$/.exec(line);
    if (v) {
      if (!VERSION.test(v[1]!)) return undefined;
      block.version = v[1]!;
    } else if (/^hashes\s*=\s*\[$/.test(line)) block.inHashes = true;
    else if (!/^constraints\s*=\s*"[^"]*"$/.test(line)) return undefined;
  }
  return block ? undefined : out;
}

/** Whether init's arguments (or terraform's TF_CLI_ARGS variables) ask it to upgrade providers. */
export function upgrades(args: readonly string[], env: NodeJS.ProcessEnv): boolean {
  const FALSE = new Set(['false', 'False', 'FALSE', 'f', 'F', '0']); // Go's strconv.ParseBool
  const upgrade = (a: string): boolean => {
    const m = /^--?upgrade(?:=(.*))?$/.exec(a);
    return m !== null && (m[1] === undefined || !FALSE.has(m[1]));
  };
  if (args.some(upgrade)) return true;
  return [env.TF_CLI_ARGS, env.TF_CLI_ARGS_init].some((v) => v !== undefined && /upgrade/i.test(v));
}

/** Terraform's name of this machine's platform (`linux_amd64`), as the cache lays packages out. */
export function terraformPlatform(platform: string = process.platform, arch: string = process.arch): string {
  const goArch: Record<string, string> = { x64: 'amd64', ia32: '386', arm64: 'arm64', arm: 'arm' };
  return `${platform}_${goArch[arch] ?? arch}`;
}

/**
 * The `h1:` checksum of an unpacked provider package, as terraform computes it (Go's
 * dirhash.Hash1 over the dir: each file's SHA-256 and slash-separated path, sorted by path).
 * Undefined when the dir holds anything but plain files and dirs.
 */
export async function packageHashV1(dir: string): Promise<string | undefined> {
  const files = await regularFiles(dir, '');
  if (!files) return undefined;
  const sum = createHash('sha256');
  for (const f of files.sort((a, b) => (a.rel < b.rel ? -1 : a.rel > b.rel ? 1 : 0))) {
    const h = createHash('sha256');
    for await (const chunk of createReadStream(path.join(dir, f.rel))) h.update(chunk as Buffer);
    sum.update(`${h.digest('hex')}  ${f.rel}\n`);
  }
  return `h1:${sum.digest('base64')}`;
}

interface FileStamp {
  rel: string;
  size: number;
  mtimeMs: number;
  ino: number;
}

async function regularFiles(dir: string, rel: string): Promise<FileStamp[] | undefined> {
  const out: FileStamp[] = [];
  for (const name of (await readdir(path.join(dir, rel))).sort()) {
    const r = rel === '' ? name : `${rel}/${name}`;
    const st = await lstat(path.join(dir, r));
    if (st.isDirectory()) {
      const inner = await regularFiles(dir, r);
      if (!inner) return undefined;
      out.push(...inner);
    } else if (st.isFile() && !name.includes('\n')) out.push({ rel: r, size: st.size, mtimeMs: st.mtimeMs, ino: st.ino });
    else return undefined;
  }
  return out;
}

/**
 * Answers "does this init only read the cache?" for one cache dir. A package's checksum is
 * computed once per content (its files' sizes, times and inodes), not once per init: a
 * provider binary is tens of MiB.
 */
export class CachedProviders {
  private readonly hashes = new Map<string, { stamp: string; hash: Promise<string | undefined> }>();

  constructor(
    private readonly cacheDir: string,
    private readonly platform: string = terraformPlatform(),
  ) {}

  /** Whether `terraform init <args>` in projectDir finds every provider it selects in the cache. */
  async initOnlyReads(projectDir: string, args: readonly string[], env: NodeJS.ProcessEnv = process.env): Promise<boolean> {
    if (upgrades(args, env)) return false;
    try {
      const lockPath = path.join(projectDir, LOCK_FILE);
      const st = await lstat(lockPath);
      if (!st.isFile() || st.size > MAX_LOCK_FILE_BYTES) return false;
      const locked = parseLockFile(await readFile(lockPath, 'utf8'));
      if (!locked) return false;
      for (const p of locked) if (!(await this.cached(p))) return false;
      return true;
    } catch {
      return false; // no lock file, or the cache cannot be read: the init waits its turn
    }
  }

  private async cached(p: LockedProvider): Promise<boolean> {
    const h1 = p.hashes.filter((h) => h.startsWith('h1:'));
    if (h1.length === 0) return false;
    const dir = path.join(this.cacheDir, ...p.address.split('/'), p.version, this.platform);
    const files = await regularFiles(dir, '');
    if (!files || files.length === 0) return false;
    const stamp = files.map((f) => `${f.rel}:${f.size}:${f.mtimeMs}:${f.ino}`).join('\n');
    let known = this.hashes.get(dir);
    if (known?.stamp !== stamp) {
      known = { stamp, hash: packageHashV1(dir).catch(() => undefined) };
      this.hashes.set(dir, known);
    }
    const hash = await known.hash;
    return hash !== undefined && h1.includes(hash);
  }
}
