"""Rules between compaction and retention, as plain Python."""

from __future__ import annotations

from typing import Protocol


class TimeBound(Protocol):
    limit_type: str
    min_value: int


def outruns_retention(interval_s: int, policy: TimeBound | None) -> bool:
    """Whether the live log's time retention may drop events before a compaction runs over them:
    compaction never extends the live log's retention, so an interval longer than the time
    retention's minimum lets events go uncompacted (keeping the interval shorter is the
    operator's schedule to keep)."""
    return policy is not None and policy.limit_type == "time" and interval_s > policy.min_value
