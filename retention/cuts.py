"""Stream-cut comparison (RETENTION-ALGORITHM.md, "Records and comparisons"). Plain Python.

Cuts on several segments are only partly ordered, so a comparison has three answers:
`equal_or_after` (every segment at or after), `before` (some behind, none ahead) and
`overlaps` (some ahead, some behind).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from enum import Enum

Cut = Mapping[str, int]


class Order(Enum):
    EQUAL_OR_AFTER = "equal_or_after"
    BEFORE = "before"
    OVERLAPS = "overlaps"


def compare(a: Cut, b: Cut) -> Order:
    """How cut `a` stands to cut `b` (both over the same segments)."""
    ahead = behind = False
    for seg, offset in a.items():
        other = b[seg]
        if offset > other:
            ahead = True
        elif offset < other:
            behind = True
    if behind:
        return Order.OVERLAPS if ahead else Order.BEFORE
    return Order.EQUAL_OR_AFTER


def is_at_or_after(a: Cut, b: Cut) -> bool:
    """`compare(a, b) is EQUAL_OR_AFTER`, without classifying the rest: a cycle asks it ~25 times
    a stream (dropping retention-set records after a truncation)."""
    for seg, offset in a.items():
        if offset < b[seg]:
            return False
    return True


def lower_bound(cuts: Iterable[Cut]) -> dict[str, int]:
    """Per segment, the smallest offset: the subscriber lower bound of these cuts."""
    bound: dict[str, int] = {}
    for cut in cuts:
        for seg, offset in cut.items():
            if seg not in bound or offset < bound[seg]:
                bound[seg] = offset
    return bound


def moves_head(target: Cut, head: Cut) -> bool:
    """A truncation at `target` happens only when it is strictly ahead of the head on some
    segment and behind it on none; anything else is a silent no-op."""
    return compare(target, head) is Order.EQUAL_OR_AFTER and any(
        target[s] > head[s] for s in target
    )
