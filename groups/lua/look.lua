-- ARGV: hand_out.lua's (1-21), then the `next` the caller expects (22) and the most live leases
-- the segment may hold (23). A read's counts and its hand-out in one call, for a read that knows
-- where the group's segment stopped (its last look): `read_counts`' answer, and, when the state is
-- as the caller expects (it exists, its `next` is the one expected, nothing is halted, expired,
-- due again or to be dead-lettered, and no more than ARGV[23] leases are live), the hand-out of
-- `hand_out` from there (whose records the caller read ahead from that `next`); else false and
-- nothing changed: the caller goes on from the counts as a read that did not know.
-- `noted_seen`, `noted_consumers` (optional, set by the caller of this function): the group's
-- last-seen key and its consumers hash, written as a read writes them (`floors.read_noted`:
-- ARGV[24] the time, ARGV[25] the consumer's field, ARGV[26] the last-seen key's TTL), so that a
-- read looking ahead sends one command, not three
if noted_seen then
  redis.call('SET', noted_seen, ARGV[24], 'EX', ARGV[26])
  redis.call('HSET', noted_consumers, ARGV[25], ARGV[24])
end
local counted = read_counts({ARGV[1], ARGV[4]})
local expected, most_live = tonumber(ARGV[22]), tonumber(ARGV[23])
local as_expected = counted[1] and tonumber(counted[1]) == expected and not counted[2]
  and counted[3] <= most_live and counted[4] == 0 and counted[5] == 0 and counted[6] == 0
  and redis.call('HGET', state, 'layout') == LAYOUT
if not as_expected or tonumber(ARGV[2]) <= 0 then return {counted, false} end
return {counted, hand_out(ARGV)}
