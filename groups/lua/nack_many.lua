-- ARGV: now, delay (seconds; '' for the group's backoff), reason, backoff, sink ('' for none),
-- then the ids' life and the deliveries; returns {index, reason, …} for those not given back
local now, delay, why = tonumber(ARGV[1]), ARGV[2], ARGV[3]
local backoff, sink = parse_backoff(ARGV[4]), ARGV[5]
local bad, back, seen, dues = {}, {}, {}, {}
for i = 1, count do
  local n = ids[2 * i - 1]
  local lease = lease_of(i)
  if seen[n] or lease == 'processed' then lease = 'unknown' end
  if lease ~= 'live' then
    bad[#bad + 1] = i
    bad[#bad + 1] = lease
  else
    seen[n] = true
    back[#back + 1] = n
    if delay == '' then dues[#dues + 1] = now + backoff_of(backoff, ids[2 * i]) else dues[#dues + 1] = now + tonumber(delay) end
  end
end
if #back > 0 then
  give_back(back, dues, why)
  if sink ~= '' and redis.call('HLEN', sinks) > 0 then
    -- the sink that gives it back has not acknowledged it (the others have, if they did)
    local had = many('HMGET', sinks, back)
    for k, o in ipairs(back) do
      if had[k] then
        local left = {}
        for s in string.gmatch(had[k], '[^,]+') do
          if s ~= sink then left[#left + 1] = s end
        end
        if #left == 0 then redis.call('HDEL', sinks, o) else redis.call('HSET', sinks, o, table.concat(left, ',')) end
      end
    end
  end
end
return bad
