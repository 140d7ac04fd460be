-- ARGV: now. The live leases not expired by `now`, counted by the consumer each was handed to
-- (its hand-out's owner; '' unnamed): {owner, count, owner, count, …}. Nothing is written.
if redis.call('HEXISTS', state, 'floor') == 0 then return {} end
local _, _, _, _, owners = live_of(redis.call('ZRANGEBYSCORE', leases, '(' .. ARGV[1], '+inf', 'WITHSCORES'))
local counts, order = {}, {}
for _, owner in ipairs(owners) do
  if not counts[owner] then
    counts[owner] = 0
    order[#order + 1] = owner
  end
  counts[owner] = counts[owner] + 1
end
local out = {}
for _, owner in ipairs(order) do
  out[#out + 1] = owner
  out[#out + 1] = counts[owner]
end
return out
