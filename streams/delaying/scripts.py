"""The Lua scripts of a stream's delayed index in Redis (streams.delaying.index explains the keys).
Each runs atomically: one per publish batch on a segment (ADD), one per hand-out round (RELEASE),
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
local function queue_segment(bucket, count, edge, packed)
  -- a bucket's snapshot segment ("segment:offset:deliver_at,…") enters the shared queue: the
  -- bucket has `count` segments loaded, and its frontier moves to `edge` ('' after its last)
  local items = {}
  for seg, off, at in string.gmatch(packed, '(%d+):(%d+):(%d+)') do
    items[#items + 1] = at
    items[#items + 1] = seg .. ':' .. off
  end
  in_chunks('ZADD', queue, items, 2, 'NX')  -- a position queued twice (after a merge) once
  redis.call('HSET', loaded, bucket, count)
  if edge ~= '' then redis.call('ZADD', frontier, edge, bucket) else redis.call('ZREM', frontier, bucket) end
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
local members, segs, offs, ats = {}, {}, {}, {}
for seg, off, at in string.gmatch(ARGV[3], '(%d+):(%d+):(%d+)') do
  local i = #members + 1
  members[i], segs[i], offs[i], ats[i] = seg .. ':' .. off, seg, off, at
end
-- dedup: looked up in batches of 500 in every set that holds indexes (and within the batch)
local function many(key)
  local out = {}
  for i = 1, #members, 500 do
    local part = redis.call('ZMSCORE', key, unpack(members, i, math.min(i + 499, #members)))
    for j = 1, #part do out[i + j - 1] = part[j] end
  end
  return out
end
local known = {}
for _, key in ipairs({mutable, queue, unpack(sealing)}) do
  if redis.call('EXISTS', key) == 1 then
    local scores = many(key)
    for i = 1, #members do known[i] = known[i] or scores[i] end
  end
end
local seen, later, now_due = {}, {}, {}
for i, m in ipairs(members) do
  local seg, off, at = segs[i], offs[i], ats[i]
  local when = tonumber(at)
  if known[i] or seen[m] then
    dups = dups + 1
  elseif when <= now then
    -- due already: handed to the groups whose cursor passed it (to the others it is ordinary)
    now_due[#now_due + 1] = 0
    now_due[#now_due + 1] = m .. ':' .. at
    if when > released then released = when end
    released_now = released_now + 1
  else
    later[#later + 1] = at
    later[#later + 1] = m
    added = added + 1
    local o = tonumber(off)
    if not lo[seg] or o < lo[seg] then lo[seg] = o end
    if not hi[seg] or o > hi[seg] then hi[seg] = o end
  end
  seen[m] = true
end
in_chunks('ZADD', due, now_due, 2)
in_chunks('ZADD', mutable, later, 2)
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

# One hand-out round. ARGV: now (ms), limit, claim until (ms), the planned bound ('' for none),
# the latest time among the direct indexes, the direct indexes "segment:offset:deliver_at,…"
# ('' for none), then 4 per bucket load: bucket id, segments loaded so far (expected), segments
# loaded after it, the frontier after it ('' when the bucket has no more), and the loaded
# indexes past the bound "segment:offset:deliver_at,…" (into the shared queue).
#
# A round may load several snapshot segments of a bucket: all but the last wholly due by the
# bound (they are released in this round, as the direct indexes, without passing through the
# shared queue), the last holding the bucket's new frontier. Then it releases everything due by
# the bound — never past the earliest frontier (a bucket whose next segment must be loaded
# first) — from the mutable bucket, the buckets being sealed and the shared queue, up to
# `limit`, and puts it with the direct indexes into the hand-out area as ONE claimed batch
# member "#n,segment:offset:deliver_at,…" (besides re-claiming unclaimed or expired members
# there); with direct indexes, everything due by the bound goes, whatever `limit` says. Nothing
# changes when the plan no longer holds (another process loaded one of the buckets, or a new
# frontier lies below the bound): the caller pops without loading, then plans again.
# Returns {status (1 done, 0 stale), re-claimed members, popped members, the new
# batch member or '', buckets whose frontier is due: "bucket:edge:loaded"…, the next frontier
# after those or ''}.
RELEASE = _COMMON + """
local now, limit, claim_until = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local planned, direct_max, direct = tonumber(ARGV[4]), tonumber(ARGV[5] ~= '' and ARGV[5] or '0'), ARGV[6]
local DUE_LISTED = 256
local function due_frontier()
  local rows = redis.call('ZRANGEBYSCORE', frontier, '-inf', now, 'WITHSCORES', 'LIMIT', 0, DUE_LISTED + 1)
  local out, after = {}, ''
  for i = 1, #rows, 2 do
    if (i + 1) / 2 > DUE_LISTED then after = rows[i + 1] break end
    out[#out + 1] = rows[i] .. ':' .. rows[i + 1] .. ':' .. (redis.call('HGET', loaded, rows[i]) or '0')
  end
  return out, after
end
local loads, loading = {}, {}
for i = 7, #ARGV, 5 do
  local b = ARGV[i]
  if tonumber(redis.call('HGET', loaded, b) or '0') ~= tonumber(ARGV[i + 1]) then
    local listed, after = due_frontier()
    return {0, {}, {}, '', listed, after}
  end
  loads[#loads + 1] = {b, ARGV[i + 2], ARGV[i + 3], ARGV[i + 4]}
  loading[b] = true
end
-- the bound: now, the plan's, and the earliest frontier once the loads are done
local bound = now
if planned and planned < bound then bound = planned end
local edge_min
local f = redis.call('ZRANGE', frontier, 0, #loads, 'WITHSCORES')
for i = 1, #f, 2 do
  if not loading[f[i]] then edge_min = tonumber(f[i + 1]) break end
end
for _, l in ipairs(loads) do
  if l[3] ~= '' and (not edge_min or tonumber(l[3]) < edge_min) then edge_min = tonumber(l[3]) end
end
if edge_min and edge_min - 1 < bound then
  if direct ~= '' then
    local listed, after = due_frontier()
    return {0, {}, {}, '', listed, after}
  end
  bound = edge_min - 1
end
-- what is due already in the hand-out area (added due, or a claim that expired)
local reclaimed = redis.call('ZRANGEBYSCORE', due, '-inf', now, 'LIMIT', 0, limit)
local room = limit - #reclaimed
local sources = sealing_keys()
sources[#sources + 1] = mutable
sources[#sources + 1] = queue
if direct ~= '' then
  -- everything due by the bound goes with the direct indexes, or a later round would release
  -- earlier ones after them: no limit (Redis holds at most a segment per bucket and the mutable
  -- bucket, so this is bounded as the hot index is)
  room = math.huge
end
local cand = {}
for _, src in ipairs(sources) do
  local items
  if room == math.huge then
    items = redis.call('ZRANGEBYSCORE', src, '-inf', bound, 'WITHSCORES')
  else
    items = redis.call('ZRANGEBYSCORE', src, '-inf', bound, 'WITHSCORES', 'LIMIT', 0, room)
  end
  if #items > 0 then cand[#cand + 1] = {src = src, items = items, at = 1} end
end
-- the plan holds: load
for _, l in ipairs(loads) do queue_segment(l[1], l[2], l[3], l[4]) end
-- release: each source gives up a prefix of its order (its lowest ranks)
local released = tonumber(redis.call('HGET', state, 'released') or '0')
if direct ~= '' and direct_max > released then released = direct_max end
-- merged by time from the sources, each giving up a prefix of its order (its lowest ranks)
local popped = {}
while #popped < room do
  local best, best_at
  for _, c in ipairs(cand) do
    if c.at < #c.items then
      local t = tonumber(c.items[c.at + 1])
      if not best or t < best_at then best, best_at = c, t end
    end
  end
  if not best then break end
  popped[#popped + 1] = best.items[best.at] .. ':' .. best.items[best.at + 1]
  best.at = best.at + 2
  if best_at > released then released = best_at end
end
for _, c in ipairs(cand) do
  if c.at > 1 then redis.call('ZREMRANGEBYRANK', c.src, 0, (c.at - 1) / 2 - 1) end
end
local claims = {}
for _, m in ipairs(reclaimed) do
  claims[#claims + 1] = claim_until
  claims[#claims + 1] = m
end
in_chunks('ZADD', due, claims, 2)
local batch = ''
if #popped > 0 or direct ~= '' then
  local parts = {'#' .. redis.call('HINCRBY', state, 'batches', 1)}
  if #popped > 0 then parts[#parts + 1] = table.concat(popped, ',') end
  if direct ~= '' then parts[#parts + 1] = direct end
  batch = table.concat(parts, ',')
  redis.call('ZADD', due, claim_until, batch)
end
redis.call('HSET', state, 'released', released)
local listed, after = due_frontier()
return {1, reclaimed, popped, batch, listed, after}
"""

# ARGV: bucket id, segments loaded so far (expected), the frontier after this load (the
# segment's latest time, '' when it is the bucket's last), a sealing generation to drop ('' for
# none), "segment:offset:deliver_at,…". Loads nothing when another process loaded it first.
LOAD = _COMMON + """
local bucket, expected, edge, gen = ARGV[1], tonumber(ARGV[2]), ARGV[3], ARGV[4]
if gen ~= '' then drop_gen(gen) end  -- its registered bucket takes over from its sealing set
if tonumber(redis.call('HGET', loaded, bucket) or '0') ~= expected then return 0 end
queue_segment(bucket, expected + 1, edge, ARGV[5])
return 1
"""

# ARGV: a sealing generation with nothing left to seal (every index of it came due meanwhile)
DROP_GEN = _COMMON + """
drop_gen(ARGV[1])
return 1
"""
