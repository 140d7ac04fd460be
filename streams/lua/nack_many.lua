-- ARGV: due, reason, then the deliveries; returns {index, reason, …} for those not given back
local due, why = ARGV[1], ARGV[2]
local bad, back, seen = {}, {}, {}
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
  end
end
if #back > 0 then give_back(back, due, why) end
return bad
