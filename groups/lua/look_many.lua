-- The looks of many reads that look at one place of one segment (each of its own group's state,
-- or of one group's for competing reads): the same records read ahead, the same expected `next`,
-- the same number of events asked for. One call instead of one per read, each look exactly as
-- `look` alone (in the order given: a later read of one group finds what an earlier one left).
-- ARGV[1-26]: `look`'s, shared by all; ARGV[27]: how many reads; then per read 9 values: its
-- lease_s (hand_out's 4), max_deliveries (5), on_poison (6), floor (8 and 15), backoff (13),
-- ack policy (14), consumer (19), most live leases (23), consumer's field (25).
-- KEYS[12]: the stream's delayed index; per read from 13: its 11 state keys, its group's
-- last-seen key and consumers hash (13 keys). Returns each read's `look` answer, in order.
local n, shared = tonumber(ARGV[27]), {}
for i = 1, 26 do shared[i] = ARGV[i] end
local out = {}
for g = 0, n - 1 do
  local k, a = 12 + 13 * g, 27 + 9 * g
  state, leases, sinks, epochs, acked, retry, poison, dead, reason, leased, scratch =
    KEYS[k + 1], KEYS[k + 2], KEYS[k + 3], KEYS[k + 4], KEYS[k + 5], KEYS[k + 6], KEYS[k + 7],
    KEYS[k + 8], KEYS[k + 9], KEYS[k + 10], KEYS[k + 11]
  noted_seen, noted_consumers = KEYS[k + 12], KEYS[k + 13]
  local args = {unpack(shared)}
  args[4], args[5], args[6], args[8], args[15] = ARGV[a + 1], ARGV[a + 2], ARGV[a + 3], ARGV[a + 4], ARGV[a + 4]
  args[13], args[14], args[19], args[23], args[25] = ARGV[a + 5], ARGV[a + 6], ARGV[a + 7], ARGV[a + 8], ARGV[a + 9]
  out[g + 1] = look(args)
end
return out
