-- Deliveries travel as runs: one msgpack array of first offset, last offset (included) and
-- epoch, run after run (see ack_tracker._packed_runs), decoded by cmsgpack in C; a batch a read
-- handed out is a run per segment, not a pair of numbers per event. `ids` is the runs spelled
-- out: offset and epoch of each delivery in turn, the i-th delivery at 2i - 1 and 2i.
local runs = cmsgpack.unpack(ARGV[#ARGV])
local ids, count = {}, 0
for r = 1, #runs - 2, 3 do
  local epoch = runs[r + 2]
  for n = runs[r], runs[r + 1] do
    ids[2 * count + 1] = n
    ids[2 * count + 2] = epoch
    count = count + 1
  end
end
-- ARGV[#ARGV - 1]: the life of the state that handed them out, as their ids name it (0: ids of
-- a state that has none, started before lives were named)
local st = redis.call('HMGET', state, 'floor', 'next', 'abase', 'life', 'redo')
local known, floor, nxt, base = st[1], tonumber(st[1] or '0'), tonumber(st[2] or '0'), tonumber(st[3] or '0')
local same_life = tonumber(st[4] or '0') == tonumber(ARGV[#ARGV - 1])
local redo = tonumber(st[5] or '0')
local stored = {}  -- epochs kept for these offsets (none kept: 1 below `next`)
if known and redis.call('HLEN', epochs) > 0 then
  local offs = {}
  for i = 1, count do offs[i] = ids[2 * i - 1] end
  stored = many('HMGET', epochs, offs)
end
local live = reader(leased)
local function lease_of(i)
  -- 'live', or why the i-th delivery holds no live lease: 'unknown', 'stale', 'processed', or
  -- 'lost' (Redis holds no state: it lost it, or the segment was never read)
  local n = ids[2 * i - 1]
  if not known then return 'lost' end
  if n < floor then return 'processed' end
  if not same_life then return 'stale' end  -- handed out by a state Redis lost since
  if n >= nxt then
    if n < redo then return 'stale' end  -- the same, not handed out again yet
    return 'unknown'
  end
  if not has(live, n - base) then
    if redis.call('GETBIT', acked, n - base) == 1 then return 'processed' end
    return 'unknown'
  end
  if (tonumber(stored[i]) or 1) ~= ids[2 * i] then return 'stale' end
  return 'live'
end
