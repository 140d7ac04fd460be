-- ARGV: offsets whose dead-letter appends are durable
for _, o in ipairs(ARGV) do
  if redis.call('ZSCORE', dead, o) then
    redis.call('ZREM', dead, o)
    mark({tonumber(o)})
    redis.call('HINCRBY', state, 'dead_lettered', 1)
  end
end
if redis.call('HEXISTS', state, 'floor') == 0 then return 0 end
return advance()
