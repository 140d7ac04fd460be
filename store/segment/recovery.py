"""Which tail a process may trust, and recovering it after a crash: what a writer calls before it
appends, and where a new chunk (and the tail that names it) is made. The rules kept here:
- offsets come from the log itself (the committed tail), never from a counter elsewhere;
- the tail names the host boot that wrote it. Past a tail of this boot, anything in the active
  chunk is a write whose publish was never acknowledged: recovery cuts it. Past a tail of
  another boot (another host, or this one before a restart, whose last tail write may not have
  reached the disk), recovery scans and keeps whole, CRC-valid batches; a missing or torn tail
  costs a scan of the whole active chunk;
- only writers recover a tail: a head move or a chunk deletion reads the tail as written
  (`_tail_as_written`: an older tail only makes them more careful), so processes on several
  hosts may move heads without making the writer check its tail again.
It must never be called without the segment's lock held. No Django, no database.
"""

from __future__ import annotations

import os
from pathlib import Path

from store import boot, framing
from store.ends import Head, Tail
from store.files import fsync_dir
from store.segment.clock import epoch_ms
from store.segment.errors import NO_SPACE_ERRNOS, CorruptSegment, StorageFull
from store.segment.index import SegmentIndex


class SegmentRecovery(SegmentIndex):
    """The committed tail: trusted, recovered, or made with a new chunk."""

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
        if tail.boot_id == boot.BOOT_ID:
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
            boot.BOOT_ID,
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
                created_ms=int(os.stat(path).st_mtime * 1000) if found.records else epoch_ms(),
                last_index_pos=self._last_index_pos(base),
                boot_id=boot.BOOT_ID,
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
        tail = Tail(base, framing.CHUNK_HEADER_SIZE, base, cum_size, epoch_ms(), 0, boot.BOOT_ID)
        self._write_tail(tail)
        return tail

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


def _unlink_quietly(path: Path) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
