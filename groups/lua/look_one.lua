-- One read's look (`look`): KEYS[1-11] the group's segment state, KEYS[12] the stream's delayed
-- index, KEYS[13], KEYS[14] (optional) what the read writes of its group; ARGV as `look` takes them.
noted_seen, noted_consumers = KEYS[13], KEYS[14]
return look(ARGV)
