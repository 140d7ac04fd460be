local now, limit, tail, lease_s = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local max_deliveries, on_poison, scan_until = tonumber(ARGV[5]), ARGV[6], tonumber(ARGV[7])
local persisted, head = tonumber(ARGV[8]), tonumber(ARGV[9])
local delayed = {}
for o, due in string.gmatch(ARGV[10], '(%d+):([%d.e+-]+)') do delayed[tonumber(o)] = tonumber(due) end
-- the stream's delayed index (streams.delaying): what it released, and whether it is live
local index = redis.call('HMGET', KEYS[12], 'released', 'recovered')
local released = tonumber(index[1] or '0') / 1000
local index_live = index[2] ~= false
-- reading a compacted view: the offsets it has; the others were compacted away (processed)
local view_mode, present = ARGV[12] == '1', {}
if view_mode then
  for o in string.gmatch(ARGV[11], '%d+') do present[tonumber(o)] = true end
end
-- the group's backoff for expired leases, and its ack policy ('none': processed when handed out)
local backoff, ack_none = parse_backoff(ARGV[13]), ARGV[14] == 'none'

-- what the database knows of the deliveries so far, for a state started afresh: offsets from
-- the floor up to `handed` were handed out at least once, and `counts` ("o:c,…") those handed
-- out more than once; `seeded` says the caller read them from the database after it found no
-- state (a state is started from nothing else: counts must never go back); `life` names the
-- state started now in its delivery ids
local handed, seeded, life = tonumber(ARGV[15]), ARGV[17] == '1', ARGV[18]
-- the consumer the hand-out is for, named in its member ('' unnamed): who holds what in flight
local owner = ARGV[19] or ''
-- offsets past their time to live (domain.ttl), among those the caller read ahead: processed
-- when the cursor reaches them, handed out to no one
local past_ttl = {}
for o in string.gmatch(ARGV[21] or '', '%d+') do past_ttl[tonumber(o)] = true end

local known = redis.call('HMGET', state, 'floor', 'layout')
if known[1] and known[2] ~= LAYOUT then
  -- kept by an older release in another shape: dropped, as if Redis had lost it
  redis.call('DEL', state, leases, sinks, epochs, acked, retry, poison, dead, reason, leased, scratch)
  known[1] = false
end
if not known[1] then
  if not seeded then
    -- lost since the caller looked: nothing handed out, its next read starts it from the database
    return {'', '', {}, 0, persisted, persisted, '', -1, 0}
  end
  redis.call('HSET', state, 'floor', persisted, 'next', persisted, 'layout', LAYOUT, 'life', life)
  start_at(persisted)
  if handed > persisted then
    -- handed out before the state was lost: each comes again as a redelivery, counting on
    redis.call('HSET', state, 'redo', handed)
    local seed = {}
    for o, c in string.gmatch(ARGV[16], '(%d+):(%d+)') do
      if tonumber(o) >= persisted and tonumber(o) < handed then
        seed[#seed + 1] = o
        seed[#seed + 1] = c
      end
    end
    if #seed > 0 then in_chunks('HSET', epochs, seed, 2) end
  end
elseif persisted > tonumber(redis.call('HGET', state, 'floor')) then
  drop_below(persisted)
end
-- an ordered group's segment hands out only to its owner (claim.lua), checked in this call
if ARGV[20] == '1' and (redis.call('HGET', state, 'owner') or '') ~= owner then
  return {'', '', {}, 0, tonumber(redis.call('HGET', state, 'floor')), tonumber(redis.call('HGET', state, 'next')), '',
          tonumber(redis.call('HGET', state, 'life') or '0'), 0}
end
local missed = 0
local floor = tonumber(redis.call('HGET', state, 'floor'))
if head > floor then
  local nxt = tonumber(redis.call('HGET', state, 'next'))
  local upto = math.min(head, nxt)
  if upto > floor then
    missed = (upto - floor) - count_acked(floor, upto)
  end
  missed = missed + math.max(0, head - nxt)
  drop_below(head)
end
-- expired leases are due again at once
local expired, members, expired_eps, expired_at = expired_leases(now)
if #members > 0 then redis.call('ZREMRANGEBYSCORE', leases, '-inf', now) end
if #expired > 0 then
  local at = now
  if #backoff > 0 then
    -- the backoff counts from the lease's expiry (never earlier than now)
    at = {}
    for k, e in ipairs(expired_eps) do at[k] = math.max(now, expired_at[k] + backoff_of(backoff, e)) end
  end
  give_back(expired, at, 'lease expired')
end
-- dead-letter appends claimed a lease ago and never confirmed: claim them again
local dead_out = {}
for _, o in ipairs(redis.call('ZRANGEBYSCORE', dead, '-inf', now - lease_s)) do
  redis.call('ZADD', dead, now, o)
  table.insert(dead_out, tonumber(o))
end
local function is_halted() return redis.call('HEXISTS', state, 'halted') == 1 end
local function poison_it(o)
  redis.call('HSET', poison, o, on_poison)
  if on_poison == 'halt' then
    local h = tonumber(redis.call('HGET', state, 'halted') or o)
    redis.call('HSET', state, 'halted', math.min(h, o))
  elseif on_poison == 'dead_letter' then
    redis.call('ZADD', dead, now, o)
    table.insert(dead_out, o)
  else
    mark({o})
    redis.call('HINCRBY', state, 'skipped', 1)
    advance()
  end
end
local halted = redis.call('HGET', state, 'halted')
if halted then
  local h = tonumber(halted)
  if epoch_of(h) < max_deliveries then
    redis.call('HDEL', state, 'halted')
    redis.call('ZADD', retry, now, h)
  elseif on_poison ~= 'halt' then
    redis.call('HDEL', state, 'halted')
    poison_it(h)
  end
end
local again, again_offs = {}, {}
local count = 0
-- due ones by (due time, offset): the sorted set orders equal times by member text, not number
local due = redis.call('ZRANGEBYSCORE', retry, '-inf', now, 'WITHSCORES')
local pairs_due = {}
for i = 1, #due, 2 do pairs_due[#pairs_due + 1] = {tonumber(due[i + 1]), tonumber(due[i])} end
table.sort(pairs_due, function(a, b) return a[1] < b[1] or (a[1] == b[1] and a[2] < b[2]) end)
local ordered = {}
for _, p in ipairs(pairs_due) do ordered[#ordered + 1] = p[2] end
for _, o in ipairs(ordered) do
  if count >= limit or is_halted() then break end
  redis.call('ZREM', retry, o)
  local e = epoch_of(o)
  if e >= max_deliveries then
    poison_it(o)
  else
    e = e + 1
    if e == 1 then redis.call('HDEL', epochs, o) else
      redis.call('HSET', epochs, o, e)
      redis.call('HINCRBY', state, 'redelivered', 1)
    end
    again_offs[#again_offs + 1] = o
    again[#again + 1] = o .. ':' .. e
    count = count + 1
  end
end
-- offsets never handed out: their first delivery (epoch 1, not stored), leased in batches
local nxt = tonumber(redis.call('HGET', state, 'next'))
local redo = tonumber(redis.call('HGET', state, 'redo') or '0')
local stop = math.min(tail, scan_until)
local first, compacted_away, expired_now = {}, {}, 0
if not is_halted() then
  while count < limit and nxt < stop do
    local o = nxt
    if (view_mode and not present[o]) or past_ttl[o] then
      compacted_away[#compacted_away + 1] = o  -- processed, nothing to deliver
      if past_ttl[o] then expired_now = expired_now + 1 end
      nxt = nxt + 1
    else
      local when = delayed[o]
      local later = when and when > now and when > released
      if later and not index_live then break end  -- wait for the index's recovery
      nxt = nxt + 1
      if later then
        -- passed over, holding the floor: the stream's delayed index hands it back when due
      elseif o < redo then
        -- handed out before Redis lost the state: a redelivery, its count going on from the
        -- database's (at least 1)
        local e = tonumber(redis.call('HGET', epochs, o) or '1')
        if e >= max_deliveries then
          redis.call('HSET', epochs, o, e)
          poison_it(o)
          if is_halted() then break end
        else
          e = e + 1
          redis.call('HSET', epochs, o, e)
          redis.call('HINCRBY', state, 'redelivered', 1)
          again_offs[#again_offs + 1] = o
          again[#again + 1] = o .. ':' .. e
          count = count + 1
        end
      else
        first[#first + 1] = o
        count = count + 1
      end
    end
  end
end
redis.call('HSET', state, 'next', nxt)
if redo > 0 and nxt >= redo then redis.call('HDEL', state, 'redo') end
-- the sinks that acknowledged a redelivered offset already (a fan-out group's redelivery is for
-- the others): "o=sink,sink;…"
local sinks_done = {}
if #again_offs > 0 and redis.call('HLEN', sinks) > 0 then
  local got = many('HMGET', sinks, again_offs)
  for k, o in ipairs(again_offs) do
    if got[k] then sinks_done[#sinks_done + 1] = o .. '=' .. got[k] end
  end
end
-- this hand-out's leases: their bits, and one member for their expiry
local first_runs = {}  -- the first deliveries as runs "a-b" (offsets a to b - 1), as answered
if ack_none and (#again_offs > 0 or #first > 0) then
  -- at-most-once: processed as they are handed out, no lease
  local i = 1
  while i <= #first do
    local j = i
    while j < #first and first[j + 1] == first[j] + 1 do j = j + 1 end
    first_runs[#first_runs + 1] = first[i] .. '-' .. (first[j] + 1)
    i = j + 1
  end
  local all = {}
  for _, o in ipairs(again_offs) do all[#all + 1] = o end
  for _, o in ipairs(first) do all[#all + 1] = o end
  table.sort(all)
  mark(all)
  advance()
elseif #again_offs > 0 or #first > 0 then
  set_many(leased, again_offs, true)
  set_many(leased, first, true)
  local items, hi = {}, -1
  for k, o in ipairs(again_offs) do
    items[#items + 1] = again[k]
    if o > hi then hi = o end
  end
  local i = 1
  while i <= #first do
    local j = i
    while j < #first and first[j + 1] == first[j] + 1 do j = j + 1 end
    items[#items + 1] = first[i] .. '-' .. (first[j] + 1)
    first_runs[#first_runs + 1] = items[#items]
    i = j + 1
  end
  if #first > 0 and first[#first] > hi then hi = first[#first] end
  local member
  if #items > 1 then member = (hi + 1) .. ';' .. table.concat(items, ',')
  elseif #first == 1 then member = tostring(first[1])
  else member = items[1] end
  if owner ~= '' then member = member .. '@' .. owner end
  redis.call('ZADD', leases, now + lease_s, member)
end
if #compacted_away > 0 then
  mark(compacted_away)
  advance()
end
table.sort(dead_out)
return {table.concat(again, ','), table.concat(first_runs, ','), dead_out, missed,
        tonumber(redis.call('HGET', state, 'floor')), nxt, table.concat(sinks_done, ';'),
        tonumber(redis.call('HGET', state, 'life') or '0'), expired_now}
