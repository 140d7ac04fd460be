"""A retention cycle (DESIGN.md §6): for every stream with a policy, record the tail cut, decide,
truncate, and keep the history. The rule itself is `domain.retention.decide`; this package
gathers its inputs from the database and the store and applies its answer. Its parts:

- `running`: one cycle over a set of streams, on either engine (`run_cycle`, `run_cycle_summary`).
- `lifecycle`: a recorded cycle (`RetentionCycle`) run, its heartbeat, dead cycles swept.
- `gathering`: streams loaded, locked and read in batches into `decide`'s inputs (`Prepared`).
- `applying`: a batch's decisions applied through `retention.truncation`, the one truncation path.
- `local`: the local engine, in this process or forked worker processes.
- `spark`: the Spark engine: inputs gathered into Parquet, decided in one Spark job per chunk.
- `outcomes`: what a cycle tells of each stream, and its summary.

Streams go through in batches (`gathering.BATCH`): a handful of queries per batch instead of per
stream, and head moves made durable by one sync (before any chunk deletion, and at the end of the
cycle) instead of two fsyncs per segment. Figures: bench/RESULTS.md.

Safety: a Redis lock per stream keeps two cycles off one stream (a stream locked by another cycle
is skipped: that cycle is deciding it); a truncation is recorded before the store is touched and
completed after, so a cycle that dies half-way is finished by the next one; a target at or behind
the head is a silent no-op.
"""
