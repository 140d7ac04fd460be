-- ARGV: bucket id, segments loaded so far (expected), the frontier after this load (the
-- segment's latest time, '' when it is the bucket's last), a sealing generation to drop ('' for
-- none), "segment:offset:deliver_at,…". Loads nothing when another process loaded it first.
local bucket, expected, edge, gen = ARGV[1], tonumber(ARGV[2]), ARGV[3], ARGV[4]
if gen ~= '' then drop_gen(gen) end  -- its registered bucket takes over from its sealing set
if tonumber(redis.call('HGET', loaded, bucket) or '0') ~= expected then return 0 end
queue_segment(bucket, expected + 1, edge, ARGV[5])
return 1
