// The Lua scripts of the Redis store (redis-store.ts has the key layout). Each runs atomically
// in Redis; KEYS and ARGV as documented beside each; replies are plain strings, numbers, arrays.
export const SCRIPTS = {
  // KEYS locks, pull-locks of the holder; ARGV F, record. The current holder, or nil when taken.
  atlTryLock: {
    numberOfKeys: 2,
    lua: `local cur = redis.call('HGET', KEYS[1], ARGV[1])
if cur then return cur end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('SADD', KEYS[2], ARGV[1])
return false`,
  },
  // KEYS locks; ARGV F, pull ('' for any holder), prefix. The released lock, or nil.
  atlUnlock: {
    numberOfKeys: 1,
    lua: `local cur = redis.call('HGET', KEYS[1], ARGV[1])
if not cur then return false end
local rec = cjson.decode(cur)
if ARGV[2] ~= '' and tonumber(ARGV[2]) ~= rec.pull then return false end
redis.call('HDEL', KEYS[1], ARGV[1])
redis.call('SREM', ARGV[3] .. 'pull-locks:' .. rec.repo .. '#' .. string.format('%d', rec.pull), ARGV[1])
return cur`,
  },
  // KEYS locks, pull-locks, plans, planfiles; ARGV '1' to discard plans. {locks, plans as field, record, field, record...}.
  atlUnlockPull: {
    numberOfKeys: 4,
    lua: `local locks = {}
for _, f in ipairs(redis.call('SMEMBERS', KEYS[2])) do
  local cur = redis.call('HGET', KEYS[1], f)
  if cur then
    locks[#locks + 1] = cur
    redis.call('HDEL', KEYS[1], f)
  end
end
redis.call('DEL', KEYS[2])
local plans = {}
if ARGV[1] == '1' then
  plans = redis.call('HGETALL', KEYS[3])
  redis.call('DEL', KEYS[3], KEYS[4])
end
return {locks, plans}`,
  },
  // KEYS pull-status, version; ARGV expected version ('' absent, '*' any), json. 1 written, 0 conflict.
  atlCasStatus: {
    numberOfKeys: 2,
    lua: `local v = redis.call('HGET', KEYS[1], 'v') or ''
if ARGV[1] ~= '*' and v ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'v', redis.call('INCR', KEYS[2]), 'json', ARGV[2])
return 1`,
  },
  // KEYS queue, queue-id, delivery; ARGV the command JSON without its id (an object), the
  // delivery's ttl ms ('' for none). The new id; 0 when the delivery was recorded already.
  atlEnqueue: {
    numberOfKeys: 3,
    lua: `if ARGV[2] ~= '' and not redis.call('SET', KEYS[3], 'queued', 'NX', 'PX', ARGV[2]) then return 0 end
local id = redis.call('INCR', KEYS[2])
redis.call('RPUSH', KEYS[1], '{"id":' .. string.format('%d', id) .. ',' .. string.sub(ARGV[1], 2))
return id`,
  },
  // KEYS commands of the replica, commands-seq; ARGV id, the command JSON without its seq (an object). The seq.
  atlAcceptCommand: {
    numberOfKeys: 2,
    lua: `local seq = redis.call('INCR', KEYS[2])
redis.call('HSET', KEYS[1], ARGV[1], '{"seq":' .. string.format('%d', seq) .. ',' .. string.sub(ARGV[2], 2))
return seq`,
  },
  // KEYS commands of the replica, commands-seq, delivery; ARGV id, the command JSON without its
  // seq, the delivery's ttl ms, replica id, key prefix. {seq, ''} when journalled, with the
  // delivery recorded as '<replica>\n<id>'; {0, 'pending'|'handled'} when that delivery was
  // recorded already: 'pending' while its command is journalled and not started.
  atlAcceptDelivery: {
    numberOfKeys: 3,
    lua: `local cur = redis.call('GET', KEYS[3])
if cur then
  local nl = string.find(cur, '\\n', 1, true)
  if nl then
    local rid, cid = string.sub(cur, 1, nl - 1), string.sub(cur, nl + 1)
    if redis.call('HEXISTS', ARGV[5] .. 'commands:' .. rid, cid) == 1 and redis.call('HEXISTS', ARGV[5] .. 'commands-started:' .. rid, cid) == 0 then
      return {0, 'pending'}
    end
  end
  return {0, 'handled'}
end
local seq = redis.call('INCR', KEYS[2])
redis.call('HSET', KEYS[1], ARGV[1], '{"seq":' .. string.format('%d', seq) .. ',' .. string.sub(ARGV[2], 2))
redis.call('SET', KEYS[3], ARGV[4] .. '\\n' .. ARGV[1], 'PX', ARGV[3])
return {seq, ''}`,
  },
  // KEYS commands, commands-started of the replica, delivery; ARGV id, replica id. Removes the
  // entry, and the delivery record when it names this command.
  atlDropRefused: {
    numberOfKeys: 3,
    lua: `redis.call('HDEL', KEYS[1], ARGV[1])
redis.call('HDEL', KEYS[2], ARGV[1])
if redis.call('GET', KEYS[3]) == ARGV[2] .. '\\n' .. ARGV[1] then redis.call('DEL', KEYS[3]) end
return 1`,
  },
  // KEYS a hash, the quarantine key; ARGV field, the value read, ttl ms. Moves the entry aside
  // if it is still that value: 1 moved, 0 changed or gone since.
  atlQuarantine: {
    numberOfKeys: 2,
    lua: `if redis.call('HGET', KEYS[1], ARGV[1]) ~= ARGV[2] then return 0 end
redis.call('SET', KEYS[2], ARGV[2], 'PX', ARGV[3])
redis.call('HDEL', KEYS[1], ARGV[1])
return 1`,
  },
  // KEYS commands, commands-started of the replica; ARGV id, time. Marks only a journalled command.
  atlCommandStarted: {
    numberOfKeys: 2,
    lua: `if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then return 0 end
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
return 1`,
  },
  // KEYS jobs, jobs-finished, jobs-unfinished; ARGV id, finished JSON. 1 if the job exists.
  atlJobFinished: {
    numberOfKeys: 3,
    lua: `if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then return 0 end
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
redis.call('HDEL', KEYS[3], ARGV[1])
return 1`,
  },
  // KEYS jobs-unfinished, jobs; ARGV replicaId. The replica's unfinished jobs: id, record, id, record...
  atlUnfinished: {
    numberOfKeys: 2,
    lua: `local all = redis.call('HGETALL', KEYS[1])
local out = {}
for i = 1, #all, 2 do
  if all[i + 1] == ARGV[1] then
    local r = redis.call('HGET', KEYS[2], all[i])
    if r then
      out[#out + 1] = all[i]
      out[#out + 1] = r
    end
  end
end
return out`,
  },
  // KEYS jobs, jobs-finished, jobs-by-start; ARGV stop index. {ids, records, finished} newest first.
  atlRecentJobs: {
    numberOfKeys: 3,
    lua: `local ids = redis.call('ZREVRANGE', KEYS[3], 0, tonumber(ARGV[1]))
local recs, fins = {}, {}
for i, id in ipairs(ids) do
  recs[i] = redis.call('HGET', KEYS[1], id)
  fins[i] = redis.call('HGET', KEYS[2], id)
end
return {ids, recs, fins}`,
  },
  // KEYS jobs, jobs-finished, jobs-by-start; ARGV keep, job-output key prefix. How many finished jobs went.
  atlPruneJobs: {
    numberOfKeys: 3,
    lua: `local n = 0
for _, id in ipairs(redis.call('ZREVRANGE', KEYS[3], tonumber(ARGV[1]), -1)) do
  if redis.call('HEXISTS', KEYS[2], id) == 1 then
    redis.call('HDEL', KEYS[1], id)
    redis.call('HDEL', KEYS[2], id)
    redis.call('ZREM', KEYS[3], id)
    redis.call('DEL', ARGV[2] .. id)
    n = n + 1
  end
end
return n`,
  },
  // KEYS job-output; ARGV chunk, most bytes kept, ttl ms. Appends unless the output is full already.
  atlAppendOutput: {
    numberOfKeys: 1,
    lua: `if redis.call('STRLEN', KEYS[1]) < tonumber(ARGV[2]) then redis.call('APPEND', KEYS[1], ARGV[1]) end
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1`,
  },
} as const;

export type ScriptArg = string | number | Buffer;
export type Scripts = { [K in keyof typeof SCRIPTS]: (...args: ScriptArg[]) => Promise<unknown> };
