-- A web process's counters added into their hashes, many hashes in one call
-- (streams.wait_stats.flush: a fan-out to 10 000 groups' consumers counts into 20 000 hashes).
-- KEYS: the hashes. ARGV, for each key in turn: its expiry in seconds (0: none, left as it is),
-- how many fields follow, then each field and the whole number to add to it, or a field named
-- with a leading '=' and the value it is set to (`counts.set_in`).
-- Returns how many fields were added to or set.
local a, added = 1, 0
for _, key in ipairs(KEYS) do
  local expire_s, fields = tonumber(ARGV[a]), tonumber(ARGV[a + 1])
  a = a + 2
  for _ = 1, fields do
    local field = ARGV[a]
    if string.sub(field, 1, 1) == '=' then
      redis.call('HSET', key, string.sub(field, 2), ARGV[a + 1])
    else
      redis.call('HINCRBY', key, field, ARGV[a + 1])
    end
    a = a + 2
  end
  added = added + fields
  if expire_s > 0 then
    redis.call('EXPIRE', key, expire_s)
  end
end
return added
