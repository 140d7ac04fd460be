"""Copying a stream's sealed chunks to the tier (`do_offload`, beat's round `offload_due`, `POST
…/offload/`), recording them (`TierObject`), releasing their local copies `CBR_TIER_LOCAL_KEEP_S`
after a verified upload (the store then reads them back: store/segment/release.py,
store/tier/reading.py), and what waits for its copy (`offload_state`) and what a stream holds in
the tier (`tier_usage`). It must never delete an object: deletion.py does."""

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
from django.db.models import Count, Q, Sum

from store import locks
from store.offload import SealedFile, copy_to_tier, sealed_files, tier_key
from store.redis_connection import get_redis
from store.segment import LocalCopyDiffers
from store.tier.base import TierError
from store.tier.reading import TieredStub
from streams import wait_stats
from streams.logs import stream_log
from streams.models import Stream, TierFile, TierObject
from streams.tiering.beside import BESIDE, beside_changes, mirror_beside
from streams.tiering.tier import OFFLOAD_LOCK_S, Recorded, recorded_for, tier

log = logging.getLogger(__name__)


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
    if not due and not beside_changes(stream, recorded) and not _releasable(stream, recorded, later):
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


def copied_for_executors(stream: Stream) -> Recorded:
    """Every sealed file of the stream copied to the tier now, whatever its age, and the files
    beside its log mirrored: what executors that do not see the data directory read (a
    compaction's, `CBR_SPARK_SHARED_STORE=false`). Waits out another process copying them
    (`OFFLOAD_LOCK_S` at most); the stream's records, these copies included."""
    if tier() is None:
        raise TierError("executors without the data directory read through long-term storage: set CBR_TIER_URL")
    deadline = time.monotonic() + OFFLOAD_LOCK_S
    while True:
        with offload_lock(stream) as got:
            if got:
                recorded = recorded_for([stream])[stream.pk]
                recorded.objects.extend(_copy(stream, [p.file for p in pending(stream, recorded) or []]))
                mirror_beside(stream, recorded)
                return recorded
        if time.monotonic() > deadline:
            raise TierError(f"another process has been copying {stream.full_name}'s files for too long")
        time.sleep(0.2)


def record_copies(stream: Stream, copies: list[tuple[str, int, int, int, str]]) -> None:
    """Record columnar copies an executor wrote to the tier itself (segment, base, end, size,
    CRC-32C): from now on they are the stream's objects as any offloaded copy."""
    TierObject.objects.bulk_create(
        [
            TierObject(stream=stream, segment_id=seg, base=base, end=end, kind="parquet", size=size, crc32c=crc)
            for seg, base, end, size, crc in copies
        ],
        ignore_conflicts=True,
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
