"""A segment's directory: its files, its lock, and its tail and head records where they live. The
base every part of `Segment` builds on (log.py). A segment directory holds

    <base>.chunk     framed records (see framing.py); the newest is the active chunk
    <base>.idx       sparse index of that chunk: (offset, file position) pairs, a hint only
    <base>.parquet   columnar copy of a sealed chunk, for Spark
    <base>.tiered    stands for a sealed chunk whose local copy was released to long-term
                     storage (store/tier/reading.py: where it lives, its size and checksum);
                     its sparse index stays
    lock             flock target that serialises writers across processes
    sealed           the segment's end, once a scale has sealed it (append.py)

and its tail and head records are kept in its slot of the stream's `ends` file (store/ends.py),
or, for a segment without a slot (or a slot never written), in files `tail` and `head` here.
This module opens, lists and deletes those files and reads and writes the two records in place;
it must never decide which tail to trust (recovery.py) nor write into a chunk (append.py).
No Django, no database.
"""

from __future__ import annotations

import fcntl
import os
import threading
import time
from array import array
from pathlib import Path

from crc32c import crc32c

from store import framing
from store.ends import ENDS_FILE, ENDS_SLOT, HEAD, HEAD_AT, HEAD_MAGIC, TAIL, Head, Tail, ends_slot, pack_head
from store.files import fsync_dir, pwrite_all, read_small
from store.segment.config import StoreConfig
from store.tier.reading import TieredStub

SEALED_FILE = "sealed"
TIERED = "tiered"


def chunk_name(base: int, suffix: str) -> str:
    return f"{base:020d}.{suffix}"


class SegmentDirectory:
    """The segment's files and its lock: the base of every part of a `Segment`."""

    def __init__(self, path: Path, config: StoreConfig):
        self.path = path if isinstance(path, Path) else Path(path)
        self.config = config
        self._head_path = os.path.join(path, "head")
        self._tail_path = os.path.join(path, "tail")
        self._sealed_path = os.path.join(path, SEALED_FILE)
        slot = ends_slot(self.path.name)
        self._ends_path = None if slot is None else os.path.join(self.path.parent, ENDS_FILE)
        self._tail_at = 0 if slot is None else slot * ENDS_SLOT
        self._head_at = self._tail_at + HEAD_AT
        self._thread_lock = threading.Lock()
        self._pid = -1
        self._lock_fd = -1
        self._chunk_fds: dict[int, int] = {}
        self._index_cache: dict[int, tuple[array, array, int]] = {}
        self._stubs: dict[int, TieredStub] = {}  # a stub never changes while its chunk is listed

    def _ensure_process(self) -> None:
        """Open the lock file for this process; after a fork the inherited descriptors are
        dropped, because a flock taken through a shared open file would not exclude the parent."""
        if self._pid == os.getpid():
            return
        self._chunk_fds = {}
        self._index_cache = {}
        self.path.mkdir(parents=True, exist_ok=True)
        self._lock_fd = os.open(self.path / "lock", os.O_RDWR | os.O_CREAT, 0o644)
        self._pid = os.getpid()

    def _chunk_fd(self, base: int) -> int:
        """A cached descriptor of the chunk, reopened if the file at that name was replaced
        (another process's recovery can remove a half-made chunk and make it again): writing
        through a stale descriptor would land in an unlinked file."""
        path = self.path / chunk_name(base, "chunk")
        fd = self._chunk_fds.get(base)
        if fd is not None and os.fstat(fd).st_ino != os.stat(path).st_ino:
            os.close(self._chunk_fds.pop(base))
            fd = None
        if fd is None:
            for old in list(self._chunk_fds):
                os.close(self._chunk_fds.pop(old))
            fd = os.open(path, os.O_RDWR)
            self._chunk_fds[base] = fd
        return fd

    def chunk_bases(self) -> list[int]:
        """Every chunk's base, local or released to the tier (a `.tiered` stub)."""
        try:
            names = os.listdir(self.path)
        except FileNotFoundError:
            return []
        bases = {int(n[:-6]) for n in names if n.endswith(".chunk") and n[:-6].isdigit()}
        bases.update(int(n[:-7]) for n in names if n.endswith(".tiered") and n[:-7].isdigit())
        return sorted(bases)

    def tiered_stub(self, base: int) -> TieredStub | None:
        """The stub of a chunk released to the tier, or None (the chunk is local, or gone)."""
        data = read_small(str(self.chunk_path(base, TIERED)), 64 * 1024)
        return None if data is None else TieredStub.unpack(data)

    def known_stub(self, base: int) -> TieredStub | None:
        """The stub this process has read for a chunk (a stub never changes; callers reach a
        chunk only through a fresh listing, so one a truncation deleted is never asked for)."""
        return self._stubs.get(base)

    def chunk_cum_size(self, base: int) -> int:
        """The cumulative size in the chunk's header: from its file, or from its stub."""
        try:
            with open(self.chunk_path(base), "rb") as f:
                return framing.decode_chunk_header(f.read(framing.CHUNK_HEADER_SIZE))[1]
        except FileNotFoundError:
            stub = self.tiered_stub(base)
            if stub is None:
                raise
            return stub.cum_size

    def chunk_path(self, base: int, suffix: str = "chunk") -> Path:
        return self.path / chunk_name(base, suffix)

    def _read_tail(self) -> Tail | None:
        data = self._read_record(self._tail_at, self._tail_path, TAIL.size)
        return None if data is None else Tail.unpack(data)

    def _read_record(self, at: int, legacy_path: str, size: int) -> bytes | None:
        """The tail or head record: from the stream's `ends` slot, or (a slot never written) from
        the segment's own file; None if neither exists."""
        if self._ends_path is not None:
            data = read_small(self._ends_path, size, at)
            if data is not None and data.count(0) != len(data):
                return data
        return read_small(legacy_path, size)

    def _write_record(self, at: int, legacy_path: str, data: bytes, durable: bool = False) -> bool:
        """Write the tail or head record in place; returns whether the file was created."""
        path = legacy_path if self._ends_path is None else self._ends_path
        pos = 0 if self._ends_path is None else at
        created = False
        try:
            fd = os.open(path, os.O_WRONLY)
        except FileNotFoundError:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
            created = True
        try:
            pwrite_all(fd, data, pos)
            if durable:
                os.fdatasync(fd)
        finally:
            os.close(fd)
        if created and self.config.fsync != "never":
            fsync_dir(os.path.dirname(path))  # the file's name must outlive a crash
        return created

    def _write_tail(self, tail: Tail, durable: bool = False) -> None:
        self._write_record(self._tail_at, self._tail_path, tail.pack(), durable)

    def _has_head(self) -> bool:
        return self._read_record(self._head_at, self._head_path, HEAD.size) is not None

    def read_head(self) -> Head:
        for attempt in range(3):
            data = self._read_record(self._head_at, self._head_path, HEAD.size)
            if data is None:
                break  # never written, or its page lost before any sync: as if torn
            if len(data) == HEAD.size:
                magic, offset, cum, crc = HEAD.unpack(data)
                if magic == HEAD_MAGIC and crc32c(data[:-4]) == crc:
                    return Head(offset, cum)
            time.sleep(0.001 * attempt)  # a read that met a write in progress
        return self._head_from_chunks()

    def _head_from_chunks(self) -> Head:
        """A head torn by a crash mid-write, or written without fsync (a batched truncation) and
        lost before the batch's sync: no chunk behind it was deleted yet (deletion follows the
        sync), so the first chunk's start is a safe head; an unfinished truncation record moves
        it again."""
        bases = self.chunk_bases()
        if not bases:
            return Head(0, 0)
        return Head(bases[0], self.chunk_cum_size(bases[0]))

    def _write_head(self, head: Head, durable: bool = True) -> None:
        """In place, like the tail: one small write, CRC-checked by readers (a rename per head
        would cost a directory update per segment truncated)."""
        self._write_record(self._head_at, self._head_path, pack_head(head), durable)

    def _locked(self):
        return _SegmentLock(self)

    def _delete_chunk_files(self, base: int, released: bool = False) -> None:
        """Delete the chunk's files (`released`: the caller found its stub in place of the chunk)."""
        self._index_cache.pop(base, None)
        stub = self._stubs.pop(base, None) or (True if released else None)
        fd = self._chunk_fds.pop(base, None)
        if fd is not None:
            os.close(fd)
        # a released chunk has only its stub and index here: the others are not looked for
        suffixes = ("chunk", "idx", "parquet", TIERED) if stub is None else (TIERED, "idx")
        for suffix in suffixes:
            try:
                os.unlink(self.chunk_path(base, suffix))
            except FileNotFoundError:
                pass

    def __del__(self) -> None:
        # an object evicted from the open-segment cache while another thread still used it may
        # have reopened its lock file: close it when the last reference goes
        try:
            self.close()
        except Exception:
            pass

    def close(self) -> None:
        for fd in self._chunk_fds.values():
            os.close(fd)
        self._chunk_fds = {}
        if self._pid == os.getpid() and self._lock_fd >= 0:
            os.close(self._lock_fd)
        self._pid = -1
        self._lock_fd = -1


class _SegmentLock:
    """Thread lock, then an exclusive flock on the segment's lock file (other processes)."""

    def __init__(self, segment: SegmentDirectory):
        self.segment = segment

    def __enter__(self) -> None:
        seg = self.segment
        seg._thread_lock.acquire()
        try:
            seg._ensure_process()
            fcntl.flock(seg._lock_fd, fcntl.LOCK_EX)
        except BaseException:
            seg._thread_lock.release()
            raise

    def __exit__(self, *exc) -> None:
        seg = self.segment
        try:
            fcntl.flock(seg._lock_fd, fcntl.LOCK_UN)
        finally:
            seg._thread_lock.release()
