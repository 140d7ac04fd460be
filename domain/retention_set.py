"""The retention set: tail cuts recorded at each cycle (docs/design/retention.md). Plain Python.

A record is `(time, size, cut)` with `size = size_till(cut)`, cumulative; the set is ordered by
time. Functions return new tuples and never mutate their input.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

from domain.cuts import is_at_or_after


class RetentionRecord(NamedTuple):
    """A NamedTuple, not a dataclass: a cycle makes millions of them (48 per stream)."""

    time: float  # epoch seconds
    size: int  # size_till(cut): payload bytes from the start of the stream to the cut
    cut: Mapping[str, int]


RetentionSet = tuple[RetentionRecord, ...]


def with_tail(rset: RetentionSet, now: float, interval: float, tail_cut, tail_size: int) -> RetentionSet:
    """Add the tail cut if the set is empty or its newest record is strictly older than the
    interval."""
    if rset and not now - rset[-1].time > interval:
        return rset
    return (*rset, RetentionRecord(now, tail_size, dict(tail_cut)))


def _newest_index_at_or_before(rset: RetentionSet, cut) -> int:
    for i in range(len(rset) - 1, -1, -1):
        if is_at_or_after(cut, rset[i].cut):
            return i
    return -1


def newest_record_at_or_before(rset: RetentionSet, cut) -> RetentionRecord | None:
    """The newest record R with `cut` equal_or_after R.cut (equal cuts match; among records
    with identical cuts the newest wins)."""
    i = _newest_index_at_or_before(rset, cut)
    return rset[i] if i >= 0 else None


def after_truncation(rset: RetentionSet, cut) -> RetentionSet:
    """Drop the newest record at or before `cut` and every record older than it."""
    return rset[_newest_index_at_or_before(rset, cut) + 1 :]
