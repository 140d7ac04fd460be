-- compare-and-set of each KEYS[i] from its dead holder ARGV[i + 2] to the token ARGV[1]
local out = {}
for i, key in ipairs(KEYS) do
  if redis.call('get', key) == ARGV[i + 2] then redis.call('set', key, ARGV[1], 'PX', ARGV[2]); out[i] = 1
  else out[i] = 0 end
end
return out
