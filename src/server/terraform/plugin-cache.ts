// --use-tf-plugin-cache (on by default, as in Atlantis v0.47): one provider cache per server,
// `<data-dir>/plugin-cache`, given to every terraform and tofu command as TF_PLUGIN_CACHE_DIR,
// as Atlantis does. Atlantis stops there, and its docs warn that parallel inits race on the
// cache (terraform's plugin cache is not safe for concurrent use: two inits installing one
// provider write the same files). Here an init that may write the cache waits for the one
// running, so that those inits run one at a time per server. An init that will only read it
// (its committed lock file's providers are all cached: cached-providers.ts) does not wait, and
// OpenTofu 1.10 and later lock the cache themselves (a file lock per provider version), so
// theirs never wait. Only `init` writes the cache; plans and applies read what init linked.
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import type { Logger } from '../../log.js';
import { CachedProviders } from './cached-providers.js';
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

/** The project an init runs in, to tell whether it only reads the cache. */
export interface InitTarget {
  projectDir: string;
  /** init's arguments, as it will be run. */
  args: readonly string[];
}

export class PluginCache {
  private tail: Promise<void> = Promise.resolve();
  private waiting = 0;
  private readonly providers: CachedProviders;

  /** Creates the dir (private: providers are executables every later init runs). */
  constructor(
    readonly dir: string,
    private readonly logger?: Logger,
  ) {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    this.providers = new CachedProviders(dir);
  }

  static inDataDir(dataDir: string, logger?: Logger): PluginCache {
    return new PluginCache(path.join(dataDir, PLUGIN_CACHE_DIR_NAME), logger);
  }

  /** The variable every terraform command of a project gets. */
  env(): Record<string, string> {
    return { TF_PLUGIN_CACHE_DIR: this.dir };
  }

  /** Inits queued behind the running one (for logs and tests). */
  get queued(): number {
    return this.waiting;
  }

  /**
   * Runs an init: at once when the distribution locks the cache itself or the init only reads
   * the cache, else after the writing init before it. A queued init asks again when its turn
   * comes, since the init before it may have cached what it needs: then it lets the next one go.
   */
  async init<T>(distribution: Distribution, version: string | undefined, fn: () => Promise<T>, target?: InitTarget): Promise<T> {
    if (locksCacheItself(distribution, version)) return fn();
    const onlyReads = () => (target ? this.providers.initOnlyReads(target.projectDir, target.args) : Promise.resolve(false));
    if (await onlyReads()) return fn();
    const before = this.tail;
    let release!: () => void;
    this.tail = new Promise<void>((r) => (release = r));
    this.waiting++;
    this.logger?.debug('Init waits for the plugin cache', { dir: target?.projectDir, queued: this.waiting });
    // `before` only ever resolves: each init releases its turn however it ends.
    await before;
    this.waiting--;
    try {
      if (await onlyReads()) {
        release();
        this.logger?.debug('Init reads the plugin cache only; the next may go', { dir: target?.projectDir });
      }
      return await fn();
    } finally {
      release();
    }
  }
}
