"""The Spark engine: a chunk of streams gathered into Parquet, decided in one Spark job with the
same `decide`, applied batch by batch; gathering and applying spread over worker processes as
in the local engine."""

from __future__ import annotations

import gc
import shutil
import tempfile
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings
from django.db import connections

from retention.cycle import local
from retention.cycle.applying import apply_batch
from retention.cycle.gathering import Prepared, load_streams, no_automatic_gc, prepared_batches
from retention.cycle.outcomes import Report, StreamOutcome, skipped
from retention.forked import Pool, chunks
from retention.locks import Locks
from spark_tasks import load_retention_job
from streams.models import Stream

SPARK_CHUNK = 25_000  # streams gathered, decided in one Spark job and applied before the next

# what the forked worker processes read (the parent's memory, shared at fork: nothing is pickled
# on the way in); set only while a cycle's workers are alive
_FORKED: tuple | None = None


@dataclass
class _SparkChunk:
    """A chunk of streams gathered for the Spark engine: where its inputs are, the streams another
    cycle holds, and the job deciding them. The batches themselves (their locks held until each is
    applied) are kept by whoever gathered them: `held` here in this process, or each worker
    process its part (`parts`: the chunk's ranges of streams, each sent to worker i % workers)."""

    path: Path
    skipped: list[StreamOutcome]
    rows: int
    held: list[tuple[Locks, list[Prepared]]] = field(default_factory=list)
    parts: list[tuple[int, int]] = field(default_factory=list)
    decided: Future | None = None
    start: int = 0  # the chunk's streams: the cycle's [start, end)
    end: int = 0


def run(ids, now, trigger, user, progress, sink: Report, workers: int = 1) -> None:
    """The Spark engine: gather the inputs of a chunk of streams (recording their tails) into
    Parquet, decide them all in one Spark job with the same `decide`, then apply the decisions
    batch by batch. Each stream is gathered once: its lock is held from gathering to applying,
    as in the local engine, so its head cannot move meanwhile. Chunks of SPARK_CHUNK streams bound
    what is held in memory (and how long a lock is held) whatever the fleet's size.

    The Spark job of one chunk runs (in a thread of this process, waiting on the JVM) while the
    next chunk is gathered: the job's executors and the gathering each use a core, where one
    waited for the other. At most two chunks are held at once. Gathering and applying are spread
    over worker processes as in the local engine (`process_count`): each worker gathers parts of
    PARALLEL_CHUNK streams, writes their inputs into the chunk's directory and keeps them, with
    their locks, until this process sends it the decisions for them. The outcomes go to `sink`
    a chunk at a time, in the streams' order."""
    decide_file = load_retention_job().decide_file

    global _FORKED
    interval = settings.CBR_RETENTION_INTERVAL
    waiting: list[_SparkChunk] = []  # gathered, in order; the first is applied next
    directory = tempfile.TemporaryDirectory(prefix="cbr-retention-")
    pool = deciding = None

    def apply_first() -> None:
        chunk = waiting[0]
        decisions = chunk.decided.result() if chunk.decided else {}
        if pool is None:
            batch_done = (lambda n: progress(chunk.start + len(chunk.skipped) + n, len(ids))) if progress else None
            outcomes = _apply_held(chunk.held, decisions, now, trigger, user, batch_done)
        else:
            outcomes = _apply_parts(pool, chunk.parts, ids, decisions)
        order = {sid: k for k, sid in enumerate(ids[chunk.start : chunk.end])}
        sink(sorted(chunk.skipped + outcomes, key=lambda o: order[o.stream_id]))  # the streams' order
        if progress:
            progress(chunk.end, len(ids))
        shutil.rmtree(chunk.path, ignore_errors=True)
        waiting.pop(0)

    try:
        if workers > 1:  # forked before the thread below exists
            _FORKED = (ids, now, interval, trigger, user, None)
            pool = Pool(_spark_part, workers, before_fork=connections.close_all, at_exit=_release_held_parts)
        deciding = ThreadPoolExecutor(max_workers=1, thread_name_prefix="cbr-spark-decide")
        for k, (start, end) in enumerate(chunks(len(ids), SPARK_CHUNK)):
            path = Path(directory.name) / f"chunk-{k}"
            path.mkdir()
            if pool is None:
                chunk = _SparkChunk(path, [], 0, start=start, end=end)
                waiting.append(chunk)  # from here on, released whatever happens
                chunk.rows = _gather_here(chunk, load_streams(ids[start:end]), now, interval)
            else:
                chunk = _gather_in_parts(pool, path, start, end)
                waiting.append(chunk)
            if chunk.rows:
                chunk.decided = deciding.submit(decide_file, path)
            if len(waiting) > 1:
                apply_first()
        while waiting:
            apply_first()
    finally:
        if deciding is not None:
            deciding.shutdown(wait=True, cancel_futures=True)  # no job reads a directory removed below
        for chunk in waiting:
            _release(chunk.held)
        _FORKED = None
        if pool is not None:
            pool.close()  # each live worker releases the parts it still holds as it exits
        directory.cleanup()


def _gather_here(chunk: _SparkChunk, streams: list[Stream], now, interval, prefix="part", files=None) -> int:
    """Gather `streams` batch by batch into `chunk` (its inputs written to its directory, its
    batches kept with their locks in `chunk.held`); the number of streams written."""
    InputsWriter = load_retention_job().InputsWriter

    writer = InputsWriter(files=files, directory=chunk.path, prefix=prefix)
    try:
        for batch, locks, prepared in prepared_batches(streams, now, interval):
            chunk.held.append((locks, prepared))
            chunk.skipped += skipped(batch, locks.held, "skipped:locked-by-another-cycle")
            writer.write([(p.stream.pk, p.inputs) for p in prepared])
    finally:
        writer.close()
    return writer.rows


def _apply_held(held, decisions, now, trigger, user, batch_done=None) -> list[StreamOutcome]:
    """Apply gathered batches with their decisions, releasing each batch's locks once applied;
    `batch_done(n)` after each batch, n the streams applied so far."""
    outcomes: list[StreamOutcome] = []
    try:
        with no_automatic_gc():
            while held:
                locks, prepared = held[0]
                outcomes += apply_batch([(p, *decisions[p.stream.pk]) for p in prepared], now, trigger, user)
                locks.release()
                held.pop(0)
                gc.collect(0)
                if batch_done:
                    batch_done(len(outcomes))
    finally:
        _release(held)
    return outcomes


def _release(held: list[tuple[Locks, list[Prepared]]]) -> None:
    """Release the locks of gathered batches not applied (after a failure)."""
    for locks, _ in held:
        locks.release()
    held.clear()


_PARTS: dict[int, _SparkChunk] = {}  # in a worker process: the parts it gathered, by start


def _gather_in_parts(pool: Pool, path: Path, start: int, end: int) -> _SparkChunk:
    parts = [(start + a, start + b) for a, b in chunks(end - start, local.PARALLEL_CHUNK)]
    chunk = _SparkChunk(path, [], 0, parts=parts, start=start, end=end)
    answers: dict[int, tuple] = {}
    pool.run([("gather", a, b, path) for a, b in parts], answers.__setitem__, worker_of=lambda i: i)
    for i in range(len(parts)):
        skipped, rows = answers[i]
        chunk.skipped += skipped
        chunk.rows += rows
    return chunk


def _apply_parts(pool: Pool, parts, ids, decisions) -> list[StreamOutcome]:
    tasks = [("apply", a, b, {sid: decisions[sid] for sid in ids[a:b] if sid in decisions}) for a, b in parts]
    answers: dict[int, list[StreamOutcome]] = {}
    pool.run(tasks, answers.__setitem__, worker_of=lambda i: i)
    return [o for i in range(len(parts)) for o in answers[i]]


def _release_held_parts() -> None:
    """In a worker process whose tasks ended (the cycle done, failed, or its process gone):
    release the locks of the parts it still holds. A worker that died cannot: its locks name a
    dead process, taken over by the next cycle on this machine (elsewhere they expire)."""
    try:
        for part in _PARTS.values():
            _release(part.held)
        _PARTS.clear()
    finally:
        connections.close_all()


def _spark_part(task) -> object:
    """In a worker process: gather a part (its inputs written as `part-<start>` files into the
    chunk's directory; kept with its locks), or apply a part with its decisions."""
    op, start, end, arg = task
    assert _FORKED is not None  # set before the workers were forked
    ids, now, interval, trigger, user, _ = _FORKED
    if op == "gather":
        part = _PARTS[start] = _SparkChunk(arg, [], 0)
        try:
            part.rows = _gather_here(
                part, load_streams(ids[start:end]), now, interval, prefix=f"part-{start:09d}", files=1
            )
        except BaseException:
            _release(_PARTS.pop(start).held)
            raise
        return part.skipped, part.rows
    return _apply_held(_PARTS.pop(start).held, arg, now, trigger, user)
