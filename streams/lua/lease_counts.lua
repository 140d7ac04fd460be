-- ARGV: now; returns {live leases, leases expired by now and not yet given back}. Expired
-- hand-outs that name no live lease are dropped (nothing changes that the rules can see): a
-- segment with nothing else to do gets no hand-out that would drop them, and every read would
-- look them over again.
if redis.call('HEXISTS', state, 'floor') == 0 then return {0, 0} end
local now = tonumber(ARGV[1])
local expired, members = expired_leases(now)
if #expired == 0 and #members > 0 then redis.call('ZREMRANGEBYSCORE', leases, '-inf', now) end
return {redis.call('BITCOUNT', leased) - #expired, #expired}
