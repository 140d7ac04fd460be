"""One segment of a stream on disk: an append-only sequence of chunk files.

A segment directory holds

    <base>.chunk     framed records (see framing.py); the newest is the active chunk
    <base>.idx       sparse index of that chunk: (offset, file position) pairs, a hint only
    <base>.parquet   columnar copy of a sealed chunk, for Spark
    lock             flock target that serialises writers across processes

and its tail and head records are kept in the stream's `ends` file (see ends.py), or in files
`tail` and `head` of its own directory.

The rules this module keeps, and must never break:
- offsets come from the log itself (the committed tail), never from a counter elsewhere;
- the tail file is written only after the records it covers are written (and, with fsync on,
  durable), so readers never see a record that a crash could take back, and a publish is
  acknowledged only after the tail moved;
- the tail names the host boot that wrote it. Past a tail of this boot, anything in the active
  chunk is a write whose publish was never acknowledged: recovery cuts it. Past a tail of
  another boot (another host, or this one before a restart, whose last tail write may not have
  reached the disk), recovery scans and keeps whole, CRC-valid batches; a missing or torn tail
  costs a scan of the whole active chunk;
- only writers recover a tail: a head move or a chunk deletion reads the tail as written (an
  older tail only makes them more careful), so processes on several hosts may move heads
  without making the writer check its tail again;
- truncation moves the head first (logical, at once), then deletes whole chunks before it, and
  only before a head the deleting process made durable itself;
- an append that fails (a full disk above all) leaves nothing behind: its bytes are cut back to
  the committed tail before the error goes up, so the space is free again and no torn record
  ever lies past the tail (`StorageFull` when the filesystem had no room).
No Django, no database.
"""

from __future__ import annotations

import bisect
import errno
import fcntl
import os
import struct
import threading
import time
from array import array
from dataclasses import dataclass
from pathlib import Path

from crc32c import crc32c

from domain.events import EventIn
from store import framing
from store.boot import BOOT_ID
from store.ends import (
    ENDS_FILE,
    ENDS_SLOT,
    HEAD,
    HEAD_AT,
    HEAD_MAGIC,
    TAIL,
    Head,
    Tail,
    ends_slot,
    heads_lock,
    pack_head,
    unpack_head,
)
from store.files import fsync_dir, pwrite_all, read_small, write_atomically
from store.framing import Frame, Record

INDEX_ENTRY = struct.Struct("<QQ")

FSYNC_MODES = ("batch", "always", "never")


@dataclass(frozen=True, slots=True)
class StoreConfig:
    chunk_bytes: int = 16 * 1024 * 1024
    chunk_seconds: int = 3600
    fsync: str = "batch"
    index_interval_bytes: int = 4096

    def __post_init__(self) -> None:
        if self.fsync not in FSYNC_MODES:
            raise ValueError(f"fsync must be one of {FSYNC_MODES}, not {self.fsync!r}")
        if self.chunk_bytes < 1024:
            raise ValueError("chunk_bytes must be at least 1024")


@dataclass(frozen=True, slots=True)
class AppendResult:
    first_offset: int
    count: int
    cum_size_after: int
    sealed_chunk: Path | None  # a chunk this append sealed, waiting for its Parquet copy


@dataclass(frozen=True, slots=True)
class TruncateResult:
    head_before: Head
    head_after: Head
    chunks_deleted: int
    bytes_deleted: int


@dataclass(frozen=True, slots=True)
class SegmentInfo:
    head: int
    tail: int
    head_size: int
    tail_size: int
    chunk_count: int
    physical_bytes: int  # bytes of chunk files on disk (framing included)
    first_chunk_base: int


class CorruptSegment(Exception):
    """A sealed chunk failed its CRC check: data on disk is damaged."""


NO_SPACE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})


class StorageFull(OSError):
    """The store's filesystem has no room left (ENOSPC) or the user's quota is spent (EDQUOT).
    Raised by an append only after its partial write was cut back: nothing of it was committed."""

    def __init__(self, path: Path, cause: OSError):
        super().__init__(cause.errno, f"no space left for {path}: {cause.strerror}")
        self.path = path


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


def chunk_name(base: int, suffix: str) -> str:
    return f"{base:020d}.{suffix}"


class Segment:
    """A segment log. One object per process and directory (see `open_segment`)."""

    def __init__(self, path: Path, config: StoreConfig):
        self.path = path if isinstance(path, Path) else Path(path)
        self.config = config
        self._head_path = os.path.join(path, "head")
        self._tail_path = os.path.join(path, "tail")
        slot = ends_slot(self.path.name)
        self._ends_path = None if slot is None else os.path.join(self.path.parent, ENDS_FILE)
        self._tail_at = 0 if slot is None else slot * ENDS_SLOT
        self._head_at = self._tail_at + HEAD_AT
        self._thread_lock = threading.Lock()
        self._pid = -1
        self._lock_fd = -1
        self._chunk_fds: dict[int, int] = {}
        self._index_cache: dict[int, tuple[array, array, int]] = {}

    # -- files ------------------------------------------------------------------------------

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
        try:
            names = os.listdir(self.path)
        except FileNotFoundError:
            return []
        return sorted(int(n[:-6]) for n in names if n.endswith(".chunk") and n[:-6].isdigit())

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
        with open(self.chunk_path(bases[0]), "rb") as f:
            return Head(bases[0], framing.decode_chunk_header(f.read(framing.CHUNK_HEADER_SIZE))[1])

    def _write_head(self, head: Head, durable: bool = True) -> None:
        """In place, like the tail: one small write, CRC-checked by readers (a rename per head
        would cost a directory update per segment truncated)."""
        self._write_record(self._head_at, self._head_path, pack_head(head), durable)

    # -- locking and recovery ---------------------------------------------------------------

    def _locked(self):
        return _SegmentLock(self)

    def _recovered_tail(self) -> Tail:
        """The committed tail, after cutting whatever a crashed writer left past it. What a
        writer calls before it appends.

        The tail names the host boot that wrote it (`boot_id`, the kernel's boot id: one per
        host and boot, shared by the host's containers). A tail of this boot is trusted: bytes
        past it are a write whose publish was never answered, and are cut. A tail of any other
        boot (a writer on another host, or this host before a restart, whose last tail write
        may not have reached the disk) is trusted up to its committed position, because the
        records it covers were durable before it was written; what lies past it is scanned, and
        whole batches there are kept (`_recover_past`). Only a tail that is missing or torn, or
        that names an older chunk than the newest one, costs a scan of the active chunk.

        Called with the segment lock held.
        """
        tail = self._read_tail()
        if tail is None:
            return self._recover_by_scan()
        path = self.chunk_path(tail.active_base)
        try:
            size = os.stat(path).st_size
        except FileNotFoundError:
            size = -1
        if size < tail.committed_pos:
            return self._recover_by_scan()  # the tail outlived its records (fsync `never`)
        if tail.boot_id == BOOT_ID:
            if size > tail.committed_pos:
                # A writer died between writing and committing: its publish was never answered.
                os.truncate(path, tail.committed_pos)
                self._cut_index(tail.active_base, tail.committed_pos)
            return tail
        if self.config.fsync == "never" or self.chunk_bases()[-1] != tail.active_base:
            return self._recover_by_scan()
        return self._recover_past(tail, size)

    def _recover_past(self, tail: Tail, size: int) -> Tail:
        """Adopt another boot's tail: keep the whole batches past its committed position (durable
        records a lost tail write did not cover, or an unanswered publish: kept, as a scan
        would keep them), cut the rest, and check the chunk's index; the tail is written again
        under this boot, durably: once a tail names this boot, no process of the other boot may
        find its own older tail again after a crash of this host and trust it. Reads only what
        lies past the tail."""
        base = tail.active_base
        path = self.chunk_path(base)
        extra = b""
        if size > tail.committed_pos:
            with open(path, "rb") as f:
                f.seek(tail.committed_pos)
                extra = f.read(size - tail.committed_pos)
        found = framing.scan(extra, 0, tail.next_offset, tail.cum_size)
        end = tail.committed_pos + found.valid_len
        if size > tail.committed_pos:
            with open(path, "r+b") as f:
                if end != size:
                    f.truncate(end)
                os.fsync(f.fileno())  # what is kept may never have been synced by its writer
        self._cut_index(base, tail.committed_pos)
        if not self._index_is_sound(base, tail):
            return self._recover_by_scan()  # the index lost pages with its host: rebuilt whole
        self._index_cache.pop(base, None)
        kept = list(framing.iter_records(extra[: found.valid_len], 0, verify=False))
        last_index_pos = tail.last_index_pos
        if kept:
            last_index_pos = self._append_index(tail, tail.committed_pos, [pos for pos, _ in kept])
        empty = tail.committed_pos == framing.CHUNK_HEADER_SIZE
        adopted = Tail(
            base,
            end,
            found.next_offset,
            found.cum_size,
            kept[0][1].published_ms if empty and kept else tail.created_ms,
            last_index_pos,
            BOOT_ID,
        )
        self._write_tail(adopted, durable=self.config.fsync != "never")
        return adopted

    def _index_is_sound(self, base: int, tail: Tail) -> bool:
        """Whether the chunk's index, already cut at the tail, is in order and inside the chunk
        (a page lost with its host reads back as zeros or a short file; a short file is only
        fewer hints, zeros in the middle would mislead a read)."""
        offsets, positions = self._load_index(base)
        if any(b <= a for a, b in zip(positions, positions[1:])) or any(b <= a for a, b in zip(offsets, offsets[1:])):
            return False
        return not positions or (
            positions[0] >= framing.CHUNK_HEADER_SIZE and offsets[0] >= base and offsets[-1] < tail.next_offset
        )

    def _recover_by_scan(self) -> Tail:
        """Rebuild the tail from the chunk files alone (after a reboot or a lost tail file)."""
        bases = self.chunk_bases()
        while bases:
            base = bases[-1]
            path = self.chunk_path(base)
            data = path.read_bytes()
            try:
                header_base, header_cum = framing.decode_chunk_header(data)
            except ValueError:
                # A roll that never finished: the new chunk has no valid header and no records.
                self._delete_chunk_files(base)
                bases.pop()
                continue
            if header_base != base:
                raise CorruptSegment(f"{path} names base {header_base}")
            found = framing.scan(data, framing.CHUNK_HEADER_SIZE, base, header_cum)
            if found.valid_len != len(data):
                with open(path, "r+b") as f:
                    f.truncate(found.valid_len)
                    f.flush()
                    os.fsync(f.fileno())
            self._rebuild_index(base, data[: found.valid_len])
            tail = Tail(
                active_base=base,
                committed_pos=found.valid_len,
                next_offset=found.next_offset,
                cum_size=found.cum_size,
                created_ms=int(os.stat(path).st_mtime * 1000) if found.records else _now_ms(),
                last_index_pos=self._last_index_pos(base),
                boot_id=BOOT_ID,
            )
            self._write_tail(tail, durable=self.config.fsync != "never")  # as in `_recover_past`
            return tail
        head = self.read_head()
        return self._create_chunk(head.offset, head.cum_size)

    def _create_chunk(self, base: int, cum_size: int) -> Tail:
        if base == 0 and not self._has_head():
            # the segment's first chunk: its head file is made now, so that a truncation only
            # ever overwrites it (creating a file costs a journal entry, a write does not)
            self._write_head(Head(0, 0), durable=False)
        path = self.chunk_path(base)
        tmp = path.with_suffix(".chunk.tmp")
        durable = self.config.fsync != "never"
        try:
            with open(tmp, "wb") as f:
                f.write(framing.encode_chunk_header(base, cum_size))
                if durable:
                    f.flush()
                    os.fsync(f.fileno())
        except OSError as exc:
            _unlink_quietly(tmp)  # a half-made chunk must not keep the space it took
            if exc.errno in NO_SPACE_ERRNOS:
                raise StorageFull(path, exc) from exc
            raise
        os.replace(tmp, path)
        if durable:
            fsync_dir(self.path)
        tail = Tail(base, framing.CHUNK_HEADER_SIZE, base, cum_size, _now_ms(), 0, BOOT_ID)
        self._write_tail(tail)
        return tail

    # -- the sparse index -------------------------------------------------------------------

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

    # -- appending --------------------------------------------------------------------------

    def append(self, events: list[EventIn], now_ms: int | None = None, on_commit=None) -> AppendResult:
        """Append a batch; returns once it is committed (and durable unless fsync is `never`).
        `on_commit(first_offset, now_ms)` runs once the batch is committed, still under the
        segment's lock: what it records about the batch is recorded in offset order."""
        if not events:
            raise ValueError("an append needs at least one event")
        sealed = None
        with self._locked():
            # The clock is read under the lock so publish times never go back within a segment.
            now_ms = _now_ms() if now_ms is None else now_ms
            tail = self._recovered_tail()
            if self._should_roll(tail, now_ms):
                sealed = self.chunk_path(tail.active_base)
                tail = self._create_chunk(tail.next_offset, tail.cum_size)
            parts, rel_positions, size, cum_after = framing.frame_batch(events, tail.next_offset, tail.cum_size, now_ms)
            start = tail.committed_pos
            try:
                fd = self._chunk_fd(tail.active_base)
                if self.config.fsync == "always":
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
                    BOOT_ID,
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

    def roll_if_due(self, now_ms: int | None = None) -> Path | None:
        """Seal an idle active chunk that has reached its age; returns the sealed chunk."""
        now_ms = _now_ms() if now_ms is None else now_ms
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

    # -- reading ----------------------------------------------------------------------------

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
                return Tail(head.offset, framing.CHUNK_HEADER_SIZE, head.offset, head.cum_size, _now_ms(), 0, BOOT_ID)

    def info(self) -> SegmentInfo:
        tail = self.committed_tail()
        head = self.read_head()
        bases = self.chunk_bases()
        physical = 0
        for base in bases:
            try:
                physical += os.stat(self.chunk_path(base)).st_size
            except FileNotFoundError:
                pass
        return SegmentInfo(
            head=head.offset,
            tail=tail.next_offset,
            head_size=head.cum_size,
            tail_size=tail.cum_size,
            chunk_count=len(bases),
            physical_bytes=physical,
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
            last_size = last.stop - last.start if frames else len(last.payload)
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
        try:  # a descriptor and pread, not a buffered file object: a read's every segment opens one
            fd = os.open(self.chunk_path(base), os.O_RDONLY)
        except FileNotFoundError:
            return []
        out: list = []
        decode = framing.read_frames if frames else framing.read_records
        try:
            end = limit if limit is not None else os.fstat(fd).st_size
            block = 4096 if max_events == 1 else 1024 * 1024  # size_till wants one record
            j = bisect.bisect_left(offsets, start + max_events)
            if max_events > 1 and j < len(offsets):
                # the index says where the record after the last one wanted starts: read that
                # much, not a whole MiB (a read of 1000 events of ~100 B wants ~150 KB, from
                # four segments); the loop below reads on if it falls short
                block = min(block, max(4096, positions[j] - pos))
            while pos < end and len(out) < max_events:
                data = _pread_full(fd, min(block, end - pos), pos)
                got, consumed = decode(data, start, max_events - len(out))
                out += got
                if consumed == 0:
                    if len(data) < end - pos:
                        block *= 2  # one record larger than the block: read more at once
                        continue
                    raise CorruptSegment(f"{self.chunk_path(base)}: bad record at {pos}")
                pos += consumed
        finally:
            os.close(fd)
        return out

    def size_till(self, offset: int) -> int:
        """Cumulative payload bytes of the segment before `offset` (RETENTION-ALGORITHM.md)."""
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
            with open(self.chunk_path(bases[0]), "rb") as f:
                return framing.decode_chunk_header(f.read(framing.CHUNK_HEADER_SIZE))[1]
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

    # -- truncation -------------------------------------------------------------------------

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

    def _tail_as_written(self, offset: int = 0) -> Tail:
        """The tail for a head move or a chunk deletion: as its writer wrote it, whoever that
        was. These never recover a writer's tail (recovery would stamp it with this boot, and
        the writer, on another host, would have to check it again): an older tail is safe here,
        since it only names an older active chunk or an earlier end. Only a tail that is missing
        or torn, or that ends before `offset` (its writer's host crashed before the tail reached
        the disk, the records did), is recovered."""
        tail = self._read_tail()
        if tail is None or offset > tail.next_offset:
            tail = self._recovered_tail()
        return tail

    def ends(self) -> tuple[Head, Tail]:
        """Head and committed tail: two small file reads, for callers that need only the ends."""
        return self.read_head(), self.committed_tail()

    def _delete_chunks_before(self, head: int, active_base: int) -> tuple[int, int]:
        bases = self.chunk_bases()
        deleted = freed = 0
        for base, next_base in zip(bases, bases[1:]):
            if next_base > head or base == active_base:
                break
            try:
                freed += os.stat(self.chunk_path(base)).st_size
            except FileNotFoundError:
                continue
            self._delete_chunk_files(base)
            deleted += 1
        if deleted:
            fsync_dir(self.path)
        return deleted, freed

    def _delete_chunk_files(self, base: int) -> None:
        self._index_cache.pop(base, None)
        fd = self._chunk_fds.pop(base, None)
        if fd is not None:
            os.close(fd)
        for suffix in ("chunk", "idx", "parquet"):
            try:
                os.unlink(self.chunk_path(base, suffix))
            except FileNotFoundError:
                pass

    def sealed_chunks(self) -> list[int]:
        tail = self.committed_tail()
        return [b for b in self.chunk_bases() if b != tail.active_base]

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

    def __init__(self, segment: Segment):
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


def _pread_full(fd: int, size: int, at: int) -> bytes:
    """`size` bytes of the file from `at`, fewer only where it ends (as a buffered file's read):
    pread may return less than asked for."""
    data = os.pread(fd, size, at)
    if len(data) == size or not data:
        return data
    parts = [data]
    got = len(data)
    while got < size:
        more = os.pread(fd, size - got, at + got)
        if not more:
            break
        parts.append(more)
        got += len(more)
    return b"".join(parts)


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


def _unlink_quietly(path: Path) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def _now_ms() -> int:
    return time.time_ns() // 1_000_000
