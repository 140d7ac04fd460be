"""Long-term storage for streams (docs/design/long-term-storage.md): sealed files copied to the
tier `CBR_TIER_URL` names and recorded (`TierObject`), and the objects deleted with what retention
or a stream's deletion deletes. Without a tier every function here does nothing.

Copies are made by beat and `POST …/offload/`, of sealed chunks and of the files beside the log
(delayed-index snapshots, the compacted view: `TierFile`); `CBR_TIER_LOCAL_KEEP_S` after a
chunk's verified upload its local copy is released (the store reads it back from the tier:
store/segment/release.py, store/tier/reading.py); `restore` rebuilds a lost data directory."""

from __future__ import annotations

import contextlib
import logging
import os
import time
from contextlib import AbstractContextManager
from dataclasses import dataclass, replace
from pathlib import Path

import redis
from django.conf import settings
from django.db import transaction
from django.db.models import Count, Q, Sum

from store import framing, locks
from store.ends import Head
from store.files import write_atomically
from store.offload import KINDS, SealedFile, copy_to_tier, sealed_files, tier_key
from store.redis_connection import get_redis
from store.segment import LocalCopyDiffers
from store.tier.base import Tier, TierError
from store.tier.opening import tier_for
from store.tier.reading import TieredStub
from streams import wait_stats
from streams.logs import stream_log
from streams.models import Stream, TierFile, TierObject

log = logging.getLogger(__name__)
OFFLOAD_LOCK_S = 300


def tier() -> Tier | None:
    """The deployment's tier, or None (everything stays on CBR_DATA_DIR)."""
    return tier_for(settings.CBR_TIER_URL)


@dataclass(frozen=True)
class Offloaded:
    objects: int = 0
    bytes: int = 0
    released: int = 0  # chunks whose local copy was released
    freed: int = 0  # local bytes that freed
    oldest_waiting: float | None = None  # when the oldest sealed file not copied yet was sealed
    waiting_bytes: int = 0  # and the bytes of those files


@dataclass(frozen=True)
class Pending:
    file: SealedFile
    size: int


@dataclass
class Recorded:
    """What the database records of a stream's copies, read once for a round's batch of streams
    (`recorded_for`) or for one stream; copies made during the round are added to it."""

    objects: list[TierObject]
    files: list[TierFile]


def recorded_for(streams: list[Stream]) -> dict[int, Recorded]:
    """Two queries for any number of streams."""
    out = {s.pk: Recorded([], []) for s in streams}
    for row in TierObject.objects.filter(stream_id__in=list(out)):
        out[row.stream_id].objects.append(row)
    for file in TierFile.objects.filter(stream_id__in=list(out)):
        out[file.stream_id].files.append(file)
    return out


def pending(stream: Stream, recorded: Recorded | None = None) -> list[Pending] | None:
    """The stream's sealed files not in the tier yet, whatever their age; None without a tier."""
    if tier() is None:
        return None
    recorded = recorded or recorded_for([stream])[stream.pk]
    known = {(r.segment_id, r.base, r.kind) for r in recorded.objects}
    out = []
    for f in sealed_files(stream_log(stream)):
        if (f.segment, f.base, f.kind) not in known:
            with contextlib.suppress(FileNotFoundError):
                out.append(Pending(f, f.path.stat().st_size))
    return out


def do_offload(
    stream: Stream, now: float | None = None, *, all_sealed: bool = False, recorded: Recorded | None = None
) -> Offloaded:
    """Copy the stream's sealed files that are not in the tier yet and were sealed at least
    `CBR_TIER_AFTER_S` ago (`all_sealed`: whatever their age, `POST …/offload/`), each verified
    by reading it back, and record them; mirror its files beside the log; release the local
    copies whose time came. Safe to run again after a crash at any point (a copy whose row did
    not commit is written again as the same bytes: a no-op) and beside another run (rows are
    made once; the tier refuses other bytes under a key). The stream's lease is taken only when
    there is something to do: a round over quiet streams costs no Redis round trip each."""
    if tier() is None:
        return Offloaded()
    recorded = recorded or recorded_for([stream])[stream.pk]
    now = time.time() if now is None else now
    files = pending(stream, recorded) or []
    due = [p.file for p in files if all_sealed or now - p.file.sealed_at >= settings.CBR_TIER_AFTER_S]
    waiting = [p for p in files if p.file not in due]
    idle = Offloaded(
        oldest_waiting=min((p.file.sealed_at for p in waiting), default=None),
        waiting_bytes=sum(p.size for p in waiting),
    )
    later = max(now, time.time())  # copies made in this round count from after them
    if not due and not _beside_changes(stream, recorded) and not _releasable(stream, recorded, later):
        return idle
    with offload_lock(stream) as got:
        if not got:  # another process is copying this stream's files: never one file twice at once
            return idle
        made = _copy(stream, due)
        recorded.objects.extend(made)
        files_made, size = mirror_beside(stream, recorded)
        released, freed = release_due(stream, max(later, time.time()), recorded)
        return replace(
            idle,
            objects=len(made) + files_made,
            bytes=sum(r.size for r in made) + size,
            released=released,
            freed=freed,
        )


def offload_lock(stream: Stream) -> AbstractContextManager[bool]:
    """One process at a time copies a stream's files (a lease: freed at once by a holder killed
    on this machine, by one elsewhere within `OFFLOAD_LOCK_S`)."""
    return locks.lease(f"cbr:tier:{stream.storage_key}:lock", OFFLOAD_LOCK_S)


def _copy(stream: Stream, due: list[SealedFile]) -> list[TierObject]:
    """Each file copied, verified and recorded; the rows made."""
    target = tier()
    assert target is not None
    rows = []
    for f in due:
        began = time.monotonic()
        try:
            stored = copy_to_tier(target, stream.storage_key, f)
        except TierError:
            wait_stats.counts.add("tier:error:put")
            raise
        wait_stats.counts.observe("tier:offload", wait_stats.OFFLOAD_BUCKETS, time.monotonic() - began)
        if stored is not None:
            rows.append(
                TierObject(
                    stream=stream,
                    segment_id=f.segment,
                    base=f.base,
                    end=f.end,
                    kind=f.kind,
                    size=stored.size,
                    crc32c=stored.crc32c,
                )
            )
    TierObject.objects.bulk_create(rows, ignore_conflicts=True)
    return rows


# the directories under CBR_DATA_DIR that hold a stream's files beside its log (`TierFile`): the
# delayed index's snapshots (streams.delaying.buckets) and the compacted view's generations
# (compaction.runs), each file written once under its name
BESIDE = ("delayed", "compacted")


def beside_files(stream: Stream) -> dict[str, Path]:
    """The stream's files beside its log, by their path under CBR_DATA_DIR (temporaries, whose
    names start with a dot, left out)."""
    root = Path(settings.CBR_DATA_DIR)
    out = {}
    for top in BESIDE:
        for dirpath, dirnames, names in os.walk(root / top / stream.storage_key):
            dirnames[:] = [d for d in dirnames if not d.startswith(".")]
            for name in names:
                if not name.startswith("."):
                    path = Path(dirpath) / name
                    out[str(path.relative_to(root))] = path
    return out


def beside_key(stream: Stream, path: str) -> str:
    """A file's key in the tier: the stream's storage key first (its objects share one prefix),
    then the kind of file and the rest of its path (`<storage key>/delayed/<name>.parquet`)."""
    top, _, rest = path.partition("/")
    return f"{stream.storage_key}/{top}/{rest.partition('/')[2]}"


def _beside_plan(stream: Stream, recorded: Recorded) -> tuple[dict[str, Path], dict[str, TierFile]]:
    """The files beside the log to copy (by path), and the recorded copies whose file went here
    while its directory stayed (by key)."""
    root = Path(settings.CBR_DATA_DIR)
    local = beside_files(stream)
    rows = {r.path: r for r in recorded.files}
    copy = {path: file for path, file in local.items() if path not in rows}
    gone = {
        beside_key(stream, path): row
        for path, row in rows.items()
        if path not in local and (root / path.split("/", 2)[0] / stream.storage_key).is_dir()
    }
    return copy, gone


def _beside_changes(stream: Stream, recorded: Recorded) -> bool:
    copy, gone = _beside_plan(stream, recorded)
    return bool(copy or gone)


def mirror_beside(stream: Stream, recorded: Recorded | None = None) -> tuple[int, int]:
    """Copy the stream's files beside its log that the tier does not hold yet (each verified, as a
    chunk is), and delete the copies of those that went here (a bucket merged, a generation
    replaced), unless the whole directory went (a lost disk: the copies are what a restore brings
    back). Local copies stay: they are what reads and recovery use. Files copied and bytes."""
    target = tier()
    if target is None:
        return 0, 0
    recorded = recorded or recorded_for([stream])[stream.pk]
    copy, gone = _beside_plan(stream, recorded)
    made = []
    for path, file in copy.items():
        try:
            data = file.read_bytes()
        except FileNotFoundError:
            continue  # replaced meanwhile
        stored = target.put(beside_key(stream, path), data)
        target.get(stored.key, stored.crc32c)
        made.append(TierFile(stream=stream, path=path, size=stored.size, crc32c=stored.crc32c))
    TierFile.objects.bulk_create(made, ignore_conflicts=True)
    if gone:
        refused = set(target.delete_many(list(gone)))
        TierFile.objects.filter(pk__in=[r.pk for k, r in gone.items() if k not in refused]).delete()
    recorded.files = [f for f in recorded.files if beside_key(stream, f.path) not in gone] + made
    return len(made), sum(f.size for f in made)


def restore_beside(stream: Stream) -> int:
    """Bring back the stream's files beside its log that are not here (a lost disk), each checked
    against its recorded checksum; how many."""
    target = tier()
    if target is None:
        return 0
    root = Path(settings.CBR_DATA_DIR)
    brought = 0
    for row in TierFile.objects.filter(stream=stream):
        path = root / row.path
        if path.exists():
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(path, target.get(beside_key(stream, row.path), row.crc32c))
        brought += 1
    return brought


def _held_locally(stream: Stream, recorded: Recorded) -> list[TierObject]:
    """The recorded chunk copies whose local file is still here, oldest copy first."""
    log_ = stream_log(stream)
    return sorted(
        (
            r
            for r in recorded.objects
            if r.kind == "chunk"
            and r.segment_id in log_.layout.held_ids
            and log_.segment(r.segment_id).chunk_path(r.base).exists()
        ),
        key=lambda r: r.offloaded_at,
    )


def _releasable(stream: Stream, recorded: Recorded, now: float) -> bool:
    held = _held_locally(stream, recorded)
    return bool(held) and held[0].offloaded_at.timestamp() + settings.CBR_TIER_LOCAL_KEEP_S <= now


def release_due(stream: Stream, now: float | None = None, recorded: Recorded | None = None) -> tuple[int, int]:
    """Release the local copy of each chunk of the stream whose verified upload is at least
    `CBR_TIER_LOCAL_KEEP_S` old (its columnar copy with it, when that was uploaded too): the store
    keeps a stub and reads the chunk back from the tier. A local file that is not what the tier
    holds is kept and logged. The chunks released and the local bytes that freed."""
    now = time.time() if now is None else now
    recorded = recorded or recorded_for([stream])[stream.pk]
    cutoff = now - settings.CBR_TIER_LOCAL_KEEP_S
    parquets = {(r.segment_id, r.base): r for r in recorded.objects if r.kind == "parquet"}
    log_ = stream_log(stream)
    released = freed = 0
    for chunk in _held_locally(stream, recorded):
        if chunk.offloaded_at.timestamp() > cutoff:
            break  # oldest first: the rest are younger
        segment_id, base = chunk.segment_id, chunk.base
        segment = log_.segment(segment_id)
        parquet = parquets.get((segment_id, base))
        stub = TieredStub(
            key=tier_key(stream.storage_key, segment_id, base, "chunk"),
            size=chunk.size,
            crc32c=chunk.crc32c,
            cum_size=segment.chunk_cum_size(base),
            parquet_key=None if parquet is None else tier_key(stream.storage_key, segment_id, base, "parquet"),
            parquet_size=None if parquet is None else parquet.size,
            parquet_crc32c=None if parquet is None else parquet.crc32c,
        )
        try:
            done = segment.release_to_tier(base, stub)
        except (LocalCopyDiffers, FileNotFoundError) as e:
            log.warning("local copy of %s kept: %s", chunk, e)
            continue
        released, freed = released + (done > 0), freed + done
    return released, freed


ROUND_BATCH = 500  # streams whose records a round reads at once


def offload_due(now: float | None = None) -> Offloaded:
    """`do_offload` of every stream that may have something to do (beat, every minute), one round
    at a time across the deployment (a round still running when the next minute comes makes that
    one a no-op); a stream the tier refuses is left for the next round, the others go on. A
    stream whose segments rolled no chunk and whose files beside the log did not change since its
    last round here, with nothing coming due, is passed over at the cost of a read of its ends
    (`_Unchanged`); the others' records are read for a batch of streams at once. What is waiting
    for its copy is kept in Redis for the dashboard and `/metrics` (`offload_state`)."""
    if tier() is None:
        return Offloaded()
    with locks.lease(ROUND_LOCK, OFFLOAD_LOCK_S) as got:
        if not got:
            return Offloaded()
        return _round(time.time() if now is None else now)


ROUND_LOCK = "cbr:tier:round"


def _round(now: float) -> Offloaded:
    total = Offloaded()
    waiting: dict[str, str] = {}
    batch: list[tuple[Stream, tuple]] = []

    def run(batch: list[tuple[Stream, tuple]]) -> None:
        nonlocal total
        recorded = recorded_for([stream for stream, _ in batch])
        for stream, signature in batch:
            try:
                done = do_offload(stream, now, recorded=recorded[stream.pk])
            except TierError as e:
                log.warning("offload of %s: %s", stream.full_name, e)
                continue
            entry = None if done.oldest_waiting is None else f"{done.oldest_waiting} {done.waiting_bytes}"
            if entry is not None:
                waiting[str(stream.pk)] = entry
            _UNCHANGED.note(stream.pk, signature, _wake_at(stream, done, recorded[stream.pk]), entry)
            total = Offloaded(
                total.objects + done.objects,
                total.bytes + done.bytes,
                total.released + done.released,
                total.freed + done.freed,
            )

    for stream in Stream.objects.all().iterator():
        signature = _signature(stream)
        unchanged, entry = _UNCHANGED.holds(stream.pk, signature, now)
        if unchanged:
            if entry is not None:
                waiting[str(stream.pk)] = entry  # still waiting, as its last round found
            continue
        batch.append((stream, signature))
        if len(batch) >= ROUND_BATCH:
            run(batch)
            batch = []
    if batch:
        run(batch)
    _record_waiting(waiting, now)
    return total


class _Unchanged:
    """Per process: each stream's signature (its segments' active chunks, its directories beside
    the log) at its last round, when something of it comes due (a copy after
    `CBR_TIER_AFTER_S`, a release after `CBR_TIER_LOCAL_KEEP_S`), and what waited then."""

    def __init__(self) -> None:
        self.seen: dict[int, tuple[tuple, float, str | None]] = {}

    def holds(self, pk: int, signature: tuple, now: float) -> tuple[bool, str | None]:
        """Whether the stream may be passed over, and what waited for its copy at its last round."""
        last = self.seen.get(pk)
        if last is None or last[0] != signature or now >= last[1]:
            return False, None
        return True, last[2]

    def note(self, pk: int, signature: tuple, wake_at: float, waiting: str | None) -> None:
        self.seen[pk] = (signature, wake_at, waiting)


_UNCHANGED = _Unchanged()


def _signature(stream: Stream) -> tuple:
    """What changes when a stream has something new to copy: a segment's active chunk (a chunk was
    sealed), a retirement (the layout), a directory beside the log (a file made or deleted)."""
    ends = stream_log(stream).ends()
    root = Path(settings.CBR_DATA_DIR)
    dirs = []
    for top in BESIDE:
        try:
            dirs.append(os.stat(root / top / stream.storage_key).st_mtime_ns)
        except FileNotFoundError:
            dirs.append(0)
    active = tuple(sorted((s, t.active_base) for s, (_, t) in ends.items()))
    return stream.storage_key, active, tuple(dirs), tuple(stream.layout.held_ids)


def _wake_at(stream: Stream, done: Offloaded, recorded: Recorded) -> float:
    """When the stream next has something to do even if nothing changes: its oldest file waiting
    for `CBR_TIER_AFTER_S`, or its oldest copy whose local file is still here reaching
    `CBR_TIER_LOCAL_KEEP_S`."""
    at = float("inf") if done.oldest_waiting is None else done.oldest_waiting + settings.CBR_TIER_AFTER_S
    held = _held_locally(stream, recorded)
    if held:
        at = min(at, held[0].offloaded_at.timestamp() + settings.CBR_TIER_LOCAL_KEEP_S)
    return at


WAITING_KEY = "cbr:tier:waiting"  # hash: stream id -> "<oldest sealed_at> <bytes>" of files not copied yet


def _record_waiting(waiting: dict[str, str], now: float) -> None:
    try:
        client = get_redis()
        pipe = client.pipeline()
        pipe.delete(WAITING_KEY)
        for stream_id, entry in waiting.items():
            pipe.hset(WAITING_KEY, stream_id, entry)
        pipe.set(f"{WAITING_KEY}:at", str(now))
        pipe.execute()
    except redis.RedisError as e:
        log.warning("offload's backlog not recorded: %s", e)


@dataclass(frozen=True)
class OffloadState:
    lag_s: float | None  # how long the oldest sealed file not copied yet has waited; None: none waits
    waiting_bytes: int
    streams_waiting: int
    round_at: float | None  # when the last round ended (None: no round yet)


def offload_state(now: float | None = None) -> OffloadState | None:
    """What waits for its copy to the tier as the last round left it (None without a tier)."""
    if tier() is None:
        return None
    now = time.time() if now is None else now
    client = get_redis()
    pipe = client.pipeline()
    pipe.hgetall(WAITING_KEY)
    pipe.get(f"{WAITING_KEY}:at")
    entries, at = pipe.execute()
    oldest, size = None, 0
    for value in entries.values():
        sealed_at, _, waiting = value.decode().partition(" ")
        oldest = float(sealed_at) if oldest is None else min(oldest, float(sealed_at))
        size += int(waiting)
    return OffloadState(
        None if oldest is None else max(0.0, now - oldest), size, len(entries), None if at is None else float(at)
    )


def publish_counts() -> None:
    """Add what this process counted of the tier (copies, their time, errors, reads of released
    chunks) into the figures `/metrics` shows; a worker calls it after its tier work (a web
    process's listener does it every second). Redis not answering keeps them for the next call."""
    try:
        wait_stats.flush(get_redis(), None)
    except redis.RedisError as e:
        log.warning("tier counts kept for later: %s", e)


def tier_usage(stream_ids: list[int]) -> dict[int, tuple[int, int]]:
    """Bytes and chunks of each stream in the tier (its chunks; their columnar copies and its files
    beside the log count in the bytes): two queries for any number of streams, none without a
    tier."""
    if tier() is None or not stream_ids:
        return {}
    rows = (
        TierObject.objects.filter(stream_id__in=stream_ids)
        .values("stream_id")
        .annotate(size=Sum("size"), chunks=Count("pk", filter=Q(kind="chunk")))
    )
    out = {r["stream_id"]: (r["size"], r["chunks"]) for r in rows}
    for r in TierFile.objects.filter(stream_id__in=stream_ids).values("stream_id").annotate(size=Sum("size")):
        size, chunks = out.get(r["stream_id"], (0, 0))
        out[r["stream_id"]] = (size + r["size"], chunks)
    return out


def delete_passed(streams: list[Stream], heads: dict[int, dict[str, int]] | None = None) -> dict[int, tuple[int, int]]:
    """After truncations: the tier's copies of what now lies wholly before each segment's head
    (or in a segment retired whole) go, objects first (in batches: a thousand a request on S3),
    then their rows. Objects the tier refuses keep their rows, and a tier that does not answer
    keeps them all, so the next cycle tries again: a cycle never waits on a tier that is down
    once per object. `heads`: the heads a truncation just wrote, by stream id and segment (the
    others are read). The objects and bytes that went, by stream id."""
    target = tier()
    if target is None or not streams:
        return {}
    by_pk = {s.pk: s for s in streams}
    rows = list(TierObject.objects.filter(stream_id__in=list(by_pk)))
    if not rows:
        return {}
    known = heads or {}
    read: dict[int, dict[str, int]] = {}

    def head_of(row: TierObject) -> int | None:
        """The segment's head: as the caller just wrote it, else read (None: retired, passed whole)."""
        head = known.get(row.stream_id, {}).get(row.segment_id)
        if head is not None:
            return head
        if row.stream_id not in read:
            ends = stream_log(by_pk[row.stream_id]).ends()
            read[row.stream_id] = {sid: h.offset for sid, (h, _) in ends.items()}
        return read[row.stream_id].get(row.segment_id)

    passed: dict[str, TierObject] = {}
    for row in rows:
        head = head_of(row)
        if head is None or row.end <= head:
            passed[tier_key(by_pk[row.stream_id].storage_key, row.segment_id, row.base, row.kind)] = row
    try:
        refused = set(target.delete_many(list(passed)))  # a thousand objects a request on S3
    except TierError as e:  # a tier that does not answer: every row kept for the next cycle
        log.warning("tier deletions left for the next cycle (%d objects): %s", len(passed), e)
        wait_stats.counts.add("tier:error:delete")
        publish_counts()
        refused = set(passed)
    if refused:
        log.warning("the tier refused to delete %d objects, left for the next cycle", len(refused))
    gone = [row for key, row in passed.items() if key not in refused]
    TierObject.objects.filter(pk__in=[r.pk for r in gone]).delete()
    out: dict[int, tuple[int, int]] = {}
    for row in gone:
        count, size = out.get(row.stream_id, (0, 0))
        out[row.stream_id] = (count + 1, size + row.size)
    return out


def sweep() -> int:
    """Objects no row names that nothing needs (beat's `tier-sweep`, hourly): those of streams
    that no longer exist (a deletion the tier refused), and those of chunks retention has
    passed (an upload whose row never committed, then a truncation: the chunk is gone here and
    began before the head). An object of a chunk still here is left: the next offload writes
    the same bytes and records it. How many objects went; a tier that does not answer stops the
    sweep until the next one."""
    target = tier()
    if target is None:
        return 0
    streams = {s.storage_key: s for s in Stream.objects.all()}
    known = {
        tier_key(key, seg, base, kind)
        for key, seg, base, kind in TierObject.objects.values_list("stream__storage_key", "segment_id", "base", "kind")
    }
    known.update(beside_key(stream, path) for stream, path in _files_by_stream(streams))
    heads: dict[str, dict[str, int]] = {}
    gone = 0
    try:
        for key in target.list_keys():
            if key in known:
                continue
            stream = streams.get(key.split("/", 1)[0])
            if stream is not None and not _passed(stream, key, heads):
                continue
            target.delete(key)
            gone += 1
    except TierError as e:
        log.warning("tier sweep stopped, the next one goes on: %s", e)
        wait_stats.counts.add("tier:error:sweep")
    return gone


def _files_by_stream(streams: dict[str, Stream]) -> list[tuple[Stream, str]]:
    by_pk = {s.pk: s for s in streams.values()}
    return [(by_pk[pk], path) for pk, path in TierFile.objects.values_list("stream_id", "path") if pk in by_pk]


def _passed(stream: Stream, key: str, heads: dict[str, dict[str, int]]) -> bool:
    """Whether an object of `stream` that no row names holds only what retention has passed, or
    is a copy of a file beside the log that is gone here (a bucket merged, a generation replaced,
    and the deletion of its copy refused then)."""
    parts = key.split("/")
    if len(parts) >= 3 and parts[1] in BESIDE:
        where = Path(settings.CBR_DATA_DIR) / parts[1] / stream.storage_key
        return where.is_dir() and not (where / "/".join(parts[2:])).exists()
    name = parts[-1].partition(".")
    if len(parts) != 3 or not name[0].isdigit() or name[2] not in KINDS:
        return False  # not a file the store names: not the sweep's to judge
    segment, base = parts[1], int(name[0])
    if segment not in stream.layout.held_ids:
        return segment in stream.layout.ids  # a retired segment's (an unknown one's: left alone)
    if stream.storage_key not in heads:
        heads[stream.storage_key] = {s: h.offset for s, (h, _) in stream_log(stream).ends().items()}
    log_ = stream_log(stream)
    # the chunk holding the head is never deleted here: a chunk gone that began before the head
    # lay wholly before it
    seg = log_.segment(segment)
    held = seg.chunk_path(base).exists() or seg.tiered_stub(base) is not None
    return base < heads[stream.storage_key][segment] and not held


def forget_stream(stream: Stream) -> None:
    """Inside a stream's deletion: once it commits, every object under the stream's key goes (its
    rows go with the stream). Objects the tier refuses to delete then are left for a sweep."""
    target = tier()
    if target is None:
        return
    prefix = f"{stream.storage_key}/"

    def delete_all() -> None:
        try:
            for key in list(target.list_keys(prefix)):
                target.delete(key)
        except TierError as e:
            log.warning("tier deletion of stream %s's objects, left for a sweep: %s", stream.full_name, e)
            wait_stats.counts.add("tier:error:delete")

    transaction.on_commit(delete_all)


@dataclass(frozen=True)
class Known:
    """What the database knows of a segment beyond its tiered chunks: its head (as the last
    truncation left it) and the highest offset and size anyone was told of (the segment's row as
    last refreshed, a reader group's hand-outs). Lower bounds: the restore starts no lower."""

    head: int = 0
    head_size: int = 0
    tail: int = 0
    tail_size: int = 0


@dataclass(frozen=True)
class SegmentRestored:
    segment: str
    chunks: int  # chunks brought back (read from the tier)
    head: int
    tail: int  # where appends go on
    lost: list[tuple[int, int]]  # [from, to) offsets whose events no tier holds
    skipped: str = ""  # why the segment was left as it was


@dataclass(frozen=True)
class Restored:
    segments: list[SegmentRestored]
    files: int  # files beside the log brought back (delayed-index snapshots, the compacted view)


def restore(stream: Stream, known: dict[str, Known]) -> Restored:
    """Rebuild the stream's segments whose directory was lost, from their chunks in the tier
    (`TierObject` rows) and what the database knows (`known`): every offloaded chunk back (as a
    stub read through the tier), the head where the last truncation left it, and appends going on
    at or past the highest offset anyone may have seen; and its files beside the log that are
    missing (`TierFile`: the delayed index's snapshots, the compacted view). What no tier holds is
    reported lost: the chunks that were never sealed or never copied. A segment that still has
    chunks is left."""
    target = tier()
    if target is None:
        raise TierError("no tier is configured (CBR_TIER_URL)")
    log_ = stream_log(stream)
    rows: dict[str, list[TierObject]] = {}
    for row in TierObject.objects.filter(stream=stream).order_by("segment_id", "base"):
        rows.setdefault(row.segment_id, []).append(row)
    files = restore_beside(stream)
    out = []
    for segment_id in log_.held_ids:
        segment = log_.segment(segment_id)
        if segment.chunk_bases():
            out.append(SegmentRestored(segment_id, 0, 0, 0, [], "it has chunks on disk"))
            continue
        out.append(
            _restore_segment(target, stream, segment_id, rows.get(segment_id, []), known.get(segment_id, Known()))
        )
    return Restored(out, files)


def _restore_segment(
    target: Tier, stream: Stream, segment_id: str, rows: list[TierObject], known: Known
) -> SegmentRestored:
    log_ = stream_log(stream)
    segment = log_.segment(segment_id)
    chunks = [r for r in rows if r.kind == "chunk"]
    parquets = {r.base: r for r in rows if r.kind == "parquet"}
    stubs: list[tuple[int, TieredStub]] = []
    lost: list[tuple[int, int]] = []
    end, cum_end = 0, 0
    for i, row in enumerate(chunks):
        key = tier_key(stream.storage_key, segment_id, row.base, "chunk")
        if i == len(chunks) - 1:  # the last one read whole: where its records end
            data = target.get(key, row.crc32c)
            header_base, cum = framing.decode_chunk_header(data)
            cum_end = framing.scan(data, framing.CHUNK_HEADER_SIZE, row.base, cum).cum_size
        else:
            header_base, cum = framing.decode_chunk_header(target.get(key, start=0, length=framing.CHUNK_HEADER_SIZE))
        if header_base != row.base:
            raise TierError(f"{key} holds the chunk of base {header_base}, not {row.base}")
        if i and row.base > chunks[i - 1].end:
            lost.append((chunks[i - 1].end, row.base))  # a sealed chunk never copied
        parquet = parquets.get(row.base)
        stubs.append(
            (
                row.base,
                TieredStub(
                    key=key,
                    size=row.size,
                    crc32c=row.crc32c,
                    cum_size=cum,
                    parquet_key=None
                    if parquet is None
                    else tier_key(stream.storage_key, segment_id, row.base, "parquet"),
                    parquet_size=None if parquet is None else parquet.size,
                    parquet_crc32c=None if parquet is None else parquet.crc32c,
                ),
            )
        )
        end = row.end
    if not stubs:  # nothing was ever copied: every event the segment held is lost
        tail = max(known.head, known.tail)
        size = max(known.head_size, known.tail_size)
        segment.restore_from_tier([], Head(tail, size), tail, size, stream.layout.is_sealed(segment_id))
        return SegmentRestored(segment_id, 0, tail, tail, [(known.head, tail)] if tail > known.head else [])
    first = stubs[0][0]
    if first > known.head:  # the head's chunk was never copied (a truncation deletes copies only behind it)
        lost.insert(0, (known.head, first))
    tail = max(end, known.tail)
    if tail > end:  # the active chunk, never sealed, and what was sealed but not copied since the last copy
        lost.append((end, tail))
        cum_end = max(cum_end, known.tail_size)
    sealed = stream.layout.is_sealed(segment_id)
    segment.restore_from_tier(stubs, Head(first, stubs[0][1].cum_size), tail, cum_end, sealed)
    head = max(known.head, first)
    if head > first:
        segment.move_head(head)
    return SegmentRestored(segment_id, len(stubs), head, tail, lost)
