"""Truncating a segment: moving its head (the logical half, at once) and deleting whole chunks
before it (the physical half), one segment at a time or a stream's segments under one heads lock
(`move_heads`). The rules kept here, and never to be broken:
- truncation moves the head first, then deletes whole chunks before it, and only before a head
  the deleting process made durable itself;
- a head never moves back (read, compare and write under the stream's heads lock);
- a head move or a chunk deletion never recovers a writer's tail it can read, only one that is
  missing, torn, or ends before the cut (`_tail_as_written`, recovery.py).
No Django, no database.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from store.ends import ENDS_SLOT, HEAD, HEAD_AT, TAIL, Head, Tail, ends_slot, heads_lock, pack_head, unpack_head
from store.files import fsync_dir, pwrite_all
from store.segment.directory import TIERED
from store.segment.reads import SegmentReads


@dataclass(frozen=True, slots=True)
class TruncateResult:
    head_before: Head
    head_after: Head
    chunks_deleted: int
    bytes_deleted: int


class SegmentTruncation(SegmentReads):
    """Head moves and chunk deletions."""

    def truncate(self, offset: int) -> TruncateResult:
        """Move the head to `offset` (no-op if it is not ahead) and delete whole chunks before it."""
        before, after, _ = self.move_head(offset)
        chunks, freed = self.delete_chunks_before_head(upto=after.offset)
        return TruncateResult(before, after, chunks, freed)

    def move_head(self, offset: int, durable: bool = True, cum_size: int | None = None) -> tuple[Head, Head, int]:
        """The logical half of a truncation: the head moves to `offset` if that is ahead of it.
        With `durable` False the head is not fsynced: the caller must make it durable (one
        `os.sync()` for many segments) before deleting any chunk behind it. `cum_size`, when the
        caller knows it from this segment (a tail or a cut's recorded size), saves reading the
        record at `offset`. Returns the head before and after, and the active chunk's base.

        Head moves are serialised by the stream's heads lock (`heads_lock`); appends, which never
        write the head, by the segment's own lock."""
        with heads_lock(self.path.parent, self._ends_path is not None):
            return self._move_head_locked(offset, durable, cum_size)

    def _move_head_locked(self, offset: int, durable: bool, cum_size: int | None) -> tuple[Head, Head, int]:
        with self._locked():
            tail = self._tail_as_written(offset)
            if offset > tail.next_offset:
                raise ValueError(f"offset {offset} is past the tail {tail.next_offset}")
            before = self.read_head()
            after = before
            if offset > before.offset:
                size = cum_size if cum_size is not None else self.size_till(offset)
                after = Head(offset, size)
                self._write_head(after, durable)
            elif durable:
                self._sync_head()  # a head another process moved: durable before anything relies on it
        return before, after, tail.active_base

    def _sync_head(self) -> None:
        path = self._head_path if self._ends_path is None else self._ends_path
        try:
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError:
            return
        try:
            os.fdatasync(fd)
        finally:
            os.close(fd)

    def has_chunks_before_head(self) -> bool:
        """Whether some whole chunk lies before the head (a truncation would delete it)."""
        head = self.read_head().offset
        bases = self.chunk_bases()
        return any(next_base <= head for next_base in bases[1:])

    def delete_chunks_before_head(self, upto: int | None = None) -> tuple[int, int]:
        """The physical half: delete the whole chunks before the (durable) head, and, with
        `upto`, before that offset too: a caller passes the head it made durable itself, so that
        a later head moved by another process, not durable yet, never decides a deletion."""
        with self._locked():
            tail = self._tail_as_written()
            head = self.read_head().offset
            return self._delete_chunks_before(head if upto is None else min(head, upto), tail.active_base)

    def _delete_chunks_before(self, head: int, active_base: int) -> tuple[int, int]:
        bases = self.chunk_bases()
        deleted = freed = 0
        for base, next_base in zip(bases, bases[1:]):
            if next_base > head or base == active_base:
                break
            released = False
            try:
                freed += os.stat(self.chunk_path(base)).st_size
            except FileNotFoundError:
                if not os.path.exists(self.chunk_path(base, TIERED)):
                    continue  # deleted already (by another process)
                # released to the tier: its stub and index go here, its objects with the rows
                # that name them (streams.tiering.delete_passed)
                released = True
            self._delete_chunk_files(base, released)
            deleted += 1
        if deleted:
            fsync_dir(self.path)
        return deleted, freed


def move_heads(
    stream_dir: Path,
    segment_ids: list[str],
    segment,
    cut: dict[str, int],
    sizes: dict[str, int],
    durable: bool = False,
) -> dict[str, tuple[Head, Head, int]]:
    """`Segment.move_head` for the segments of one stream in `cut`, under one heads lock with one
    read of the `ends` file: a stream's truncation costs a few system calls, not a dozen file
    operations per segment. A segment whose slot is not valid, or whose cut lies past its tail (a
    tail its writer's crash left behind), is moved by `Segment.move_head`'s own path. Like it,
    this never recovers a tail it can read: a writer on another host keeps its own.
    `segment(id)` gives a segment's object, asked for only where one is needed."""
    wanted = [s for s in segment_ids if s in cut]
    slots = {s: slot for s in wanted if (slot := ends_slot(s)) is not None}
    if not wanted or any(s not in slots for s in wanted):
        return {s: segment(s).move_head(cut[s], durable, sizes.get(s)) for s in wanted}
    out: dict[str, tuple[Head, Head, int]] = {}
    with heads_lock(stream_dir) as fd:
        top = max(slots.values())
        data = os.pread(fd, (top + 1) * ENDS_SLOT, 0)
        for s in wanted:
            at = slots[s] * ENDS_SLOT
            head = unpack_head(data[at + HEAD_AT : at + HEAD_AT + HEAD.size])
            tail = Tail.unpack(data[at : at + TAIL.size])
            offset = cut[s]
            if head is None or tail is None or offset > tail.next_offset:
                out[s] = segment(s)._move_head_locked(offset, durable, sizes.get(s))
                continue
            after = head
            if offset > head.offset:
                size = sizes.get(s)
                after = Head(offset, size if size is not None else segment(s).size_till(offset))
                pwrite_all(fd, pack_head(after), at + HEAD_AT)
            out[s] = (head, after, tail.active_base)
        if durable:
            os.fdatasync(fd)  # what this call wrote, and heads it found moved by another process
    return out
