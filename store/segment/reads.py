"""Reading a segment: its committed tail as readers see it, its records (decoded, or as stored
frames), the size before an offset, the offset at a time, and a summary (`SegmentInfo`). A read
sees only what the committed tail covers, and meets a chunk that a truncation deleted under it
by moving on to the new head. It must never write a record or move a head; it writes a tail
only where none can be read (a segment not made yet, or a tail lost or torn), through recovery
under the segment's lock, and a segment that a full disk keeps from being made reads as empty.
No Django, no database.
"""

from __future__ import annotations

import bisect
import os
import time
from array import array
from collections.abc import Iterator
from dataclasses import dataclass

from crc32c import crc32c

from store import boot, framing
from store.ends import Head, Tail
from store.framing import Frame, Record
from store.large import PIECE_BYTES
from store.segment.clock import epoch_ms
from store.segment.errors import NO_SPACE_ERRNOS, CorruptSegment
from store.segment.recovery import SegmentRecovery
from store.tier.base import TierMissing
from store.tier.opening import tier_for
from store.tier.reading import DEFAULT_CACHE_DIR, ChunkBytes, cache_for, open_tiered


@dataclass(frozen=True, slots=True)
class SegmentInfo:
    head: int
    tail: int
    head_size: int
    tail_size: int
    chunk_count: int
    physical_bytes: int  # bytes of chunk files on disk (framing included)
    first_chunk_base: int
    local_chunks: int = 0  # chunks on disk (the others were released to the tier)


class SegmentReads(SegmentRecovery):
    """Reads of records and of the segment's ends, sizes and times."""

    def create(self) -> Tail:
        """Make the segment (directory, head, first chunk) unless it exists; its committed tail.
        A disk that cannot take it raises (`StorageFull`, or the OSError of a file it needed)."""
        with self._locked():
            return self._tail_as_written()  # a segment that exists keeps its writer's tail

    def committed_tail(self) -> Tail:
        """The tail as readers see it. Creates the segment if it does not exist yet; one that
        cannot be made for lack of space reads as empty (reading needs no space: its first
        append makes it, or is refused with `StorageFull`)."""
        for _ in range(3):
            tail = self._read_tail()
            if tail is not None:
                return tail
            time.sleep(0.001)
        with self._locked():
            try:
                return self._recovered_tail()
            except OSError as exc:
                if exc.errno not in NO_SPACE_ERRNOS or self.chunk_bases():
                    raise
                head = self.read_head()
                return Tail(
                    head.offset, framing.CHUNK_HEADER_SIZE, head.offset, head.cum_size, epoch_ms(), 0, boot.BOOT_ID
                )

    def info(self) -> SegmentInfo:
        tail = self.committed_tail()
        head = self.read_head()
        bases = self.chunk_bases()
        physical = local = 0
        for base in bases:
            try:
                physical += os.stat(self.chunk_path(base)).st_size
                local += 1
            except FileNotFoundError:
                pass
        return SegmentInfo(
            head=head.offset,
            tail=tail.next_offset,
            head_size=head.cum_size,
            tail_size=tail.cum_size,
            chunk_count=len(bases),
            physical_bytes=physical,
            local_chunks=local,
            first_chunk_base=bases[0] if bases else head.offset,
        )

    def read(
        self,
        from_offset: int,
        max_events: int,
        max_bytes: int = 8 * 1024 * 1024,
        ends: tuple[Head, Tail] | None = None,
    ) -> list[Record]:
        """Up to `max_events` committed records from `from_offset` (raised to the head). `ends`:
        the head and committed tail the caller has just read (`ends()`; a reader group's read
        reads every segment's at once), read again here otherwise: the read is then the one it
        would have been a moment earlier (a chunk a truncation deleted since is met as below)."""
        return self._read(from_offset, max_events, max_bytes, ends, frames=False)

    def read_frames(
        self, from_offset: int, max_events: int, max_bytes: int = 8 * 1024 * 1024, ends: tuple[Head, Tail] | None = None
    ) -> list[Frame]:
        """`read`, the records left in their stored form (`framing.Frame`: verified, not decoded)."""
        return self._read(from_offset, max_events, max_bytes, ends, frames=True)

    def _read(
        self, from_offset: int, max_events: int, max_bytes: int, ends: tuple[Head, Tail] | None, frames: bool
    ) -> list:
        if max_events <= 0:
            return []
        read_head, tail = ends if ends is not None else (self.read_head(), self.committed_tail())
        start = max(from_offset, read_head.offset)
        out: list = []
        payload_bytes = 0
        while start < tail.next_offset and len(out) < max_events and payload_bytes < max_bytes:
            following: int | None = None  # the next chunk's base, after a sealed one
            if start >= tail.active_base:
                # the active chunk, which the tail names: a consumer that keeps up reads only
                # there, without listing the segment's directory (a month's chunks, per read)
                base = tail.active_base
            else:
                bases = self.chunk_bases()
                i = bisect.bisect_right(bases, start) - 1
                if i < 0:
                    # The chunk was deleted under us by a truncation: continue from the new head.
                    new_start = max(start, self.read_head().offset)
                    if new_start == start:
                        raise CorruptSegment(f"{self.path}: no chunk holds offset {start}")
                    start = new_start
                    continue
                base = bases[i]
                following = bases[i + 1] if i + 1 < len(bases) else None
            sealed = base != tail.active_base
            limit = None if sealed else tail.committed_pos
            got = self._read_chunk(base, start, max_events - len(out), limit, sealed, frames)
            if not got:
                if sealed and following is not None:
                    start = following
                    continue
                break
            out.extend(got)
            # the records are consecutive: their payload bytes are where the last one ends less
            # where the first one starts (cum_size), not a sum over thousands of records (a
            # frame's whole length stands for its payload's: the cap is a bound, not a count)
            last = got[-1]
            last_size = last.stop - last.start if type(last) is Frame else len(last.payload)
            payload_bytes += last.cum_size + last_size - got[0].cum_size
            start = got[-1].offset + 1
        return out

    def _read_chunk(
        self, base: int, start: int, max_events: int, limit: int | None, sealed: bool, frames: bool = False
    ) -> list:
        offsets, positions = self._index(base, None if sealed else limit)
        i = bisect.bisect_right(offsets, start) - 1
        if i < 0:
            return self._read_chunk_from(
                base, start, max_events, limit, framing.CHUNK_HEADER_SIZE, offsets, positions, frames
            )
        try:
            out = self._read_chunk_from(base, start, max_events, limit, positions[i], offsets, positions, frames)
            if out and out[0].offset == start:
                return out
        except CorruptSegment:
            pass
        # The entry does not lead to `start` (callers ask only for offsets the chunk holds): an
        # index that a crash left stale (it is a hint, written without fsync). The chunk itself
        # is read from its start instead.
        self._index_cache.pop(base, None)
        return self._read_chunk_from(
            base, start, max_events, limit, framing.CHUNK_HEADER_SIZE, array("Q"), array("Q"), frames
        )

    def _read_chunk_from(
        self,
        base: int,
        start: int,
        max_events: int,
        limit: int | None,
        pos: int,
        offsets: array,
        positions: array,
        frames: bool = False,
    ) -> list:
        try:
            return self._read_chunk_bytes(base, start, max_events, limit, pos, offsets, positions, frames)
        except TierMissing:
            if self.tiered_stub(base) is None:
                return []  # a truncation deleted the released chunk (its stub, then its object) under us
            raise

    def _read_chunk_bytes(
        self,
        base: int,
        start: int,
        max_events: int,
        limit: int | None,
        pos: int,
        offsets: array,
        positions: array,
        frames: bool,
    ) -> list:
        chunk = self._open_chunk(base, pos, whole=max_events > 1)
        if chunk is None:
            return []
        out: list = []
        decode = framing.read_frames if frames else framing.read_records
        try:
            end = limit if limit is not None else chunk.size
            block = 4096 if max_events == 1 else 1024 * 1024  # size_till wants one record
            j = bisect.bisect_left(offsets, start + max_events)
            if max_events > 1 and j < len(offsets):
                # the index says where the record after the last one wanted starts: read that
                # much, not a whole MiB (a read of 1000 events of ~100 B wants ~150 KB, from
                # four segments); the loop below reads on if it falls short
                block = min(block, max(4096, positions[j] - pos))
            while pos < end and len(out) < max_events:
                data = chunk.pread(min(block, end - pos), pos)
                got, consumed = decode(data, start, max_events - len(out))
                out += got
                if consumed == 0:
                    if len(data) < end - pos:
                        block *= 2  # one record larger than the block: read more at once
                        continue
                    raise CorruptSegment(f"{self.chunk_path(base)}: bad record at {pos}")
                pos += consumed
        finally:
            chunk.close()
        return out

    def _open_chunk(self, base: int, pos: int, whole: bool) -> ChunkBytes | None:
        """The chunk's bytes for a read from file position `pos`: its file (a descriptor and
        pread, not a buffered file object: a read's every segment opens one), or, for a chunk
        released to the tier, what `open_tiered` gives (`whole`: the read wants more than one
        record). None when the chunk is gone (a truncation deleted it under the read)."""
        stub = self.known_stub(base)
        if stub is None:
            try:
                return ChunkBytes(fd=os.open(self.chunk_path(base), os.O_RDONLY))
            except FileNotFoundError:
                pass
            stub = self.tiered_stub(base)
            if stub is None:
                return None
            if len(self._stubs) > 4096:  # a bound, not an eviction policy: read again as needed
                self._stubs.clear()
            self._stubs[base] = stub
        config = self.config
        if not config.tier_url:
            raise CorruptSegment(f"{self.chunk_path(base)} lives in the tier {stub.key}, and no tier is configured")
        tier = tier_for(config.tier_url)
        assert tier is not None
        cache = cache_for(config.tier_cache_dir or DEFAULT_CACHE_DIR, config.tier_cache_bytes)
        return open_tiered(tier, cache, stub, pos, whole, config.tier_ranged_min_bytes)

    def large_payload(self, offset: int) -> LargePayload | None:
        """The payload of the large event at `offset`, to be read by range; None when the segment
        holds no event there (never written, or truncated away), or holds an event that is not
        large (`NotLarge`)."""
        head, tail = self.ends()
        if not head.offset <= offset < tail.next_offset:
            return None
        bases = self.chunk_bases()
        i = bisect.bisect_right(bases, offset) - 1
        if i < 0:
            return None
        base = bases[i]
        sealed = base != tail.active_base
        offsets, positions = self._index(base, None if sealed else tail.committed_pos)
        j = bisect.bisect_right(offsets, offset) - 1
        starts = [positions[j], framing.CHUNK_HEADER_SIZE] if j >= 0 else [framing.CHUNK_HEADER_SIZE]
        chunk = self._open_chunk(base, starts[0], whole=False)
        if chunk is None:
            return None
        try:
            end = chunk.size if sealed else tail.committed_pos
            for pos in starts:  # from the index's entry; from the chunk's start if that is stale
                found = framing.find_record(chunk.pread, pos, end, offset)
                if found is not None:
                    break
            else:
                raise CorruptSegment(f"{self.chunk_path(base)}: no record holds offset {offset}")
        except BaseException:
            chunk.close()
            raise
        if found.large_size is None:
            chunk.close()
            raise NotLarge(offset)
        return LargePayload(chunk, found)

    def size_till(self, offset: int) -> int:
        """Cumulative payload bytes of the segment before `offset` (docs/design/retention.md)."""
        tail = self.committed_tail()
        if offset == tail.next_offset:
            return tail.cum_size
        if offset > tail.next_offset or offset < 0:
            raise ValueError(f"offset {offset} is outside [0, {tail.next_offset}]")
        head = self.read_head()
        if offset == head.offset:
            return head.cum_size
        bases = self.chunk_bases()
        if bases and offset == bases[0]:
            return self.chunk_cum_size(bases[0])
        recs = self._read_chunk_at(offset)
        if recs is None:
            raise ValueError(f"offset {offset} lies in a deleted chunk")
        return recs.cum_size

    def offset_at_time(self, ms: int) -> int:
        """The offset of the first event published at or after `ms` (epoch milliseconds), from
        the head; the tail when every event held is older. Publish times never go back within a
        segment (the writer stamps them under the segment's lock), so a binary search over the
        offsets finds it: a few reads of one record, each found through the sparse index."""
        lo, hi = self.read_head().offset, self.committed_tail().next_offset
        while lo < hi:
            mid = (lo + hi) // 2
            rec = self._read_chunk_at(mid)
            if rec is None:  # truncated away under us: what is left starts later
                lo = max(mid + 1, self.read_head().offset)
            elif rec.published_ms < ms:
                lo = mid + 1
            else:
                hi = mid
        return lo

    def _read_chunk_at(self, offset: int) -> Record | None:
        tail = self.committed_tail()
        bases = self.chunk_bases()
        i = bisect.bisect_right(bases, offset) - 1
        if i < 0:
            return None
        base = bases[i]
        sealed = base != tail.active_base
        got = self._read_chunk(base, offset, 1, None if sealed else tail.committed_pos, sealed)
        return got[0] if got and got[0].offset == offset else None

    def ends(self) -> tuple[Head, Tail]:
        """Head and committed tail: two small file reads, for callers that need only the ends."""
        return self.read_head(), self.committed_tail()

    def sealed_chunks(self) -> list[int]:
        tail = self.committed_tail()
        return [b for b in self.chunk_bases() if b != tail.active_base]


class NotLarge(Exception):
    """The event asked for is not a large one: its payload is in its read's answer."""


class LargePayload:
    """A large event's payload where its chunk holds it: `size`, `pieces(first, last)` (the
    bytes from `first` to `last` inclusive, a piece at a time), `close()`. The chunk stays open
    while it is read: a truncation that deletes the chunk meanwhile does not cut the read short.
    A read of the whole payload checks the record's CRC as it goes and raises `CorruptSegment`
    instead of its last piece when it does not hold: a client never gets the whole of a payload
    that differs from the one published."""

    def __init__(self, chunk: ChunkBytes, found: framing.FoundRecord):
        self._chunk = chunk
        self._found = found
        self.size: int = found.large_size  # type: ignore[assignment]

    def pieces(self, first: int = 0, last: int | None = None, piece: int = PIECE_BYTES) -> Iterator[bytes]:
        last = self.size - 1 if last is None else min(last, self.size - 1)
        whole = first == 0 and last == self.size - 1
        crc = self._found.head_crc
        at = first
        held = b""  # the last piece, kept back until the CRC says it may go
        while at <= last:
            data = self._chunk.pread(min(piece, last + 1 - at), self._found.payload_pos + at)
            if not data:
                raise CorruptSegment(f"a large payload ends after {at} of its {self.size} bytes")
            if whole:
                crc = crc32c(data, crc)
                if held:
                    yield held
                held = data
            else:
                yield data
            at += len(data)
        if whole:
            if crc != self._found.crc:
                raise CorruptSegment(f"the large payload of offset {self._found.offset} fails its CRC")
            if held:
                yield held

    def close(self) -> None:
        self._chunk.close()
