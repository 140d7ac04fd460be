"""What a cycle tells of each stream (`StreamOutcome`), and of itself (`CycleSummary`)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NamedTuple

from streams.models import Stream


class Truncation(NamedTuple):
    """What a cycle's outcome keeps of the TruncationRecord it wrote (the record itself, with its
    subscribers and cuts, stays in the database: a million of them would not fit in a worker)."""

    record_id: int
    after_cut: dict[str, int]
    reclaimed_bytes: int


@dataclass(frozen=True)
class StreamOutcome:
    stream: str
    rule: str
    truncation: Truncation | None
    at_max: bool = False
    stream_id: int | None = None

    def line(self) -> str:
        if self.truncation is None:
            return f"{self.stream}: no truncation ({self.rule})"
        return (
            f"{self.stream}: truncated at {self.truncation.after_cut} ({self.rule}), "
            f"reclaimed {self.truncation.reclaimed_bytes} bytes"
        )


@dataclass
class CycleSummary:
    """What a cycle did, counted as its outcomes go by: what the beat task records and the bench
    prints, without holding an outcome per stream."""

    streams: int = 0
    truncations: int = 0
    bytes_reclaimed: int = 0
    rules: Counter = field(default_factory=Counter)

    def merge(self, other: CycleSummary) -> None:
        self.streams += other.streams
        self.truncations += other.truncations
        self.bytes_reclaimed += other.bytes_reclaimed
        self.rules.update(other.rules)

    def add(self, outcomes: list[StreamOutcome]) -> None:
        for o in outcomes:
            self.streams += 1
            self.rules[o.rule] += 1
            if o.truncation is not None:
                self.truncations += 1
                self.bytes_reclaimed += o.truncation.reclaimed_bytes


def skipped(streams: list[Stream], held: list[Stream], rule: str) -> list[StreamOutcome]:
    ids = {s.pk for s in held}
    return [StreamOutcome(s.full_name, rule, None, stream_id=s.pk) for s in streams if s.pk not in ids]


Report = Callable[[list[StreamOutcome]], None]
