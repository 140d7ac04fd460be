-- A stream's publish rate: two token buckets (events and bytes) in one hash, taken together or not
-- at all (domain.rate_limits). KEYS[1]: the hash {e, b, at}. ARGV: now (seconds; empty: Redis's
-- clock), events, bytes, events_per_s (0: no limit), bytes_per_s (0: no limit).
-- Each bucket holds at most one second of its rate; a batch passes when every limited bucket
-- holds at least min(what it takes, a full bucket), and then takes all of it (a large batch leaves
-- a debt that the next ones wait out). Returns {1} when taken, or {0, seconds to wait}.
local now = tonumber(ARGV[1])
if not now then
  local t = redis.call('TIME')
  now = tonumber(t[1]) + tonumber(t[2]) / 1e6
end
local need = {tonumber(ARGV[2]), tonumber(ARGV[3])}
local rate = {tonumber(ARGV[4]), tonumber(ARGV[5])}
local held = redis.call('HMGET', KEYS[1], 'e', 'b', 'at')
local at = tonumber(held[3]) or now
if now < at then now = at end  -- a clock that went back refills nothing, takes nothing back
local tokens, wait = {}, 0
for i = 1, 2 do
  if rate[i] > 0 then
    local full = rate[i]  -- one second's worth
    local t = tonumber(held[i]) or full
    t = math.min(full, t + (now - at) * rate[i])
    tokens[i] = t
    local wanted = math.min(need[i], full)
    -- (a hair's breadth of rounding is no shortfall: it would ask to wait a billionth of a second)
    if t + 1e-9 < wanted then wait = math.max(wait, (wanted - t) / rate[i]) end
  end
end
if wait > 0 then
  return {0, tostring(wait)}
end
local debt = 0
for i = 1, 2 do
  if rate[i] > 0 then
    tokens[i] = tokens[i] - need[i]
    debt = math.max(debt, (rate[i] - tokens[i]) / rate[i])
  end
end
redis.call('HSET', KEYS[1], 'e', tostring(tokens[1] or 0), 'b', tostring(tokens[2] or 0), 'at', tostring(now))
-- refilled whole by then: an absent hash is a full bucket
redis.call('PEXPIRE', KEYS[1], math.ceil(debt * 1000) + 1000)
return {1}
