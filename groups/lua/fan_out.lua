-- ARGV: delayed events the stream's index released (streams.domain.acks.fan_out), as one msgpack
-- array: offset, due (seconds), offset, … (ack_tracker._released: decoded in C); returns the
-- offsets queued for this group. The bitmaps are read once over the batch's span when that is
-- not much more than the batch (a clean span, all zero, needs no lookup per offset), else a
-- block at a time; the dead-letter and poison tables are looked at only when they hold anything.
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
