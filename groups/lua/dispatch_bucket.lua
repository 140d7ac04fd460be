-- A reader group's dispatch rate: a token bucket of events (domain.rate_limits) in one hash.
-- KEYS[1]: the hash {t, at}. ARGV: now (seconds; empty: Redis's clock), events_per_s, and
-- either a positive count to take up to, or a negative one to give back (what a read took and did
-- not hand out).
-- The bucket holds at most one second of the rate. A read takes what it may hand out, up to what
-- it asks for: the whole tokens the bucket holds, at least one when it holds at least one (or, for
-- a rate below one a second, when it is full), leaving a debt of the fraction. Returns {taken,
-- seconds until one more could be taken (0 when taken)}.
local now = tonumber(ARGV[1])
if not now then
  local t = redis.call('TIME')
  now = tonumber(t[1]) + tonumber(t[2]) / 1e6
end
local rate, ask = tonumber(ARGV[2]), tonumber(ARGV[3])
local full = rate
local held = redis.call('HMGET', KEYS[1], 't', 'at')
local at = tonumber(held[2]) or now
if now < at then now = at end  -- a clock that went back refills nothing
local tokens = math.min(full, (tonumber(held[1]) or full) + (now - at) * rate)
local taken = 0
if ask < 0 then
  tokens = math.min(full, tokens - ask)
else
  local least = math.min(1, full)
  if tokens + 1e-9 >= least then
    taken = math.min(ask, math.max(1, math.floor(tokens + 1e-9)))
    tokens = tokens - taken
  end
end
redis.call('HSET', KEYS[1], 't', tostring(tokens), 'at', tostring(now))
redis.call('PEXPIRE', KEYS[1], math.ceil(math.max(0, (full - tokens) / rate) * 1000) + 1000)
if taken > 0 or ask <= 0 then return {taken, '0'} end
return {0, tostring((math.min(1, full) - tokens) / rate)}
