"""Where a group that reads compacted streams (`read_compacted`) reads below a compacted view's
horizon: the compaction app registers its views here (`read_compacted_from`, at start-up), so
that reader groups never import the app above them; until it does, no view is read."""

from __future__ import annotations

from typing import Any, Protocol

from groups.consuming.floors import (
    Slot,
)
from groups.models import ReaderGroup
from store.framing import Record
from streams.models import Stream


class CompactedViews(Protocol):
    """Where a `read_compacted` group reads below a compacted view's horizon. The compaction app,
    which owns the views, registers one (`read_compacted_from`) when Django starts; without it,
    such a group reads the live log."""

    def current(self, stream_ids: set[int]) -> dict[int, Any]:
        """The current view of each stream that has one (each with a `horizon` cut)."""

    def segment_records(self, stream: Stream, view: Any, segment: str, start: int, limit: int) -> list[Record]:
        """Up to `limit` of the view's records on `segment` from offset `start`."""

    def records_at(self, stream: Stream, view: Any, segment: str, offsets: list[int]) -> dict[int, Record]:
        """The view's records at these offsets (those it has)."""


class _NoViews:
    """The views before the compaction app registers its own: none."""

    def current(self, stream_ids: set[int]) -> dict[int, Any]:
        return {}

    def segment_records(self, stream: Stream, view: Any, segment: str, start: int, limit: int) -> list[Record]:
        return []

    def records_at(self, stream: Stream, view: Any, segment: str, offsets: list[int]) -> dict[int, Record]:
        return {}


_compacted: CompactedViews = _NoViews()


def read_compacted_from(views: CompactedViews) -> None:
    global _compacted
    _compacted = views


def compacted_views(group: ReaderGroup, group_slots: list[Slot]) -> dict[int, Any]:
    """For a `read_compacted` group, the current compacted view of each of its compacted
    streams (none for others, none before the compaction app registers its views)."""
    if not group.read_compacted:
        return {}
    ids = {slot.stream.pk for slot in group_slots if slot.stream.is_compacted}
    return _compacted.current(ids) if ids else {}


def views() -> CompactedViews:
    """The views registered (none until the compaction app registers its own)."""
    return _compacted
