"""A chunk's sparse index (`<base>.idx`): (offset, file position) pairs, one every
`index_interval_bytes` or so, that let a read start near the record it wants. The index is a
hint only (an append extends it without fsync): it must never be trusted past the committed
tail, and a read it misleads starts again from the chunk's start (reads.py). No Django, no
database.
"""

from __future__ import annotations

import bisect
import os
import struct
from array import array

from store import framing
from store.ends import Tail
from store.files import pwrite_all, write_atomically
from store.segment.directory import SegmentDirectory

INDEX_ENTRY = struct.Struct("<QQ")


class SegmentIndex(SegmentDirectory):
    """Reading, cutting, rebuilding and extending the chunks' sparse indexes."""

    def _load_index(self, base: int) -> tuple[array, array]:
        data = b""
        try:
            data = self.chunk_path(base, "idx").read_bytes()
        except FileNotFoundError:
            pass
        usable = len(data) - len(data) % INDEX_ENTRY.size
        both = array("Q")
        both.frombytes(data[:usable])
        return both[0::2], both[1::2]

    def _index(self, base: int, limit: int | None) -> tuple[array, array]:
        """The chunk's index. A sealed chunk's (`limit` None) is cached whole. For the active chunk
        only entries before the committed position `limit` are trusted and cached: entries past it
        may belong to a write that recovery will cut and another writer lay out differently."""
        cached = self._index_cache.get(base)
        if limit is None and cached is not None and cached[2] < 0:
            return cached[0], cached[1]
        try:
            size = os.stat(self.chunk_path(base, "idx")).st_size
        except FileNotFoundError:
            size = 0
        size -= size % INDEX_ENTRY.size
        if cached is None or cached[2] < 0 or size < cached[2]:
            offsets, positions = self._load_index(base)
        elif size == cached[2]:
            offsets, positions = cached[0], cached[1]
        else:
            with open(self.chunk_path(base, "idx"), "rb") as f:
                f.seek(cached[2])
                more = array("Q")
                more.frombytes(f.read(size - cached[2]))
            offsets, positions = cached[0] + more[0::2], cached[1] + more[1::2]
        if limit is None:
            self._index_cache[base] = (offsets, positions, -1)
            return offsets, positions
        keep = bisect.bisect_left(positions, limit)
        offsets, positions = offsets[:keep], positions[:keep]
        self._index_cache[base] = (offsets, positions, keep * INDEX_ENTRY.size)
        return offsets, positions

    def _cut_index(self, base: int, valid_len: int) -> None:
        offsets, positions = self._load_index(base)
        keep = bisect.bisect_left(positions, valid_len)
        path = self.chunk_path(base, "idx")
        try:
            size = os.stat(path).st_size
        except FileNotFoundError:
            return
        if size != keep * INDEX_ENTRY.size:  # entries past the end, or half an entry (a short write)
            os.truncate(path, keep * INDEX_ENTRY.size)

    def _last_index_pos(self, base: int) -> int:
        _, positions = self._load_index(base)
        return positions[-1] if positions else 0

    def _rebuild_index(self, base: int, data: bytes) -> None:
        entries = bytearray()
        last = -self.config.index_interval_bytes
        for pos, rec in framing.iter_records(data, framing.CHUNK_HEADER_SIZE, verify=False):
            if pos - last >= self.config.index_interval_bytes:
                entries += INDEX_ENTRY.pack(rec.offset, pos)
                last = pos
        write_atomically(self.chunk_path(base, "idx"), bytes(entries))

    def _append_index(self, tail: Tail, start: int, rel_positions: list[int]) -> int:
        interval = self.config.index_interval_bytes
        last = tail.last_index_pos if tail.last_index_pos else -interval
        entries = bytearray()
        offset = tail.next_offset
        for rel in rel_positions:
            pos = start + rel
            if pos - last >= interval:
                entries += INDEX_ENTRY.pack(offset, pos)
                last = pos
            offset += 1
        if entries:
            fd = os.open(self.chunk_path(tail.active_base, "idx"), os.O_WRONLY | os.O_CREAT, 0o644)
            try:
                pwrite_all(fd, bytes(entries), os.fstat(fd).st_size)
            finally:
                os.close(fd)
        return max(last, 0)
