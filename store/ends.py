"""A segment's ends, its committed tail and its logical head, as the records that hold them, and
the stream's `ends` file that keeps both records of every segment. The stream's directory (the
parent of its segments' directories) holds

    ends             per segment, in the slot numbered by its id: the committed tail (active
                     chunk, position, next offset, size) and the logical head (first readable
                     offset and the cumulative size before it), each CRC-checked

so that a reader of many streams' heads and tails (a retention cycle) opens one small file per
stream instead of two per segment. A segment whose id is not a small number, or a store made
before the `ends` file, keeps its tail and head in files `tail` and `head` of its own directory;
a slot never written falls back to those files, so an older store is read as it is and moves
into the slots as its segments are written.

This module packs, unpacks and locates the records, reads every slot of a stream at once and
holds the stream's heads lock. It must never decide which tail to trust nor recover one (that is
a writer's, store/segment/recovery.py), and never imports the segment package, which builds on it.
No Django, no database.
"""

from __future__ import annotations

import fcntl
import os
import struct
from dataclasses import dataclass
from pathlib import Path

from crc32c import crc32c

from store.files import read_small

TAIL = struct.Struct("<8sQQQQqQ16sI")  # magic, base, pos, next, cum, created_ms, idx_pos, boot, crc
TAIL_MAGIC = b"CBRTAIL1"
HEAD = struct.Struct("<8sQQI")  # magic, offset, cum_size, crc
HEAD_MAGIC = b"CBRHEAD1"

ENDS_FILE = "ends"
ENDS_SLOT = 128  # bytes per segment in the stream's ends file: the tail at 0, the head at HEAD_AT
HEAD_AT = 96
MAX_SLOTS = 4096  # segment ids 0..4095 have a slot; any other id keeps its own files


def ends_slot(segment_id: str) -> int | None:
    """The slot of a segment in its stream's `ends` file, or None (its own head and tail files)."""
    if segment_id.isdigit() and segment_id.isascii() and len(segment_id) <= 4:
        slot = int(segment_id)
        if slot < MAX_SLOTS and str(slot) == segment_id:
            return slot
    return None


@dataclass(frozen=True, slots=True)
class Tail:
    active_base: int
    committed_pos: int
    next_offset: int
    cum_size: int
    created_ms: int
    last_index_pos: int
    boot_id: bytes

    def pack(self) -> bytes:
        body = TAIL.pack(
            TAIL_MAGIC,
            self.active_base,
            self.committed_pos,
            self.next_offset,
            self.cum_size,
            self.created_ms,
            self.last_index_pos,
            self.boot_id,
            0,
        )[:-4]
        return body + struct.pack("<I", crc32c(body))

    @classmethod
    def unpack(cls, data: bytes) -> Tail | None:
        if len(data) != TAIL.size:
            return None
        magic, base, pos, nxt, cum, created, idx_pos, boot, crc = TAIL.unpack(data)
        if magic != TAIL_MAGIC or crc32c(data[:-4]) != crc:
            return None
        return cls(base, pos, nxt, cum, created, idx_pos, boot)


@dataclass(frozen=True, slots=True)
class Head:
    offset: int
    cum_size: int


def pack_head(head: Head) -> bytes:
    body = HEAD.pack(HEAD_MAGIC, head.offset, head.cum_size, 0)[:-4]
    return body + struct.pack("<I", crc32c(body))


def unpack_head(data: bytes) -> Head | None:
    if len(data) != HEAD.size:
        return None
    magic, offset, cum, crc = HEAD.unpack(data)
    if magic != HEAD_MAGIC or crc32c(data[:-4]) != crc:
        return None
    return Head(offset, cum)


class heads_lock:
    """The stream's heads lock: an exclusive flock on its `ends` file, held while a head moves
    (read, compare, write: a head never moves back). Segments without slots (`slotted` False)
    move their heads under their own segment lock alone. Returns the descriptor, open for
    reading and writing the slots."""

    def __init__(self, stream_dir: Path, slotted: bool = True):
        self.path = os.path.join(stream_dir, ENDS_FILE) if slotted else None
        self.fd = -1

    def __enter__(self) -> int:
        if self.path is not None:
            os.makedirs(os.path.dirname(self.path), exist_ok=True)
            self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(self.fd, fcntl.LOCK_EX)
            except BaseException:
                os.close(self.fd)
                raise
        return self.fd

    def __exit__(self, *exc) -> None:
        if self.fd >= 0:
            os.close(self.fd)  # releases the flock
            self.fd = -1


def read_stream_ends(stream_dir: Path, segment_ids: list[str]) -> dict[str, tuple[Head | None, Tail | None]]:
    """Every segment's head and tail from the stream's `ends` file, in one read: None where a
    slot is not there or not valid (never written, torn, or a segment that keeps its own files);
    the caller asks the segment itself for those (`Segment.ends`), which retries and recovers."""
    slots = {s: ends_slot(s) for s in segment_ids}
    top = max((slot for slot in slots.values() if slot is not None), default=-1)
    data = b""
    if top >= 0:
        data = read_small(os.path.join(stream_dir, ENDS_FILE), (top + 1) * ENDS_SLOT, 0) or b""
    out: dict[str, tuple[Head | None, Tail | None]] = {}
    for seg, slot in slots.items():
        if slot is None:
            out[seg] = (None, None)
            continue
        at = slot * ENDS_SLOT
        out[seg] = (
            unpack_head(data[at + HEAD_AT : at + HEAD_AT + HEAD.size]),
            Tail.unpack(data[at : at + TAIL.size]),
        )
    return out
