-- One script call for a whole batch: each key is set if free, else its holder is returned, to be
-- judged (a pipelined SET per key was ~50 µs a key of client-side work in a retention cycle).
local out = {}
for i, key in ipairs(KEYS) do
  if redis.call('set', key, ARGV[1], 'NX', 'PX', ARGV[2]) then out[i] = 1
  else out[i] = redis.call('get', key) or 0 end
end
return out
