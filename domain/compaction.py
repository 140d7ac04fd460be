"""A stream's compaction settings, declared once (`COMPACTION_FIELDS`: the API's serializers,
the console's forms and a scope's defaults are made from or checked by it), and the rules between
compaction and retention, as plain Python."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Protocol

from domain.fields import MAX_BIGINT_COLUMN, Choice, Field, Whole

DAY_S = 86_400
CLEANUP_POLICIES = ("delete", "compact", "compact,delete")
COMPACTION_FIELDS: dict[str, Field] = {
    "cleanup_policy": Choice(
        (("delete", "Delete"), ("compact", "Compact"), ("compact,delete", "Compact Delete")),
        label="cleanup",
        help="delete: retention alone; compact: the latest event per key; both: a view with a retention of its own",
        default="delete",
    ),
    "min_compaction_lag_s": Whole(
        0,
        365 * DAY_S,
        label="min compaction lag (s)",
        help="younger chunks are not compacted yet",
        default=0,
        unit="seconds",
    ),
    "delete_retention_s": Whole(
        0,
        3650 * DAY_S,
        label="tombstones kept (s)",
        help="how long a deletion stays in the view",
        default=DAY_S,
        unit="seconds",
    ),
    "compacted_retention_s": Whole(
        1,
        3650 * DAY_S,
        label="view retention (s)",
        help="compact,delete: the view's age limit (blank: none)",
        nullable=True,
        unit="seconds",
    ),
    "compacted_retention_bytes": Whole(
        1,
        MAX_BIGINT_COLUMN,
        label="view retention (bytes)",
        help="compact,delete: the view's payload limit (blank: none)",
        nullable=True,
        unit="bytes",
    ),
}
# the settings that are numbers (the cleanup policy has words of its own on each edge)
COMPACTION_NUMBERS = tuple(name for name in COMPACTION_FIELDS if name != "cleanup_policy")


class TimeBound(Protocol):
    limit_type: str
    min_value: int
    max_value: int | None


def max_may_outrun_compaction(interval_s: int, policy: TimeBound | None) -> bool:
    """Whether the live log's time retention may have to drop events before a compaction runs
    over them: retention waits for the compactor (`domain.retention.decide`), but not past its
    max limit, so an interval longer than the time retention's max lets the max remove events
    the view never reads (its next run records them as missed)."""
    return (
        policy is not None
        and policy.limit_type == "time"
        and policy.max_value is not None
        and interval_s > policy.max_value
    )


def view_due_to_drop(
    oldest_event: datetime | None,
    oldest_tombstone: datetime | None,
    now: datetime,
    retention_s: int | None,
    delete_retention_s: int,
) -> bool:
    """Whether a run over nothing new would still drop something from the view (docs/design/compaction.md):
    an event older than the compacted retention's time (`retention_s`, `compact,delete`), or a
    tombstone kept since `oldest_tombstone` whose `delete_retention_s` has passed. A stream that
    stopped receiving events still ages by these runs. (The byte limit cannot be newly exceeded
    without new events.)"""
    if retention_s is not None and oldest_event is not None and oldest_event < now - timedelta(seconds=retention_s):
        return True
    return (
        oldest_tombstone is not None
        and oldest_tombstone < now
        and oldest_tombstone + timedelta(seconds=delete_retention_s) <= now
    )


def missed_ranges(horizon: Mapping[str, int], chunk_bases: Mapping[str, list[int]]) -> dict[str, list[int]]:
    """Per segment, the offsets `[from, to)` after the view's `horizon` that no chunk holds any
    more: retention's max limit deleted them before a run folded them in (the compactor holds
    every other truncation back). A horizon lies on a chunk boundary; a chunk that still holds it
    (whole on disk, even behind a moved head) is read by the run, so nothing of it is missed."""
    missed = {}
    for segment, bases in chunk_bases.items():
        at = int(horizon.get(segment, 0))
        if bases and bases[0] > at:
            missed[segment] = [at, bases[0]]
    return missed
