// The global apply lock on Redis: one key, `<prefix>apply-lock`, holding the lock's JSON while
// it is on. Kept beside redis-store.ts, whose methods call these.
import type { Redis } from 'ioredis';
import type { ApplyLock } from './state-store.js';

const parse = (s: string | null): ApplyLock | undefined => (s === null ? undefined : (JSON.parse(s) as ApplyLock));

export async function getApplyLock(redis: Redis, prefix: string): Promise<ApplyLock | undefined> {
  return parse(await redis.get(`${prefix}apply-lock`));
}

/** On: `lock` unless one is on already (then that one stays); off: none. Returns the lock after. */
export async function setApplyLock(redis: Redis, prefix: string, on: boolean, lock: ApplyLock): Promise<ApplyLock | undefined> {
  const key = `${prefix}apply-lock`;
  if (!on) return void (await redis.del(key));
  // One MULTI: what is read back is the lock kept, this one or the one already there.
  const res = await redis.multi().set(key, JSON.stringify(lock), 'NX').get(key).exec();
  if (res === null) throw new Error('Redis transaction aborted');
  for (const [err] of res) if (err) throw err;
  return parse(res[1]?.[1] as string | null);
}
