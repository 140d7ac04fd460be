"""The Lua scripts of the acknowledgement tracker (streams.ack_tracker explains the keys). Each
runs atomically in Redis: one per read of a segment, per batch of acks, per batch of nacks, and
per confirmation of dead-letter appends. They implement the rules of streams.domain.acks, and
the tests run both side by side."""

_COMMON = """
local state, leases, sinks, epochs, acked, retry, poison, dead, reason =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8], KEYS[9]
local function in_chunks(command, key, items, width)
  -- one call per 500 items: `width` values per item (HDEL, ZREM: 1; HSET, ZADD: 2)
  local step = 500 * width
  for i = 1, #items, step do
    redis.call(command, key, unpack(items, i, math.min(i + step - 1, #items)))
  end
end
local function epoch_of(o)
  -- deliveries so far; not stored for the common case: 1 below `next`, 0 from it
  local e = redis.call('HGET', epochs, o)
  if e then return tonumber(e) end
  if tonumber(o) < tonumber(redis.call('HGET', state, 'next')) then return 1 end
  return 0
end
local function forget(from, to)
  -- the floor passed [from, to): drop what the side tables hold about those offsets
  if to <= from then return end
  for _, key in ipairs({epochs, poison, reason, sinks}) do
    local n = redis.call('HLEN', key)
    if n > 0 and n <= 64 then
      local gone = {}
      for _, f in ipairs(redis.call('HKEYS', key)) do
        local v = tonumber(f)
        if v >= from and v < to then table.insert(gone, f) end
      end
      if #gone > 0 then redis.call('HDEL', key, unpack(gone)) end
    elseif n > 64 then
      local gone = {}
      for o = from, to - 1 do gone[#gone + 1] = o end
      in_chunks('HDEL', key, gone, 1)
    end
  end
end
-- `acked` is a bitmap: bit (o - abase) is 1 once offset o is processed. Every bit below the
-- floor is 1; `abase` (a multiple of 8, at or below the floor) moves up as the floor does.
local function abase() return tonumber(redis.call('HGET', state, 'abase') or '0') end
local function mark(offsets)
  -- set the offsets' bits: whole bytes of a contiguous run at once, single bits otherwise
  local base, ops, bits, sorted = abase(), {}, {}, true
  for _, o in ipairs(offsets) do
    local b = tonumber(o) - base
    if sorted and #bits > 0 and b < bits[#bits] then sorted = false end
    bits[#bits + 1] = b
  end
  if not sorted then table.sort(bits) end
  local i = 1
  while i <= #bits do
    local j = i
    while j < #bits and bits[j + 1] <= bits[j] + 1 do j = j + 1 end
    local a, b = bits[i], bits[j] + 1  -- the run [a, b)
    local first, last = math.ceil(a / 8), math.floor(b / 8)  -- whole bytes [first, last)
    if last - first >= 2 then
      redis.call('SETRANGE', acked, first, string.rep('\\255', last - first))
      for x = a, first * 8 - 1 do ops[#ops + 1] = x end
      for x = last * 8, b - 1 do ops[#ops + 1] = x end
    else
      for x = a, b - 1 do ops[#ops + 1] = x end
    end
    i = j + 1
  end
  for _, x in ipairs(ops) do redis.call('SETBIT', acked, x, 1) end
end
local function is_acked(o)
  -- processed? (false for a segment Redis knows nothing of, and for offsets never handed out)
  o = tonumber(o)
  local floor, nxt = redis.call('HGET', state, 'floor'), redis.call('HGET', state, 'next')
  if not floor then return false end
  if o < tonumber(floor) then return true end
  if o >= tonumber(nxt) then return false end
  return redis.call('GETBIT', acked, o - abase()) == 1
end
local function count_acked(from, to)
  -- processed offsets in [from, to), from at or above the floor
  local base = abase()
  local n = 0
  local lo, hi = from - base, to - base
  local first_byte, last_byte = math.ceil(lo / 8), math.floor(hi / 8) - 1
  if first_byte <= last_byte then
    n = n + redis.call('BITCOUNT', acked, first_byte, last_byte)
    for b = lo, first_byte * 8 - 1 do n = n + redis.call('GETBIT', acked, b) end
    for b = (last_byte + 1) * 8, hi - 1 do n = n + redis.call('GETBIT', acked, b) end
  else
    for b = lo, hi - 1 do n = n + redis.call('GETBIT', acked, b) end
  end
  return n
end
local function rebase(offset)
  -- drop the bitmap's bytes wholly below `offset` (a multiple of 8 at or below the floor)
  local base = abase()
  local skip = (offset - base) / 8
  if skip <= 0 then return end
  local rest = redis.call('GETRANGE', acked, skip, -1)
  if rest == '' then redis.call('DEL', acked) else redis.call('SET', acked, rest) end
  redis.call('HSET', state, 'abase', offset)
end
local function advance()
  -- move the floor over the processed offsets right above it
  local floor = tonumber(redis.call('HGET', state, 'floor'))
  local base = abase()
  local pos = redis.call('BITPOS', acked, 0, math.floor((floor - base) / 8))
  if pos >= 0 and base + pos > floor then
    local start = floor
    floor = base + pos
    redis.call('HSET', state, 'floor', floor)
    forget(start, floor)
    if floor - base >= 65536 then rebase(floor - floor % 8) end
  end
  return floor
end
local function start_at(offset)
  -- a fresh bitmap whose floor is `offset`
  redis.call('DEL', acked)
  local base = offset - offset % 8
  redis.call('HSET', state, 'abase', base)
  local below = {}
  for o = base, offset - 1 do below[#below + 1] = o end
  mark(below)
end
local function below(key, offset, kind)
  local gone = {}
  local members
  if kind == 'hash' then members = redis.call('HKEYS', key) else members = redis.call('ZRANGE', key, 0, -1) end
  for _, o in ipairs(members) do
    if tonumber(o) < offset then table.insert(gone, o) end
  end
  if #gone > 0 then
    if kind == 'hash' then in_chunks('HDEL', key, gone, 1) else in_chunks('ZREM', key, gone, 1) end
  end
end
local function drop_below(offset)
  local nxt = tonumber(redis.call('HGET', state, 'next'))
  -- keep the processed offsets at or above `offset`; all below it count as processed
  local base = abase()
  local keep = offset - offset % 8
  if keep > base then rebase(keep) end
  local below_offset = {}
  for o = keep, offset - 1 do below_offset[#below_offset + 1] = o end
  mark(below_offset)
  redis.call('HSET', state, 'floor', offset)
  if nxt < offset then redis.call('HSET', state, 'next', offset) end
  below(leases, offset, 'zset')
  below(retry, offset, 'zset')
  below(dead, offset, 'zset')
  for _, key in ipairs({epochs, poison, reason, sinks}) do below(key, offset, 'hash') end
  local halted = redis.call('HGET', state, 'halted')
  if halted and tonumber(halted) < offset then redis.call('HDEL', state, 'halted') end
  return advance()
end
"""

HAND_OUT = _COMMON + """
local now, limit, tail, lease_s = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local max_deliveries, on_poison, scan_until = tonumber(ARGV[5]), ARGV[6], tonumber(ARGV[7])
local persisted, head = tonumber(ARGV[8]), tonumber(ARGV[9])
local delayed = {}
for o, due in string.gmatch(ARGV[10], '(%d+):([%d.e+-]+)') do delayed[tonumber(o)] = tonumber(due) end
-- the stream's delayed index (streams.delaying): what it released, and whether it is live
local index = redis.call('HMGET', KEYS[10], 'released', 'recovered')
local released = tonumber(index[1] or '0') / 1000
local index_live = index[2] ~= false
-- reading a compacted view: the offsets it has; the others were compacted away (processed)
local view_mode, present = ARGV[12] == '1', {}
if view_mode then
  for o in string.gmatch(ARGV[11], '%d+') do present[tonumber(o)] = true end
end

if redis.call('HEXISTS', state, 'floor') == 0 then
  redis.call('HSET', state, 'floor', persisted, 'next', persisted)
  start_at(persisted)
elseif persisted > tonumber(redis.call('HGET', state, 'floor')) then
  drop_below(persisted)
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
for _, o in ipairs(redis.call('ZRANGEBYSCORE', leases, '-inf', now)) do
  redis.call('ZREM', leases, o)
  redis.call('HDEL', sinks, o)
  redis.call('ZADD', retry, now, o)
  redis.call('HSET', reason, o, 'lease expired')
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
local again = {}
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
    redis.call('ZADD', leases, now + lease_s, o)
    again[#again + 1] = o .. ':' .. e
    count = count + 1
  end
end
-- offsets never handed out: their first delivery (epoch 1, not stored), leased in batches
local nxt = tonumber(redis.call('HGET', state, 'next'))
local stop = math.min(tail, scan_until)
local first, first_leases, compacted_away = {}, {}, {}
if not is_halted() then
  local expires = now + lease_s
  while count < limit and nxt < stop do
    local o = nxt
    if view_mode and not present[o] then
      compacted_away[#compacted_away + 1] = o  -- processed, nothing to deliver
      nxt = nxt + 1
    else
      local when = delayed[o]
      local later = when and when > now and when > released
      if later and not index_live then break end  -- wait for the index's recovery
      nxt = nxt + 1
      if later then
        -- passed over, holding the floor: the stream's delayed index hands it back when due
      else
        first[#first + 1] = o
        first_leases[#first_leases + 1] = expires
        first_leases[#first_leases + 1] = o
        count = count + 1
      end
    end
  end
end
in_chunks('ZADD', leases, first_leases, 2)
redis.call('HSET', state, 'next', nxt)
if #compacted_away > 0 then
  mark(compacted_away)
  advance()
end
table.sort(dead_out)
return {table.concat(again, ','), table.concat(first, ','), dead_out, missed,
        tonumber(redis.call('HGET', state, 'floor')), nxt}
"""

# ARGV: sink, number of sinks, the sinks, then "offset:epoch,offset:epoch,…"
# returns {floor, {index, reason, index, reason, …}} for the deliveries not counted
ACK_MANY = _COMMON + """
local sink, nsinks = ARGV[1], tonumber(ARGV[2])
local required = {}
for i = 3, 2 + nsinks do required[ARGV[i]] = true end
local offs, eps = {}, {}
for o, epoch in string.gmatch(ARGV[3 + nsinks], '(%d+):(%d+)') do
  offs[#offs + 1] = o
  eps[#eps + 1] = tonumber(epoch)
end
-- one lookup per 500 ids rather than one per id
local function many(command, key)
  local out = {}
  for i = 1, #offs, 500 do
    local part = redis.call(command, key, unpack(offs, i, math.min(i + 499, #offs)))
    for _, v in ipairs(part) do out[#out + 1] = v end
  end
  return out
end
local live = many('ZMSCORE', leases)
local stored = {}
if redis.call('HLEN', epochs) > 0 then stored = many('HMGET', epochs) end
local nxt = tonumber(redis.call('HGET', state, 'next') or '0')
local bad, done, seen = {}, {}, {}
for i, o in ipairs(offs) do
  local answer = 'ok'
  local n = tonumber(o)
  if seen[n] then
    answer = 'already-acked'  -- named twice in one batch
  elseif not live[i] then
    if is_acked(n) then answer = 'already-acked' else answer = 'unknown' end
  else
    local e = stored[i]
    if e then e = tonumber(e) elseif n < nxt then e = 1 else e = 0 end
    if e ~= eps[i] then
      answer = 'stale'
    elseif nsinks > 0 then
      if not required[sink] then
        answer = 'unknown-sink'
      else
        local have, count, list = {}, 0, {}
        for s in string.gmatch(redis.call('HGET', sinks, o) or '', '[^,]+') do have[s] = true end
        have[sink] = true
        for s, _ in pairs(have) do
          table.insert(list, s)
          if required[s] then count = count + 1 end  -- a sink no longer declared counts for nothing
        end
        if count < nsinks then
          table.sort(list)
          redis.call('HSET', sinks, o, table.concat(list, ','))
          answer = 'waiting-for-sinks'
        end
      end
    end
  end
  if answer == 'ok' then
    seen[n] = true
    done[#done + 1] = n
  else
    bad[#bad + 1] = i
    bad[#bad + 1] = answer
  end
end
if #done == 0 then
  return {tonumber(redis.call('HGET', state, 'floor') or '0'), bad}
end
in_chunks('ZREM', leases, done, 1)
mark(done)
return {advance(), bad}
"""

# ARGV: due, reason, "offset:epoch,…"; returns {index, reason, …} for those not given back
NACK_MANY = _COMMON + """
local due, why = ARGV[1], ARGV[2]
local bad = {}
local i = 0
for o, epoch in string.gmatch(ARGV[3], '(%d+):(%d+)') do
  i = i + 1
  if not redis.call('ZSCORE', leases, o) then
    bad[#bad + 1] = i
    bad[#bad + 1] = 'unknown'
  elseif epoch_of(o) ~= tonumber(epoch) then
    bad[#bad + 1] = i
    bad[#bad + 1] = 'stale'
  else
    redis.call('ZREM', leases, o)
    redis.call('HDEL', sinks, o)
    redis.call('ZADD', retry, due, o)
    if why ~= '' then redis.call('HSET', reason, o, why) end
  end
end
return bad
"""

# ARGV: offsets whose dead-letter appends are durable
DEAD_LETTERED = _COMMON + """
for _, o in ipairs(ARGV) do
  if redis.call('ZSCORE', dead, o) then
    redis.call('ZREM', dead, o)
    mark({o})
    redis.call('HINCRBY', state, 'dead_lettered', 1)
  end
end
if redis.call('HEXISTS', state, 'floor') == 0 then return 0 end
return advance()
"""

# ARGV: "offset:due,…" delayed events the stream's index released (streams.domain.acks.fan_out);
# returns the offsets queued for this group
FAN_OUT = _COMMON + """
local floor = redis.call('HGET', state, 'floor')
if not floor then return {} end  -- a group not started yet reads them as ordinary events
floor = tonumber(floor)
local nxt = tonumber(redis.call('HGET', state, 'next'))
local halted = tonumber(redis.call('HGET', state, 'halted') or '-1')
local offs, dues = {}, {}
for o, due in string.gmatch(ARGV[1], '(%d+):([%d.e+-]+)') do
  local n = tonumber(o)
  if n >= floor and n < nxt and n ~= halted then
    offs[#offs + 1] = o
    dues[#dues + 1] = due
  end
end
if #offs == 0 then return {} end
-- one lookup per 500 offsets and table, not one per offset
local function many(command, key)
  local out = {}
  for i = 1, #offs, 500 do
    local part = redis.call(command, key, unpack(offs, i, math.min(i + 499, #offs)))
    for j = 1, #part do out[i + j - 1] = part[j] end
  end
  return out
end
local leased, queued, dying, poisoned = many('ZMSCORE', leases), many('ZMSCORE', retry), many('ZMSCORE', dead), many('HMGET', poison)
local base = abase()
local adds, marks, queued_now = {}, {}, {}
for i, o in ipairs(offs) do
  if not leased[i] and not queued[i] and not dying[i] and not poisoned[i]
      and redis.call('GETBIT', acked, tonumber(o) - base) == 0 then
    adds[#adds + 1] = dues[i]
    adds[#adds + 1] = o
    marks[#marks + 1] = o
    marks[#marks + 1] = 0  -- never handed out: its first delivery comes
    queued_now[#queued_now + 1] = tonumber(o)
  end
end
in_chunks('ZADD', retry, adds, 2)
in_chunks('HSET', epochs, marks, 2)
return queued_now
"""
