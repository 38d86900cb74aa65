// The Atlantis import (bolt-import.ts) into the Redis store, in the store's key layout
// (redis-store.ts), plus two keys of its own:
//
//   P atlantis-import          STRING the import's marker JSON; while it exists no import runs again
//   P atlantis-import-notices  HASH   R#N -> ImportNotice JSON, until a server posts the comment
//
// One Lua script does the whole import, so it is atomic: every replica starting at once on the
// same Redis runs it, and the first one's marker makes the others' a no-op. Everything was
// checked before (records, key names), so nothing in the script can fail half-way; Redis does
// not roll a script back. Like the store's unlock script, it derives keys from its arguments
// (pull-locks and pull-status keys): one Redis, not Redis Cluster.
import type { Redis } from 'ioredis';
import type { AtlantisImportBatch, AtlantisImportOutcome, ImportMarker, ImportNotice } from './bolt-import-types.js';
import type { PullStatus } from './pull-status.js';
import type { LockKey, LockRecord } from './state-store.js';

const IMPORT_LUA = `
local cur = redis.call('GET', KEYS[1])
if cur then return {0, cur} end
local p = ARGV[1]
local i = 3
local kept = {}
local n = tonumber(ARGV[i]); i = i + 1
for _ = 1, n do
  local f, rec, rn, pull = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3]
  i = i + 4
  local held = redis.call('HGET', KEYS[2], f)
  if held then
    if cjson.decode(held).pull ~= tonumber(pull) then kept[#kept + 1] = held end
  else
    redis.call('HSET', KEYS[2], f, rec)
    redis.call('SADD', p .. 'pull-locks:' .. rn, f)
  end
end
n = tonumber(ARGV[i]); i = i + 1
for _ = 1, n do
  local key = p .. 'pull-status:' .. ARGV[i]
  if redis.call('EXISTS', key) == 0 then redis.call('HSET', key, 'v', redis.call('INCR', KEYS[3]), 'json', ARGV[i + 1]) end
  i = i + 2
end
if ARGV[i] ~= '' then redis.call('SET', KEYS[4], ARGV[i], 'NX') end
i = i + 1
n = tonumber(ARGV[i]); i = i + 1
for _ = 1, n do
  redis.call('HSET', KEYS[5], ARGV[i], ARGV[i + 1])
  i = i + 2
end
redis.call('SET', KEYS[1], ARGV[2])
return {1, kept}`;

const rn = (repo: string, pull: number): string => `${repo}#${pull}`;

export async function redisImportMarker(redis: Redis, prefix: string): Promise<ImportMarker | undefined> {
  const s = await redis.get(`${prefix}atlantis-import`);
  return s === null ? undefined : (JSON.parse(s) as ImportMarker);
}

/**
 * `lockField`: the store's field of a lock in `P locks`; `sealStatus`: a PR status as the store
 * keeps it, sealed with the shared state key (redis-store.ts).
 */
export async function redisImportAtlantis(
  redis: Redis,
  prefix: string,
  batch: AtlantisImportBatch,
  lockField: (k: LockKey) => string,
  sealStatus: (repo: string, pull: number, status: PullStatus) => string,
): Promise<AtlantisImportOutcome> {
  const args: string[] = [prefix, JSON.stringify(batch.marker), String(batch.locks.length)];
  for (const l of batch.locks) args.push(lockField(l), JSON.stringify(l), rn(l.repo, l.pull), String(l.pull));
  args.push(String(batch.pulls.length));
  for (const p of batch.pulls) args.push(rn(p.repo, p.pull), sealStatus(p.repo, p.pull, p.status));
  args.push(batch.applyLock ? JSON.stringify(batch.applyLock) : '');
  args.push(String(batch.notices.length));
  for (const n of batch.notices) args.push(rn(n.repo, n.pull), JSON.stringify(n));
  const keys = ['atlantis-import', 'locks', 'version', 'apply-lock', 'atlantis-import-notices'].map((k) => prefix + k);
  const [done, what] = (await redis.eval(IMPORT_LUA, keys.length, ...keys, ...args)) as [number, string | string[]];
  if (done === 0) return { imported: false, marker: JSON.parse(what as string) as ImportMarker };
  return { imported: true, kept: (what as string[]).map((s) => JSON.parse(s) as LockRecord) };
}

/** Removes and returns the notices not yet posted, in one MULTI (one replica gets them). */
export async function redisTakeImportNotices(redis: Redis, prefix: string): Promise<ImportNotice[]> {
  const key = `${prefix}atlantis-import-notices`;
  const res = await redis.multi().hvals(key).del(key).exec();
  if (res === null) throw new Error('Redis transaction aborted');
  for (const [err] of res) if (err) throw err;
  return ((res[0]?.[1] ?? []) as string[])
    .map((s) => JSON.parse(s) as ImportNotice)
    .sort((a, b) => (a.repo === b.repo ? a.pull - b.pull : a.repo < b.repo ? -1 : 1));
}
