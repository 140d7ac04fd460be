"""A compaction run (docs/design/compaction.md): the previous generation and the sealed chunks after its
horizon — up to the first chunk still active or younger than `min_compaction_lag_s` — go through
the compactor's transforms (`spark_tasks.compaction_job`) on Spark; the new generation is
written whole, then switched in one transaction, then the old one's files go. A crash at any
step leaves the old generation or the new one whole: files not named by the current generation
are leftovers, deleted by the next run."""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads
import pyarrow.parquet as pq
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from compaction.models import CompactedView, CompactionRun
from domain.compaction import missed_ranges, view_due_to_drop
from spark_tasks import load_compaction_job, load_executors, load_tier_io, spark_session
from store import locks as redis_locks
from store.offload import tier_key
from store.parquet import SCHEMA as PARQUET_SCHEMA
from store.parquet import ChunkCopy, CopyFacts, TierCopy
from store.tier.base import TierError
from streams import tiering
from streams.logs import seal_active_chunks, stream_log
from streams.models import Stream

log = logging.getLogger(__name__)


class CompactionBusy(Exception):
    """A compaction of the stream is already running."""


def view_dir(stream: Stream) -> Path:
    return Path(settings.CBR_DATA_DIR) / "compacted" / stream.storage_key


def staging_dir(stream: Stream) -> Path:
    """Where a run's executors put the columnar copies of chunks they read from long-term
    storage (store.parquet); emptied when the run ends."""
    return Path(settings.CBR_DATA_DIR) / "tier-staging" / stream.storage_key


def _lock_key(stream: Stream) -> str:
    return f"cbr:compaction:{{{stream.storage_key}}}:lock"


@contextmanager
def compaction_lock(stream: Stream) -> Iterator[bool]:
    """Never two compactions of a stream at once. A lease its holder renews while it lives: a
    holder killed on this machine gives it up at once, one elsewhere within
    `CBR_COMPACTION_LOCK_S`."""
    with redis_locks.lease(_lock_key(stream), settings.CBR_COMPACTION_LOCK_S) as got:
        yield got


def is_running(stream: Stream) -> bool:
    """Whether a live process compacts the stream now."""
    return redis_locks.holder(_lock_key(stream)) is not None


def fail_dead_runs(stream: Stream) -> int:
    """Mark failed the runs left `running` by a process that died. Only called while no live
    process holds the stream's lock: a run is `running` only while its process holds it."""
    return CompactionRun.objects.filter(stream=stream, state=CompactionRun.State.RUNNING).update(
        state=CompactionRun.State.FAILED, error="the process running it died", finished_at=timezone.now()
    )


@dataclass(frozen=True)
class InputCounts:
    events: int = 0
    keyless: int = 0
    bytes: int = 0  # payload bytes

    def __add__(self, other: InputCounts) -> InputCounts:
        return InputCounts(self.events + other.events, self.keyless + other.keyless, self.bytes + other.bytes)


@dataclass(frozen=True)
class Pending:
    # Parquet copies of the sealed chunks to compact, in order: their paths, or (executors that
    # do not see the data directory) their keys in the tier with their CRC-32C
    paths: list[str]
    crcs: list[str | None]
    horizon: dict[str, int]  # per segment, the next offset after the last chunk taken
    counts: InputCounts  # what the run reads from them
    copies_made: int  # Parquet copies the run's job made (of these chunks and of younger ones)
    missed: dict[str, list[int]]  # per segment, [from, to) deleted before any run read them

    @property
    def missed_events(self) -> int:
        return sum(to - at for at, to in self.missed.values())


@dataclass(frozen=True)
class SealedChunk:
    segment: str
    base: int
    path: Path
    next_base: int  # the base of the chunk after it


def sealed_after(stream: Stream, horizon: dict[str, int]) -> list[SealedChunk]:
    """Per segment, in order, the sealed chunks at or after `horizon` (names only: no file is
    read)."""
    logs = stream_log(stream)
    chunks = []
    for seg_id in stream.segment_ids:
        seg = logs.segment(seg_id)
        bases = seg.chunk_bases()
        sealed = set(seg.sealed_chunks())
        for base, next_base in zip(bases, bases[1:]):
            if base < horizon.get(seg_id, 0):
                continue
            if base not in sealed:
                break
            chunks.append(SealedChunk(seg_id, base, seg.chunk_path(base), next_base))
    return chunks


def chunk_copies(stream: Stream, chunks: list[SealedChunk]) -> list[CopyFacts]:
    """The chunks' Parquet copies, the missing ones made, and what each holds: one Spark job, a
    task per chunk (`store.parquet.copy_facts`), so a run's copies are made by every executor
    core at once and the driver only sums their counts. Executors that do not see the data
    directory take the chunks from the tier (`tier_chunk_copies`)."""
    if not chunks:
        return []
    if not settings.CBR_SPARK_SHARED_STORE:
        return tier_chunk_copies(stream, chunks)
    tasks = [
        ChunkCopy(
            chunk=str(c.path), segment=c.segment, tier_url=settings.CBR_TIER_URL, staging=str(staging_dir(stream))
        )
        for c in chunks
    ]
    return load_executors().run_in_executors("store.parquet:copy_facts", tasks)


def tier_chunk_copies(stream: Stream, chunks: list[SealedChunk]) -> list[CopyFacts]:
    """`chunk_copies` through the tier: the stream's sealed files copied there first (whatever
    their age: `tiering.copied_for_executors`), then a task per chunk reads its copy from the
    tier or makes one there from the chunk's object (`store.parquet.tier_copy_facts`); the copies
    made are recorded as the stream's objects. Each fact's `copy` is a key in the tier."""
    recorded = tiering.copied_for_executors(stream)
    objects = {(r.segment_id, r.base, r.kind): r for r in recorded.objects}
    tasks = []
    for c in chunks:
        chunk = objects.get((c.segment, c.base, "chunk"))
        if chunk is None:  # truncated since the run listed it: the next run finds it passed
            raise TierError(f"chunk {c.base} of segment {c.segment} of {stream.full_name} is not in the tier")
        copy = objects.get((c.segment, c.base, "parquet"))
        tasks.append(
            TierCopy(
                tier_url=settings.CBR_TIER_URL,
                segment=c.segment,
                chunk_key=tier_key(stream.storage_key, c.segment, c.base, "chunk"),
                chunk_crc32c=chunk.crc32c,
                parquet_key=tier_key(stream.storage_key, c.segment, c.base, "parquet"),
                parquet_crc32c=copy.crc32c if copy is not None else None,
            )
        )
    facts = load_executors().run_in_executors("store.parquet:tier_copy_facts", tasks)
    tiering.record_copies(
        stream, [(c.segment, c.base, c.next_base, f["size"], f["crc32c"]) for c, f in zip(chunks, facts) if f["made"]]
    )
    return facts


def pending_chunks(stream: Stream, horizon: dict[str, int], now_ms: int) -> Pending:
    """The sealed chunks after `horizon`, per segment up to the first one younger than the lag
    (`min_compaction_lag_s`), with their copies made and their contents counted."""
    lag_ms = stream.min_compaction_lag_s * 1000
    logs = stream_log(stream)
    missed = missed_ranges(horizon, {s: logs.segment(s).chunk_bases() for s in stream.segment_ids})
    chunks = sealed_after(stream, horizon)
    facts = chunk_copies(stream, chunks)
    paths: list[str] = []
    crcs: list[str | None] = []
    counts, young = InputCounts(), set()
    new = {**horizon, **{s: to for s, (_, to) in missed.items()}}  # past what is gone
    for chunk, fact in zip(chunks, facts, strict=True):
        if chunk.segment in young:
            continue
        newest = fact["newest_ms"]
        if newest is not None and newest > now_ms - lag_ms:
            young.add(chunk.segment)
            continue
        paths.append(fact["copy"])
        crcs.append(fact.get("crc32c"))
        new[chunk.segment] = chunk.next_base
        counts += InputCounts(fact["events"], fact["keyless"], fact["bytes"])
    return Pending(paths, crcs, new, counts, sum(f["made"] for f in facts), missed)


def due_to_drop(stream: Stream, view: CompactedView, now: datetime) -> bool:
    """Whether the view holds something a run over nothing new would drop
    (`domain.compaction.view_due_to_drop`): read from the generation's two time columns."""
    if not (view.tombstones or (stream.compacted_view_ages and stream.compacted_retention_s is not None)):
        return False
    dataset = pads.dataset(str(view_dir(stream) / view.directory), format="parquet")
    times = dataset.to_table(columns=["published_at", "tombstone_since"])
    oldest_event = pc.min(times["published_at"]).as_py()
    oldest_tombstone = pc.min(times["tombstone_since"]).as_py()
    return view_due_to_drop(
        _utc(oldest_event),
        _utc(oldest_tombstone),
        now,
        stream.compacted_retention_s if stream.compacted_view_ages else None,
        stream.delete_retention_s,
    )


def _utc(at: datetime | None) -> datetime | None:
    """A time read from a generation (Spark writes UTC instants, read back naive or aware)."""
    if at is None or at.tzinfo is not None:
        return at
    return at.replace(tzinfo=UTC)


def becoming_compacted_warnings(stream: Stream, was_compacted: bool) -> list[str]:
    """What a change that made `stream` compacted warns of (none if it was already, or is not
    now): events without a key already in it stay on the live log, and the compacted view leaves
    them out (new ones are refused)."""
    if was_compacted or not stream.is_compacted:
        return []
    keyless = keyless_events(stream)
    if not keyless:
        return []
    return [
        f"{keyless} events without a key are already in the stream: the "
        "compacted view will leave them out (new ones are refused)"
    ]


def keyless_events(stream: Stream) -> int:
    """Events without a key in the stream (from the Parquet copies' statistics where a chunk has
    one, else by reading the chunk): what a stream turned compacted leaves out of its view."""
    logs = stream_log(stream)
    count = 0
    for seg_id in stream.segment_ids:
        seg = logs.segment(seg_id)
        bases = seg.chunk_bases()
        for i, base in enumerate(bases):
            copy = seg.chunk_path(base, "parquet")
            if copy.exists():
                meta = pq.ParquetFile(copy).metadata
                column = meta.schema.to_arrow_schema().get_field_index("key")
                count += sum(meta.row_group(g).column(column).statistics.null_count for g in range(meta.num_row_groups))
                continue
            start = max(base, seg.read_head().offset)
            end = bases[i + 1] if i + 1 < len(bases) else seg.committed_tail().next_offset
            while start < end:
                records = seg.read(start, min(10_000, end - start))
                if not records:
                    break
                count += sum(1 for r in records if r.offset < end and r.key is None)
                start = records[-1].offset + 1
    return count


def execute(run: CompactionRun, now: datetime | None = None, seal: bool = False) -> CompactionRun:
    """Do the run (the task, the command and the tests call this)."""
    stream = run.stream
    with compaction_lock(stream) as got:
        if not got:
            run.state, run.error, run.finished_at = (
                CompactionRun.State.FAILED,
                "another compaction was running",
                timezone.now(),
            )
            run.save(update_fields=["state", "error", "finished_at"])
            raise CompactionBusy(stream.full_name)
        fail_dead_runs(stream)  # nothing else holds the lock, and this run is not running yet
        try:
            return _execute(run, now or datetime.now(UTC), seal)
        except Exception as exc:
            log.exception("compaction of %s failed", stream)
            run.state, run.error, run.finished_at = CompactionRun.State.FAILED, str(exc)[:2000], timezone.now()
            run.save(update_fields=["state", "error", "finished_at"])
            raise
        finally:
            shutil.rmtree(staging_dir(stream), ignore_errors=True)


def _phase(run: CompactionRun, phase: str, **fields) -> None:
    for name, value in fields.items():
        setattr(run, name, value)
    run.phase = phase
    run.save(update_fields=["phase", *fields])


def _execute(run: CompactionRun, now: datetime, seal: bool) -> CompactionRun:
    compaction_job = load_compaction_job()

    stream = run.stream
    _phase(run, "reading the sealed chunks", state=CompactionRun.State.RUNNING, started_at=timezone.now())
    if seal:
        seal_active_chunks(stream)
    current = CompactedView.objects.filter(stream=stream).first()
    pending = pending_chunks(stream, current.horizon if current else {}, int(now.timestamp() * 1000))
    if not pending.paths and not (current and (pending.missed or due_to_drop(stream, current, now))):
        _phase(
            run,
            "nothing new",
            state=CompactionRun.State.SKIPPED,
            finished_at=timezone.now(),
            horizon=current.horizon if current else {},
            generation=current.generation if current else None,
        )
        return run
    engine = spark_session().sparkContext.master
    made = f" ({pending.copies_made} Parquet copies made)" if pending.copies_made else ""
    doing = f"compacting {len(pending.paths)} chunks{made}" if pending.paths else "dropping what aged from the view"
    _phase(run, doing, chunks=len(pending.paths), engine=engine)
    directory = view_dir(stream)
    incoming = pending.counts
    config = compaction_job.CompactionSettings(
        delete_retention_s=stream.delete_retention_s,
        retention_s=stream.compacted_retention_s if stream.compacted_view_ages else None,
        retention_bytes=stream.compacted_retention_bytes if stream.compacted_view_ages else None,
        broadcast_winners=broadcast_fits((current.keys if current else 0) + incoming.events - incoming.keyless),
    )
    generation = (current.generation if current else 0) + 1
    name = f"gen-{generation}"
    tmp = directory / f".{name}.{os.getpid()}.tmp"
    _phase(run, f"writing generation {generation}")
    if settings.CBR_SPARK_SHARED_STORE:
        previous = directory / current.directory if current else None
        stats = write_generation([Path(p) for p in pending.paths], previous, now, config, tmp)
    else:
        stats = write_generation_through_tier(run, pending, current, now, config, tmp)
    _durable_rename(tmp, directory / name)
    written = {"rows": stats.rows, "keys": stats.rows, "tombstones": stats.tombstones, "bytes": stats.bytes}
    pause = settings.CBR_COMPACTION_PAUSE_BEFORE_SWITCH_S  # tests: a kill lands between write and switch
    if pause:
        _phase(run, "written, switching")
        time.sleep(pause)
    with transaction.atomic():
        CompactedView.objects.update_or_create(
            stream=stream,
            defaults={
                "generation": generation,
                "directory": name,
                "horizon": pending.horizon,
                "keys": written["keys"],
                "tombstones": written["tombstones"],
                "bytes": written["bytes"],
                "switched_at": timezone.now(),
            },
        )
        _phase(
            run,
            "done",
            state=CompactionRun.State.SUCCEEDED,
            finished_at=timezone.now(),
            generation=generation,
            horizon=pending.horizon,
            events_in=incoming.events + (current.keys if current else 0),
            events_out=written["rows"],
            keys=written["keys"],
            keyless_dropped=incoming.keyless,
            tombstones_dropped=stats.tombstones_dropped,
            marked_by_retention=stats.marked,
            bytes_before=incoming.bytes + (current.bytes if current else 0),
            bytes_after=written["bytes"],
            missed=pending.missed,
            missed_events=pending.missed_events,
        )
    if pending.missed:
        log.warning(
            "compaction of %s: retention's max limit removed %s before the view read them", stream, pending.missed
        )
    remove_leftovers(stream)
    return run


BROADCAST_BYTES_PER_KEY = 400  # a winner's position is ~100 bytes in the driver: a quarter of it at most


def broadcast_fits(keys_at_most: int) -> bool:
    """Whether a run with at most this many keys (the previous generation's and one per new
    event) broadcasts its winners' positions (`compaction_job.latest_per_key`): when they take
    at most a quarter of the driver's memory (`CBR_SPARK_DRIVER_MEMORY`)."""

    memory = spark_session().sparkContext._jsc.sc().getConf().getSizeAsBytes("spark.driver.memory", "1g")
    return keys_at_most * BROADCAST_BYTES_PER_KEY <= memory


def write_generation(paths: list[Path], previous: Path | None, now: datetime, config, target: Path):
    """The Spark part of a run: the previous generation's files and the chunks' Parquet copies
    in, the new generation's files out (`target`), and what each step dropped."""
    compaction_job = load_compaction_job()

    spark = spark_session()
    before = spark.read.parquet(str(previous)) if previous else None
    if paths:
        events = spark.read.parquet(*[str(p) for p in paths])
    else:  # a run that only drops what aged (a quiet stream): the view over no new event
        assert before is not None
        events = compaction_job.no_new_events(before)
    result = compaction_job.compact_with_stats(before, events, now, config)
    # one Spark job: reads the input once, writes the view, and counts (observations)
    compaction_job.in_key_order(result.view).write.mode("overwrite").parquet(str(target))
    return result.stats()


def write_generation_through_tier(
    run: CompactionRun, pending: Pending, current: CompactedView | None, now: datetime, config, target: Path
):
    """`write_generation` for executors that do not see the data directory
    (`compact_through_tier`), with the stream's staging prefix in the tier emptied before and
    after (a run that died left its parts there)."""
    stream = run.stream
    staging = f"{stream.storage_key}/compaction-staging/"
    tiering.delete_prefix(staging)
    previous = None
    if current is not None:
        recorded = tiering.copied_for_executors(stream)  # the current generation's files mirrored
        prefix = f"compacted/{stream.storage_key}/{current.directory}/"
        files = sorted((f.path, f.crc32c) for f in recorded.files if f.path.startswith(prefix))
        previous = [(tiering.beside_key(stream, path), crc) for path, crc in files if path.endswith(".parquet")]
    inputs = [(key, crc) for key, crc in zip(pending.paths, pending.crcs, strict=True) if crc is not None]
    try:
        _, stats = compact_through_tier(inputs, previous, now, config, f"{staging}{run.pk}", target)
    finally:
        tiering.delete_prefix(staging)
    return stats


def compact_through_tier(
    inputs: list[tuple[str, str]], previous: list[tuple[str, str]] | None, now: datetime, config, staging: str, target
):
    """The Spark part of a run whose executors do not see the data directory: the chunks'
    copies and the previous generation's files read from the tier (key and CRC-32C, each
    checked), the new generation's parts written to the tier under `staging` by the executors,
    then brought here into `target` (a generation is served from the data directory). The parts'
    objects (key, CRC-32C) and what each step dropped; the caller deletes `staging`."""
    compaction_job, tier_io = load_compaction_job(), load_tier_io()
    spark = spark_session()
    url = settings.CBR_TIER_URL
    tier = tiering.tier()
    if tier is None:
        raise TierError("executors without the data directory read through long-term storage: set CBR_TIER_URL")
    before = tier_io.view_frame(spark, url, previous) if previous is not None else None
    if inputs:
        events = tier_io.chunk_copies_frame(spark, url, inputs)
    else:  # a run that only drops what aged (a quiet stream): the view over no new event
        assert before is not None
        events = compaction_job.no_new_events(before)
    result = compaction_job.compact_with_stats(before, events, now, config)
    view = compaction_job.in_key_order(result.view)
    written = tier_io.write_objects(view, url, staging)
    target.mkdir(parents=True, exist_ok=True)
    for i, part in enumerate(written):
        (target / f"part-{i:05d}.parquet").write_bytes(tier.get(part["key"], part["crc32c"]))
    if not written:
        (target / "part-00000.parquet").write_bytes(tier_io.empty_parquet(view))
    return [(part["key"], part["crc32c"]) for part in written], result.stats()


WARM_UP_EVENTS = 300_000  # enough for the JIT to compile the hot loops, ~10 s of a worker's start


def _made_up_chunk(path: Path, first_offset: int, events: int, keys: int, now: datetime) -> Path:
    """A Parquet copy of `events` events over `keys` keys, on two segments (every fifth a
    tombstone), for the warm-up."""
    key = [f"key-{i % keys:08d}".encode() for i in range(events)]
    columns = {
        "segment": [str(i % 2) for i in range(events)],
        "offset": [first_offset + i // 2 for i in range(events)],
        "published_at": [now] * events,
        "deliver_at": [None] * events,
        "cum_size": [None] * events,
        "routing_key": key,
        "key": key,
        "headers": [None] * events,
        "payload": [b"" if i % 5 == 0 else b"v" * 100 for i in range(events)],
        "payload_size": [0 if i % 5 == 0 else 100 for i in range(events)],
    }
    pq.write_table(pa.table(columns, schema=PARQUET_SCHEMA), path, compression="zstd")
    return path


def warm_up(events: int = WARM_UP_EVENTS) -> list:
    """Three runs over made-up events in a scratch directory — a first generation of `events`
    events, one over it, one with the compacted retention — through `write_generation`: a
    compactor does this when it starts, so that its first real run does not also pay for
    starting Spark, loading classes, generating the plans' code (cached by its text, which does
    not depend on the data) and the JIT's first compilations of the hot loops. Returns the runs'
    stats."""
    compaction_job = load_compaction_job()

    now = datetime.now(UTC)
    keys = max(1, events // 10)
    with tempfile.TemporaryDirectory(prefix="cbr-compaction-warm-up-") as scratch:
        root = Path(scratch)
        copies = [
            _made_up_chunk(root / "0.parquet", 0, events, keys, now),  # each after the one before
            _made_up_chunk(root / "1.parquet", events, 40, keys, now),
            _made_up_chunk(root / "2.parquet", events + 20, 40, keys, now),
        ]
        compact = compaction_job.CompactionSettings(delete_retention_s=0)
        with_retention = compaction_job.CompactionSettings(
            delete_retention_s=0, retention_s=3600, retention_bytes=100 * events
        )
        if not settings.CBR_SPARK_SHARED_STORE:
            return _warm_up_through_tier(copies, root, now, compact, with_retention)
        return [
            write_generation(copies[:1], None, now, compact, root / "gen-1"),
            write_generation(copies[1:2], root / "gen-1", now, compact, root / "gen-2"),
            write_generation(copies[2:], root / "gen-2", now, with_retention, root / "gen-3"),
        ]


def _warm_up_through_tier(copies: list[Path], root: Path, now: datetime, compact, with_retention) -> list:
    """`warm_up`'s three runs as executors that do not see the data directory make them: the
    made-up copies put in the tier under a scratch prefix, deleted after."""
    tier = tiering.tier()
    if tier is None:
        raise TierError("executors without the data directory read through long-term storage: set CBR_TIER_URL")
    scratch = f"compaction-warm-up/{uuid.uuid4().hex}/"
    try:
        inputs = []
        for copy in copies:
            stored = tier.put(f"{scratch}{copy.name}", copy.read_bytes())
            inputs.append((stored.key, stored.crc32c))
        gen1, first = compact_through_tier(inputs[:1], None, now, compact, f"{scratch}gen-1", root / "gen-1")
        gen2, second = compact_through_tier(inputs[1:2], gen1, now, compact, f"{scratch}gen-2", root / "gen-2")
        _, third = compact_through_tier(inputs[2:], gen2, now, with_retention, f"{scratch}gen-3", root / "gen-3")
        return [first, second, third]
    finally:
        tiering.delete_prefix(scratch)


def _durable_rename(tmp: Path, target: Path) -> None:
    for path in tmp.iterdir():
        with open(path, "rb") as f:
            os.fsync(f.fileno())
    if target.exists():  # a generation written by a run that died before switching to it
        shutil.rmtree(target)
    os.replace(tmp, target)
    fd = os.open(target.parent, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def remove_leftovers(stream: Stream) -> int:
    """Delete every generation but the current one (the old one after a switch; one written by a
    run that died before switching; temporary directories)."""
    directory = view_dir(stream)
    if not directory.exists():
        return 0
    current = CompactedView.objects.filter(stream=stream).values_list("directory", flat=True).first()
    gone = 0
    for path in directory.iterdir():  # only the lock's holder calls this: nothing else writes here
        if path.name != current:
            shutil.rmtree(path, ignore_errors=True)
            gone += 1
    return gone
