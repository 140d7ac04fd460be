"""Appending to a segment, and rolling its active chunk when it is full or old. The rules kept
here, and never to be broken:
- the tail is written only after the records it covers are written (and, with fsync on,
  durable), so readers never see a record that a crash could take back, and a publish is
  acknowledged only after the tail moved;
- publish times never go back within a segment: the clock is read under the segment's lock;
- an append that fails (a full disk above all) leaves nothing behind: its bytes are cut back to
  the committed tail before the error goes up, so the space is free again and no torn record
  ever lies past the tail (`StorageFull` when the filesystem had no room);
- a sealed segment (a scale replaced it) takes no append, ever: `seal` writes its end durably
  under the segment's lock, and every append looks for it under that lock (`SegmentSealed`), so
  whatever a reader finds before the end is all the segment will hold.
No Django, no database.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path

from domain.events import EventIn
from store import boot, framing
from store.ends import Tail
from store.files import pwrite_all, read_small, write_atomically
from store.large import SpooledPayload
from store.segment.clock import epoch_ms
from store.segment.directory import SEALED_FILE
from store.segment.errors import NO_SPACE_ERRNOS, SegmentSealed, StorageFull
from store.segment.recovery import SegmentRecovery


@dataclass(frozen=True, slots=True)
class AppendResult:
    first_offset: int
    count: int
    cum_size_after: int
    sealed_chunk: Path | None  # a chunk this append sealed, waiting for its Parquet copy


JOIN_AT_MOST = 1 << 20  # a batch framed smaller than this is joined and written in one call
_IOV_MAX = os.sysconf("SC_IOV_MAX") if hasattr(os, "sysconf") else 1024


def _write_parts(fd: int, parts: list[bytes], size: int, pos: int) -> None:
    """Write a framed batch's parts at `pos`: joined when small (one call, and the copy costs
    nothing), else straight from the parts, `_IOV_MAX` at a time (`pwritev`), so that a large
    batch is not copied once more. A short write is finished as `pwrite_all` does."""
    if size <= JOIN_AT_MOST:
        pwrite_all(fd, b"".join(parts), pos)
        return
    for i in range(0, len(parts), _IOV_MAX):
        group = parts[i : i + _IOV_MAX]
        want = sum(map(len, group))
        written = os.pwritev(fd, group, pos)
        if written < want:  # a full disk shows first as a short write: finish it byte by byte
            pwrite_all(fd, b"".join(group)[written:], pos + written)
        pos += want


def _write_large(fd: int, parts: list, pos: int) -> None:
    """A large event's record written at `pos`: its frame and head, then its payload copied
    from where it was spooled (`store.large`), never whole in memory."""
    for part in parts:
        if type(part) is SpooledPayload:
            part.write_to(fd, pos)
        else:
            pwrite_all(fd, part, pos)
        pos += len(part)


_SEALED = struct.Struct("<4sqq")  # magic, the end's offset, its cumulative size
_SEALED_MAGIC = b"SEAL"


def read_sealed_end(segment_dir: str | os.PathLike) -> int | None:
    """The end a scale's seal wrote in a segment's directory, or None while it is not sealed."""
    data = read_small(os.path.join(segment_dir, SEALED_FILE), _SEALED.size)
    if data is not None and len(data) == _SEALED.size:
        magic, offset, _ = _SEALED.unpack(data)
        if magic == _SEALED_MAGIC:
            return offset
    return None


class SegmentAppends(SegmentRecovery):
    """Appends and rolls: the only writer of records into a chunk."""

    _sealed_end: int | None = None  # known once sealed (a seal is never undone)

    def sealed_end(self) -> int | None:
        """The offset after this segment's last event once a scale has sealed it, else None."""
        if self._sealed_end is None:
            self._sealed_end = read_sealed_end(self.path)
        return self._sealed_end

    def seal(self) -> int:
        """Take no more appends, durably; returns the segment's end (the offset after its last
        event). Its active chunk is sealed too, so every event it holds is in a sealed chunk.
        Sealing a sealed segment changes nothing."""
        with self._locked():
            end = self.sealed_end()
            if end is not None:
                return end
            tail = self._recovered_tail()
            if tail.committed_pos > framing.CHUNK_HEADER_SIZE:
                tail = self._create_chunk(tail.next_offset, tail.cum_size)
            self._write_seal(tail.next_offset, tail.cum_size)
            return tail.next_offset

    def _write_seal(self, end: int, cum_size: int) -> None:
        write_atomically(Path(self._sealed_path), _SEALED.pack(_SEALED_MAGIC, end, cum_size))
        self._sealed_end = end

    def append(self, events: list[EventIn], now_ms: int | None = None, on_commit=None) -> AppendResult:
        """Append a batch; returns once it is committed (and durable unless fsync is `never`).
        `on_commit(first_offset, now_ms)` runs once the batch is committed, still under the
        segment's lock: what it records about the batch is recorded in offset order."""
        if not events:
            raise ValueError("an append needs at least one event")
        sealed = None
        with self._locked():
            if self._sealed_end is not None or os.path.exists(self._sealed_path):
                raise SegmentSealed(self.path)
            # The clock is read under the lock so publish times never go back within a segment.
            now_ms = epoch_ms() if now_ms is None else now_ms
            tail = self._recovered_tail()
            if self._should_roll(tail, now_ms):
                sealed = self.chunk_path(tail.active_base)
                tail = self._create_chunk(tail.next_offset, tail.cum_size)
            parts, rel_positions, size, cum_after = framing.frame_batch(events, tail.next_offset, tail.cum_size, now_ms)
            start = tail.committed_pos
            try:
                fd = self._chunk_fd(tail.active_base)
                if type(events[0][0]) is SpooledPayload:  # a large event (alone in its batch)
                    _write_large(fd, parts, start)
                    if self.config.fsync != "never":
                        os.fdatasync(fd)
                elif self.config.fsync == "always":
                    data = b"".join(parts)
                    ends = rel_positions[1:] + [size]
                    for begin, end in zip(rel_positions, ends):
                        pwrite_all(fd, data[begin:end], start + begin)
                        os.fdatasync(fd)
                else:
                    _write_parts(fd, parts, size, start)
                    if self.config.fsync == "batch":
                        os.fdatasync(fd)
                last_index_pos = self._append_index(tail, start, rel_positions)
                empty = start == framing.CHUNK_HEADER_SIZE
                new_tail = Tail(
                    tail.active_base,
                    start + size,
                    tail.next_offset + len(events),
                    cum_after,
                    now_ms if empty else tail.created_ms,  # the age of a chunk is its first record's
                    last_index_pos,
                    boot.BOOT_ID,
                )
                self._write_tail(new_tail)
            except OSError as exc:
                self._undo_append(tail)
                if exc.errno in NO_SPACE_ERRNOS:
                    raise StorageFull(self.chunk_path(tail.active_base), exc) from exc
                raise
            if on_commit is not None:
                on_commit(tail.next_offset, now_ms)
        return AppendResult(tail.next_offset, len(events), cum_after, sealed)

    def _undo_append(self, tail: Tail) -> None:
        """Cut a failed append back to the committed tail `tail` (its chunk, its index entries and
        the tail file), so the bytes it wrote free their space now rather than at the next
        writer's recovery. If this fails too, the tail file still names the committed end (or is
        torn, and recovery scans): the next writer cuts the rest."""
        try:
            os.truncate(self.chunk_path(tail.active_base), tail.committed_pos)
            self._cut_index(tail.active_base, tail.committed_pos)
            self._index_cache.pop(tail.active_base, None)
            if self._read_tail() != tail:
                self._write_tail(tail)  # a tail write that failed half-way
        except OSError:
            pass

    def _should_roll(self, tail: Tail, now_ms: int) -> bool:
        used = tail.committed_pos - framing.CHUNK_HEADER_SIZE
        if used <= 0:
            return False
        if used >= self.config.chunk_bytes:
            return True
        return now_ms - tail.created_ms >= self.config.chunk_seconds * 1000

    def roll_if_due(self, now_ms: int | None = None) -> Path | None:
        """Seal an idle active chunk that has reached its age; returns the sealed chunk."""
        now_ms = epoch_ms() if now_ms is None else now_ms
        if self._read_tail() is None and not self.chunk_bases():
            return None
        with self._locked():
            # as written first: a sealing task on another host recovers (and so restamps) the
            # writer's tail only when it rolls
            if not self._should_roll(self._tail_as_written(), now_ms):
                return None
            tail = self._recovered_tail()
            if not self._should_roll(tail, now_ms):
                return None
            self._create_chunk(tail.next_offset, tail.cum_size)
            return self.chunk_path(tail.active_base)
