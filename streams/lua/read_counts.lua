-- ARGV: now, lease_s. What a read needs to know of the segment before it hands out, in one call:
-- {next, halted, live leases, leases expired by now and not yet given back, retries due by now,
-- dead-letter claims older than a lease}; next and halted are nil when unset (a state Redis lost,
-- or a segment never read). Expired hand-outs that name no live lease are dropped (nothing
-- changes that the rules can see): a segment with nothing else to do gets no hand-out that would
-- drop them, and every read would look them over again.
local now, lease_s = tonumber(ARGV[1]), tonumber(ARGV[2])
local known = redis.call('HMGET', state, 'next', 'halted')
local retry_due = redis.call('ZCOUNT', retry, '-inf', now)
local dead_due = redis.call('ZCOUNT', dead, '-inf', now - lease_s)
if redis.call('HEXISTS', state, 'floor') == 0 then
  return {known[1], known[2], 0, 0, retry_due, dead_due}
end
local expired, members = expired_leases(now)
if #expired == 0 and #members > 0 then redis.call('ZREMRANGEBYSCORE', leases, '-inf', now) end
return {known[1], known[2], redis.call('BITCOUNT', leased) - #expired, #expired, retry_due, dead_due}
