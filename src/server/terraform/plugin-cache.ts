// --use-tf-plugin-cache (on by default, as in Atlantis v0.47): one provider cache per server,
// `<data-dir>/plugin-cache`, given to every terraform and tofu command as TF_PLUGIN_CACHE_DIR,
// as Atlantis does. Atlantis stops there, and its docs warn that parallel inits race on the
// cache (terraform's plugin cache is not safe for concurrent use: two inits installing one
// provider write the same files). Here an init that may write the cache waits for the one
// running: terraform's inits run one at a time per server; OpenTofu 1.10 and later lock the
// cache themselves (a file lock per provider version), so theirs run at once. Only `init`
// writes the cache; plans and applies read what init linked, so nothing else waits.
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import type { Distribution } from './distribution.js';
import { normaliseTfVersion } from './tf-versions.js';

export const PLUGIN_CACHE_DIR_NAME = 'plugin-cache';

/** The first OpenTofu release whose provider installer locks the plugin cache. */
const TOFU_LOCKING_SINCE = [1, 10, 0] as const;

/**
 * Whether inits of this distribution and version may share the cache at once: only OpenTofu
 * from 1.10 on. An unknown version waits, as the safe side.
 */
export function locksCacheItself(distribution: Distribution, version: string | undefined): boolean {
  if (distribution !== 'opentofu' || version === undefined) return false;
  const v = normaliseTfVersion(version);
  if (v === null) return false;
  const [major, minor, patch] = v.split(/[.-]/).map(Number) as [number, number, number];
  const [M, m, p] = TOFU_LOCKING_SINCE;
  return major !== M ? major > M : minor !== m ? minor > m : patch >= p;
}

export class PluginCache {
  private tail: Promise<void> = Promise.resolve();
  private waiting = 0;

  /** Creates the dir (private: providers are executables every later init runs). */
  constructor(readonly dir: string) {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
  }

  static inDataDir(dataDir: string): PluginCache {
    return new PluginCache(path.join(dataDir, PLUGIN_CACHE_DIR_NAME));
  }

  /** The variable every terraform command of a project gets. */
  env(): Record<string, string> {
    return { TF_PLUGIN_CACHE_DIR: this.dir };
  }

  /** Inits queued behind the running one (for logs and tests). */
  get queued(): number {
    return this.waiting;
  }

  /** Runs an init: at once when the distribution locks the cache itself, else after the init before it. */
  init<T>(distribution: Distribution, version: string | undefined, fn: () => Promise<T>): Promise<T> {
    if (locksCacheItself(distribution, version)) return fn();
    const before = this.tail;
    let release!: () => void;
    this.tail = new Promise<void>((r) => (release = r));
    this.waiting++;
    // `before` only ever resolves: each init releases its turn however it ends.
    return before.then(async () => {
      this.waiting--;
      try {
        return await fn();
      } finally {
        release();
      }
    });
  }
}
