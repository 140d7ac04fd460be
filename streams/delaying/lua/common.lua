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
