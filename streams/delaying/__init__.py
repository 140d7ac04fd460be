"""Delayed delivery (docs/design/delayed-delivery.md): one bucket-based index per stream,
shared by all its reader groups. `indexing` indexes published events; `handing` releases due
ones to the groups; `buckets` seals, loads, merges, deletes and recovers; `maintenance` runs
them; `index` and `scripts` are the Redis side. The rules, as plain Python, are
domain.delayed."""
