-- ARGV: sink, number of sinks, the sinks, then the ids' life and the deliveries
-- returns {floor, {index, reason, index, reason, …}} for the deliveries not counted
local sink, nsinks = ARGV[1], tonumber(ARGV[2])
local required = {}
for i = 3, 2 + nsinks do required[ARGV[i]] = true end
local bad, done, seen = {}, {}, {}
for i = 1, count do
  local n = ids[2 * i - 1]
  local answer = 'ok'
  local lease = lease_of(i)
  if seen[n] or lease == 'processed' then
    answer = 'already-acked'  -- named twice in one batch, or processed
  elseif lease ~= 'live' then
    answer = lease
  elseif nsinks > 0 then
    if not required[sink] then
      answer = 'unknown-sink'
    else
      local have, count, list = {}, 0, {}
      for s in string.gmatch(redis.call('HGET', sinks, n) or '', '[^,]+') do have[s] = true end
      have[sink] = true
      for s, _ in pairs(have) do
        table.insert(list, s)
        if required[s] then count = count + 1 end  -- a sink no longer declared counts for nothing
      end
      if count < nsinks then
        table.sort(list)
        redis.call('HSET', sinks, n, table.concat(list, ','))
        answer = 'waiting-for-sinks'
      end
    end
  end
  if answer == 'ok' then
    seen[n] = true
    done[#done + 1] = n - base
  else
    bad[#bad + 1] = i
    bad[#bad + 1] = answer
  end
end
if #done == 0 then return {floor, bad} end
-- their leases end and they count as processed: two BITOPs, whatever the number
apply_mask(done, {{'XOR', leased}, {'OR', acked}})
return {advance(), bad}
