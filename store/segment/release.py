"""Releasing a sealed chunk's local copy once the tier holds it (docs/design/long-term-storage.md):
the chunk file and its columnar copy give way to a `.tiered` stub that says where the chunk
lives, and reads fetch it from there (reads.py). The rules kept here:
- only a sealed chunk is released (never the active one), under the segment's lock;
- the local file must be exactly what the tier holds (its size and CRC-32C the stub's, which
  the caller took from the verified upload): a copy that differs is kept and reported;
- the stub is written durably before the local copy goes, so a crash between the two leaves a
  chunk that is both local and tiered (read locally; released again next time), never neither;
- the chunk's sparse index stays: a read near a chunk's end fetches only the bytes it needs.
No Django, no database.
"""

from __future__ import annotations

import os

from crc32c import crc32c

from store.files import fsync_dir, write_atomically
from store.segment.directory import TIERED
from store.segment.reads import SegmentReads
from store.tier.reading import TieredStub


class LocalCopyDiffers(Exception):
    """The local chunk (or its columnar copy) is not what the tier holds: it is kept."""


class SegmentRelease(SegmentReads):
    """Giving a sealed chunk's local copy up for its tiered one."""

    def release_to_tier(self, base: int, stub: TieredStub) -> int:
        """Replace the sealed chunk at `base` (and its columnar copy, when `stub` names one) with
        `stub`; the local bytes freed, 0 when there was nothing to release (the chunk is active,
        gone, or already released). `LocalCopyDiffers` when a local file is not the tier's."""
        with self._locked():
            if base >= self._tail_as_written().active_base:
                return 0
            chunk = self.chunk_path(base)
            try:
                data = chunk.read_bytes()
            except FileNotFoundError:
                return 0
            _same(chunk, data, stub.size, stub.crc32c)
            parquet = self.chunk_path(base, "parquet")
            freed = len(data)
            if stub.parquet_key is not None:
                try:
                    copy = parquet.read_bytes()
                except FileNotFoundError:
                    copy = None
                if copy is not None:
                    _same(parquet, copy, stub.parquet_size, stub.parquet_crc32c)
                    freed += len(copy)
            write_atomically(self.chunk_path(base, TIERED), stub.pack())
            self._index_cache.pop(base, None)
            fd = self._chunk_fds.pop(base, None)
            if fd is not None:
                os.close(fd)
            chunk.unlink()
            if stub.parquet_key is not None:
                try:
                    parquet.unlink()
                except FileNotFoundError:
                    pass
            fsync_dir(self.path)
            return freed


def _same(path, data: bytes, size: int | None, crc: str | None) -> None:
    if len(data) != size or f"{crc32c(data):08x}" != crc:
        raise LocalCopyDiffers(f"{path}: {len(data)} bytes, crc {crc32c(data):08x}; the tier holds {size}, {crc}")
