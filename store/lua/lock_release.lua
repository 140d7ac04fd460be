-- compare-and-delete: a lock that expired and was taken by another holder stays
for _, key in ipairs(KEYS) do
  if redis.call('get', key) == ARGV[1] then redis.call('del', key) end
end
return 0
