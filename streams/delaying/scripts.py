"""The Lua scripts of a stream's delayed index in Redis (streams.delaying.index explains the keys).
Each runs atomically: one per publish batch on a segment (ADD), one per hand-out round (POP),
one per snapshot segment loaded into the shared queue (LOAD). They follow the rules of
DELAYED-DELIVERY.md, which streams.domain.delayed states in plain Python."""

_COMMON = """
local state, mutable, queue, due, frontier, loaded = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local prefix = string.sub(state, 1, -7)  -- the keys' common part (state ends in ':state')
local function sealing_keys()
  local out = {}
  for g in string.gmatch(redis.call('HGET', state, 'sealing') or '', '%d+') do
    out[#out + 1] = prefix .. ':sealing:' .. g
  end
  return out
end
local function drop_gen(gen)
  -- a sealing generation is done with: its sets go, and it leaves the state's list
  redis.call('DEL', prefix .. ':sealing:' .. gen, prefix .. ':sealrange:' .. gen)
  local left = {}
  for g in string.gmatch(redis.call('HGET', state, 'sealing') or '', '%d+') do
    if g ~= gen then left[#left + 1] = g end
  end
  redis.call('HSET', state, 'sealing', table.concat(left, ','))
end
local function in_chunks(command, key, items, width, flag)
  local step = 500 * width
  for i = 1, #items, step do
    if flag then
      redis.call(command, key, flag, unpack(items, i, math.min(i + step - 1, #items)))
    else
      redis.call(command, key, unpack(items, i, math.min(i + step - 1, #items)))
    end
  end
end
"""

# ARGV: now (ms), min_index_count_per_bucket, "segment:offset:deliver_at,…" (one publish batch on
# one segment: one chunk of the index). Returns {added, duplicates, released now, sealed gen or 0, live (1/0)}.
ADD = _COMMON + """
local now, min_count = tonumber(ARGV[1]), tonumber(ARGV[2])
if redis.call('HEXISTS', state, 'gen') == 0 then
  -- chunks are numbered from the clock: a Redis that lost the index never reuses a number
  redis.call('HSET', state, 'gen', now, 'count', 0)
end
local gen = tonumber(redis.call('HGET', state, 'gen'))
local sealed = 0
-- a strictly newer chunk arrives and the mutable bucket is full enough: seal it (whole chunks)
if tonumber(redis.call('HGET', state, 'count')) >= min_count then
  local target = prefix .. ':sealing:' .. gen
  if redis.call('EXISTS', mutable) == 1 then redis.call('RENAME', mutable, target) end
  local marks = redis.call('HGETALL', state)
  local ranges, gone = {}, {}
  for i = 1, #marks, 2 do
    local f = marks[i]
    if string.sub(f, 1, 3) == 'lo:' or string.sub(f, 1, 3) == 'hi:' then
      ranges[#ranges + 1] = f
      ranges[#ranges + 1] = marks[i + 1]
      gone[#gone + 1] = f
    end
  end
  if #ranges > 0 then
    redis.call('HSET', prefix .. ':sealrange:' .. gen, unpack(ranges))
    redis.call('HDEL', state, unpack(gone))
  end
  local list = redis.call('HGET', state, 'sealing') or ''
  if list == '' then list = tostring(gen) else list = list .. ',' .. gen end
  sealed = gen
  gen = gen + 1
  redis.call('HSET', state, 'sealing', list, 'gen', gen, 'count', 0)
end
local sealing = sealing_keys()
local released = tonumber(redis.call('HGET', state, 'released') or '0')
local added, dups, released_now = 0, 0, 0
local lo, hi = {}, {}
for seg, off, at in string.gmatch(ARGV[3], '(%d+):(%d+):(%d+)') do
  local m = seg .. ':' .. off
  local when = tonumber(at)
  local known = redis.call('ZSCORE', mutable, m) or redis.call('ZSCORE', queue, m)
  for _, key in ipairs(sealing) do known = known or redis.call('ZSCORE', key, m) end
  if known then
    dups = dups + 1
  elseif when <= now then
    -- due already: handed to the groups whose cursor passed it (to the others it is ordinary)
    redis.call('ZADD', due, 0, m .. ':' .. at)
    if when > released then released = when end
    released_now = released_now + 1
  else
    redis.call('ZADD', mutable, when, m)
    added = added + 1
    local o = tonumber(off)
    if not lo[seg] or o < lo[seg] then lo[seg] = o end
    if not hi[seg] or o > hi[seg] then hi[seg] = o end
  end
end
for seg, o in pairs(lo) do
  local have = redis.call('HGET', state, 'lo:' .. seg)
  if not have or o < tonumber(have) then redis.call('HSET', state, 'lo:' .. seg, o) end
end
for seg, o in pairs(hi) do
  local have = redis.call('HGET', state, 'hi:' .. seg)
  if not have or o > tonumber(have) then redis.call('HSET', state, 'hi:' .. seg, o) end
end
redis.call('HINCRBY', state, 'count', added)
redis.call('HSET', state, 'released', released)
return {added, dups, released_now, sealed, redis.call('HEXISTS', state, 'recovered')}
"""

# ARGV: now (ms), limit, claim until (ms). Moves due indexes — those before the earliest frontier
# (the last index of a bucket's loaded segment, whose next segment must be loaded first) — to
# the hand-out area `due`, and claims up to `limit` entries of it (fresh ones, or ones whose
# claim expired: a hand-out that crashed). Returns {claimed "segment:offset:deliver_at"…,
# bucket to load or ''}.
POP = _COMMON + """
local now, limit, claim_until = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local bound, load = now, ''
local f = redis.call('ZRANGE', frontier, 0, 0, 'WITHSCORES')
if #f > 0 then
  local edge = tonumber(f[2])
  if edge <= now then load = f[1] end
  if edge - 1 < bound then bound = edge - 1 end
end
local sources = sealing_keys()
sources[#sources + 1] = mutable
sources[#sources + 1] = queue
local cand = {}
for _, src in ipairs(sources) do
  local items = redis.call('ZRANGEBYSCORE', src, '-inf', bound, 'WITHSCORES', 'LIMIT', 0, limit)
  for i = 1, #items, 2 do cand[#cand + 1] = {tonumber(items[i + 1]), items[i], src} end
end
table.sort(cand, function(a, b) return a[1] < b[1] or (a[1] == b[1] and a[2] < b[2]) end)
local released = tonumber(redis.call('HGET', state, 'released') or '0')
-- first what is in the hand-out area unclaimed (indexes due when added) or whose claim expired
local claimed = redis.call('ZRANGEBYSCORE', due, '-inf', now, 'LIMIT', 0, limit)
local claims, gone = {}, {}
for _, m in ipairs(claimed) do
  claims[#claims + 1] = claim_until
  claims[#claims + 1] = m
end
-- then the due indexes, moved into it already claimed
for i = 1, math.min(#cand, limit - #claimed) do
  local c = cand[i]
  gone[c[3]] = gone[c[3]] or {}
  table.insert(gone[c[3]], c[2])
  local m = c[2] .. ':' .. c[1]
  claims[#claims + 1] = claim_until
  claims[#claims + 1] = m
  claimed[#claimed + 1] = m
  if c[1] > released then released = c[1] end
end
for src, members in pairs(gone) do in_chunks('ZREM', src, members, 1) end
in_chunks('ZADD', due, claims, 2)
redis.call('HSET', state, 'released', released)
return {claimed, load}
"""

# ARGV: bucket id, segments loaded so far (expected), the frontier after this load (the
# segment's latest time, '' when it is the bucket's last), a sealing generation to drop ('' for
# none), "segment:offset:deliver_at,…". Loads nothing when another process loaded it first.
LOAD = _COMMON + """
local bucket, expected, edge, gen = ARGV[1], tonumber(ARGV[2]), ARGV[3], ARGV[4]
if gen ~= '' then drop_gen(gen) end  -- its registered bucket takes over from its sealing set
if tonumber(redis.call('HGET', loaded, bucket) or '0') ~= expected then return 0 end
local items = {}
for seg, off, at in string.gmatch(ARGV[5], '(%d+):(%d+):(%d+)') do
  items[#items + 1] = at
  items[#items + 1] = seg .. ':' .. off
end
in_chunks('ZADD', queue, items, 2, 'NX')  -- a position queued twice (after a merge) once
redis.call('HSET', loaded, bucket, expected + 1)
if edge ~= '' then redis.call('ZADD', frontier, edge, bucket) else redis.call('ZREM', frontier, bucket) end
return 1
"""

# ARGV: a sealing generation with nothing left to seal (every index of it came due meanwhile)
DROP_GEN = _COMMON + """
drop_gen(ARGV[1])
return 1
"""
