"""A segment retention has passed whole (a sealed segment whose every event lies before the
stream's head): its files are gone, and it answers as an empty segment standing at its end, so
that every cut and every sum of sizes over a stream's segments stays what it was. Read-only: an
append is refused as to any sealed segment. No Django, no database.
"""

from __future__ import annotations

from pathlib import Path

from store import framing
from store.ends import Head, Tail
from store.segment.errors import SegmentSealed
from store.segment.reads import SegmentInfo


class RetiredSegment:
    def __init__(self, path: Path, end: int, size: int):
        self.path = path
        self.end = end
        self.size = size

    def sealed_end(self) -> int:
        return self.end

    def seal(self) -> int:
        return self.end

    def append(self, *args, **kwargs):
        raise SegmentSealed(self.path)

    def create(self) -> None:
        return None

    def read_head(self) -> Head:
        return Head(self.end, self.size)

    def committed_tail(self) -> Tail:
        return Tail(self.end, framing.CHUNK_HEADER_SIZE, self.end, self.size, 0, 0, b"")

    def ends(self) -> tuple[Head, Tail]:
        return self.read_head(), self.committed_tail()

    def info(self) -> SegmentInfo:
        return SegmentInfo(self.end, self.end, self.size, self.size, 0, 0, self.end)

    def size_till(self, offset: int) -> int:
        return self.size

    def offset_at_time(self, ms: int) -> int:
        return self.end

    def read(self, start: int, limit: int) -> list:
        return []

    def read_frames(self, *args, **kwargs) -> list:
        return []

    def chunk_bases(self) -> list[int]:
        return []

    def sealed_chunks(self) -> list[int]:
        return []

    def roll_if_due(self, now_ms: int | None = None) -> None:
        return None

    def has_chunks_before_head(self) -> bool:
        return False
