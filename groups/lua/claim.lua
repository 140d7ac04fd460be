-- ARGV: now, consumer. An ordered group's segment passes to `consumer` ('' for nobody) only while
-- none of its deliveries is in flight (a lease not expired by `now`): the same call that checks
-- it writes the owner, and a hand-out checks the owner in its own call (hand_out.lua), so two
-- consumers can never hold one segment's deliveries at once. Returns the owner after the call.
local now, consumer = tonumber(ARGV[1]), ARGV[2]
local current = redis.call('HGET', state, 'owner') or ''
if current == consumer then return current end
if current ~= '' and redis.call('ZCOUNT', leases, '(' .. now, '+inf') > 0 then return current end
if consumer == '' then
  redis.call('HDEL', state, 'owner')
else
  redis.call('HSET', state, 'owner', consumer)
end
return consumer
