// A robust list+watch cache (the core of a client-go informer) on our own streaming GET.
//
// Why not client-node's Watch/ListWatch as is: its watch has no read timeout (a half-open
// connection goes silent forever), may never report the end of a stream, and its informer
// does not resume from the last resourceVersion. This one:
//   - lists (paginated), then watches from the list's resourceVersion with
//     allowWatchBookmarks=true and a server-side timeoutSeconds so watches rotate;
//   - on a closed/failed watch restarts from the last seen resourceVersion, with capped
//     exponential backoff when it fails repeatedly;
//   - on 410 Gone (HTTP status or an ERROR event with code 410) re-lists, emitting ADDED /
//     MODIFIED for what exists now and DELETED for what vanished during the gap;
//   - restarts a watch that delivered nothing (not even a BOOKMARK) for silenceTimeoutMs.
// Handlers are level-triggered friendly: after a re-list every current object is delivered.
import type { V1ObjectMeta } from '@kubernetes/client-node';
import type { KubeClientConfig } from './kubeconfig.js';
import type { Logger } from '../log.js';
import { nullLogger } from '../log.js';
import { kubeRequest, openKubeStream, type KubeStream } from './client.js';
import { backoffDelay, spreadJitter } from '../backoff.js';

export interface KubeObject {
  apiVersion?: string;
  kind?: string;
  metadata?: V1ObjectMeta;
}
export type WatchEventType = 'ADDED' | 'MODIFIED' | 'DELETED';

export interface InformerOptions<T = KubeObject> {
  labelSelector?: string;
  fieldSelector?: string;
  /** restart a watch that delivered nothing (not even a BOOKMARK) for this long (default 60 s) */
  silenceTimeoutMs?: number;
  logger?: Logger;
  /** first retry delay after a failure (default 200 ms), doubled up to maxBackoffMs */
  minBackoffMs?: number;
  /** cap of the retry delay (default 30 s) */
  maxBackoffMs?: number;
  /** page size of the list (default 500) */
  pageSize?: number;
  /**
   * An index key per object (undefined: not indexed), for `byIndex`: the controller asks for
   * the pods of one AtlantisDeployment on every reconcile, and filtering the whole cache
   * each time would make a rollout's cost grow with the square of the pod count.
   */
  indexBy?: (obj: T) => string | undefined;
}

interface ListBody<T> {
  metadata?: { resourceVersion?: string; continue?: string };
  items?: T[];
}

interface WatchEvent<T> {
  type: string;
  object: T & { code?: number; reason?: string; message?: string };
}

function keyOf(o: KubeObject): string {
  const ns = o.metadata?.namespace ?? '';
  return `${ns}/${o.metadata?.name ?? ''}`;
}

export class Informer<T extends KubeObject> {
  private readonly store = new Map<string, T>();
  /** indexBy key -> store key -> object */
  private readonly index = new Map<string, Map<string, T>>();
  private readonly handlers: Array<(type: WatchEventType, obj: T) => void> = [];
  private readonly log: Logger;
  private readonly silenceMs: number;
  private readonly minBackoff: number;
  private readonly maxBackoff: number;
  private rv = '';
  private synced = false;
  private stopped = true;
  private stream: KubeStream | undefined;
  private retryTimer: NodeJS.Timeout | undefined;
  private wakeRetry: (() => void) | undefined;
  private watchdog: NodeJS.Timeout | undefined;
  private lastActivity = 0;
  private failures = 0;
  /** incremented for each watch attempt; callbacks of older attempts are ignored */
  private generation = 0;
  /** counters, for tests and debugging */
  readonly stats = { lists: 0, watches: 0, restarts: 0, silenceRestarts: 0, gone: 0 };

  constructor(
    private readonly kc: KubeClientConfig,
    private readonly listPath: string,
    private readonly opts: InformerOptions<T> = {},
  ) {
    this.log = (opts.logger ?? nullLogger()).child({ informer: listPath });
    this.silenceMs = opts.silenceTimeoutMs ?? 60_000;
    this.minBackoff = opts.minBackoffMs ?? 200;
    this.maxBackoff = opts.maxBackoffMs ?? 30_000;
  }

  onEvent(handler: (type: WatchEventType, obj: T) => void): void {
    this.handlers.push(handler);
  }

  /** Lists, delivers the objects to the handlers, then keeps watching. Resolves after the first list. */
  async start(): Promise<void> {
    if (!this.stopped) return;
    this.stopped = false;
    await this.relist();
    if (this.stopped) return;
    this.synced = true;
    this.startWatchdog();
    void this.watch();
  }

  /** Ends the watch; no more events, no timers left behind. */
  stop(): void {
    this.stopped = true;
    this.generation++;
    this.stream?.abort();
    this.stream = undefined;
    if (this.retryTimer) clearTimeout(this.retryTimer);
    this.wakeRetry?.();
    if (this.watchdog) clearInterval(this.watchdog);
    this.retryTimer = undefined;
    this.watchdog = undefined;
  }

  hasSynced(): boolean {
    return this.synced;
  }

  list(): T[] {
    return [...this.store.values()];
  }

  get(namespace: string | undefined, name: string): T | undefined {
    return this.store.get(`${namespace ?? ''}/${name}`);
  }

  /** The objects whose `indexBy` key is `key` (none without `indexBy`). */
  byIndex(key: string): T[] {
    const m = this.index.get(key);
    return m ? [...m.values()] : [];
  }

  private put(k: string, obj: T): void {
    const old = this.store.get(k);
    this.store.set(k, obj);
    const by = this.opts.indexBy;
    if (!by) return;
    const oldKey = old ? by(old) : undefined;
    const newKey = by(obj);
    if (oldKey !== undefined && oldKey !== newKey) this.unindex(oldKey, k);
    if (newKey === undefined) return;
    let m = this.index.get(newKey);
    if (!m) {
      m = new Map();
      this.index.set(newKey, m);
    }
    m.set(k, obj);
  }

  private remove(k: string): void {
    const old = this.store.get(k);
    this.store.delete(k);
    const key = old && this.opts.indexBy?.(old);
    if (key !== undefined) this.unindex(key, k);
  }

  private unindex(indexKey: string, k: string): void {
    const m = this.index.get(indexKey);
    m?.delete(k);
    if (m?.size === 0) this.index.delete(indexKey);
  }

  /** The resourceVersion the next watch starts from. */
  resourceVersion(): string {
    return this.rv;
  }

  private emit(type: WatchEventType, obj: T): void {
    if (this.stopped) return;
    for (const h of this.handlers) {
      try {
        h(type, obj);
      } catch (err) {
        this.log.error('Informer event handler failed', { err: err instanceof Error ? err.message : String(err) });
      }
    }
  }

  private query(): Record<string, string | undefined> {
    return { labelSelector: this.opts.labelSelector, fieldSelector: this.opts.fieldSelector };
  }

  /** Lists everything (paginated) and reconciles the store with it, emitting the differences. */
  private async relist(): Promise<void> {
    // Retry the list itself until it works or we are stopped (backoff capped).
    for (let attempt = 0; !this.stopped; attempt++) {
      try {
        const items: T[] = [];
        let cont: string | undefined;
        let rv = '';
        for (let page = 0; page < 100_000; page++) {
          const res = await kubeRequest<ListBody<T>>(this.kc, 'GET', this.listPath, undefined, {
            query: { ...this.query(), limit: this.opts.pageSize ?? 500, continue: cont },
          });
          if (res.status === 410 && cont) {
            // the continue token expired: start the list over
            cont = undefined;
            items.length = 0;
            continue;
          }
          if (res.status !== 200) throw new Error(`list ${this.listPath}: HTTP ${res.status}: ${JSON.stringify(res.body).slice(0, 300)}`);
          items.push(...(res.body.items ?? []));
          rv = res.body.metadata?.resourceVersion ?? '';
          cont = res.body.metadata?.continue || undefined;
          if (!cont) break;
        }
        if (this.stopped) return;
        this.stats.lists++;
        this.rv = rv;
        const seen = new Set<string>();
        for (const item of items) {
          const k = keyOf(item);
          seen.add(k);
          const had = this.store.has(k);
          this.put(k, item);
          this.emit(had ? 'MODIFIED' : 'ADDED', item);
        }
        for (const [k, old] of [...this.store]) {
          if (!seen.has(k)) {
            this.remove(k);
            this.emit('DELETED', old);
          }
        }
        this.failures = 0;
        return;
      } catch (err) {
        const delay = this.backoff(attempt);
        this.log.warn('Informer list failed', { err: err instanceof Error ? err.message : String(err), retryInMs: delay });
        // stop() calls wakeRetry, so a stopped informer's start() returns instead of hanging.
        await new Promise<void>((r) => {
          this.wakeRetry = r;
          this.retryTimer = setTimeout(r, delay);
        });
        this.wakeRetry = undefined;
      }
    }
  }

  private backoff(attempt: number): number {
    return spreadJitter(backoffDelay(attempt, this.minBackoff, this.maxBackoff), 0.2);
  }

  private startWatchdog(): void {
    const tick = Math.max(50, Math.min(5_000, Math.floor(this.silenceMs / 4)));
    this.watchdog = setInterval(() => {
      if (this.stopped || !this.stream) return;
      if (Date.now() - this.lastActivity > this.silenceMs) {
        this.stats.silenceRestarts++;
        this.log.warn('Watch silent, restarting it', { silentMs: Date.now() - this.lastActivity });
        this.restartWatch(false, 0);
      }
    }, tick);
    this.watchdog.unref?.();
  }

  /** Ends the current watch and starts another after `delayMs`, re-listing first when `relist`. */
  private restartWatch(relist: boolean, delayMs: number): void {
    if (this.stopped) return;
    this.generation++;
    this.stream?.abort();
    this.stream = undefined;
    this.stats.restarts++;
    if (this.retryTimer) clearTimeout(this.retryTimer);
    this.retryTimer = setTimeout(() => {
      this.retryTimer = undefined;
      if (this.stopped) return;
      void (async () => {
        if (relist) await this.relist();
        if (!this.stopped) await this.watch();
      })();
    }, delayMs);
  }

  private async watch(): Promise<void> {
    if (this.stopped) return;
    const gen = ++this.generation;
    // Rotate watches before the watchdog would consider them silent.
    const serverTimeout = Math.max(1, Math.floor((this.silenceMs / 1000) * (0.7 + Math.random() * 0.2)));
    let status = 0;
    let gone = false;
    let errorBody = '';
    let delivered = 0;
    this.lastActivity = Date.now();
    this.stats.watches++;
    const onFailure = (why: string) => {
      if (gen !== this.generation || this.stopped) return;
      if (gone) {
        this.stats.gone++;
        this.log.info('Watch expired, re-listing', { resourceVersion: this.rv });
        this.restartWatch(true, 0);
        return;
      }
      // A clean end after events (or a normal server-side timeout) restarts at once; a failure
      // (no events, error status) backs off.
      if (status === 200 && why === 'end') {
        this.failures = 0;
        this.restartWatch(false, 0);
        return;
      }
      const delay = this.backoff(this.failures++);
      this.log.warn('Watch failed, retrying', { reason: why, status, body: errorBody.slice(0, 300), delivered, retryInMs: delay });
      this.restartWatch(false, delay);
    };
    try {
      const stream = await openKubeStream(
        this.kc,
        this.listPath,
        {
          ...this.query(),
          watch: 'true',
          resourceVersion: this.rv || undefined,
          allowWatchBookmarks: 'true',
          timeoutSeconds: serverTimeout,
        },
        {
          onResponse: (s) => {
            status = s;
            if (gen !== this.generation) return;
            this.lastActivity = Date.now();
            if (s === 410) gone = true;
          },
          onLine: (line) => {
            if (gen !== this.generation || this.stopped) return;
            this.lastActivity = Date.now();
            if (status !== 200) {
              errorBody += line;
              return;
            }
            let ev: WatchEvent<T>;
            try {
              ev = JSON.parse(line) as WatchEvent<T>;
            } catch {
              this.log.warn('Watch sent an unparsable line', { length: line.length });
              return;
            }
            this.handleEvent(ev, () => {
              gone = true;
            });
            delivered++;
            if (gone) onFailure('gone');
          },
          onClose: (err) => {
            onFailure(err ? `error: ${err.message}` : status === 200 ? 'end' : `status ${status}`);
          },
        },
      );
      if (gen !== this.generation || this.stopped) {
        stream.abort();
        return;
      }
      this.stream = stream;
    } catch (err) {
      onFailure(`error: ${err instanceof Error ? err.message : String(err)}`);
    }
  }

  private handleEvent(ev: WatchEvent<T>, markGone: () => void): void {
    const obj = ev.object;
    const objRv = obj?.metadata?.resourceVersion;
    switch (ev.type) {
      case 'ADDED':
      case 'MODIFIED': {
        const k = keyOf(obj);
        const had = this.store.has(k);
        this.put(k, obj);
        if (objRv) this.rv = objRv;
        this.emit(had ? 'MODIFIED' : 'ADDED', obj);
        break;
      }
      case 'DELETED': {
        const k = keyOf(obj);
        this.remove(k);
        if (objRv) this.rv = objRv;
        this.emit('DELETED', obj);
        break;
      }
      case 'BOOKMARK':
        if (objRv) this.rv = objRv;
        break;
      case 'ERROR':
        if (obj?.code === 410 || obj?.reason === 'Expired' || obj?.reason === 'Gone') markGone();
        else {
          this.log.warn('Watch sent an error', { code: obj?.code, reason: obj?.reason, message: obj?.message });
          // Restart the watch (from the same resourceVersion) after a backoff.
          this.restartWatch(false, this.backoff(this.failures++));
        }
        break;
      default:
        break;
    }
  }
}
