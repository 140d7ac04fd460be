"""A retention cycle (docs/design/retention.md): for every stream with a policy, record the tail cut, decide,
truncate, and keep the history. The rule itself is `domain.retention.decide`; this package
gathers its inputs from the database and the store and applies its answer. Its parts:

- `running`: one cycle over a set of streams, on either engine (`run_cycle`, `run_cycle_summary`).
- `lifecycle`: a recorded cycle (`RetentionCycle`) run, its heartbeat, dead cycles swept.
- `buckets`: a bucket of streams, the cycle's unit of work, and `run_bucket`, its whole work.
- `gathering`: streams loaded, locked and read in batches into `decide`'s inputs (`Prepared`).
- `applying`: a batch's decisions applied through `retention.truncation`, the one truncation path.
- `local`: the local engine: the buckets one after another in this process.
- `spark`: the Spark engine: each bucket a Spark task in an executor.
- `outcomes`: what a cycle tells of each stream, and its summary.

A bucket's streams go through in batches (`gathering.BATCH`): a handful of queries per batch
instead of per stream, and head moves made durable by one sync (before any chunk deletion, and at
the end of the bucket) instead of two fsyncs per segment. Figures: bench/RESULTS.md.

Safety: a Redis lock per stream keeps two cycles off one stream (a stream locked by another cycle
is skipped: that cycle is deciding it); a truncation is recorded before the store is touched and
completed after, so a cycle that dies half-way is finished by the next one; a target at or behind
the head is a silent no-op.
"""
