"""The local engine: lock, gather, decide and apply batch by batch in this process, or in a few
forked worker processes for a large cycle (`process_count`)."""

from __future__ import annotations

import os

from django.conf import settings
from django.db import connection, connections

from domain.retention import decide
from retention.cycle.applying import apply_batch
from retention.cycle.gathering import load_streams, prepared_batches
from retention.cycle.outcomes import Report, StreamOutcome, skipped
from retention.forked import chunks, run_forked
from spark_tasks.retention_inputs import considered

PARALLEL_CHUNK = 2_000  # streams a process takes at a time (4 batches)

# what the forked worker processes read (the parent's memory, shared at fork: nothing is pickled
# on the way in); set only while a cycle's workers are alive
_FORKED: tuple | None = None


def run(ids, now, trigger, user, progress, sink: Report, workers: int = 1) -> None:
    """The local engine over the streams `ids`, PARALLEL_CHUNK streams loaded at a time; on
    `workers` processes (`run_in_processes`) when more than one. The outcomes go to `sink` a
    chunk at a time, in the streams' order."""
    interval = settings.CBR_RETENTION_INTERVAL
    if workers > 1:
        run_in_processes(ids, now, interval, trigger, user, progress, sink, workers)
        return
    for start, end in chunks(len(ids), PARALLEL_CHUNK):
        batch_done = (lambda n, start=start: progress(start + n, len(ids))) if progress else None
        sink(run_locally(load_streams(ids[start:end]), now, interval, trigger, user, batch_done))
        if progress:
            progress(end, len(ids))  # streams gone since they were listed count as done


def process_count(stream_count: int, asked: int | None = None) -> int:
    """How many processes a cycle (either engine) over `stream_count` streams uses. One,
    whatever was asked, below `CBR_RETENTION_PARALLEL_MIN_STREAMS` streams, on a database other than
    PostgreSQL (SQLite takes one writer at a time, and an in-memory one is not shared), inside a
    transaction (other processes would not see what it has not committed), or where processes
    cannot be forked."""
    workers = asked if asked is not None else settings.CBR_RETENTION_WORKERS
    if (
        workers <= 1
        or stream_count < settings.CBR_RETENTION_PARALLEL_MIN_STREAMS
        or connection.vendor != "postgresql"
        or connection.in_atomic_block
        or not hasattr(os, "fork")
    ):
        return 1
    return min(workers, -(-stream_count // PARALLEL_CHUNK))


def run_locally(targets, now, interval, trigger, user, batch_done=None) -> list[StreamOutcome]:
    """Lock, gather, decide and apply batch by batch in this process; `batch_done(n)` after each
    batch, n the streams done so far."""
    outcomes: list[StreamOutcome] = []
    for batch, locks, prepared in prepared_batches(targets, now, interval):
        try:
            outcomes += skipped(batch, locks.held, "skipped:locked-by-another-cycle")
            items = []
            for p in prepared:
                decision = decide(p.inputs)
                items.append((p, decision, considered(p.inputs, decision)))
            outcomes += apply_batch(items, now, trigger, user)
        finally:
            locks.release()
        if batch_done:
            batch_done(len(outcomes))
    return outcomes


def run_in_processes(ids, now, interval, trigger, user, progress, sink: Report, workers) -> None:
    """The local engine on `workers` forked processes (`retention.forked`), each taking chunks of
    PARALLEL_CHUNK streams in turn and running them exactly as `run_locally` does: its own
    database connection, the same per-stream locks, batches and rules. A cycle in one process is
    half Python and half PostgreSQL, one after the other; two processes keep both cores busy.
    The outcomes go to `sink` in the streams' order, a chunk at a time (a chunk done early waits
    for the ones before it); progress counts the chunks done in that order.
    A worker that dies fails the cycle; the locks it held belonged to a dead process on this
    machine, so the next cycle takes them over and finishes its streams."""
    global _FORKED
    ranges = chunks(len(ids), PARALLEL_CHUNK)
    done: dict[int, list[StreamOutcome]] = {}
    reported = 0

    def on_result(i: int, outcomes: list[StreamOutcome]) -> None:
        nonlocal reported
        done[i] = outcomes
        while reported < len(ranges) and reported in done:
            sink(done.pop(reported))
            reported += 1
            if progress:
                progress(ranges[reported - 1][1], len(ids))

    _FORKED = (ids, now, interval, trigger, user, ranges)
    try:
        # a forked process must not share this process's database socket: each opens its own
        run_forked(
            _run_chunk,
            len(ranges),
            workers,
            on_result,
            before_fork=connections.close_all,
            at_exit=connections.close_all,
        )  # a worker's backend ends with it, not a moment later
    finally:
        _FORKED = None


def _run_chunk(i: int) -> list[StreamOutcome]:
    """In a worker process: the i-th chunk of the cycle's streams, run locally."""
    assert _FORKED is not None  # set before the workers were forked
    ids, now, interval, trigger, user, ranges = _FORKED
    start, end = ranges[i]
    return run_locally(load_streams(ids[start:end]), now, interval, trigger, user)
