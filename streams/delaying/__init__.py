"""Delayed delivery (docs/design/delayed-delivery.md): one bucket-based index per stream,
shared by all its reader groups. `indexing` indexes published events; `buckets` seals, loads,
merges, deletes and recovers; `maintenance` runs them; `index` and `scripts` are the Redis side;
`projection` is what the console and /metrics show of an index. Releasing what is due to the
groups is the groups app's (`groups.delayed_release`). The rules, as plain Python, are
domain.delayed."""
