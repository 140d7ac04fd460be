"""Rebuilding a segment whose directory was lost, from its chunks in long-term storage
(docs/design/long-term-storage.md, "Losing a host"): each offloaded chunk comes back as a
`.tiered` stub (reads fetch it from the tier), the head is put where the caller knows it was,
and a new, empty active chunk starts at the tail the caller gives, at or past every offset
anyone may have seen, so that no offset is ever handed out twice for two different events. A
segment a scale had sealed is sealed again at that tail. The rules kept here:
- a segment that still has chunks on disk is never touched (`SegmentNotLost`);
- the stubs are written before the tail and head, so a restore cut short by a crash leaves a
  directory that a second restore refuses (its chunks are back) or a reader reads whole.
No Django, no database.
"""

from __future__ import annotations

from store.ends import Head
from store.files import write_atomically
from store.segment.append import SegmentAppends
from store.segment.directory import TIERED
from store.tier.reading import TieredStub


class SegmentNotLost(Exception):
    """The segment has chunks on disk: restoring it would overwrite what is there."""


class SegmentRestore(SegmentAppends):
    """A lost segment made again from its tiered chunks."""

    def restore_from_tier(
        self, stubs: list[tuple[int, TieredStub]], head: Head, tail_offset: int, tail_cum: int, sealed: bool
    ) -> None:
        """Put `stubs` (base, stub) in place, the head at `head`, an empty active chunk at
        `tail_offset` (cumulative size `tail_cum`), and the seal at that tail if `sealed`."""
        if stubs and tail_offset < max(base for base, _ in stubs):
            raise ValueError(f"tail {tail_offset} lies before a restored chunk")
        if head.offset > tail_offset:
            raise ValueError(f"head {head.offset} lies past the tail {tail_offset}")
        with self._locked():
            if self.chunk_bases():
                raise SegmentNotLost(self.path)
            for base, stub in stubs:
                write_atomically(self.chunk_path(base, TIERED), stub.pack())
            self._create_chunk(tail_offset, tail_cum)
            self._write_head(head, durable=True)
            if sealed:
                self._write_seal(tail_offset, tail_cum)
