-- ARGV: now, lease_s. What a read needs to know of the segment before it hands out, in one call:
-- {next, halted, live leases, leases expired by now and not yet given back, retries due by now,
-- dead-letter claims older than a lease, the earliest time something comes due later}; next and
-- halted are nil when unset (a state Redis lost,
-- or a segment never read). Expired hand-outs that name no live lease are dropped (nothing
-- changes that the rules can see): a segment with nothing else to do gets no hand-out that would
-- drop them, and every read would look them over again.
local now, lease_s = tonumber(ARGV[1]), tonumber(ARGV[2])
local known = redis.call('HMGET', state, 'next', 'halted')
local retry_due = redis.call('ZCOUNT', retry, '-inf', now)
local dead_due = redis.call('ZCOUNT', dead, '-inf', now - lease_s)
-- the earliest time something comes due later (a lease's expiry, a retry, a dead-letter claim
-- lapsing), for a read that waits: false when nothing will
local function first_score(key)
  local got = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
  if got[2] then return tonumber(got[2]) end
end
local function next_due()
  local best
  for _, t in ipairs({first_score(leases) or false, first_score(retry) or false}) do
    if t and (not best or t < best) then best = t end
  end
  local d = first_score(dead)
  if d and (not best or d + lease_s < best) then best = d + lease_s end
  if best then return tostring(best) end
  return false
end
if redis.call('HEXISTS', state, 'floor') == 0 then
  return {known[1], known[2], 0, 0, retry_due, dead_due, next_due()}
end
local expired, members = expired_leases(now)
if #expired == 0 and #members > 0 then redis.call('ZREMRANGEBYSCORE', leases, '-inf', now) end
return {known[1], known[2], redis.call('BITCOUNT', leased) - #expired, #expired, retry_due, dead_due, next_due()}
