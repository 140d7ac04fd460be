-- ARGV: now (ms), min_index_count_per_bucket, "segment:offset:deliver_at,…" (one publish batch on
-- one segment: one chunk of the index). Returns {added, duplicates, released now, sealed gen or 0, live (1/0)}.
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
