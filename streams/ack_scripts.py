"""The Lua scripts of the acknowledgement tracker (streams.ack_tracker explains the keys). Each
runs atomically in Redis: one per read of a segment, per batch of acks, per batch of nacks, and
per confirmation of dead-letter appends. They implement the rules of streams.domain.acks, and
the tests run both side by side.

What they must never do is call Redis once per offset where a batch of offsets is at hand: inside
a script every `redis.call` costs about a microsecond (bench/RESULTS.md), more than the rest of an
acknowledgement. So lease expiries are kept per hand-out, not per offset; bits are looked up in
blocks read once (`reader`), and a batch's bit changes are one mask combined by BITOP
(`apply_mask`); deliveries arrive as msgpack, decoded in C."""

# The shape of the keys. A state of another shape (an older release's) is dropped by the next
# hand-out, as if Redis had lost it: everything above the persisted floor comes again.
LAYOUT = "2"

_COMMON = """
local LAYOUT = '""" + LAYOUT + """'
local state, leases, sinks, epochs, acked, retry, poison, dead, reason, leased, scratch =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8], KEYS[9], KEYS[10], KEYS[11]
local function in_chunks(command, key, items, width)
  -- one call per 500 items: `width` values per item (HDEL, ZREM: 1; HSET, ZADD: 2)
  local step = 500 * width
  for i = 1, #items, step do
    redis.call(command, key, unpack(items, i, math.min(i + step - 1, #items)))
  end
end
local function many(command, key, items)
  -- a lookup of many fields or members (HMGET, ZMSCORE), one call per 500
  local out = {}
  for i = 1, #items, 500 do
    local part = redis.call(command, key, unpack(items, i, math.min(i + 499, #items)))
    for j = 1, #part do out[i + j - 1] = part[j] end
  end
  return out
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
-- Two bitmaps share one base, `abase` (a multiple of 8 at or below the floor, moving up with
-- it): bit (o - abase) of `acked` is 1 once offset o is processed (every bit below the floor is
-- 1), bit (o - abase) of `leased` is 1 while o is handed out and neither acknowledged, given back
-- nor expired.
local function abase() return tonumber(redis.call('HGET', state, 'abase') or '0') end
-- A view reads a bitmap a block (512 bytes, 4096 offsets) at a time as a table of bytes and
-- writes back the blocks it changed, one SETRANGE each (`save`): for a few bits in no order
-- (converting a block costs ~15 us; many bits go through `apply_mask`). Positions are relative
-- to `abase`. Save a view before anything else writes its key.
local BLOCK = 512
local function view(key) return {key = key, blocks = {}, dirty = {}} end
local function block_of(v, r)
  local b = math.floor(r / 4096)
  local t = v.blocks[b]
  if not t then
    local s = redis.call('GETRANGE', v.key, b * BLOCK, b * BLOCK + BLOCK - 1)
    t = {string.byte(s, 1, -1)}
    for i = #s + 1, BLOCK do t[i] = 0 end
    v.blocks[b] = t
  end
  return t, b, r - b * 4096
end
local function put_bit(v, r, on)
  local t, b, i = block_of(v, r)
  local j, m = bit.rshift(i, 3) + 1, bit.rshift(128, bit.band(i, 7))
  if on then t[j] = bit.bor(t[j], m) else t[j] = bit.band(t[j], bit.bnot(m)) end
  v.dirty[b] = true
end
local function save(v)
  for b in pairs(v.dirty) do
    redis.call('SETRANGE', v.key, b * BLOCK, string.char(unpack(v.blocks[b])))
  end
  v.dirty = {}
end
-- A reader looks bits up in 4 KiB blocks it reads once each (GETRANGE), as strings.
local POW = {[0] = 128, 64, 32, 16, 8, 4, 2, 1}
local function reader(key) return {key = key, blocks = {}} end
local function has(rd, r)
  local i = r % 32768
  local b = (r - i) / 32768
  local s = rd.blocks[b]
  if not s then
    s = redis.call('GETRANGE', rd.key, b * 4096, b * 4096 + 4095)
    rd.blocks[b] = s
  end
  local m = POW[i % 8]
  local x = string.byte(s, (i - i % 8) / 8 + 1) or 0
  return x % (m + m) >= m
end
-- Many bits changed at once: a mask of them is written to `scratch` (512-byte chunks, one
-- SETRANGE per run of chunks) and combined with each key by BITOP, e.g. {'XOR', leased} to
-- clear bits known to be set, {'OR', acked} to set them. `rels`: distinct positions.
local ZEROS = string.rep('\0', 512)
local function apply_mask(rels, ops)
  if #rels == 0 then return end
  redis.call('DEL', scratch)  -- a script that failed half-way is not rolled back
  local chunks, order, sb = {}, {}, string.byte
  for _, r in ipairs(rels) do
    local j = (r - r % 8) / 8
    local jj = j % 512
    local c = (j - jj) / 512
    local ch = chunks[c]
    if not ch then
      ch = {sb(ZEROS, 1, 512)}
      chunks[c] = ch
      order[#order + 1] = c
    end
    local x, m = ch[jj + 1], POW[r % 8]
    if x % (m + m) < m then ch[jj + 1] = x + m end
  end
  table.sort(order)
  local i = 1
  while i <= #order do
    local j, parts = i, {string.char(unpack(chunks[order[i]]))}
    while j < #order and order[j + 1] == order[j] + 1 do
      j = j + 1
      parts[#parts + 1] = string.char(unpack(chunks[order[j]]))
    end
    redis.call('SETRANGE', scratch, order[i] * 512, table.concat(parts))
    i = j + 1
  end
  for _, op in ipairs(ops) do redis.call('BITOP', op[1], op[2], op[2], scratch) end
  redis.call('DEL', scratch)
end
-- offsets with a live lease go back: their leases end, and they are due again at `at` with
-- `why` as their reason ('' keeps the reason they had); their sinks' acks are forgotten
local function give_back(offsets, at, why)
  local base, rels, queue, whys = abase(), {}, {}, {}
  for k, o in ipairs(offsets) do
    rels[k] = o - base
    queue[#queue + 1] = at
    queue[#queue + 1] = o
    whys[#whys + 1] = o
    whys[#whys + 1] = why
  end
  apply_mask(rels, {{'XOR', leased}})
  in_chunks('ZADD', retry, queue, 2)
  if redis.call('HLEN', sinks) > 0 then in_chunks('HDEL', sinks, offsets, 1) end
  if why ~= '' then in_chunks('HSET', reason, whys, 2) end
end
local function set_many(key, offsets, on)
  -- set (on) or clear the bits of these offsets (numbers): the whole bytes of an ascending run
  -- at once, the other bits through a view
  local base, n, sorted = abase(), #offsets, true
  for k = 2, n do
    if offsets[k] < offsets[k - 1] then sorted = false break end
  end
  local singles = offsets
  if sorted then
    local fill = on and '\\255' or '\\0'
    singles = {}
    local i = 1
    while i <= n do
      local j = i
      while j < n and offsets[j + 1] <= offsets[j] + 1 do j = j + 1 end
      local a, b = offsets[i] - base, offsets[j] - base + 1  -- the run [a, b)
      local first, last = math.ceil(a / 8), math.floor(b / 8)  -- whole bytes [first, last)
      if last - first >= 2 then
        redis.call('SETRANGE', key, first, string.rep(fill, last - first))
        for x = a, first * 8 - 1 do singles[#singles + 1] = x + base end
        for x = last * 8, b - 1 do singles[#singles + 1] = x + base end
      else
        for x = a, b - 1 do singles[#singles + 1] = x + base end
      end
      i = j + 1
    end
  end
  if #singles == 0 then return end
  if on and #singles > 64 then  -- unsorted, many: a mask
    local rels = {}
    for k, o in ipairs(singles) do rels[k] = o - base end
    apply_mask(rels, {{'OR', key}})
    return
  end
  local v = view(key)
  for _, o in ipairs(singles) do put_bit(v, o - base, on) end
  save(v)
end
local function mark(offsets) set_many(acked, offsets, true) end
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
  -- drop the bitmaps' bytes wholly below `offset` (a multiple of 8 at or below the floor)
  local skip = (offset - abase()) / 8
  if skip <= 0 then return end
  for _, key in ipairs({acked, leased}) do
    local rest = redis.call('GETRANGE', key, skip, -1)
    if rest == '' then redis.call('DEL', key) else redis.call('SET', key, rest) end
  end
  redis.call('HSET', state, 'abase', offset)
end
-- `leases` holds one member per hand-out, scored by its expiry, naming its deliveries: items
-- "o:e" (offset o in its e-th delivery), "a-b" (offsets a to b - 1, each in its first delivery)
-- or "o" (o in its first delivery). One item is the member; several are "end;item,item,…",
-- `end` their highest offset + 1 (one delivery's member is as short as a member per offset was:
-- a read of one event costs no more than it did). A lease is live while its offset's `leased`
-- bit is set and its delivery is the offset's latest; a member outlives the leases it names
-- (acks do not look for it) until it expires or the floor passes its end.
local function end_of(m)
  local e = string.match(m, '^(%d+);')
  if e then return tonumber(e) end
  local a, sep, b = string.match(m, '^(%d+)([-:]?)(%d*)$')
  if sep == '-' then return tonumber(b) end
  return tonumber(a) + 1
end
local function trim_leases(floor)
  while true do
    local m = redis.call('ZRANGE', leases, 0, 0)[1]
    if not m or end_of(m) > floor then return end
    redis.call('ZREM', leases, m)
  end
end
local function expired_leases(now)
  -- the live leases of the hand-outs due by `now` (offsets), and those members
  local members = redis.call('ZRANGEBYSCORE', leases, '-inf', now)
  if #members == 0 then return {}, members end
  local st = redis.call('HMGET', state, 'floor', 'next')
  local floor, nxt, base = tonumber(st[1]), tonumber(st[2]), abase()
  local v = reader(leased)
  local offs, eps = {}, {}
  for _, m in ipairs(members) do
    for item in string.gmatch(string.match(m, ';(.*)$') or m, '[^,]+') do
      local a, sep, b = string.match(item, '^(%d+)([-:]?)(%d*)$')
      a, b = tonumber(a), tonumber(b)
      if sep == '' then sep, b = '-', a + 1 end
      if sep == ':' then
        if a >= floor and a < nxt and has(v, a - base) then
          offs[#offs + 1] = a
          eps[#eps + 1] = b
        end
      else
        for o = math.max(a, floor), math.min(b, nxt) - 1 do
          if has(v, o - base) then
            offs[#offs + 1] = o
            eps[#eps + 1] = 1
          end
        end
      end
    end
  end
  if #offs == 0 then return offs, members end
  local stored = {}
  if redis.call('HLEN', epochs) > 0 then stored = many('HMGET', epochs, offs) end
  local out = {}
  for i, o in ipairs(offs) do
    -- an older delivery's lease (given back, handed out again since) is not this one
    if (tonumber(stored[i]) or 1) == eps[i] then out[#out + 1] = o end
  end
  return out, members
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
    trim_leases(floor)
    if floor - base >= 65536 then rebase(floor - floor % 8) end
  end
  return floor
end
local function start_at(offset)
  -- fresh bitmaps whose floor is `offset`
  redis.call('DEL', acked, leased, leases)
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
  -- keep the processed offsets at or above `offset`; all below it count as processed, and
  -- their leases end (the bitmaps' bytes below `keep` go, the bits in [keep, offset) are set)
  local keep = offset - offset % 8
  if keep > abase() then rebase(keep) end
  local below_offset = {}
  for o = keep, offset - 1 do below_offset[#below_offset + 1] = o end
  mark(below_offset)
  set_many(leased, below_offset, false)
  redis.call('HSET', state, 'floor', offset)
  if nxt < offset then redis.call('HSET', state, 'next', offset) end
  below(retry, offset, 'zset')
  below(dead, offset, 'zset')
  for _, key in ipairs({epochs, poison, reason, sinks}) do below(key, offset, 'hash') end
  local halted = redis.call('HGET', state, 'halted')
  if halted and tonumber(halted) < offset then redis.call('HDEL', state, 'halted') end
  trim_leases(offset)
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
local index = redis.call('HMGET', KEYS[12], 'released', 'recovered')
local released = tonumber(index[1] or '0') / 1000
local index_live = index[2] ~= false
-- reading a compacted view: the offsets it has; the others were compacted away (processed)
local view_mode, present = ARGV[12] == '1', {}
if view_mode then
  for o in string.gmatch(ARGV[11], '%d+') do present[tonumber(o)] = true end
end

local known = redis.call('HMGET', state, 'floor', 'layout')
if known[1] and known[2] ~= LAYOUT then
  -- kept by an older release in another shape: dropped, as if Redis had lost it
  redis.call('DEL', state, leases, sinks, epochs, acked, retry, poison, dead, reason, leased, scratch)
  known[1] = false
end
if not known[1] then
  redis.call('HSET', state, 'floor', persisted, 'next', persisted, 'layout', LAYOUT)
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
local expired, members = expired_leases(now)
if #members > 0 then redis.call('ZREMRANGEBYSCORE', leases, '-inf', now) end
if #expired > 0 then give_back(expired, now, 'lease expired') end
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
local stop = math.min(tail, scan_until)
local first, compacted_away = {}, {}
if not is_halted() then
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
        count = count + 1
      end
    end
  end
end
redis.call('HSET', state, 'next', nxt)
-- this hand-out's leases: their bits, and one member for their expiry
local first_runs = {}  -- the first deliveries as runs "a-b" (offsets a to b - 1), as answered
if #again_offs > 0 or #first > 0 then
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
  redis.call('ZADD', leases, now + lease_s, member)
end
if #compacted_away > 0 then
  mark(compacted_away)
  advance()
end
table.sort(dead_out)
return {table.concat(again, ','), table.concat(first_runs, ','), dead_out, missed,
        tonumber(redis.call('HGET', state, 'floor')), nxt}
"""

# Deliveries travel as one msgpack array, offset and epoch after each other (see
# ack_tracker._packed): cmsgpack decodes it in C, four times faster than matching text.
_DELIVERIES = """
local ids = cmsgpack.unpack(ARGV[#ARGV])
local count = #ids / 2
local st = redis.call('HMGET', state, 'floor', 'next', 'abase')
local known, floor, nxt, base = st[1], tonumber(st[1] or '0'), tonumber(st[2] or '0'), tonumber(st[3] or '0')
local stored = {}  -- epochs kept for these offsets (none kept: 1 below `next`)
if known and redis.call('HLEN', epochs) > 0 then
  local offs = {}
  for i = 1, count do offs[i] = ids[2 * i - 1] end
  stored = many('HMGET', epochs, offs)
end
local live = reader(leased)
local function lease_of(i)
  -- 'live', or why the i-th delivery holds no live lease: 'unknown', 'stale', 'processed'
  local n = ids[2 * i - 1]
  if not known then return 'unknown' end
  if n < floor then return 'processed' end
  if n >= nxt then return 'unknown' end
  if not has(live, n - base) then
    if redis.call('GETBIT', acked, n - base) == 1 then return 'processed' end
    return 'unknown'
  end
  if (tonumber(stored[i]) or 1) ~= ids[2 * i] then return 'stale' end
  return 'live'
end
"""

# ARGV: sink, number of sinks, the sinks, then the deliveries
# returns {floor, {index, reason, index, reason, …}} for the deliveries not counted
ACK_MANY = _COMMON + _DELIVERIES + """
local sink, nsinks = ARGV[1], tonumber(ARGV[2])
local required = {}
for i = 3, 2 + nsinks do required[ARGV[i]] = true end
local bad, done, seen = {}, {}, {}
for i = 1, count do
  local n = ids[2 * i - 1]
  local answer = 'ok'
  local lease = lease_of(i)
  if seen[n] or lease == 'processed' then
    answer = 'already-acked'  -- named twice in one batch, or processed
  elseif lease ~= 'live' then
    answer = lease
  elseif nsinks > 0 then
    if not required[sink] then
      answer = 'unknown-sink'
    else
      local have, count, list = {}, 0, {}
      for s in string.gmatch(redis.call('HGET', sinks, n) or '', '[^,]+') do have[s] = true end
      have[sink] = true
      for s, _ in pairs(have) do
        table.insert(list, s)
        if required[s] then count = count + 1 end  -- a sink no longer declared counts for nothing
      end
      if count < nsinks then
        table.sort(list)
        redis.call('HSET', sinks, n, table.concat(list, ','))
        answer = 'waiting-for-sinks'
      end
    end
  end
  if answer == 'ok' then
    seen[n] = true
    done[#done + 1] = n - base
  else
    bad[#bad + 1] = i
    bad[#bad + 1] = answer
  end
end
if #done == 0 then return {floor, bad} end
-- their leases end and they count as processed: two BITOPs, whatever the number
apply_mask(done, {{'XOR', leased}, {'OR', acked}})
return {advance(), bad}
"""

# ARGV: due, reason, then the deliveries; returns {index, reason, …} for those not given back
NACK_MANY = _COMMON + _DELIVERIES + """
local due, why = ARGV[1], ARGV[2]
local bad, back, seen = {}, {}, {}
for i = 1, count do
  local n = ids[2 * i - 1]
  local lease = lease_of(i)
  if seen[n] or lease == 'processed' then lease = 'unknown' end
  if lease ~= 'live' then
    bad[#bad + 1] = i
    bad[#bad + 1] = lease
  else
    seen[n] = true
    back[#back + 1] = n
  end
end
if #back > 0 then give_back(back, due, why) end
return bad
"""

# ARGV: offsets whose dead-letter appends are durable
DEAD_LETTERED = _COMMON + """
for _, o in ipairs(ARGV) do
  if redis.call('ZSCORE', dead, o) then
    redis.call('ZREM', dead, o)
    mark({tonumber(o)})
    redis.call('HINCRBY', state, 'dead_lettered', 1)
  end
end
if redis.call('HEXISTS', state, 'floor') == 0 then return 0 end
return advance()
"""

# ARGV: delayed events the stream's index released (streams.domain.acks.fan_out), as one msgpack
# array: offset, due (seconds), offset, … (ack_tracker._released: decoded in C); returns the
# offsets queued for this group. The bitmaps are read once over the batch's span when that is
# not much more than the batch (a clean span, all zero, needs no lookup per offset), else a
# block at a time; the dead-letter and poison tables are looked at only when they hold anything.
FAN_OUT = _COMMON + """
local floor = redis.call('HGET', state, 'floor')
if not floor then return {} end  -- a group not started yet reads them as ordinary events
floor = tonumber(floor)
local nxt = tonumber(redis.call('HGET', state, 'next'))
local halted = tonumber(redis.call('HGET', state, 'halted') or '-1')
local items = cmsgpack.unpack(ARGV[1])
local offs, dues = {}, {}
local lo, hi
for i = 1, #items, 2 do
  local n = items[i]
  if n >= floor and n < nxt and n ~= halted then
    offs[#offs + 1] = n
    dues[#dues + 1] = items[i + 1]
    if not lo or n < lo then lo = n end
    if not hi or n > hi then hi = n end
  end
end
if #offs == 0 then return {} end
local queued = many('ZMSCORE', retry, offs)
local dying, poisoned = {}, {}
if redis.call('EXISTS', dead) == 1 then dying = many('ZMSCORE', dead, offs) end
if redis.call('EXISTS', poison) == 1 then poisoned = many('HMGET', poison, offs) end
local base = abase()
local first = math.floor((lo - base) / 8)
local last = math.floor((hi - base) / 8)
local function bits(key)
  -- a test of offset o's bit: false when none is set in the span (BITCOUNT, in C: the common
  -- case for `leased`, which holds only the deliveries in flight)
  if redis.call('BITCOUNT', key, first, last) == 0 then return false end
  if last - first > 8 * #offs + 4096 then
    local rd = reader(key)
    return function(o) return has(rd, o - base) end
  end
  local s = redis.call('GETRANGE', key, first, last)
  if not string.find(s, '[^%z]') then return false end
  local byte = string.byte
  return function(o)
    local r = o - base
    local x = byte(s, (r - r % 8) / 8 - first + 1) or 0
    local m = POW[r % 8]
    return x % (m + m) >= m
  end
end
local live, processed = bits(leased), bits(acked)
local adds, marks, queued_now = {}, {}, {}
for i, o in ipairs(offs) do
  if not queued[i] and not dying[i] and not poisoned[i] and not (live and live(o))
      and not (processed and processed(o)) then
    adds[#adds + 1] = dues[i]
    adds[#adds + 1] = o
    marks[#marks + 1] = o
    marks[#marks + 1] = 0  -- never handed out: its first delivery comes
    queued_now[#queued_now + 1] = o
  end
end
in_chunks('ZADD', retry, adds, 2)
in_chunks('HSET', epochs, marks, 2)
return queued_now
"""

# ARGV: now; returns {live leases, leases expired by now and not yet given back}. Expired
# hand-outs that name no live lease are dropped (nothing changes that the rules can see): a
# segment with nothing else to do gets no hand-out that would drop them, and every read would
# look them over again.
LEASE_COUNTS = _COMMON + """
if redis.call('HEXISTS', state, 'floor') == 0 then return {0, 0} end
local now = tonumber(ARGV[1])
local expired, members = expired_leases(now)
if #expired == 0 and #members > 0 then redis.call('ZREMRANGEBYSCORE', leases, '-inf', now) end
return {redis.call('BITCOUNT', leased) - #expired, #expired}
"""
